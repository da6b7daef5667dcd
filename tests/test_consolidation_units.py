"""The consolidation producer's pure parts: segmentation, extractive summaries, claims, procedure steps."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventloom.event import Event
from eventloom.schemas.catalogue_memory import MemoryFactAsserted
from projectors.producers.consolidation.claims import claims_of
from projectors.producers.consolidation.procedures import normalise_command, steps_before
from projectors.producers.consolidation.segments import SegmentRules, last_stretch, segment
from projectors.producers.consolidation.summaries import extractive
from projectors.producers.consolidation.text import event_text

START = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


def make_event(seq: int, type_: str, payload: dict[str, Any], minutes: float = 0.0) -> Event:
    ts = (START + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    digest = hashlib.sha256(f"{seq}:{type_}:{payload}".encode()).hexdigest()
    return Event(
        v=1, session="s1", seq=seq, ts=ts, type=type_, actor="agent", payload=payload,
        caused_by=[], prev_hash=None, hash=digest, sig="", key_id="0" * 16,
    )  # fmt: skip


def titled(seq: int, title: str, minutes: float = 0.0, type_: str = "task.proposed") -> Event:
    return make_event(seq, type_, {"task_id": f"t{seq}", "title": title}, minutes)


AUTH = [
    "Fix login timeouts in auth-service",
    "auth-service login timeouts come from the token cache",
    "Cache auth-service login tokens in redis",
    "auth-service login tokens cached, timeouts gone",
]
BILLING = ["Write billing invoice documentation", "Document billing invoice export formats"]


def test_a_turn_to_unrelated_words_opens_a_topic_segment() -> None:
    events = [titled(i + 1, text, minutes=i) for i, text in enumerate(AUTH + BILLING)]
    segments = segment(events)
    assert [s.opened_by for s in segments] == ["start", "topic"]
    assert [len(s.events) for s in segments] == [4, 2]


def test_a_pause_and_a_session_end_open_new_stretches() -> None:
    events = [
        titled(1, AUTH[0]),
        titled(2, AUTH[1], minutes=1),
        titled(3, AUTH[2], minutes=45),  # after a 44-minute pause
        make_event(4, "session.ended", {"reason": "done"}, minutes=46),
        titled(5, AUTH[3], minutes=47),
    ]
    segments = segment(events)
    assert [s.opened_by for s in segments] == ["start", "gap", "ended"]
    assert [e.seq for e in last_stretch(segments)[0].events] == [5]


def test_derived_events_are_neither_content_nor_a_clock() -> None:
    events = [
        titled(1, AUTH[0]),
        make_event(2, "consolidation.candidate.created", {"title": "late"}, minutes=90),
        titled(3, AUTH[1], minutes=2),
    ]
    (only,) = segment(events)
    assert [e.seq for e in only.events] == [1, 3]


def test_short_commands_never_shift_the_topic() -> None:
    events = [titled(i + 1, text, minutes=i) for i, text in enumerate(AUTH)]
    events.append(make_event(5, "command.completed", {"command": "make build", "exit_code": 0}, 5))
    assert len(segment(events)) == 1


def test_extractive_summary_keeps_the_central_texts_in_order() -> None:
    texts = [*AUTH, "Lunch break"]
    summary = extractive(texts, fallback_title="Episode")
    lines = summary.summary.split("\n")
    assert "Lunch break" not in lines
    assert lines == [text for text in texts if text in lines]  # text order
    assert summary.title in AUTH
    assert summary.summary_by == "extractive"
    assert extractive(["", " "], fallback_title="Episode").title == "Episode"


def test_event_text_reads_the_human_fields_and_spells_out_facts() -> None:
    fact = make_event(
        1,
        "memory.fact.asserted",
        {"relations": [{"source": "auth", "target": "redis", "relation_type": "depends_on"}]},
    )
    assert event_text(fact) == "auth depends_on redis"
    command = make_event(2, "command.completed", {"command": "make build", "exit_code": 0})
    assert event_text(command) == "make build"


@pytest.mark.parametrize(
    ("command", "step"),
    [
        ("git commit -m 'fix login'", "git commit"),
        ("FOO=1 sudo /usr/bin/make test && echo ok", "make test"),
        ("python -m pytest -q tests/x.py", "python -m pytest"),
        ("pytest tests/test_login.py", "pytest"),
        ("uv run --frozen pytest", "uv run"),
        ("", ""),
    ],
)
def test_a_command_normalises_to_program_and_subcommand(command: str, step: str) -> None:
    assert normalise_command(command) == step


def command(seq: int, text: str, exit_code: int = 0) -> Event:
    return make_event(seq, "command.completed", {"command": text, "exit_code": exit_code}, seq)


def test_steps_fold_retries_drop_failures_and_start_after_the_last_success() -> None:
    events = [
        command(1, "git pull"),
        make_event(2, "verification.recorded", {"subject": "ok", "passed": True}, 2),
        command(3, "git pull", exit_code=1),
        command(4, "git pull"),
        command(5, "git pull"),
        command(6, "make build"),
        make_event(7, "tool.call.completed", {"tool": "run_tests", "ok": True}, 7),
    ]
    steps = steps_before(events, gap_s=1800)
    assert [(s.name, s.event.seq) for s in steps] == [
        ("git pull", 5),
        ("make build", 6),
        ("tool:run_tests", 7),
    ]


def fact(payload: dict[str, Any]) -> MemoryFactAsserted:
    return msgspec.convert(payload, MemoryFactAsserted)


def test_a_fact_is_the_same_claim_whatever_its_case_and_spacing() -> None:
    def claim_ids(source: str, target: str) -> list[tuple[str, ...]]:
        relation = {"source": source, "target": target, "relation_type": "depends_on"}
        return [c.identity for c in claims_of(fact({"relations": [relation]}))]

    assert claim_ids("Auth-Service", "Redis") == claim_ids("auth-service ", "redis")
    redis = {"name": "redis", "entity_type": "service"}
    assert len(claims_of(fact({"entities": [{**redis, "summary": "the token cache"}]}))) == 1
    assert claims_of(fact({"entities": [redis]})) == []  # existence alone is not a claim


WORDS = ["auth", "login", "token", "cache", "billing", "invoice", "docs", "deploy", "redis", "build"]
event_specs = st.lists(
    st.tuples(
        st.sampled_from(["task.proposed", "session.ended", "inference.edge.generated", "note.added"]),
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=5),
        st.sampled_from([0.5, 1, 5, 40]),  # minutes since the event before
    ),
    max_size=40,
)


def build(specs: list[tuple[str, list[str], float]]) -> list[Event]:
    events, minutes = [], 0.0
    for seq, (type_, words, delta) in enumerate(specs, start=1):
        minutes += delta
        events.append(make_event(seq, type_, {"title": " ".join(words)} if words else {}, minutes))
    return events


def seqs(segments: list[Any]) -> list[tuple[str, list[int]]]:
    return [(s.opened_by, [e.seq for e in s.events]) for s in segments]


@settings(max_examples=150, deadline=None)
@given(event_specs)
def test_segmentation_is_deterministic_and_prefix_stable(specs: list[tuple[str, list[str], float]]) -> None:
    events = build(specs)
    rules = SegmentRules(min_topic_events=2, min_topic_words=1, max_events=6)
    whole = seqs(segment(events, rules))
    assert whole == seqs(segment(list(events), rules))
    for cut in range(len(events) + 1):
        prefix = seqs(segment(events[:cut], rules))
        closed, last = prefix[:-1], prefix[-1:]
        assert whole[: len(closed)] == closed  # closed segments never change as the session goes on
        for opened_by, members in last:  # the open one only grows
            assert whole[len(closed)][0] == opened_by
            assert whole[len(closed)][1][: len(members)] == members
