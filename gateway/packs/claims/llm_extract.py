"""`OpenAICompatibleTriples`: an LLM behind an OpenAI-compatible `/v1/chat/completions` extracts an
observation's mentions and triples.

Off by default: it is configured by the same settings as the consolidation LLM (`llm_base_url`,
`llm_model`, `llm_api_key_env`, `llm_timeout_s`), and `from_settings` gives None when they are unset. It
sees the observation's text only. What it answers is checked item by item: a predicate is normalised
(`predicates.normalise_predicate`, "lives in" -> `LIVES_IN`) and a triple whose predicate or names do not
fit is dropped, so it never returns an invalid predicate. Any failure (timeout, HTTP error, an answer that
is not the JSON asked for) falls back to the deterministic extractor, and `extract_named` says which of the
two extracted (`llm:<model>` or `deterministic`), for the observation's `extracted_by`.
"""

from __future__ import annotations

import logging
import os
from typing import Final, Protocol, runtime_checkable

import httpx2
import msgspec

from eventloom.settings import Settings
from gateway.packs.claims.events import Triple
from gateway.packs.claims.extract import DeterministicExtractor, Extraction, TripleExtractor
from gateway.packs.claims.model import entity_key
from gateway.packs.claims.predicates import normalise_predicate

log = logging.getLogger(__name__)
TEXT_LIMIT: Final = 12_000  # characters of the observation sent at most
MAX_ITEMS: Final = 256
MAX_NAME_CHARS: Final = 512
_INSTRUCTIONS: Final = (
    "You extract facts from a text. Reply with one JSON object "
    '{"mentions": ["entity name", ...], "triples": [{"subject": "...", "predicate": "...", '
    '"object": "..."}, ...]}. Mentions are the people, places, organisations and things the text names; '
    'a predicate is a short positive relation such as "lives in" or "works at". Use only what the text '
    "states; no negated facts."
)


class _Triple(msgspec.Struct):
    subject: str
    predicate: str
    object: str


class _Answer(msgspec.Struct):
    mentions: list[str] = msgspec.field(default_factory=list)
    triples: list[_Triple] = msgspec.field(default_factory=list)


@runtime_checkable
class NamesEachExtraction(Protocol):
    """An extractor that may fall back to another: `extract_named` says which one extracted."""

    async def extract_named(self, text: str) -> tuple[str, Extraction]: ...


class OpenAICompatibleTriples:
    """A `TripleExtractor` asking an OpenAI-compatible chat completion endpoint; falls back on error."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 20.0,
        *,
        fallback: TripleExtractor | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self._url = f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s
        self._fallback = fallback or DeterministicExtractor()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleTriples | None:
        """The configured extractor, or None when no endpoint and model are set (the default)."""
        if not settings.llm_base_url or not settings.llm_model:
            return None
        key = os.environ.get(settings.llm_api_key_env) if settings.llm_api_key_env else None
        return cls(settings.llm_base_url, settings.llm_model, key or None, settings.llm_timeout_s)

    @property
    def name(self) -> str:
        return f"llm:{self._model}"

    async def extract(self, text: str) -> Extraction:
        return (await self.extract_named(text))[1]

    async def extract_named(self, text: str) -> tuple[str, Extraction]:
        try:
            answer = await self._ask(text)
        except (httpx2.HTTPError, ValueError, KeyError, IndexError, TypeError, msgspec.DecodeError) as exc:
            log.warning("LLM extraction failed (%s), extracting deterministically", exc)
            return self._fallback.name, await self._fallback.extract(text)
        return self.name, checked(answer)

    async def _ask(self, text: str) -> _Answer:
        body = {
            "model": self._model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": _INSTRUCTIONS},
                {"role": "user", "content": text[:TEXT_LIMIT]},
            ],
        }
        async with httpx2.AsyncClient(timeout=self._timeout_s) as client:
            response = await client.post(self._url, json=body, headers=self._headers)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        return msgspec.json.decode(_strip_fence(str(content)), type=_Answer)


def _name(text: str) -> str | None:
    """`text` stripped, when it names an entity and fits a name."""
    name = " ".join(text.split())
    if not name or len(name) > MAX_NAME_CHARS:
        return None
    try:
        entity_key(name)
    except ValueError:
        return None
    return name


def _triple(found: _Triple) -> Triple | None:
    subject, obj = _name(found.subject), _name(found.object)
    try:
        predicate = normalise_predicate(found.predicate)
    except ValueError:
        return None
    if subject is None or obj is None:
        return None
    return Triple(subject=subject, predicate=predicate, object=obj)


def checked(answer: _Answer) -> Extraction:
    """What the model answered, keeping only valid names and triples (one per entity / fact), at most
    `MAX_ITEMS` of each; every triple's ends are mentions."""
    mentions: dict[str, str] = {}
    triples: dict[tuple[str, str, str], Triple] = {}
    for found in answer.triples:
        triple = _triple(found)
        if triple is not None and len(triples) < MAX_ITEMS:
            triples.setdefault(
                (entity_key(triple.subject), triple.predicate, entity_key(triple.object)), triple
            )
    for text in answer.mentions + [n for t in triples.values() for n in (t.subject, t.object)]:
        name = _name(text)
        if name is not None and len(mentions) < MAX_ITEMS:
            mentions.setdefault(entity_key(name), name)
    return Extraction(mentions=list(mentions.values()), triples=list(triples.values()))


def _strip_fence(content: str) -> str:
    """The JSON inside a ```json fence, as some models reply; else the content itself."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text
