"""Reading the newest event of a session and any event by stream sequence."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from nats.aio.client import Client

from eventloom.bus.stream import StreamLayout, jetstream_api
from eventloom.chain import ChainBreak, check_self, self_problem
from eventloom.errors import EventloomError, UntrustedTailError
from eventloom.event import Event, decode_event, encode_event
from eventloom.keys import Keyring, KeyStore
from eventloom.quarantine import cleared_digests, message_digest

log = logging.getLogger(__name__)

_NO_MESSAGE = 10037


@dataclass(frozen=True)
class StoredEvent:
    """An event together with where the stream keeps it."""

    event: Event
    stream_seq: int


class MalformedMessageError(EventloomError):
    """A message on an event subject that is not an event (raw bytes published past the appender)."""

    def __init__(self, stream_seq: int, reason: str) -> None:
        super().__init__(f"stream message {stream_seq} is not a valid event: {reason}")
        self.stream_seq = stream_seq
        self.reason = reason


@dataclass(frozen=True)
class SessionTail:
    """Where a session's next event goes: after `last_valid` (None: the session has no valid event yet),
    with `stream_seq` the stream sequence of the subject's last message, valid or not, which the next
    publish must name; `skipped` are the messages after `last_valid` that are not its events."""

    last_valid: StoredEvent | None
    stream_seq: int
    skipped: tuple[tuple[int, str], ...] = ()


async def last_event(client: Client, layout: StreamLayout, session: str) -> StoredEvent | None:
    """The session's newest event (decodable, canonical, its own), past any junk published after it."""
    return (await valid_tail(client, layout, session, _no_problem)).last_valid


async def event_at(client: Client, layout: StreamLayout, stream_seq: int) -> StoredEvent:
    found = await _get(client, layout.name, {"seq": stream_seq})
    if found is None:
        raise EventloomError(f"stream {layout.name} has no message at sequence {stream_seq}")
    return found


async def valid_tail(
    client: Client, layout: StreamLayout, session: str, problem: Callable[[Event], str | None]
) -> SessionTail:
    """The session's last message that is one of its events (`problem` says what is wrong with a decoded
    one), walking back past anything else: one message that is not an event never becomes the tail."""
    subject = layout.subject_for(session)
    found = await _get_raw(client, layout.name, {"last_by_subj": subject})
    if found is None:
        return SessionTail(None, 0)
    last_stream_seq = found[1]
    skipped: list[tuple[int, str]] = []
    while found is not None:
        data, stream_seq = found
        verdict = event_problem(data, session, problem)
        if isinstance(verdict, Event):
            return SessionTail(StoredEvent(verdict, stream_seq), last_stream_seq, tuple(skipped))
        skipped.append((stream_seq, verdict))
        found = await _message_before(client, layout.name, subject, stream_seq)
    return SessionTail(None, last_stream_seq, tuple(skipped))


def _no_problem(event: Event) -> None:
    return None


