"""Conversational retrieval datasets (LoCoMo, LongMemEval) in one neutral model, and their append requests.

Both public formats are parsed as published so the real files load unmodified. Their known flaws (evidence
ids packed into one string or mistyped, dates of sessions that have no turns, sessions listed out of date
order) are repaired only where the repair is unambiguous, and every repair or loss is listed in the
dataset's load report: a retrieval score that silently lost evidence would not be comparable.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, TypeVar

import msgspec
from dataset_model import (
    Conversation,
    Dataset,
    DatasetError,
    Format,
    IssueKind,
    IssueLog,
    LoadIssue,
    LoadReport,
    Question,
    Role,
    Turn,
    session_id_for,
)

from eventloom.request import AppendRequest
from eventloom.validation import MAX_PAYLOAD_BYTES

__all__ = [
    "Conversation",
    "Dataset",
    "DatasetError",
    "Format",
    "IssueKind",
    "LoadIssue",
    "LoadReport",
    "Question",
    "Role",
    "Turn",
    "append_requests",
    "detect_format",
    "load_dataset",
    "normalize_evidence",
    "session_id_for",
]

LOCOMO_CATEGORIES: Final = {
    1: "multi_hop",
    2: "temporal",
    3: "open_domain",
    4: "single_hop",
    5: "adversarial",
}
ADVERSARIAL: Final = 5
ACTOR: Final = "bench.retrieval"
EVENT_TYPE: Final = "transcript.turn"
MAX_ID_CHARS: Final = 256  # `Id` in eventloom/schemas/catalogue_common.py
MAX_NAME_CHARS: Final = 512  # `Name` there
# Ids, dia_id and speaker take at most ~6 KiB even fully JSON-escaped; the text gets the rest of the limit.
TEXT_BUDGET_BYTES: Final = MAX_PAYLOAD_BYTES - 8 * 1024
_DATE_FORMATS: Final = ("%I:%M %p on %d %B, %Y", "%Y/%m/%d (%a) %H:%M")  # LoCoMo, LongMemEval
_SESSION_KEY: Final = re.compile(r"^session_(\d+)$")
_DATE_KEY: Final = re.compile(r"^session_(\d+)_date_time$")
_DIA_TOKEN: Final = re.compile(r"^D:?(\d+):(\d+)$", re.IGNORECASE)
_MSGSPEC_PATH: Final = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_T = TypeVar("_T")


# The published record shapes. Unknown keys (img_url, query, observation, session summaries ...) are ignored.
class _LocomoTurn(msgspec.Struct):
    speaker: str
    dia_id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_CHARS)]
    text: str
    blip_caption: str | None = None


class _LocomoQA(msgspec.Struct):
    question: str
    category: int
    answer: str | int | float | None = None
    adversarial_answer: str | int | float | None = None
    evidence: list[str] = msgspec.field(default_factory=list)
    beam_kind: str | None = None  # BEAM converted to this shape (see shared/data/README.md) names its types


class _LocomoSample(msgspec.Struct):
    sample_id: str
    conversation: dict[str, Any]
    qa: list[_LocomoQA]


class _LmeTurn(msgspec.Struct):
    role: Role
    content: str
    has_answer: bool = False


class _LmeRecord(msgspec.Struct):
    question_id: str
    question_type: str
    question: str
    answer: str | int | float
    question_date: str
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[_LmeTurn]]
    answer_session_ids: list[str]


def detect_format(path: str | Path) -> Format:
    """Which of the two formats a file is in, judged by the keys of its first record."""
    return _detect(path, _records(path))


def load_dataset(path: str | Path, format: Format | None = None) -> Dataset:
    records = _records(path)
    found = _detect(path, records)
    if format is not None and format != found:
        raise DatasetError(path, "$[0]", f"expected a {format} record, found a {found} one")
    issues = IssueLog()
    if found == "locomo":
        samples = [_decode(path, f"$[{i}]", raw, _LocomoSample) for i, raw in enumerate(records)]
        conversations = [_locomo_conversation(path, i, s, issues) for i, s in enumerate(samples)]
    else:
        lme = [_decode(path, f"$[{i}]", raw, _LmeRecord) for i, raw in enumerate(records)]
        conversations = [_lme_conversation(path, i, r, issues) for i, r in enumerate(lme)]
    return Dataset(
        source=found,
        path=str(path),
        conversations=tuple(conversations),
        report=LoadReport(issues=tuple(issues)),
    )


def normalize_evidence(raw: str) -> tuple[list[str], list[str]]:
    """Split one evidence cell into canonical dia_ids (`D<session>:<turn>`) and the tokens that are none.

    Accepts what the real file contains: several ids packed with `;`, `,` or spaces, a stray colon
    (`D:11:26`), zero padding (`D30:05`). Anything else is rejected, never guessed.
    """
    ids: list[str] = []
    rejected: list[str] = []
    for token in re.split(r"[;,\s]+", raw.strip()):
        match = _DIA_TOKEN.fullmatch(token)
        if match:
            ids.append(f"D{int(match.group(1))}:{int(match.group(2))}")
        elif token:
            rejected.append(token)
    return ids, rejected


def append_requests(conversation: Conversation, *, actor: str = ACTOR) -> list[AppendRequest]:
    """One `transcript.turn` per turn, in conversation order, in the conversation's own session."""
    session = conversation.session
    requests: list[AppendRequest] = []
    for turn in conversation.turns:
        payload: dict[str, Any] = {"role": turn.role, "text": turn.text, "turn_id": turn.turn_id}
        if turn.dia_id:
            payload["dia_id"] = turn.dia_id
        if turn.speaker:
            payload["speaker"] = turn.speaker
        requests.append(AppendRequest(session=session, type=EVENT_TYPE, actor=actor, payload=payload))
    return requests


