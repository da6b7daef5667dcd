"""An OpenAI-compatible LLM may write a candidate's title and summary, never its citations; on any failure
the extractive summary stays. The server is a real HTTP server on loopback, started by the test."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.producers.consolidation.llm import OpenAICompatibleSummaries
from projectors.producers.consolidation.summaries import Summary, SummaryRequest
from tests.test_consolidation_live import CANDIDATE, RELATION, candidates, fast_producer, run_until_idle

pytestmark = pytest.mark.anyio
DRAFT = Summary(title="auth-service depends_on redis", summary="Asserted 2 times in 2 sessions.")
REQUEST = SummaryRequest(candidate_type="claim", texts=("auth-service depends_on redis",), draft=DRAFT)


class ChatServer:
    """Answers `/v1/chat/completions` with `reply` (a chat completion's message content) or `status`."""

    def __init__(self, reply: str, status: int = 200) -> None:
        self.reply, self.status = reply, status
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                chat.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                      "body": json.loads(body)})  # fmt: skip
                answer = {"choices": [{"message": {"role": "assistant", "content": chat.reply}}]}
                data = json.dumps(answer).encode()
                self.send_response(chat.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads `requests` instead."""

        return Handler

    def __enter__(self) -> ChatServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    reply = json.dumps(
        {"title": "auth-service needs redis", "summary": "Two sessions say auth-service uses redis."}
    )
    with ChatServer(reply) as server:
        yield server


async def test_the_llm_from_settings_writes_title_and_summary_with_its_key(
    chat: ChatServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert OpenAICompatibleSummaries.from_settings(Settings(data_dir=tmp_path)) is None  # off by default
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    configured = Settings(
        data_dir=tmp_path, llm_base_url=chat.url, llm_model="tiny", llm_api_key_env="TEST_LLM_KEY"
    )
    writer = OpenAICompatibleSummaries.from_settings(configured)
    assert writer is not None
    written = await writer.write(REQUEST)
    assert written == Summary(
        "auth-service needs redis", "Two sessions say auth-service uses redis.", "llm:tiny"
    )
    (sent,) = chat.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["auth"] == "Bearer sk-test"
    assert sent["body"]["model"] == "tiny"


@pytest.mark.parametrize(
    ("reply", "status"),
    [("not json at all", 200), (json.dumps({"title": "x", "summary": "y"}), 500), ('{"title": ""}', 200)],
)
async def test_a_failing_llm_leaves_the_extractive_summary(reply: str, status: int) -> None:
    with ChatServer(reply, status) as server:
        writer = OpenAICompatibleSummaries(f"{server.url}/v1", "tiny", timeout_s=5)
        assert await writer.write(REQUEST) == DRAFT
    unreachable = OpenAICompatibleSummaries(server.url, "tiny", timeout_s=1)  # closed: connection refused
    assert await unreachable.write(REQUEST) == DRAFT


async def test_a_claim_summarised_by_the_llm_keeps_its_citations(log: EventLog, chat: ChatServer) -> None:
    first = await log.append("s1", "memory.fact.asserted", "agent", {"relations": [RELATION]})
    second = await log.append("s2", "memory.fact.asserted", "agent", {"relations": [RELATION]})
    writer = OpenAICompatibleSummaries(chat.url, "tiny", timeout_s=5)
    await run_until_idle(log, fast_producer(writer=writer), "consolidation")
    (claim,) = await candidates(log)
    assert claim.type == CANDIDATE
    assert claim.payload["title"] == "auth-service needs redis"
    assert claim.payload["summary_by"] == "llm:tiny"
    assert claim.payload["source_events"] == [
        {"session": e.session, "seq": e.seq, "hash": e.hash} for e in (first, second)
    ]
    assert claim.payload["relations"] == [RELATION]
