"""The neutral model both retrieval-dataset formats map to (see `datasets.py`), and its load report."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

import msgspec

Format = Literal["locomo", "longmemeval"]
Role = Literal["user", "assistant"]
IssueKind = Literal[
    "evidence_repaired",  # a malformed id was rewritten, e.g. "D8:6; D9:17" or "D30:05"
    "evidence_dropped",  # a token that names no turn at all, e.g. "D"
    "evidence_unknown",  # a well-formed id that no turn of the conversation has
    "no_evidence",  # a question that is not an abstention but has nothing to retrieve
    "orphan_session_date",  # a session date without the session
    "date_unparsed",  # a session date in neither published format (its order is kept as in the file)
    "sessions_reordered",  # LongMemEval sessions sorted by date because the file lists them out of order
    "unknown_speaker",  # a LoCoMo turn by neither speaker_a nor speaker_b
    "text_altered",  # NULs or lone surrogates replaced, or text cut to fit the payload limit
]

_UNSAFE_SESSION_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")


class DatasetError(ValueError):
    """The file is not in the shape its format publishes; names the file and the offending field."""

    def __init__(self, path: str | Path, field: str, reason: str) -> None:
        super().__init__(f"{path}: {field}: {reason}")
        self.path = str(path)
        self.field = field
        self.reason = reason


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    turn_id: str  # unique within its conversation; what retrieval results cite
    speaker: str
    role: Role
    text: str
    session_id: str  # the source's session: LoCoMo `session_<N>`, LongMemEval's haystack session id
    session_date: str  # as written in the source
    session_time: datetime | None = None
    dia_id: str | None = None


class Question(msgspec.Struct, frozen=True, kw_only=True):
    question_id: str
    text: str
    answer: str
    category: str
    evidence_turns: tuple[str, ...]
    evidence_sessions: tuple[str, ...]
    abstention: bool = False
    marked_turns: tuple[str, ...] = ()  # LongMemEval's `has_answer` turns, finer than its session evidence
    adversarial_answer: str | None = None
    question_date: str | None = None


class Conversation(msgspec.Struct, frozen=True, kw_only=True):
    conversation_id: str
    source: Format
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    @property
    def session(self) -> str:
        """The eventloom session the conversation's turns are appended to."""
        return session_id_for(self.source, self.conversation_id)

    def session_of_turn(self) -> dict[str, str]:
        return {turn.turn_id: turn.session_id for turn in self.turns}


class LoadIssue(msgspec.Struct, frozen=True, kw_only=True):
    kind: IssueKind
    conversation_id: str
    detail: str
    question_id: str | None = None


class LoadReport(msgspec.Struct, frozen=True, kw_only=True):
    issues: tuple[LoadIssue, ...] = ()

    def counts(self) -> dict[str, int]:
        return dict(Counter(issue.kind for issue in self.issues))


class IssueLog(list[LoadIssue]):
    """The issues found while loading, in order; frozen into a `LoadReport` at the end."""

    def add(self, kind: IssueKind, cid: str, detail: str, question_id: str | None = None) -> None:
        self.append(LoadIssue(kind=kind, conversation_id=cid, detail=detail, question_id=question_id))


class Dataset(msgspec.Struct, frozen=True, kw_only=True):
    source: Format
    path: str
    conversations: tuple[Conversation, ...]
    report: LoadReport

    @property
    def questions(self) -> tuple[Question, ...]:
        return tuple(q for conversation in self.conversations for q in conversation.questions)


def session_id_for(source: str, conversation_id: str) -> str:
    """A valid eventloom session id (`^[A-Za-z0-9_-]{1,128}$`) for a conversation, stable across runs.

    An id that had to be changed gets a digest of the original, so ids differing only in unsafe characters
    (or beyond the length limit) still land in different sessions.
    """
    base = f"{source}-{conversation_id}"
    safe = _UNSAFE_SESSION_CHARS.sub("_", base)
    if safe == base and len(safe) <= 128:
        return safe
    digest = hashlib.sha256(base.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe[: 128 - len(digest) - 1]}-{digest}"
