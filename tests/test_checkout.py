"""Memory Checkout: facts, snippets, inferred context marked non-authoritative, evidence, answerability,
guidance and a token budget that is never exceeded; `after_turn` and `handoff_bundle` on a real log."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventloom.log import EventLog
from gateway.agent_loop import after_turn, handoff_bundle
from readmodels.checkout.assemble import assemble_context, checkout_from
from readmodels.checkout.budget import estimate_tokens
from readmodels.checkout.model import MIN_TOKEN_BUDGET, CheckoutRequest
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.query.local import LocalMemory
from readmodels.retrieval.fusion import Contribution
from readmodels.retrieval.model import Citation, Explanation, Hit, InferredLink, Query, QueryResult, TaskState
from readmodels.retrieval.retriever import Retriever
from tests.retrieval_support import (
    StoryModels,
    flag_story,
    memory_story,
    story_models,
    work_story_with_owners,
)
from tests.test_graph_support import ts
from tests.test_ledger import caught_up, running_mirror

pytestmark = pytest.mark.anyio


@pytest.fixture
async def story(tmp_path: Path) -> AsyncIterator[StoryModels]:
    async with (
        LadybugGraphStore(tmp_path / "graph.lbug") as graph,
        story_models(graph, tmp_path, memory_story().events) as models,
    ):
        yield models


def cited(seq: int) -> Citation:
    return Citation(uri=f"eventloom://s/events/{seq}#{seq:012x}", session="s", seq=seq, hash=f"{seq:064x}")


def hit(
    key: str,
    summary: str,
    *,
    kind: str = "entity",
    lanes: tuple[str, ...] = ("keyword", "vector"),
    seqs: tuple[int, ...] = (1,),
    inferred: InferredLink | None = None,
) -> Hit:
    contributions = {lane: Contribution(raw=1.0, rank=0, weight=1.0, contribution=0.01) for lane in lanes}
    return Hit(
        key=key,
        kind=kind,  # type: ignore[arg-type]
        session="s",
        entity=key,
        type="service" if kind == "entity" else "transcript.turn",
        summary=summary,
        valid_from="2026-11-20T10:00:00.000000Z",
        valid_to=None,
        score=0.01 * len(lanes),
        explanation=Explanation(profile="balanced", fusion="rrf", lanes=contributions),
        citations=[cited(seq) for seq in seqs],
        inferred=inferred,
    )


def result_of(*hits: Hit, warnings: tuple[str, ...] = (), excluded: int = 0) -> QueryResult:
    return QueryResult(
        query=Query(text="q"),
        hits=list(hits),
        lanes=[],
        warnings=list(warnings),
        excluded_not_current=excluded,
        ms=1.0,
    )


def references(prompt: str) -> set[int]:
    body = prompt.split("## Evidence", maxsplit=1)[0]
    return {int(n) for n in re.findall(r"\[(\d+)\]", body)}


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(min_value=200, max_value=2500),
    summaries=st.lists(st.text(min_size=0, max_size=3000), min_size=0, max_size=25),
    kinds=st.lists(st.sampled_from(["entity", "event", "source"]), min_size=25, max_size=25),
    question=st.text(min_size=1, max_size=4096).filter(str.strip),
)
def test_the_budget_is_never_exceeded_and_every_reference_resolves(
    budget: int, summaries: list[str], kinds: list[str], question: str
) -> None:
    hits = [
        hit(f"k{i}", text, kind=kinds[i], seqs=(2 * i + 1, 2 * i + 2)) for i, text in enumerate(summaries)
    ]
    checkout = checkout_from(result_of(*hits), CheckoutRequest(text=question, token_budget=budget))
    assert estimate_tokens(checkout.prompt) <= budget
    assert checkout.diagnostics.tokens == estimate_tokens(checkout.prompt)
    assert references(checkout.prompt) <= set(range(1, len(checkout.evidence) + 1))
    for number, citation in enumerate(checkout.evidence, 1):
        assert f"[{number}] {citation.uri}" in checkout.prompt
    placed = len(checkout.facts) + len(checkout.snippets)
    eligible = [h for h in hits if h.kind != "entity" or h.summary.strip()]  # a bare name is not a fact
    assert placed + checkout.diagnostics.left_out_for_budget == len(eligible)


def test_an_entity_reached_only_by_inference_is_context_not_fact() -> None:
    link = InferredLink(
        source="billing",
        relation_type="depends_on",
        target="auth",
        kind="inferred",
        confidence=0.6,
        method="co_mention_v1",
        trust=0.25,
        citation="eventloom://s/events/8#abcdefabcdef",
    )
    only = hit("billing", "Charges invoices", lanes=("traversal",), inferred=link)
    checkout = checkout_from(result_of(only), CheckoutRequest(text="who depends on auth?"))
    assert checkout.facts == []
    (context,) = checkout.inferred
    assert (context.statement, context.authoritative, context.trust) == (
        "billing -depends_on-> auth",
        False,
        0.25,
    )
    assert "NOT authoritative" in checkout.prompt
    assert any("NOT authoritative" in line for line in checkout.guidance)
    verdict = checkout.answerability
    assert (verdict.answer_from_memory, verdict.ask_user, verdict.refresh_recommended) == (False, True, True)
    assert checkout.diagnostics.inferred_context == 1


def test_nothing_found_means_ask_the_user() -> None:
    checkout = checkout_from(result_of(), CheckoutRequest(text="what is the launch date?"))
    assert checkout.answerability.ask_user and not checkout.answerability.answer_from_memory
    assert any("ask the user" in line for line in checkout.guidance)


def test_weak_single_lane_matches_are_leads_not_answers() -> None:
    checkout = checkout_from(result_of(hit("x", "maybe", lanes=("vector",))), CheckoutRequest(text="x"))
    assert not checkout.answerability.answer_from_memory and not checkout.answerability.ask_user


def test_a_question_about_a_speaker_who_said_none_of_it_is_not_answered_from_memory() -> None:
    def turn(seq: int, speaker: str, text: str) -> Hit:
        found = hit(f"event:s/{seq}", text, kind="event", seqs=(seq,))
        return msgspec.structs.replace(found, entity=speaker)

    maya = turn(8, "Maya", "We adopted a greyhound and named her Pepper!")
    jonah = turn(9, "Jonah", "That is wonderful news")
    asked = CheckoutRequest(text="What did Jonah name the greyhound he adopted?")
    others = (maya, turn(3, "Maya", "greyhounds are gentle"), turn(5, "Maya", "we named the cat Tom"))
    wrong = checkout_from(result_of(*others, jonah), asked)  # Jonah's best turn is only fourth
    assert not wrong.answerability.answer_from_memory and not wrong.answerability.ask_user
    assert any("about Jonah, but what matches was said by Maya" in r for r in wrong.answerability.reasons)
    right = CheckoutRequest(text="What did Maya name the greyhound she adopted?")
    assert checkout_from(result_of(maya, jonah), right).answerability.answer_from_memory
    about = turn(10, "Maya", "Jonah adopted a greyhound too, named Bolt")  # a turn naming him is about him
    assert checkout_from(result_of(about, maya, jonah), asked).answerability.answer_from_memory
    both = CheckoutRequest(text="What did Jonah tell Maya about the greyhound?")
    assert checkout_from(result_of(maya, jonah), both).answerability.answer_from_memory


def test_a_failed_lane_recommends_a_refresh_with_the_reason() -> None:
    checkout = checkout_from(
        result_of(hit("x", "found"), warnings=("lane vector left out: timed out",)), CheckoutRequest(text="x")
    )
    assert checkout.answerability.refresh_recommended
    assert any("timed out" in reason for reason in checkout.answerability.reasons)
    assert checkout.warnings == ["lane vector left out: timed out"]


def test_an_event_already_cited_by_a_fact_is_not_repeated_as_a_snippet() -> None:
    fact = hit("postgres", "Postgres 16", seqs=(5,))
    same_event = hit("event:s/5", "fact: postgres (database)", kind="event", seqs=(5,))
    turn = hit("event:s/6", "the backup failed", kind="event", seqs=(6,))
    checkout = checkout_from(result_of(fact, same_event, turn), CheckoutRequest(text="postgres"))
    assert [s.text for s in checkout.snippets] == ["the backup failed"]


async def test_superseded_and_invalidated_facts_are_left_out_and_counted(story: StoryModels) -> None:
    checkout = await assemble_context(
        Retriever(story.models), CheckoutRequest(text="postgres cluster legacy-ldap")
    )
    assert [f.summary for f in checkout.facts if f.entity == "postgres"] == [
        "Postgres 16 cluster after the upgrade"
    ]
    assert "legacy-ldap" not in {f.entity for f in checkout.facts}
    assert checkout.superseded_excluded >= 2  # postgres's first version, legacy-ldap
    assert checkout.diagnostics.superseded_excluded == checkout.superseded_excluded
    assert set(checkout.diagnostics.lanes_used) == {"exact", "keyword", "vector", "traversal", "verbatim"}


async def test_the_event_that_asserted_an_invalidated_fact_is_not_quoted_and_the_invalidation_is(
    tmp_path: Path,
) -> None:
    """Issue 17, defect 3: snippets obey the same time rules as facts."""
    async with (
        LadybugGraphStore(tmp_path / "graph.lbug") as graph,
        story_models(graph, tmp_path, flag_story().events) as story,
    ):
        retriever = Retriever(story.models)
        result = await retriever.query(Query(text="feature flag X beta"))
        assert all(c.seq != 1 for h in result.hits for c in h.citations), [h.key for h in result.hits]
        assert result.excluded_not_current >= 2  # the entity and the event that asserted it
        [gone] = result.invalidated
        assert (gone.entity, gone.type, gone.invalid_at) == ("flag-x", "feature_flag", ts(3))
        assert "flag removed after the beta" in gone.statement and gone.citation.seq == 3

        checkout = await assemble_context(retriever, CheckoutRequest(text="feature flag X beta"))
        assert [(g.entity, g.invalid_at) for g in checkout.no_longer_true] == [("flag-x", ts(3))]
        assert all(checkout.evidence[n - 1].seq != 1 for s in checkout.snippets for n in s.evidence)
        assert "flag-x" not in {f.entity for f in checkout.facts}
        assert "## No longer true" in checkout.prompt and "stopped holding at" in checkout.prompt
        assert any("never state it as current" in line for line in checkout.guidance)

        unrelated = await retriever.query(Query(text="what happens on Monday?"))
        assert unrelated.invalidated == []  # the question does not name the flag: no room taken by it

        before = await assemble_context(retriever, CheckoutRequest(text="feature flag X beta", as_of=ts(2)))
        assert [f.entity for f in before.facts] == ["flag-x"] and not before.no_longer_true


def test_a_small_budget_keeps_the_best_ranked_items_and_bare_names_are_not_facts() -> None:
    """Issue 17, defect 4: the budget keeps the most relevant first; empty facts are not facts."""
    passage = hit("event:s/9", "the outage began when the token cache expired " * 3, kind="event", seqs=(9,))
    bare = [hit(f"person-{i}", "", seqs=(20 + i,)) for i in range(5)]
    weak = [hit(f"service-{i}", f"service {i} " + "details " * 30, seqs=(40 + i,)) for i in range(6)]
    request = CheckoutRequest(text="outage", token_budget=400)
    checkout = checkout_from(result_of(passage, *bare, *weak), request)
    assert [s.text.split()[:3] for s in checkout.snippets] == [["the", "outage", "began"]]
    assert checkout.diagnostics.left_out_for_budget > 0  # the budget was tight: the weak facts paid
    assert not any(f.entity.startswith("person-") for f in checkout.facts)
    assert "person-" not in checkout.prompt


async def test_what_is_left_to_do_answers_with_the_open_tasks_their_owner_and_blockers(
    tmp_path: Path,
) -> None:
    """Issue 17, defect 4: work state is first-class in query and checkout."""
    async with (
        LadybugGraphStore(tmp_path / "graph.lbug") as graph,
        story_models(graph, tmp_path, work_story_with_owners().events) as story,
    ):
        retriever = Retriever(story.models)
        result = await retriever.query(Query(text="What is left to do?", session="w"))
        work = {task.task: task for task in result.work}
        assert set(work) == {"T1", "T2"}  # T3 is done
        assert (work["T1"].status, work["T1"].blocked_by) == ("open", [])
        assert (work["T2"].status, work["T2"].assignee, work["T2"].blocked_by) == ("claimed", "bob", ["T1"])
        assert work["T2"].title == "Backfill old sessions" and work["T2"].citation.seq == 3

        checkout = await assemble_context(retriever, CheckoutRequest(text="What is left to do?", session="w"))
        assert {item.task for item in checkout.work} == {"T1", "T2"}
        assert "## Work state" in checkout.prompt
        assert "[claimed by bob; blocked by T1]" in checkout.prompt and "[open]" in checkout.prompt
        assert checkout.answerability.answer_from_memory and not checkout.answerability.ask_user
        about_t2 = await assemble_context(
            retriever, CheckoutRequest(text="Backfill old sessions", session="w")
        )
        assert about_t2.superseded_excluded == 0  # T2's proposed -> claimed steps are its state, not left out
        assert "0 superseded or invalidated item(s) were left out" in about_t2.prompt

        about_t3 = await retriever.query(Query(text="Rotate the signing keys", session="w"))
        assert (about_t3.work[0].task, about_t3.work[0].status) == ("T3", "done")  # the best hit's state
        unrelated = await retriever.query(Query(text="when is the demo", session="w"))
        hit_tasks = {hit.entity for hit in unrelated.hits if hit.type == "task"}
        assert {t.task for t in unrelated.work} == hit_tasks  # no work cue: only the tasks it reached
        before_claim = await retriever.query(Query(text="open tasks", session="w", as_of=ts(2)))
        assert {(t.task, t.status) for t in before_claim.work} == {("T1", "open"), ("T2", "open")}


def test_a_task_shows_once_as_its_work_state_and_a_budget_too_small_is_not_nothing() -> None:
    task = msgspec.structs.replace(hit("T2", "Backfill old sessions", seqs=(3,)), type="task")
    event = hit("event:s/3", "task T2 claimed by bob", kind="event", seqs=(3,))
    state = TaskState(
        task="T2", session="s", title="Backfill old sessions", status="claimed", assignee="bob",
        blocked_by=["T1"], since="2026-11-20T10:00:00.000000Z", citation=cited(3),
    )  # fmt: skip
    result = msgspec.structs.replace(result_of(event, task), work=[state])
    checkout = checkout_from(result, CheckoutRequest(text="backfill"))
    assert [w.task for w in checkout.work] == ["T2"] and checkout.facts == []
    assert checkout.prompt.count("Backfill old sessions") == 1

    long = [hit(f"e{i}", "words " * 400, kind="event", seqs=(10 + i,)) for i in range(3)]
    tight = checkout_from(result_of(*long), CheckoutRequest(text="q", token_budget=MIN_TOKEN_BUDGET))
    assert tight.snippets == [] and tight.diagnostics.left_out_for_budget == 3
    assert not tight.answerability.ask_user and tight.answerability.refresh_recommended
    assert "did not fit the token budget" in tight.answerability.reasons[0]


async def test_as_of_checkout_shows_the_fact_as_it_was(story: StoryModels) -> None:
    checkout = await assemble_context(
        Retriever(story.models), CheckoutRequest(text="postgres cluster", as_of=ts(4))
    )
    assert [f.summary for f in checkout.facts if f.entity == "postgres"] == ["Postgres 14 cluster"]
    assert f"As of: {ts(4)}" in checkout.prompt


async def test_after_turn_logs_the_turn_and_returns_its_context(log: EventLog, story: StoryModels) -> None:
    memory = LocalMemory(story.models, lambda: story.inferred)
    turned = await after_turn(log, memory, "chat-1", "how do we refresh OAuth tokens?", speaker="Maya")
    events = [event async for event in log.events("chat-1")]
    assert [(e.type, e.payload) for e in events] == [
        ("transcript.turn", {"role": "user", "text": "how do we refresh OAuth tokens?", "speaker": "Maya"})
    ]
    assert turned.turn == events[0].citation and turned.seq == 1
    assert turned.checkout.request.session == "chat-1"


async def test_handoff_bundle_summarizes_replays_verifies_and_retrieves(
    log: EventLog, story: StoryModels
) -> None:
    memory = LocalMemory(story.models, lambda: story.inferred)
    async with running_mirror(log):
        for event in memory_story().events:
            await log.append("h1", event.type, event.actor, event.payload)
        await caught_up(log)
        bundle = await handoff_bundle(log, memory, "h1", replay=3, token_budget=500)
    assert bundle.summary.events == 8 and bundle.summary.last_seq == 8
    assert bundle.summary.by_type["memory.fact.asserted"] == 3
    assert [line.seq for line in bundle.replay] == [6, 7, 8]
    assert bundle.replay[-1].type == "inference.edge.generated"
    assert bundle.integrity.ok and bundle.integrity.stream_events == bundle.integrity.ledger_events == 8
    assert bundle.retrieval.diagnostics.tokens <= 500
