"""Structured tool errors: `{code, message, remediation}`, so an agent can tell what to fix or retry.

Messages name the field at fault; remediation says what to do next. Nothing here echoes a caller's value
into the audit log: the log records only the code.
"""

from __future__ import annotations

import logging
from typing import Final, Literal

import msgspec
import nats.errors
from pydantic import ValidationError

from eventloom.errors import (
    BusUnavailableError,
    ConcurrencyError,
    EventValidationError,
    NodeNotRunningError,
    ReadModelUnavailableError,
    StreamFullError,
    UntrustedTailError,
    WrongExpectedSeqError,
)
from readmodels.graph.protocol import GraphStoreError
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.retrieval.model import QueryError

log = logging.getLogger(__name__)

ErrorCode = Literal[
    "invalid_input",
    "payload_too_large",
    "unauthorized",
    "forbidden",
    "unknown_tool",
    "unavailable",
    "conflict",
    "internal",
]

REMEDIATION: Final[dict[ErrorCode, str]] = {
    "invalid_input": "Fix the named field; the tool's input schema lists every field and its limits.",
    "payload_too_large": "Send at most 1 MiB of JSON per event; index large documents in chunks.",
    "unauthorized": "Send `Authorization: Bearer <token>` with a token from `eventloom tokens add`.",
    "forbidden": "Use a token whose session patterns (or role) cover this call; ask an operator for one.",
    "unknown_tool": "List the tools (tools/list) and call one of those names.",
    "unavailable": "Start the node (`eventloom up`) or the missing role, wait until it is ready, and retry.",
    "conflict": "Retry the call; pass an idempotency_key so a retry cannot append twice.",
    "internal": "Retry once; if it persists, report it with the server log (the error is logged there).",
}


class ToolFailure(Exception):
    """A tool call that failed on purpose, with its code and a message naming the field at fault."""

    def __init__(self, code: ErrorCode, message: str, remediation: str | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.remediation = remediation or REMEDIATION[code]

    def body(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "remediation": self.remediation}


def _validation_message(exc: ValidationError) -> str:
    """Field names and the rule they broke, never the rejected values."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "arguments"
        parts.append(f"{field}: {error['msg']}")
    return "; ".join(parts)


def failure_of(exc: BaseException) -> ToolFailure:
    """The structured failure for whatever a tool raised."""
    match exc:
        case ToolFailure():
            return exc
        case ValidationError():
            return ToolFailure("invalid_input", _validation_message(exc))
        case QueryError() | EventValidationError() | msgspec.ValidationError() | GraphStoreError():
            return ToolFailure("invalid_input", str(exc))
        case WrongExpectedSeqError():
            return ToolFailure(
                "conflict",
                str(exc),
                "Read the session again (memory_query or the resource), decide whether your append still "
                "holds, and retry with the new expected_seq.",
            )
        case UntrustedTailError():
            return ToolFailure("conflict", str(exc), "Ask an operator: see docs/operations.md, quarantine.")
        case ConcurrencyError():
            return ToolFailure("conflict", str(exc))
        case StreamFullError():
            return ToolFailure(
                "unavailable",
                str(exc),
                "Ask an operator to make room (the message says how); a retry fails "
                "until then. Nothing was appended.",
            )
        case (
            MemoryUnavailableError()
            | NodeNotRunningError()
            | BusUnavailableError()
            | ReadModelUnavailableError()
        ):
            return ToolFailure("unavailable", str(exc))
        case nats.errors.NoRespondersError() | nats.errors.TimeoutError():
            return ToolFailure("unavailable", "no service answered over NATS in time")
    log.error("tool failed unexpectedly", exc_info=exc)
    return ToolFailure("internal", f"internal error ({type(exc).__name__}); details are in the server log")
