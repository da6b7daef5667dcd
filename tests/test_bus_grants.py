"""Least privilege on the bus (issue 42, item 2): each role's credentials are refused every JetStream API
subject, KV write and subject outside the role's grant (`eventloom.bus.auth.GRANTS`), on every stream and
bucket the system uses and one it does not; and the forged idempotency record of the issue is refused."""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace

import msgspec
import nats
import pytest
from nats.aio.client import Client

from eventloom.bus.auth import (
    BUCKETS,
    GRANTS,
    IDEMPOTENCY,
    MIRROR_CONSUMER,
    inbox_prefix,
    permissions,
    role_credentials,
)
from eventloom.bus.stream import DLQ_STREAM, jetstream_api
from eventloom.errors import EventloomError
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.buckets import NODE_BUCKETS, ensure_node_buckets
from tests.conftest import NatsServer

pytestmark = pytest.mark.anyio
ROLES = tuple(GRANTS)
UNKNOWN = "UNKNOWN"
SENTINEL = "refusals-end"
_VIOLATION = re.compile(r'permissions violation for (publish|subscription) to "([^"]+)"', re.IGNORECASE)

STREAM_VERBS = (
    "CREATE", "UPDATE", "DELETE", "INFO", "PURGE", "MSG.GET", "MSG.DELETE", "SNAPSHOT", "RESTORE",
    "LEADER.STEPDOWN", "PEER.REMOVE",
)  # fmt: skip
CONSUMER_VERBS = (
    "CREATE", "DURABLE.CREATE", "DELETE", "INFO", "MSG.NEXT", "PAUSE", "RESET", "UNPIN", "LEADER.STEPDOWN",
)  # fmt: skip
MUST_REFUSE_VERBS = ("CREATE", "UPDATE", "DELETE", "PURGE", "MSG.DELETE", "SNAPSHOT", "RESTORE")


def stream_names(stream: str) -> list[str]:
    return [stream, DLQ_STREAM, *(f"KV_{bucket}" for bucket in (*BUCKETS, UNKNOWN)), UNKNOWN]


def surface(stream: str) -> list[str]:
    """Every JetStream API subject, KV write and Eventloom subject there is to try, on every name in use."""
    api = "$JS.API"
    subjects = [
        f"{api}.INFO", f"{api}.STREAM.LIST", f"{api}.STREAM.NAMES", f"{api}.ACCOUNT.PURGE.$G",
        f"{api}.SERVER.REMOVE", f"{api}.META.LEADER.STEPDOWN", f"{api}.STREAM.TEMPLATE.CREATE.{UNKNOWN}",
    ]  # fmt: skip
    for name in stream_names(stream):
        subjects += [f"{api}.STREAM.{verb}.{name}" for verb in STREAM_VERBS]
        subjects += [f"{api}.ACCOUNT.STREAM.MOVE.{name}", f"{api}.ACCOUNT.STREAM.CANCEL_MOVE.{name}"]
        subjects += [f"{api}.DIRECT.GET.{name}", f"{api}.DIRECT.GET.{name}.$KV.{UNKNOWN}.k"]
        subjects += [f"{api}.CONSUMER.{verb}.{name}" for verb in ("CREATE", "LIST", "NAMES")]
        for consumer in (MIRROR_CONSUMER, "graph", "x"):
            subjects += [f"{api}.CONSUMER.{verb}.{name}.{consumer}" for verb in CONSUMER_VERBS]
            subjects += [f"{api}.CONSUMER.CREATE.{name}.{consumer}.eventloom.>"]
            subjects += [f"$JS.ACK.{name}.{consumer}.1.2.3.4.0", f"$JS.FC.{name}.{consumer}.1"]
    subjects += [f"$KV.{bucket}.probe" for bucket in (*BUCKETS, UNKNOWN)]
    subjects += [
        "eventloom.0.s1", "eventloom.q.memory.query", "eventloom.q.graph.cypher", "eventloom.q.memory.health",
        "eventloom_dlq.graph", "eventloom_dlq.graph.resolved", "eventloom_peers.x", "_INBOX.x", "other",
    ]  # fmt: skip
    return subjects


