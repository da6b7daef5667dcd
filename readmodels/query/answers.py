"""Questions about a projector's read model over NATS request/reply (a projector that `Answers`).

Subject `eventloom.q.<projector>.<question>`, queue group `<projector>`: every process that runs the
projector answers, any number of stateless clients ask. The body is the question's JSON; the reply is the
envelope of the memory query service (`readmodels.query.service.Reply`): `{"result": ...}` or
`{"error": {"code", "message"}}`, `invalid_input` when the answerer raised a `ValueError` (its message
names the field), `unavailable` when it raised `ReadModelUnavailableError`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from eventloom.errors import ReadModelUnavailableError
from eventloom.position import Position
from readmodels.consistency import (
    DEFAULT_AFTER_WAIT_MS,
    Consistency,
    Progress,
    after_wait_problem,
    wait_applied,
)
from readmodels.query.client import DEFAULT_TIMEOUT_S, request_reply
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.query.responder import Responder
from readmodels.query.service import BUSY_REPLY, answer
from readmodels.retrieval.model import QueryError

SUBJECT_ROOT: Final = "eventloom.q."
_TOKEN: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Answerer = Callable[[str, bytes], Awaitable[Any]]
"""`(question, body) -> answer`: a projector's `answer`, raising `ValueError` for a bad question."""
AFTER_FIELDS: Final = ("after", "after_wait_ms")


class ReadAfter(msgspec.Struct, frozen=True, kw_only=True):
    """The part of any question that asks to read one's own writes: taken off the body before the
    projector's answerer sees it, so every question of every pack accepts it."""

    after: Position | None = None
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS

    def __post_init__(self) -> None:
        if (problem := after_wait_problem(self.after_wait_ms)) is not None:
            raise ValueError(problem)


def split_after(body: bytes) -> tuple[bytes, ReadAfter | None]:
    """The body without `after` and `after_wait_ms`, and them (None when the body has neither)."""
    if b'"after' not in body:  # the common case costs no decoding
        return body, None
    try:
        fields = msgspec.json.decode(body)
        if not isinstance(fields, dict) or not set(AFTER_FIELDS) & fields.keys():
            return body, None
        asked = msgspec.convert(
            {name: fields.pop(name) for name in AFTER_FIELDS if name in fields}, ReadAfter
        )
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise QueryError(f"after: {exc}") from None
    return msgspec.json.encode(fields), asked


def question_subject(projector: str, question: str) -> str:
    """The subject of `question` to `projector` (both must be plain NATS tokens)."""
    for field, value in (("projector", projector), ("question", question)):
        if not _TOKEN.fullmatch(value):
            raise QueryError(f"{field}: {value!r} is not a name of letters, digits, '_' or '-'")
    return f"{SUBJECT_ROOT}{projector}.{question}"


async def serve_answers(
    client: Client,
    projector: str,
    answerer: Answerer,
    stop: asyncio.Event,
    ready: asyncio.Event | None = None,
    *,
    progress: Progress | None = None,
    hurry: Callable[[], None] | None = None,
) -> None:
    """Answer questions to `projector` through `answerer` until `stop` is set; `ready` is set once the
    server knows the subscription. Given `progress` (the projector's), a question with `after` is answered
    once the projector has applied it, or its wait ran out (the reply's `consistency` says which); `hurry`
    tells the projector's runner a reader waits."""
    prefix = question_subject(projector, "x")[:-1]

    async def respond(message: Msg) -> None:
        question = message.subject.removeprefix(prefix)
        consistency: Consistency | None = None

        async def asked(data: bytes) -> Any:
            nonlocal consistency
            body, read_after = split_after(data)
            if read_after is not None and read_after.after is not None and progress is not None:
                hurried = None if hurry is None else lambda _names: hurry()
                models = {projector: progress}
                consistency = await wait_applied(read_after.after, models, read_after.after_wait_ms, hurried)
            try:
                return await answerer(question, body)
            except ValueError as exc:  # the answerer's word for a bad question
                raise QueryError(str(exc)) from None
            except ReadModelUnavailableError as exc:  # its store is down, or being swapped
                raise MemoryUnavailableError(str(exc)) from None

        reply = await answer(asked, message.data)
        if consistency is not None:
            reply = msgspec.structs.replace(reply, consistency=consistency)
        await message.respond(msgspec.json.encode(reply))

    async def busy(message: Msg) -> None:
        await message.respond(BUSY_REPLY)

    await Responder(client, prefix + "*", projector, respond, busy).serve(stop, ready)


async def ask(
    client: Client,
    projector: str,
    question: str,
    request: Any,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    after: Position | None = None,
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS,
) -> Any:
    """Ask `projector` the named `question` (`request`: anything msgspec encodes, usually its Struct) and
    return the answer as plain JSON values. With `after`, the projector answers once it has applied that
    event (or `after_wait_ms` ran out: the reply envelope's `consistency` names the lag).

    Raises `MemoryUnavailableError` when no running node answers for `projector`, `QueryError` with the
    answerer's message for a bad question and `MemoryQueryFailed` when answering failed."""
    if after is not None:
        request = {**msgspec.to_builtins(request), "after": after, "after_wait_ms": after_wait_ms}
    return await request_reply(
        client,
        question_subject(projector, question),
        request,
        timeout_s,
        nobody=f"nothing answers questions to the {projector!r} projector: start a node that runs it "
        f"(`eventloom up --detach`; EVENTLOOM_PROJECTORS must include {projector})",
        late=f"the {projector!r} projector",
    )
