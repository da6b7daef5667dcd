"""The dataset side of the retrieval benchmark: LoCoMo and LongMemEval parsing and append requests."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventloom.errors import EventValidationError
from eventloom.event import SESSION_PATTERN
from eventloom.schemas import schema_for, validate_payload
from eventloom.schemas.catalogue_activity import TranscriptTurn
from eventloom.validation import MAX_PAYLOAD_BYTES

# The bench scripts import each other as top-level modules (they run as `python bench/<name>.py`).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from datasets import (
    Dataset,
    DatasetError,
    append_requests,
    detect_format,
    load_dataset,
    normalize_evidence,
    session_id_for,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "retrieval"
LOCOMO = FIXTURES / "locomo_mini.json"
LONGMEMEVAL = FIXTURES / "longmemeval_mini.json"


def write(tmp_path: Path, data: Any, name: str = "data.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def locomo_sample(qa: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    turns = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog."},
        {"speaker": "Bob", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a photo of a dog"},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "He is called Rex."},
    ]
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": qa
        if qa is not None
        else [{"question": "Q?", "answer": "A", "evidence": ["D1:1"], "category": 4}],
    }


def lme_record(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "Where do I live?",
        "answer": "Oslo",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I moved to Oslo.", "has_answer": True},
                {"role": "assistant", "content": "Nice."},
            ],
            [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi!"}],
        ],
        "answer_session_ids": ["s1"],
    }
    record.update(overrides)
    return record


# --- the fixtures -------------------------------------------------------------------------------------


def test_locomo_fixture_loads_with_its_counts() -> None:
    dataset = load_dataset(LOCOMO)
    assert dataset.source == "locomo"
    assert [c.conversation_id for c in dataset.conversations] == ["conv-1", "conv-2"]
    assert [len(c.turns) for c in dataset.conversations] == [66, 50]
    assert [len({t.session_id for t in c.turns}) for c in dataset.conversations] == [4, 3]
    categories = Counter(q.category for q in dataset.questions)
    assert categories == {"single_hop": 10, "multi_hop": 6, "temporal": 6, "open_domain": 2, "adversarial": 2}
    assert [q.question_id for q in dataset.questions if q.abstention] == ["conv-1:q13", "conv-2:q13"]


def test_locomo_turns_keep_speaker_role_date_and_photo_caption() -> None:
    conversation = load_dataset(LOCOMO).conversations[0]
    first, second = conversation.turns[:2]
    assert (first.turn_id, first.dia_id, first.speaker, first.role) == ("D1:1", "D1:1", "Maya", "user")
    assert (second.speaker, second.role) == ("Jonah", "assistant")
    assert first.session_date == "7:15 pm on 3 March, 2023"
    assert first.session_time is not None and first.session_time.isoformat() == "2023-03-03T19:15:00"
    photo = next(t for t in conversation.turns if t.turn_id == "D2:8")
    assert photo.text.endswith("[shares a photo of a gray dog lying on a blue couch]")


def test_locomo_answers_are_text_and_adversarial_answers_kept_apart() -> None:
    questions = {q.question_id: q for q in load_dataset(LOCOMO).questions}
    assert questions["conv-1:q1"].answer == "11"  # a JSON number in the file, as in the real one
    trap = questions["conv-1:q13"]
    assert (trap.answer, trap.adversarial_answer, trap.category) == ("", "Pepper", "adversarial")
    assert trap.evidence_turns == ("D2:8",)


def test_longmemeval_fixture_loads_with_its_counts() -> None:
    dataset = load_dataset(LONGMEMEVAL)
    assert dataset.source == "longmemeval"
    assert len(dataset.conversations) == 13
    for conversation in dataset.conversations:
        assert len(conversation.questions) == 1
        sessions = Counter(t.session_id for t in conversation.turns)
        assert 4 <= len(sessions) <= 6
        assert all(4 <= n <= 10 for n in sessions.values())
        assert 1 <= len(conversation.questions[0].evidence_sessions) <= 2
    assert [q.question_id for q in dataset.questions if q.abstention] == ["f4b2d816_abs"]
    assert len({q.category for q in dataset.questions}) == 6


def test_longmemeval_evidence_is_every_turn_of_the_answer_sessions() -> None:
    dataset = load_dataset(LONGMEMEVAL)
    for conversation in dataset.conversations:
        question = conversation.questions[0]
        in_sessions = tuple(
            t.turn_id for t in conversation.turns if t.session_id in question.evidence_sessions
        )
        assert question.evidence_turns == in_sessions
        assert set(question.marked_turns) <= set(question.evidence_turns)
        assert question.marked_turns or question.abstention
    app = next(c for c in dataset.conversations if c.conversation_id == "1b4e7f28")
    marked = [t for t in app.turns if t.turn_id in app.questions[0].marked_turns]
    assert [(t.role, "APScheduler" in t.text) for t in marked] == [("assistant", True)]


def test_longmemeval_sessions_are_ordered_by_date_and_the_reordering_reported() -> None:
    dataset = load_dataset(LONGMEMEVAL)
    assert dataset.report.counts() == {"sessions_reordered": 1}
    for conversation in dataset.conversations:
        times = [t.session_time for t in conversation.turns]
        assert None not in times
        assert times == sorted(times)  # type: ignore[type-var]


def test_longmemeval_numeric_answer_becomes_text() -> None:
    questions = {q.question_id: q for q in load_dataset(LONGMEMEVAL).questions}
    assert questions["8e2f6b90"].answer == "3"
    assert questions["8e2f6b90"].question_date == "2023/08/20 (Sun) 11:00"


@pytest.mark.parametrize("path", [LOCOMO, LONGMEMEVAL], ids=["locomo", "longmemeval"])
def test_every_evidence_id_resolves_to_a_turn(path: Path) -> None:
    dataset = load_dataset(path)
    for conversation in dataset.conversations:
        turn_ids = [t.turn_id for t in conversation.turns]
        assert len(turn_ids) == len(set(turn_ids))
        sessions = conversation.session_of_turn()
        for question in conversation.questions:
            assert question.evidence_turns, question.question_id
            assert set(question.evidence_turns) <= set(turn_ids)
            assert set(question.evidence_sessions) == {sessions[t] for t in question.evidence_turns}


def test_locomo_fixture_report_lists_its_packed_evidence_and_orphan_date() -> None:
    dataset = load_dataset(LOCOMO)
    assert dataset.report.counts() == {"evidence_repaired": 1, "orphan_session_date": 1}
    repaired = next(i for i in dataset.report.issues if i.kind == "evidence_repaired")
    assert repaired.question_id == "conv-1:q6"
    bowls = next(q for q in dataset.questions if q.question_id == "conv-1:q6")
    assert bowls.evidence_turns == ("D1:15", "D2:12", "D3:15")
    assert bowls.evidence_sessions == ("session_1", "session_2", "session_3")


# --- malformed evidence ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "ids", "rejected"),
    [
        ("D1:3", ["D1:3"], []),
        (" D1:3 ", ["D1:3"], []),
        ("D8:6; D9:17", ["D8:6", "D9:17"], []),
        ("D9:1 D4:4 D4:6", ["D9:1", "D4:4", "D4:6"], []),
        ("D1:2,D1:3", ["D1:2", "D1:3"], []),
        ("D:11:26", ["D11:26"], []),
        ("D30:05", ["D30:5"], []),
        ("D", [], ["D"]),
        ("", [], []),
        ("D1:3 see above", ["D1:3"], ["see", "above"]),
    ],
)
def test_normalize_evidence(cell: str, ids: list[str], rejected: list[str]) -> None:
    assert normalize_evidence(cell) == (ids, rejected)


def test_malformed_evidence_is_normalized_and_reported_not_fatal(tmp_path: Path) -> None:
    qa = [
        {"question": "packed", "answer": "a", "evidence": ["D1:1; D1:3"], "category": 1},
        {"question": "padded", "answer": "a", "evidence": ["D1:03", "D:1:1"], "category": 2},
        {"question": "empty token", "answer": "a", "evidence": ["D", "D1:2"], "category": 4},
        {"question": "dangling", "answer": "a", "evidence": ["D4:36"], "category": 1},
        {"question": "no list", "answer": "a", "category": 3},
        {"question": "trap", "adversarial_answer": "b", "category": 5},
    ]
    dataset = load_dataset(write(tmp_path, [locomo_sample(qa)]))
    evidence = [q.evidence_turns for q in dataset.questions]
    assert evidence == [("D1:1", "D1:3"), ("D1:3", "D1:1"), ("D1:2",), (), (), ()]
    assert dataset.report.counts() == {
        "evidence_repaired": 3,
        "evidence_dropped": 1,
        "evidence_unknown": 1,
        "no_evidence": 2,  # the dangling one and the one without a list; the trap is an abstention
    }
    unknown = next(i for i in dataset.report.issues if i.kind == "evidence_unknown")
    assert (unknown.conversation_id, unknown.question_id, unknown.detail) == ("conv-x", "conv-x:q4", "D4:36")


def test_longmemeval_unknown_answer_session_is_reported(tmp_path: Path) -> None:
    dataset = load_dataset(write(tmp_path, [lme_record(answer_session_ids=["s1", "s9"])]))
    assert dataset.questions[0].evidence_sessions == ("s1",)
    assert dataset.report.counts() == {"evidence_unknown": 1}


def test_unparsed_dates_keep_file_order_and_are_reported(tmp_path: Path) -> None:
    record = lme_record(haystack_dates=["yesterday", "2023/05/01 (Mon) 09:00"])
    dataset = load_dataset(write(tmp_path, [record]))
    assert [t.session_id for t in dataset.conversations[0].turns] == ["s1", "s1", "s2", "s2"]
    assert dataset.conversations[0].turns[0].session_time is None
    assert dataset.report.counts() == {"date_unparsed": 1}


# --- format detection and errors ----------------------------------------------------------------------


def test_detect_format() -> None:
    assert detect_format(LOCOMO) == "locomo"
    assert detect_format(LONGMEMEVAL) == "longmemeval"


@pytest.mark.parametrize(
    ("content", "field", "words"),
    [
        ("[{not json", "$", "not valid JSON"),
        ('{"sample_id": "x"}', "$", "array"),
        ("[]", "$", "no records"),
        ("[1]", "$[0]", "expected an object"),
        ('[{"question": "?"}]', "$[0]", "neither LoCoMo"),
    ],
)
def test_detect_format_errors_name_file_and_field(
    tmp_path: Path, content: str, field: str, words: str
) -> None:
    path = tmp_path / "odd.json"
    path.write_text(content)
    with pytest.raises(DatasetError) as caught:
        detect_format(path)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{path}: {field}: ")
    assert words in str(caught.value)


def wrong_locomo(case: str) -> dict[str, Any]:
    sample = locomo_sample()
    conversation = sample["conversation"]
    if case == "question missing":
        sample["qa"] = [{"answer": "a", "evidence": [], "category": 4}]
    elif case == "session not a list":
        conversation["session_1"] = {"turns": []}
    elif case == "turn text not a string":
        conversation["session_1"][2]["text"] = 7
    elif case == "speaker missing":
        del conversation["speaker_b"]
    elif case == "dia_id repeats":
        conversation["session_1"][2]["dia_id"] = "D1:1"
    return sample


@pytest.mark.parametrize(
    ("case", "field", "words"),
    [
        ("question missing", "$[0].qa[0]", "`question`"),
        ("session not a list", "$[0].conversation.session_1", "array"),
        ("turn text not a string", "$[0].conversation.session_1[2].text", "str"),
        ("speaker missing", "$[0].conversation.speaker_b", "speaker"),
        ("dia_id repeats", "$[0].conversation.session_1[2].dia_id", "repeats"),
    ],
)
def test_locomo_shape_errors_name_file_and_field(tmp_path: Path, case: str, field: str, words: str) -> None:
    path = write(tmp_path, [wrong_locomo(case)], "locomo10.json")
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert caught.value.path == str(path) and caught.value.field == field
    assert "locomo10.json" in str(caught.value) and field in str(caught.value)
    assert words in caught.value.reason


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"haystack_dates": ["2023/05/01 (Mon) 09:00"]}, "$[1].haystack_dates", "1 entries for 2"),
        ({"haystack_session_ids": ["s1", "s1"]}, "$[1].haystack_session_ids", "repeats"),
        ({"answer_session_ids": "s1"}, "$[1].answer_session_ids", "array"),
        (
            {"haystack_sessions": [[{"role": "narrator", "content": "x"}], []]},
            "$[1].haystack_sessions[0][0].role",
            "narrator",
        ),
    ],
)
def test_longmemeval_shape_errors_name_file_and_field(
    tmp_path: Path, overrides: dict[str, Any], field: str, words: str
) -> None:
    path = write(tmp_path, [lme_record(), lme_record(question_id="q2", **overrides)], "longmemeval_s.json")
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{path}: {field}: ")
    assert words in caught.value.reason


def test_a_forced_format_that_does_not_match_is_an_error() -> None:
    with pytest.raises(DatasetError, match=r"locomo_mini\.json: \$\[0\]: expected a longmemeval record"):
        load_dataset(LOCOMO, format="longmemeval")
    assert load_dataset(LOCOMO, format="locomo").source == "locomo"


# --- append requests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [LOCOMO, LONGMEMEVAL], ids=["locomo", "longmemeval"])
def test_append_requests_pass_the_real_schema(path: Path) -> None:
    assert schema_for("transcript.turn") is TranscriptTurn
    dataset = load_dataset(path)
    for conversation in dataset.conversations:
        requests = append_requests(conversation)
        assert len(requests) == len(conversation.turns)
        for request, turn in zip(requests, conversation.turns, strict=True):
            assert request.validated() is request  # what the appender runs before anything is signed
            validate_payload("transcript.turn", request.payload)
            payload = msgspec.convert(request.payload, TranscriptTurn, strict=True)
            assert (payload.role, payload.text, payload.turn_id) == (turn.role, turn.text, turn.turn_id)
            assert (request.type, request.session) == ("transcript.turn", conversation.session)
            expected = {"role", "text", "turn_id", "speaker"} | (
                {"dia_id"} if dataset.source == "locomo" else set()
            )
            assert set(request.payload) == expected
        assert SESSION_PATTERN.fullmatch(conversation.session)


def test_the_schema_check_used_above_does_reject_a_bad_turn() -> None:
    conversation = load_dataset(LOCOMO).conversations[0]
    request = append_requests(conversation)[0]
    bad = msgspec.structs.replace(request, payload={**request.payload, "role": "narrator"})
    with pytest.raises(EventValidationError, match=r"payload\.role"):
        bad.validated()


def test_session_ids_are_valid_distinct_and_stable() -> None:
    plain = session_id_for("locomo", "conv-26")
    assert plain == "locomo-conv-26"
    odd = [session_id_for("longmemeval", cid) for cid in ("a.b", "a/b", "a b", "é", "x" * 300, "x" * 301)]
    assert all(SESSION_PATTERN.fullmatch(s) for s in odd)
    assert len(set(odd)) == len(odd)
    assert session_id_for("longmemeval", "a.b") == odd[0]


def test_text_the_schema_would_refuse_is_cleaned_reported_and_then_appendable(tmp_path: Path) -> None:
    huge = "word " * (MAX_PAYLOAD_BYTES // 4)
    sessions = [[{"role": "user", "content": "nul\x00here"}, {"role": "assistant", "content": huge}], []]
    dataset = load_dataset(write(tmp_path, [lme_record(haystack_sessions=sessions)]))
    assert dataset.report.counts() == {"text_altered": 2}
    turns = dataset.conversations[0].turns
    assert turns[0].text == "nul\ufffdhere"
    assert huge.startswith(turns[1].text) and len(turns[1].text) < len(huge)
    for request in append_requests(dataset.conversations[0]):
        request.validated()


def test_locomo_turn_by_an_unknown_speaker_is_reported(tmp_path: Path) -> None:
    sample = locomo_sample()
    sample["conversation"]["session_1"][0]["speaker"] = "Cleo"
    dataset = load_dataset(write(tmp_path, [sample]))
    assert dataset.report.counts() == {"unknown_speaker": 1}
    assert dataset.conversations[0].turns[0].role == "user"


def test_dataset_round_trips_through_json() -> None:
    dataset = load_dataset(LOCOMO)
    again = msgspec.json.decode(msgspec.json.encode(dataset), type=Dataset)
    assert again == dataset