def event_problem(data: bytes, session: str, problem: Callable[[Event], str | None]) -> Event | str:
    """The event in `data`, or why it is not one of `session`'s (`problem` judges a decoded one)."""
    try:
        event = decode_event(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"not a valid event: {exc}"
    if encode_event(event) != data:
        return "not in canonical form"
    if event.session != session:
        return f"an event of session {event.session}"
    return problem(event) or event


async def _message_before(
    client: Client, stream: str, subject: str, stream_seq: int
) -> tuple[bytes, int] | None:
    """The subject's last message before `stream_seq`, in O(log stream_seq) `next_by_subj` probes."""
    low, high, best = 1, stream_seq - 1, None
    while low <= high:
        middle = (low + high) // 2
        probe = await _get_raw(client, stream, {"seq": middle, "next_by_subj": subject})
        if probe is None or probe[1] >= stream_seq:
            high = middle - 1
        else:
            best, low = probe, probe[1] + 1
    return best


async def _get_raw(client: Client, stream: str, request: dict[str, object]) -> tuple[bytes, int] | None:
    response = await jetstream_api(client, f"STREAM.MSG.GET.{stream}", request)
    error = response.get("error")
    if error is not None:
        if error.get("err_code") == _NO_MESSAGE:
            return None
        raise EventloomError(f"stream {stream}: {error.get('description')}")
    message = response["message"]
    return base64.b64decode(message["data"]), int(message["seq"])


async def _get(client: Client, stream: str, request: dict[str, object]) -> StoredEvent | None:
    found = await _get_raw(client, stream, request)
    if found is None:
        return None
    data, stream_seq = found
    try:
        return StoredEvent(decode_event(data), stream_seq)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise MalformedMessageError(stream_seq, str(exc)) from None


async def event_by_seq(
    client: Client,
    layout: StreamLayout,
    session: str,
    seq: int,
    problem: Callable[[Event], str | None] | None = None,
) -> StoredEvent | None:
    """The session's event at event seq `seq`, found by binary search over stream sequences.

    A session's events are stored in seq order on one subject, so `next_by_subj` probes (the first message
    on the subject at or after a stream sequence) find any event in O(log stream length) requests; a message
    there that is not one of its events (or that `problem` objects to) is stepped over.
    """
    problem = problem or _no_problem
    last = (await valid_tail(client, layout, session, problem)).last_valid
    if last is None or seq < 1 or seq > last.event.seq:
        return None
    if seq == last.event.seq:
        return last
    subject = layout.subject_for(session)
    low, high = 1, last.stream_seq
    while low <= high:
        middle = (low + high) // 2
        probe = await _next_event(client, layout.name, subject, session, problem, middle, last.stream_seq)
        if probe is None:
            high = middle - 1
        elif probe.event.seq == seq:
            return probe
        elif probe.event.seq < seq:
            low = probe.stream_seq + 1
        else:
            high = middle - 1
    return None


async def _next_event(
    client: Client,
    stream: str,
    subject: str,
    session: str,
    problem: Callable[[Event], str | None],
    start: int,
    below: int,
) -> StoredEvent | None:
    """The subject's first event of `session` at stream sequence `start` or later and before `below`."""
    while True:
        found = await _get_raw(client, stream, {"seq": start, "next_by_subj": subject})
        if found is None or found[1] >= below:
            return None
        verdict = event_problem(found[0], session, problem)
        if isinstance(verdict, Event):
            return StoredEvent(verdict, found[1])
        start = found[1] + 1


class TailFinder:
    """Finds the event a session's next append chains onto: its last valid event, stepping over bytes
    someone published past the appender, but never over an event signed by a key this node does not know
    (it may be a peer's whose key was never shared: chaining past it would fork the session), unless an
    operator reviewed that message (`eventloom quarantine clear`). Without a key store, form and hash only."""

    def __init__(self, client: Client, layout: StreamLayout, keys: KeyStore | None) -> None:
        self._client = client
        self._layout = layout
        self._keys = keys
        self._keyring: Keyring | None = None
        self._cleared: set[str] = set()

    async def find(self, session: str) -> SessionTail:
        if self._keys is not None and self._keyring is None:
            self._keyring = await asyncio.to_thread(self._keys.load_keyring)
        try:
            found = await valid_tail(self._client, self._layout, session, self._problem)
        except UntrustedTailError:
            if self._keys is None:
                raise
            self._keyring = await asyncio.to_thread(self._keys.load_keyring)  # trusted since?
            self._cleared = await cleared_digests(self._client)  # or reviewed as a forgery?
            found = await valid_tail(self._client, self._layout, session, self._problem)
        for stream_seq, reason in found.skipped:
            log.warning("session %s: stream message %s skipped: %s", session, stream_seq, reason)
        return found

    def _problem(self, event: Event) -> str | None:
        if self._keyring is None:
            return self_problem(event, None)
        try:
            check_self(event, self._keyring)
        except ChainBreak as exc:
            if not exc.unknown_key:
                return exc.reason
            if message_digest(encode_event(event)) in self._cleared:
                return f"cleared from quarantine: {exc.reason}"
            raise UntrustedTailError(event.session, event.seq, exc.reason) from None
        return None
