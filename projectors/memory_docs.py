"""The memory documents of an event (keyword and vector models): pure, built on graph extraction.

From the graph extraction come the entities an event asserts with a summary (name and summary; a bare
name, such as a turn's speaker, would only add a tiny document per mention that outranks real text on
the name alone, and the exact lane finds names anyway) and the source spans it
cites with their text (document chunks, with line ranges). From the payload comes the event's own verbatim
text, for the types that carry some: a transcript turn, a command and its output, a decision and its
rationale, an explanation, a code symbol's signature and docstring. Any other event contributes its
one-line summary, so that every event can be found by its words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from eventloom.event import Event
from eventloom.schemas import current_fields
from projectors.graph.registry import extract
from readmodels.documents import DocKind, EventDocs, MemoryDoc
from readmodels.graph.model import EntityAssertion, SourceCitation

MAX_TEXT_CHARS: Final = 20_000
"""A document's text is cut here: BM25 gains nothing from more, and the index stays small."""


def _joined(*parts: Any) -> str:
    return "\n".join(str(part) for part in parts if part)[:MAX_TEXT_CHARS]


Verbatim = Callable[[dict[str, Any]], tuple[str, str]]
"""payload -> (title, text)"""


def _turn(p: dict[str, Any]) -> tuple[str, str]:
    return str(p.get("speaker") or p.get("role") or ""), _joined(p.get("text"))


def _command(p: dict[str, Any]) -> tuple[str, str]:
    return str(p.get("command", "")), _joined(p.get("command"), p.get("output"))


def _decision(p: dict[str, Any]) -> tuple[str, str]:
    return str(p.get("title", "")), _joined(p.get("title"), p.get("rationale"))


def _explanation(p: dict[str, Any]) -> tuple[str, str]:
    return str(p.get("outcome", "")), _joined(p.get("outcome"), p.get("explanation"), p.get("cause"))


def _symbol(p: dict[str, Any]) -> tuple[str, str]:
    return str(p.get("symbol", "")), _joined(p.get("symbol"), p.get("signature"), p.get("docstring"))


_VERBATIM: Final[dict[str, tuple[DocKind, Verbatim]]] = {
    "transcript.turn": ("turn", _turn),
    "command.completed": ("command", _command),
    "decision.made": ("decision", _decision),
    "outcome.explained": ("explanation", _explanation),
    "code.symbol.indexed": ("code", _symbol),
}


def memory_docs(event: Event) -> EventDocs:
    """Every document `event` contributes (entities, cited spans, its own text)."""
    projection = extract(event)
    spine = projection.event
    common: dict[str, Any] = {
        "session": event.session,
        "seq": event.seq,
        "event_hash": event.hash,
        "event_type": event.type,
        "ts": event.ts,
    }
    docs: list[MemoryDoc] = []
    for op in projection.ops:
        if isinstance(op, EntityAssertion) and op.summary:  # a bare name: the exact lane finds it by name
            docs.append(
                MemoryDoc(
                    **common,
                    kind="entity",
                    title=op.name,
                    text=_joined(op.summary),
                    entity_name=op.name,
                    entity_type=op.entity_type,
                )
            )
        elif isinstance(op, SourceCitation) and op.text:
            docs.append(
                MemoryDoc(
                    **common,
                    kind="source",
                    title=op.path,
                    text=_joined(op.text),
                    path=op.path,
                    line_start=op.line_start,
                    line_end=op.line_end,
                )
            )
    verbatim = _VERBATIM.get(event.type)
    if verbatim is not None:
        kind, fields = verbatim
        title, text = fields(current_fields(event))
        docs.append(MemoryDoc(**common, kind=kind, title=title, text=text))
    elif not any(doc.kind == "source" for doc in docs):
        docs.append(MemoryDoc(**common, kind="event", title=event.type, text=_joined(spine.summary)))
    return EventDocs(session=event.session, seq=event.seq, event_hash=event.hash, docs=tuple(docs))