def must_refuse(role: str, stream: str) -> set[str]:
    """What the issue names, spelled out apart from the table, so a table grown too wide fails too."""
    api = "$JS.API"
    refused = {f"{api}.STREAM.{verb}.{name}" for verb in MUST_REFUSE_VERBS for name in stream_names(stream)}
    refused |= {f"{api}.ACCOUNT.PURGE.$G", f"{api}.SERVER.REMOVE", f"{api}.META.LEADER.STEPDOWN"}
    refused |= {f"{api}.CONSUMER.{verb}.{stream}.{MIRROR_CONSUMER}" for verb in ("DELETE", "MSG.NEXT")}
    refused |= {f"$JS.ACK.{stream}.{MIRROR_CONSUMER}.1.2.3.4.0", "$KV.EVENTLOOM_QUARANTINE.probe"}
    if role not in ("gateway", "producer"):
        refused |= {f"$KV.{IDEMPOTENCY}.probe", "eventloom.0.s1"}
    return refused


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` one token, `>` the rest."""
    wanted, tokens = pattern.split("."), subject.split(".")
    for index, token in enumerate(wanted):
        if token == ">":
            return len(tokens) > index
        if index >= len(tokens) or token not in ("*", tokens[index]):
            return False
    return len(tokens) == len(wanted)


def granted(rules: dict[str, list[str]], subject: str) -> bool:
    allowed = any(matches(p, subject) for p in rules["allow"])
    return allowed and not any(matches(p, subject) for p in rules.get("deny", []))


class Refusals:
    """A connection as one role and the subjects the server refused it."""

    def __init__(self, client: Client, seen: list[tuple[str, str]], arrived: asyncio.Event) -> None:
        self.client = client
        self.seen = seen
        self._arrived = arrived

    @classmethod
    async def open(cls, settings: Settings, role: str) -> Refusals:
        credentials = role_credentials(settings.data_dir, role)
        assert settings.nats_url is not None and credentials is not None
        seen: list[tuple[str, str]] = []
        arrived = asyncio.Event()

        async def remember(error: Exception) -> None:
            found = _VIOLATION.search(str(error))
            assert found is not None, error
            seen.append((found[1].lower(), found[2].lower()))
            arrived.set()

        client = await nats.connect(
            settings.nats_url,
            user=credentials.user,
            password=credentials.password,
            error_cb=remember,
            allow_reconnect=False,
        )
        return cls(client, seen, arrived)

    async def refused(self) -> set[tuple[str, str]]:
        """Every refusal of what was sent so far. The server sends its -ERRs in the order of what they
        refuse (not always before the PONG of a flush): a sentinel no role may publish on comes last."""
        sentinel = f"{SENTINEL}.{uuid.uuid4().hex}"
        await self.client.publish(sentinel, b"")
        await self.client.flush()
        async with asyncio.timeout(10):
            while ("publish", sentinel) not in self.seen:
                self._arrived.clear()
                await self._arrived.wait()
        refused = set(self.seen) - {("publish", sentinel)}
        self.seen.clear()
        return refused

    async def publishing(self, subjects: Iterable[str]) -> set[str]:
        """Which of `subjects` the server refuses this role to publish on."""
        subjects = list(subjects)
        for subject in subjects:
            await self.client.publish(subject, b"")
        refused = {subject for kind, subject in await self.refused() if kind == "publish"}
        return {s for s in subjects if s.lower() in refused}

    async def subscribing(self, subjects: Iterable[str]) -> set[str]:
        subjects = list(subjects)
        for subject in subjects:
            await self.client.subscribe(subject)
        refused = {subject for kind, subject in await self.refused() if kind == "subscription"}
        return {s for s in subjects if s.lower() in refused}


@pytest.fixture
async def deployment(authenticated_nats: tuple[NatsServer, Settings]) -> AsyncIterator[Settings]:
    settings = authenticated_nats[1]
    async with await EventLog.open(settings) as admin:  # as the node does: the stream, then every bucket
        await ensure_node_buckets(admin.client, settings.replicas)
    yield settings


def test_the_grants_name_every_bucket_the_node_creates() -> None:
    assert sorted(BUCKETS) == sorted(name for name, _ in NODE_BUCKETS)


@pytest.mark.parametrize("role", ROLES)
async def test_each_role_is_refused_everything_outside_its_grant(deployment: Settings, role: str) -> None:
    stream = deployment.stream
    rules = permissions(role, stream)
    publish, subscribe = rules["publish"], rules["subscribe"]
    assert isinstance(publish, dict) and isinstance(subscribe, dict)
    subjects = surface(stream)
    expected = {s for s in subjects if not granted(publish, s)}
    assert must_refuse(role, stream) <= expected, "the grant table allows what the issue forbids"
    who = await Refusals.open(deployment, role)
    try:
        assert await who.publishing(subjects) == expected
        watched = ["eventloom.>", "eventloom.0.s1", "eventloom.q.>", "eventloom.q.memory.query",
                   "eventloom_dlq.>", "$KV.>", f"$KV.{IDEMPOTENCY}.>", "$JS.API.>", "$JS.ACK.>", ">",
                   "eventloom_peers.x", "_INBOX.abc", "_INBOX.>",
                   *(f"{inbox_prefix(r)}.>" for r in ROLES)]  # fmt: skip
        wanted = {s for s in watched if not granted(subscribe, s)}
        others = {f"{inbox_prefix(r)}.>" for r in ("admin", *ROLES) if r != role}
        assert {"$JS.API.>", ">", "eventloom.>", "$KV.>", "_INBOX.abc", "_INBOX.>"} | others <= wanted
        assert await who.subscribing(watched) == wanted
    finally:
        await who.client.close()


def idempotency_key_of(session: str, key: str) -> str:
    return f"{session}.{hashlib.sha256(key.encode()).hexdigest()[:40]}"


@pytest.mark.parametrize("role", ["projector", "query"])
async def test_the_issues_attack_with_a_reading_roles_credentials_is_refused(
    deployment: Settings, role: str
) -> None:
    """The issue's reproduction: a forged idempotency record, the bucket's config, a new stream and a dead
    letter's deletion, each refused; a later idempotent append still appends."""
    async with await EventLog.open(deployment) as admin:
        old = await admin.append("s1", "note.added", "agent:a", {"text": "old"})
    who = await Refusals.open(deployment, role)
    forged = f"$KV.{IDEMPOTENCY}.{idempotency_key_of('s1', 'k-1')}"
    update = msgspec.json.encode({"name": f"KV_{IDEMPOTENCY}", "max_age": 10_000_000_000})
    try:
        await who.client.publish(forged, b"1")  # stream seq 1: the old event
        await who.client.publish(f"$JS.API.STREAM.UPDATE.KV_{IDEMPOTENCY}", update)
        await who.client.publish("$JS.API.STREAM.CREATE.NEW", msgspec.json.encode({"name": "NEW"}))
        await who.client.publish(f"$JS.API.STREAM.MSG.DELETE.{DLQ_STREAM}", b'{"seq": 1}')
        assert {subject for _, subject in await who.refused()} == {
            forged.lower(),
            f"$js.api.stream.update.kv_{IDEMPOTENCY.lower()}",
            "$js.api.stream.create.new",
            f"$js.api.stream.msg.delete.{DLQ_STREAM.lower()}",
        }
    finally:
        await who.client.close()
    gateway = role_credentials(deployment.data_dir, "gateway")
    assert gateway is not None
    as_gateway = replace(deployment, nats_user="gateway", nats_password=gateway.password)
    async with await EventLog.open(as_gateway) as log:
        event = await log.append("s1", "note.added", "agent:a", {"text": "new"}, idempotency_key="k-1")
        again = await log.append("s1", "note.added", "agent:a", {"text": "new"}, idempotency_key="k-1")
        config = await jetstream_api(log.client, f"STREAM.INFO.KV_{IDEMPOTENCY}")
    assert (event.seq, event.payload) == (old.seq + 1, {"text": "new"})
    assert again == event
    assert config["config"].get("max_age", 0) == 0


async def test_a_role_that_finds_no_bucket_is_told_to_start_the_node(
    authenticated_nats: tuple[NatsServer, Settings],
) -> None:
    """Only the node creates buckets: a role whose node never made them says so, instead of waiting."""
    settings = authenticated_nats[1]
    async with await EventLog.open(settings) as admin:  # the stream, but no bucket
        await admin.append("s1", "note.added", "agent:a", {"text": "one"})
    gateway = role_credentials(settings.data_dir, "gateway")
    assert gateway is not None
    as_gateway = replace(settings, nats_user="gateway", nats_password=gateway.password)
    async with await EventLog.open(as_gateway) as log:
        with pytest.raises(EventloomError, match=f"creating bucket {IDEMPOTENCY}: .*only the bus's admin"):
            await log.append("s1", "note.added", "agent:a", {"text": "two"}, idempotency_key="k")
