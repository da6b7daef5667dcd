"""`OpenAICompatibleSummaries`: an LLM behind an OpenAI-compatible `/v1/chat/completions` writes the text.

Off by default (settings `llm_base_url` and `llm_model`). It sees the candidate's source texts and the
extractive draft, and may return a title and a summary; it never sees or returns citations. Any failure
(timeout, HTTP error, an answer that is not the JSON asked for) falls back to the extractive draft, so the
producer never stops because a model is down.
"""

from __future__ import annotations

import logging
import os
from typing import Final

import httpx2
import msgspec

from eventloom.settings import Settings
from projectors.producers._common import fit
from projectors.producers.consolidation.summaries import Summary, SummaryRequest

log = logging.getLogger(__name__)
TITLE_LIMIT: Final = 200
SUMMARY_LIMIT: Final = 4_000
SOURCE_LIMIT: Final = 12_000  # characters of source text sent at most
_INSTRUCTIONS: Final = (
    "You summarise an agent's memory for later reuse. Reply with one JSON object "
    '{"title": "...", "summary": "..."}: a one-line title and a summary of at most five sentences. '
    "Use only what the source texts say."
)


class _Answer(msgspec.Struct):
    title: str
    summary: str


class OpenAICompatibleSummaries:
    """Asks an OpenAI-compatible chat completion endpoint for the title and summary; falls back on error."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 20.0
    ) -> None:
        base = base_url.rstrip("/")
        self._url = f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleSummaries | None:
        """The configured provider, or None when no endpoint and model are set (the default)."""
        if not settings.llm_base_url or not settings.llm_model:
            return None
        key = os.environ.get(settings.llm_api_key_env) if settings.llm_api_key_env else None
        return cls(settings.llm_base_url, settings.llm_model, key or None, settings.llm_timeout_s)

    async def write(self, request: SummaryRequest) -> Summary:
        try:
            answer = await self._ask(request)
        except (httpx2.HTTPError, ValueError, KeyError, IndexError, TypeError, msgspec.DecodeError) as exc:
            log.warning("LLM summary failed (%s), keeping the extractive one", exc)
            return request.draft
        title, summary = " ".join(answer.title.split()), answer.summary.strip()
        if not title or not summary:
            return request.draft
        return Summary(
            title=fit(title, TITLE_LIMIT),
            summary=fit(summary, SUMMARY_LIMIT),
            summary_by=f"llm:{self._model}",
        )

    async def _ask(self, request: SummaryRequest) -> _Answer:
        sources = fit("\n".join(f"- {text}" for text in request.texts), SOURCE_LIMIT)
        prompt = (
            f"Candidate type: {request.candidate_type}\nSource texts:\n{sources}\n\n"
            f"Extractive draft title: {request.draft.title}\n"
            f"Extractive draft summary: {request.draft.summary}"
        )
        body = {
            "model": self._model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": _INSTRUCTIONS},
                {"role": "user", "content": prompt},
            ],
        }
        async with httpx2.AsyncClient(timeout=self._timeout_s) as client:
            response = await client.post(self._url, json=body, headers=self._headers)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        return msgspec.json.decode(_strip_fence(str(content)), type=_Answer)


def _strip_fence(content: str) -> str:
    """The JSON inside a ```json fence, as some models reply; else the content itself."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text