def _records(path: str | Path) -> list[msgspec.Raw]:
    data = Path(path).read_bytes()
    try:
        records = msgspec.json.decode(data, type=list[msgspec.Raw])
    except msgspec.ValidationError as exc:
        raise DatasetError(path, "$", f"expected a JSON array of records ({exc})") from None
    except msgspec.DecodeError as exc:
        raise DatasetError(path, "$", f"not valid JSON ({exc})") from None
    if not records:
        raise DatasetError(path, "$", "the array has no records")
    return records


def _detect(path: str | Path, records: list[msgspec.Raw]) -> Format:
    first = msgspec.json.decode(records[0])
    if not isinstance(first, dict):
        raise DatasetError(path, "$[0]", f"expected an object, got {type(first).__name__}")
    if "conversation" in first and "qa" in first:
        return "locomo"
    if "haystack_sessions" in first and "question_id" in first:
        return "longmemeval"
    raise DatasetError(
        path,
        "$[0]",
        "neither LoCoMo (`conversation`, `qa`) nor LongMemEval (`question_id`, `haystack_sessions`)",
    )


def _decode(path: str | Path, where: str, raw: msgspec.Raw | object, kind: type[_T]) -> _T:
    try:
        if isinstance(raw, msgspec.Raw):
            return msgspec.json.decode(raw, type=kind)
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _MSGSPEC_PATH.search(message)
        field = where + (match.group("path") if match else "")
        raise DatasetError(path, field, message[: match.start()] if match else message) from None


