"""GitHub webhooks on the HTTP gateway: deliveries shaped like GitHub's (tests/fixtures/github), signed and
sent over real HTTP to the gateway (`serve_http`, on a real NATS), then read back from the log."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.refusals import AUDIT_TYPE
from gateway.mcp.gate import MAX_BODY_BYTES, FailedAttempts
from gateway.packs.workflow.webhooks import PRINCIPAL, SECRET_ENV, WEBHOOK_PATH, secret_file
from tests.mcp_support import http_gateway

pytestmark = pytest.mark.anyio
SECRET = "It's a Secret to Everybody"
FIXTURES = Path(__file__).parent / "fixtures" / "github"
SESSION = "github-acme-rocket"


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def write_secret(settings: Settings, secret: str = SECRET, mode: int = 0o600) -> None:
    path = secret_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(secret + "\n")
    path.chmod(mode)


@dataclass
class Hook:
    """The webhook route of a running gateway, and the log it writes to."""

    base: str
    http: httpx2.AsyncClient
    log: EventLog

    @property
    def url(self) -> str:
        return self.base + WEBHOOK_PATH

    async def deliver(
        self,
        event: str,
        body: bytes | dict[str, Any],
        *,
        delivery: str | None = None,
        signature: str | None = "sign",
        url: str | None = None,
    ) -> httpx2.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/5a1b2c3",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "512345678",
        }
        if signature is not None:
            headers["X-Hub-Signature-256"] = sign(raw) if signature == "sign" else signature
        return await self.http.post(url or self.url, content=raw, headers=headers)

    async def last_seq(self) -> int:
        """The stream's last sequence less the gateway's audit of refusals: moves with any other event
        written to any session."""
        info = await self.log.client.jetstream().stream_info(self.log.layout.name)
        return int(info.state.last_seq) - len(await self.audited())

    async def audited(self) -> list[dict[str, Any]]:
        """The payloads of the `access.refused` events in the audit session."""
        events = self.log.events(self.log.settings.audit_session)
        return [e.payload async for e in events if e.type == AUDIT_TYPE]

    async def recorded(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(e.type, e.actor, e.payload) async for e in self.log.events(SESSION)]


@pytest.fixture
async def hook(settings: Settings) -> AsyncIterator[Hook]:
    write_secret(settings)
    async with (
        http_gateway(settings) as gateway,
        await EventLog.open(settings) as log,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        yield Hook(gateway.url.removesuffix("/mcp"), http, log)


STORY = [
    "issues.opened",
    "issues.edited",
    "issues.labeled",
    "issues.assigned",
    "issue_comment.created.issue",
    "pull_request.opened",
    "issue_comment.created.pull_request",
    "pull_request_review.submitted.changes_requested",
    "pull_request_review.submitted.approved",
    "pull_request.closed.merged",
    "issues.closed",
]
ISSUE, PR = "acme/rocket#42", "acme/rocket#57"
SEEN = ("workflow.repository.seen", {"repository": "acme/rocket", "owner": "acme", "github_id": 812345678})
EXPECTED: list[tuple[str, str, dict[str, Any]]] = [
    ("github:ada", *SEEN),
    ("github:ada", "workflow.issue.opened", {
        "issue": ISSUE, "title": "Engine stalls at ignition",
        "body": fixture("issues.opened")["issue"]["body"],
        "state": "open", "labels": ["bug"], "assignees": [], "author": "ada",
        "created_at": "2026-11-25T09:00:00Z", "github_id": 2701234567,
    }),
    ("github:ada", "workflow.issue.updated", {
        "issue": ISSUE, "updated_at": "2026-11-25T09:05:12Z", "actor": "ada",
        "title": "Engine stalls at ignition",
    }),
    ("github:grace", "workflow.issue.updated", {
        "issue": ISSUE, "updated_at": "2026-11-25T09:06:40Z", "actor": "grace", "labels": ["bug", "ignition"],
    }),
    ("github:grace", "workflow.issue.updated", {
        "issue": ISSUE, "updated_at": "2026-11-25T09:07:03Z", "actor": "grace",
        "assignees": ["eventloom-agent[bot]"],
    }),
    ("github:grace", "workflow.comment.posted", {
        "item": ISSUE, "on": "issue", "comment_id": "github-comment-2501110001", "author": "grace",
        "body": "I can reproduce it with 35% fuel: stall at 2.1 s.", "created_at": "2026-11-25T10:15:00Z",
    }),
    ("github:eventloom-agent[bot]", *SEEN),
    ("github:eventloom-agent[bot]", "workflow.pull_request.opened", {
        "pull_request": PR, "title": "Fix ignition timing under low tank pressure",
        "body": fixture("pull_request.opened")["pull_request"]["body"], "state": "open",
        "labels": ["ignition"],
        "assignees": [], "author": "eventloom-agent[bot]", "created_at": "2026-11-25T11:30:00Z",
        "github_id": 2209876543, "resolves": [ISSUE],
    }),
    ("github:grace", "workflow.comment.posted", {
        "item": PR, "on": "pull_request", "comment_id": "github-comment-2501110002", "author": "grace",
        "body": "Could you add a test for the 40% threshold?", "created_at": "2026-11-25T12:40:00Z",
    }),
    ("github:grace", "workflow.pull_request.reviewed", {
        "pull_request": PR, "review_id": "github-review-2801230001", "reviewer": "grace",
        "state": "changes_requested", "submitted_at": "2026-11-25T12:55:00Z",
        "body": "The delay should come from the pressure sensor, not a constant.",
    }),
    ("github:grace", "workflow.pull_request.reviewed", {
        "pull_request": PR, "review_id": "github-review-2801230002", "reviewer": "grace", "state": "approved",
        "body": "", "submitted_at": "2026-11-25T13:50:00Z",
    }),
    ("github:grace", "workflow.pull_request.updated", {
        "pull_request": PR, "updated_at": "2026-11-25T14:02:30Z", "actor": "grace", "state": "merged",
    }),
    ("github:grace", "workflow.issue.updated", {
        "issue": ISSUE, "updated_at": "2026-11-25T14:02:31Z", "actor": "grace", "state": "closed",
    }),
]  # fmt: skip


async def test_each_delivery_becomes_its_events_in_the_repository_session(hook: Hook) -> None:
    answers = []
    for name in STORY:
        response = await hook.deliver(name.split(".")[0], fixture(name), delivery=f"delivery-{name}")
        assert response.status_code == 200, response.text
        answers.append(response.json())
    recorded = [e async for e in hook.log.events(SESSION)]
    assert [(e.actor, e.type, e.payload) for e in recorded] == EXPECTED
    assert {e.principal for e in recorded} == {PRINCIPAL}
    answered = [event for answer in answers for event in answer["events"]]
    assert answered == [
        {"type": e.type, "session": SESSION, "seq": e.seq, "citation": e.citation} for e in recorded
    ]
    assert answers[0]["delivery"] == "delivery-issues.opened" and answers[0]["event"] == "issues.opened"
    assert not any(answer["duplicate"] for answer in answers)


async def test_a_redelivery_writes_nothing_new_and_answers_the_same(hook: Hook) -> None:
    body = fixture("pull_request.opened")
    first = await hook.deliver("pull_request", body, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert first.status_code == 200 and not first.json()["duplicate"]
    seq = await hook.last_seq()
    again = await hook.deliver("pull_request", body, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert again.status_code == 200 and again.json()["duplicate"]
    assert again.json()["events"] == first.json()["events"] and len(first.json()["events"]) == 2
    assert await hook.last_seq() == seq
    assert [event_type for event_type, _, _ in await hook.recorded()] == [
        "workflow.repository.seen",
        "workflow.pull_request.opened",
    ]


async def test_a_replay_under_a_new_delivery_id_or_in_another_body_is_recorded_once(hook: Hook) -> None:
    body = json.dumps(fixture("issues.labeled")).encode()
    first = await hook.deliver("issues", body, delivery="delivery-1")
    assert first.status_code == 200 and not first.json()["duplicate"]
    replayed = await hook.deliver("issues", body, delivery="delivery-2")  # the id is not signed
    assert replayed.status_code == 200 and replayed.json()["duplicate"]
    assert replayed.json()["events"] == first.json()["events"]
    other_hook = fixture("issues.labeled") | {"hook_id": 99, "organization": {"login": "acme"}}
    again = await hook.deliver("issues", other_hook, delivery="delivery-3")  # the same change, another body
    assert again.status_code == 200 and again.json()["duplicate"]
    assert len(await hook.recorded()) == 1

    later = fixture("issues.labeled")
    later["issue"]["updated_at"] = "2026-11-25T09:30:00Z"  # labelled the same way again, later: a change
    assert not (await hook.deliver("issues", later)).json()["duplicate"]
    comment = fixture("issue_comment.created.issue")
    assert not (await hook.deliver("issue_comment", comment)).json()["duplicate"]
    edited = fixture("issue_comment.created.issue") | {"action": "edited"}
    edited["comment"] = comment["comment"] | {"body": "typo", "updated_at": "2026-11-25T10:16:00Z"}
    back = fixture("issue_comment.created.issue") | {"action": "edited"}
    back["comment"] = comment["comment"] | {"updated_at": "2026-11-25T10:17:00Z"}  # the first words again
    for delivery in (edited, back):
        assert not (await hook.deliver("issue_comment", delivery)).json()["duplicate"]
    assert [p.get("body", p.get("labels")) for _, _, p in await hook.recorded()] == [
        ["bug", "ignition"],
        ["bug", "ignition"],
        comment["comment"]["body"],
        "typo",
        comment["comment"]["body"],
    ]


@pytest.mark.parametrize(
    "signature",
    [
        None,  # unsigned
        "",
        "sha256=",
        "sha1=2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",  # the old X-Hub-Signature's form
        "sha256=" + "0" * 64,
        sign(b"{}"),  # another body's signature
        sign(json.dumps(fixture("issues.opened")).encode(), "another secret"),
        sign(json.dumps(fixture("issues.opened")).encode()).upper(),
    ],
)
async def test_a_bad_signature_is_refused_with_401_and_writes_nothing(
    hook: Hook, signature: str | None
) -> None:
    seq = await hook.last_seq()
    response = await hook.deliver("issues", fixture("issues.opened"), signature=signature)
    assert response.status_code == 401
    assert response.json()["error"]["message"].startswith("X-Hub-Signature-256: ")
    assert await hook.last_seq() == seq and await hook.recorded() == []


async def test_repeated_bad_signatures_block_the_address_but_never_a_signed_delivery(hook: Hook) -> None:
    for _ in range(FailedAttempts().limit):
        assert (
            await hook.deliver("issues", fixture("issues.opened"), signature=sign(b"x"))
        ).status_code == 401
    blocked = await hook.deliver("issues", fixture("issues.opened"), signature=sign(b"x"))
    assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) >= 1
    assert await hook.recorded() == []
    signed = await hook.deliver("issues", fixture("issues.opened"))  # from the same address, at once
    assert signed.status_code == 200 and len(await hook.recorded()) == 2


async def test_the_bearer_gate_still_guards_everything_but_the_webhook(hook: Hook) -> None:
    mcp = await hook.http.post(f"{hook.base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert mcp.status_code == 401  # no token, no MCP
    elsewhere = await hook.deliver("issues", fixture("issues.opened"), url=f"{hook.base}/webhooks/gitlab")
    assert elsewhere.status_code == 401 and elsewhere.json()["error"]["message"] == "authorization: missing"
    assert (await hook.http.get(hook.url)).status_code == 405  # the route's, without a token: POST only
    assert await hook.recorded() == []


async def test_ignored_events_and_actions_are_accepted_and_write_nothing(hook: Hook) -> None:
    seq = await hook.last_seq()
    synchronize = await hook.deliver("pull_request", fixture("pull_request.synchronize"))
    assert synchronize.status_code == 202
    assert synchronize.json()["event"] == "pull_request.synchronize" and synchronize.json()["events"] == []
    assert "synchronize" in synchronize.json()["ignored"]
    starred = await hook.deliver("star", {"action": "created", "starred_at": "2026-11-25T09:00:00Z"})
    assert starred.status_code == 202 and "'star' events are not recorded" in starred.json()["ignored"]
    ping = await hook.deliver("ping", fixture("ping"))
    assert ping.status_code == 200 and ping.json()["events"] == [] and ping.json()["event"] == "ping"
    assert await hook.last_seq() == seq


async def test_an_oversized_body_is_refused_with_413(hook: Hook) -> None:
    body = fixture("issues.opened")
    body["issue"]["body"] = "x" * MAX_BODY_BYTES
    raw = json.dumps(body).encode()
    seq = await hook.last_seq()
    assert (await hook.deliver("issues", raw)).status_code == 413

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit counts what arrives
        for start in range(0, len(raw), 1 << 16):
            yield raw[start : start + (1 << 16)]

    headers = {"X-GitHub-Event": "issues", "X-GitHub-Delivery": "big", "X-Hub-Signature-256": sign(raw)}
    streamed = await hook.http.post(hook.url, content=chunks(), headers=headers)
    assert streamed.status_code == 413
    assert await hook.last_seq() == seq


async def test_a_delivery_that_maps_to_an_invalid_event_is_refused_whole(hook: Hook) -> None:
    seq = await hook.last_seq()
    late = fixture("issues.opened")
    late["issue"]["created_at"] = "yesterday"  # the repository.seen before it is fine, and not written either
    refused = await hook.deliver("issues", late)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("workflow.issue.opened payload.created_at: ")
    untitled = fixture("issues.opened")
    del untitled["issue"]["title"]
    refused = await hook.deliver("issues", untitled)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "issue.title: must be a non-empty string"
    no_repository = fixture("issue_comment.created.issue")
    del no_repository["repository"]
    refused = await hook.deliver("issue_comment", no_repository)
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("repository: ")
    assert (await hook.deliver("issues", b"{not json")).status_code == 400
    assert (await hook.deliver("", fixture("issues.opened"))).status_code == 400  # no X-GitHub-Event
    assert (await hook.deliver("issues", fixture("issues.opened"), delivery="a b/c")).status_code == 400
    assert await hook.last_seq() == seq


async def test_without_a_secret_nothing_is_accepted(hook: Hook, settings: Settings) -> None:
    secret_file(settings).unlink()
    seq = await hook.last_seq()
    missing = await hook.deliver("issues", fixture("issues.opened"))
    assert missing.status_code == 503 and SECRET_ENV in missing.json()["error"]["message"]
    write_secret(settings, mode=0o644)  # readable by others: refused
    assert (await hook.deliver("issues", fixture("issues.opened"))).status_code == 503
    assert await hook.last_seq() == seq
    write_secret(settings)  # set while running: no restart
    assert (await hook.deliver("issues", fixture("issues.opened"))).status_code == 200


async def test_the_variable_overrides_the_file(hook: Hook, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, SECRET_ENV, "from the environment")
    body = json.dumps(fixture("issues.opened")).encode()
    assert (await hook.deliver("issues", body)).status_code == 401  # signed with the file's secret
    signed = sign(body, "from the environment")
    assert (await hook.deliver("issues", body, signature=signed)).status_code == 200
