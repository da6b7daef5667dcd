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
from readmodels.query.client import DEFAULT_TIMEOUT_S, request_reply
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.query.responder import Responder
from readmodels.query.service import BUSY_REPLY, answer
from readmodels.retrieval.model import QueryError

SUBJECT_ROOT: Final = "eventloom.q."
_TOKEN: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Answerer = Callable[[str, bytes], Awaitable[Any]]
"""`(question, body) -> answer`: a projector's `answer`, raising `ValueError` for a bad question."""


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
) -> None:
    """Answer questions to `projector` through `answerer` until `stop` is set; `ready` is set once the
    server knows the subscription."""
    prefix = question_subject(projector, "x")[:-1]

    async def respond(message: Msg) -> None:
        question = message.subject.removeprefix(prefix)

        async def asked(data: bytes) -> Any:
            try:
                return await answerer(question, data)
            except ValueError as exc:  # the answerer's word for a bad question
                raise QueryError(str(exc)) from None
            except ReadModelUnavailableError as exc:  # its store is down, or being swapped
                raise MemoryUnavailableError(str(exc)) from None

        reply = await answer(asked, message.data)
        await message.respond(msgspec.json.encode(reply))

    async def busy(message: Msg) -> None:
        await message.respond(BUSY_REPLY)

    await Responder(client, prefix + "*", projector, respond, busy).serve(stop, ready)


async def ask(
    client: Client, projector: str, question: str, request: Any, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Any:
    """Ask `projector` the named `question` (`request`: anything msgspec encodes, usually its Struct) and
    return the answer as plain JSON values.

    Raises `MemoryUnavailableError` when no running node answers for `projector`, `QueryError` with the
    answerer's message for a bad question and `MemoryQueryFailed` when answering failed."""
    return await request_reply(
        client,
        question_subject(projector, question),
        request,
        timeout_s,
        nobody=f"nothing answers questions to the {projector!r} projector: start a node that runs it "
        f"(`eventloom up --detach`; EVENTLOOM_PROJECTORS must include {projector})",
        late=f"the {projector!r} projector",
    )