def _locomo_conversation(
    path: str | Path, index: int, sample: _LocomoSample, issues: IssueLog
) -> Conversation:
    cid = sample.sample_id
    conv = sample.conversation
    speakers: dict[str, Role] = {}
    pairs: tuple[tuple[str, Role], ...] = (("speaker_a", "user"), ("speaker_b", "assistant"))
    for key, role in pairs:
        name = conv.get(key)
        if not isinstance(name, str):
            raise DatasetError(path, f"$[{index}].conversation.{key}", "expected the speaker's name")
        # Both speakers are people; the schema's role only tells them apart, the name is in `speaker`.
        speakers.setdefault(name, role)
    sessions = sorted(int(m.group(1)) for m in map(_SESSION_KEY.fullmatch, conv) if m)
    for n in sorted(int(m.group(1)) for m in map(_DATE_KEY.fullmatch, conv) if m):
        if n not in sessions:
            issues.add("orphan_session_date", cid, f"session_{n}")
    turns: list[Turn] = []
    by_dia: dict[str, Turn] = {}
    for n in sessions:
        where = f"$[{index}].conversation.session_{n}"
        raw_turns = _decode(path, where, conv[f"session_{n}"], list[_LocomoTurn])
        date = conv.get(f"session_{n}_date_time")
        session_date = date if isinstance(date, str) else ""
        time = _parse_date(session_date, cid, f"session_{n}", issues)
        for k, raw in enumerate(raw_turns):
            turn = _locomo_turn(cid, n, raw, speakers, session_date, time, issues)
            if turn.turn_id in by_dia:  # evidence names turns by dia_id, so a repeat makes it ambiguous
                raise DatasetError(
                    path, f"{where}[{k}].dia_id", f"{turn.turn_id!r} repeats an earlier turn's"
                )
            by_dia[turn.turn_id] = turn
            turns.append(turn)
    by_dia = {_canonical(dia): turn for dia, turn in by_dia.items()}
    questions = tuple(
        _locomo_question(cid, f"{cid}:q{q}", qa, by_dia, issues) for q, qa in enumerate(sample.qa, 1)
    )
    return Conversation(conversation_id=cid, source="locomo", turns=tuple(turns), questions=questions)


def _locomo_turn(
    cid: str,
    session: int,
    raw: _LocomoTurn,
    speakers: dict[str, Role],
    session_date: str,
    time: datetime | None,
    issues: IssueLog,
) -> Turn:
    role = speakers.get(raw.speaker)
    if role is None:
        issues.add("unknown_speaker", cid, f"{raw.speaker!r}")
    # A shared photo's only readable content is its caption; without it the turn is often just "Look!".
    text = f"{raw.text} [shares {raw.blip_caption}]" if raw.blip_caption else raw.text
    return Turn(
        turn_id=raw.dia_id,
        speaker=raw.speaker[:MAX_NAME_CHARS],
        role=role or "user",
        text=_clean_text(text, cid, issues),
        session_id=f"session_{session}",
        session_date=session_date,
        session_time=time,
        dia_id=raw.dia_id,
    )


def _locomo_question(
    cid: str, qid: str, qa: _LocomoQA, by_dia: dict[str, Turn], issues: IssueLog
) -> Question:
    evidence: list[Turn] = []
    for cell in qa.evidence:
        ids, rejected = normalize_evidence(cell)
        if rejected:
            detail = f"{cell!r}: no turn id in {rejected}"
            issues.add("evidence_dropped", cid, detail, qid)
        if ids and ids != [cell]:
            detail = f"{cell!r} -> {ids}"
            issues.add("evidence_repaired", cid, detail, qid)
        for dia in ids:
            if dia in by_dia:
                evidence.append(by_dia[dia])
            else:
                issues.add("evidence_unknown", cid, dia, qid)
    adversarial = qa.category == ADVERSARIAL
    if not evidence and not adversarial:
        issues.add("no_evidence", cid, qa.question, qid)
    return Question(
        question_id=qid,
        text=qa.question,
        answer=_text_of(qa.answer),
        category=qa.beam_kind or LOCOMO_CATEGORIES.get(qa.category, f"category_{qa.category}"),
        evidence_turns=_unique(turn.turn_id for turn in evidence),
        evidence_sessions=_unique(turn.session_id for turn in evidence),
        # Category 5 asks about something that did not happen (often a misattributed speaker); its
        # `adversarial_answer` is the trap, so the question is scored as an abstention.
        abstention=adversarial,
        adversarial_answer=None if qa.adversarial_answer is None else _text_of(qa.adversarial_answer),
    )


def _lme_conversation(path: str | Path, index: int, rec: _LmeRecord, issues: IssueLog) -> Conversation:
    cid = rec.question_id
    where = f"$[{index}]"
    count = len(rec.haystack_sessions)
    for name in ("haystack_session_ids", "haystack_dates"):
        if len(getattr(rec, name)) != count:
            reason = f"has {len(getattr(rec, name))} entries for {count} haystack sessions"
            raise DatasetError(path, f"{where}.{name}", reason)
    if len(set(rec.haystack_session_ids)) != count:
        raise DatasetError(path, f"{where}.haystack_session_ids", "a session id repeats")
    times = [
        _parse_date(d, cid, s, issues)
        for d, s in zip(rec.haystack_dates, rec.haystack_session_ids, strict=True)
    ]
    order = list(range(count))
    if all(t is not None for t in times):
        order.sort(key=lambda i: times[i] or datetime.min)
        if order != sorted(order):
            issues.add("sessions_reordered", cid, str(order))
    turns: list[Turn] = []
    marked: list[str] = []
    for i in order:
        sid = rec.haystack_session_ids[i]
        for k, raw in enumerate(rec.haystack_sessions[i], start=1):
            turn = Turn(
                turn_id=_fit_id(f"{sid}:{k}"),
                speaker=raw.role,
                role=raw.role,
                text=_clean_text(raw.content, cid, issues),
                session_id=sid,
                session_date=rec.haystack_dates[i],
                session_time=times[i],
            )
            turns.append(turn)
            if raw.has_answer:
                marked.append(turn.turn_id)
    return Conversation(
        conversation_id=cid,
        source="longmemeval",
        turns=tuple(turns),
        questions=(_lme_question(rec, turns, marked, issues),),
    )


def _lme_question(rec: _LmeRecord, turns: list[Turn], marked: list[str], issues: IssueLog) -> Question:
    cid = rec.question_id
    known = {turn.session_id for turn in turns}
    for sid in rec.answer_session_ids:
        if sid not in known:
            issues.add("evidence_unknown", cid, sid, cid)
    sessions = _unique(sid for sid in rec.answer_session_ids if sid in known)
    abstention = cid.endswith("_abs")
    if not sessions and not abstention:
        issues.add("no_evidence", cid, rec.question, cid)
    return Question(
        question_id=cid,
        text=rec.question,
        answer=_text_of(rec.answer),
        category=rec.question_type,
        # LongMemEval scores retrieval by session, so every turn of an answer session is evidence; the
        # `has_answer` turns are kept apart in `marked_turns`, as the two annotations often disagree.
        evidence_turns=tuple(turn.turn_id for turn in turns if turn.session_id in sessions),
        evidence_sessions=sessions,
        abstention=abstention,
        marked_turns=tuple(marked),
        question_date=rec.question_date,
    )


def _parse_date(value: str, cid: str, session: str, issues: IssueLog) -> datetime | None:
    for pattern in _DATE_FORMATS:
        try:
            return datetime.strptime(value.strip(), pattern)
        except ValueError:
            continue
    detail = f"{session}: {value!r}"
    issues.add("date_unparsed", cid, detail)
    return None


def _clean_text(text: str, cid: str, issues: IssueLog) -> str:
    """Text the payload validation accepts: no NUL, valid UTF-8, within the payload limit."""
    cleaned = text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    size = len(msgspec.json.encode(cleaned))
    while size > TEXT_BUDGET_BYTES:
        # JSON escaping can make a character cost up to 12 bytes, so shrink by the measured ratio.
        cleaned = cleaned[: int(len(cleaned) * TEXT_BUDGET_BYTES / size) - 1]
        size = len(msgspec.json.encode(cleaned))
    if cleaned != text:
        detail = f"{len(text)} -> {len(cleaned)} characters"
        issues.add("text_altered", cid, detail)
    return cleaned


def _canonical(dia_id: str) -> str:
    ids, rejected = normalize_evidence(dia_id)
    return ids[0] if len(ids) == 1 and not rejected else dia_id


def _fit_id(value: str) -> str:
    if len(value) <= MAX_ID_CHARS:
        return value
    return f"{value[:200]}~{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def _text_of(value: str | int | float | None) -> str:
    # Some answers in both files are JSON numbers (e.g. 2022); they are compared as text.
    return "" if value is None else str(value)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
