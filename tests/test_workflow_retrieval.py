"""Workflow runs in memory search: messages, plans and review comments found by `memory query` words and
in `checkout`, cited; a plan answers with its current version, or `as_of` an earlier time, the version of
then. Real stores (LadybugDB and a real Neo4j, SQLite keyword and vector models), the pack's extractors
reached through the `eventloom.graph_extractors` entry point as every node reaches them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from eventloom.schemas import validate_payload
from gateway.packs.workflow.events import WORKFLOW_EVENT_TYPES
from gateway.packs.workflow.extractors import EXTRACTORS
from projectors.graph import extract
from readmodels.checkout.assemble import assemble_context
from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.graph.model import EntityAssertion
from readmodels.graph.protocol import GraphStore
from readmodels.retrieval.model import Hit, Query, QueryResult
from readmodels.retrieval.retriever import Retriever
from tests.retrieval_support import StoryModels, story_models
from tests.test_graph_support import SessionLog, backend, fresh_store, graph_store, ts  # noqa: F401

pytestmark = pytest.mark.anyio

ISSUE = "acme/auth#42"
PLAN_V1 = "Rewrite the refresh scheduler with cron expressions evaluated in UTC."
PLAN_V2 = "Replace the scheduler by a monotonic timer and compare expiry instants in UTC."
PLAN_V3 = PLAN_V2 + " Add a regression test that refreshes a token at 23:59 local time."


def workflow_story() -> SessionLog:
    """An issue, a run with its messages and tool traffic, a plan reviewed and edited twice, a PR review."""
    log = SessionLog("wf")
    log.add(
        "workflow.issue.opened",
        {
            "issue": ISSUE,
            "author": "maya",
            "created_at": "2025-05-01T08:00:00Z",
            "title": "Token refresh fails at midnight",
            "body": "Every night the OAuth refresh job throws an expired-token error.",
        },
    )
    log.add("workflow.run.started", {"run_id": "run-7", "workflow_type": "fix_issue", "agent": "claude"})
    log.add(  # 3
        "workflow.message.recorded",
        {"run_id": "run-7", "message_id": "m1", "role": "user", "author": "maya", "content": "Fix #42."},
    )
    log.add(  # 4
        "workflow.message.recorded",
        {
            "run_id": "run-7",
            "message_id": "m2",
            "role": "assistant",
            "content": "The refresh scheduler computes deadlines in local wall-clock time, not UTC.",
            "responds_to": "m1",
            "references": [ISSUE],
        },
    )
    log.add("workflow.tool.called", {"run_id": "run-7", "call_id": "t1", "tool_name": "grep"})
    log.add("workflow.tool.returned", {"run_id": "run-7", "call_id": "t1", "result_id": "r1", "content": "x"})
    log.add(  # 7
        "workflow.plan.proposed", {"run_id": "run-7", "plan_id": "p1", "content": PLAN_V1, "issue": ISSUE}
    )
    log.add(  # 8
        "workflow.plan.reviewed",
        {
            "plan_id": "p1",
            "reviewer": "lee",
            "verdict": "commented",
            "comment_id": "c1",
            "comment": "Cron is overkill here; a monotonic timer avoids daylight-saving surprises.",
            "suggests_edit": True,
        },
    )
    log.add(  # 9: a first edit (its parent is version 1: no `original_id` needed)
        "workflow.plan.edited",
        {"plan_id": "p2", "parent_id": "p1", "content": PLAN_V2, "edited_by": "lee", "run_id": "run-7"},
    )
    log.add(  # 10: a second edit, named to its lineage by `original_id`
        "workflow.plan.edited",
        {
            "plan_id": "p3",
            "parent_id": "p2",
            "original_id": "p1",
            "content": PLAN_V3,
            "edited_by": "maya",
            "edit_message": "add the regression test",
        },
    )
    log.add(  # 11
        "workflow.pull_request.reviewed",
        {
            "pull_request": "acme/auth#43",
            "review_id": "rv1",
            "reviewer": "lee",
            "state": "changes_requested",
            "body": "The jitter constant needs a comment explaining the thundering herd.",
            "submitted_at": "2025-05-01T09:00:11Z",
        },
    )
    for seq, body in ((12, "I cannot reproduce this yet."), (13, "Reproduced on staging with a fake clock.")):
        comment = {"item": ISSUE, "comment_id": "ic1", "author": "maya", "body": body}
        log.add("workflow.comment.posted", {**comment, "created_at": f"2025-05-01T09:00:{seq}Z"})
    return log


@pytest.fixture
async def story(graph_store: GraphStore, tmp_path: Path) -> AsyncIterator[StoryModels]:  # noqa: F811
    async with story_models(graph_store, tmp_path, workflow_story().events) as models:
        yield models


async def ask(story: StoryModels, text: str, **options: object) -> QueryResult:
    return await Retriever(story.models).query(Query(text=text, **options))  # type: ignore[arg-type]


async def checkout(story: StoryModels, text: str, as_of: str | None = None) -> MemoryCheckout:
    return await assemble_context(Retriever(story.models), CheckoutRequest(text=text, as_of=as_of))


def of_type(result: QueryResult, entity_type: str) -> list[Hit]:
    return [hit for hit in result.hits if hit.type == entity_type]


def test_every_workflow_type_has_an_extractor_and_the_story_is_valid() -> None:
    assert set(EXTRACTORS) == set(WORKFLOW_EVENT_TYPES)
    for event in workflow_story().events:
        validate_payload(event.type, event.payload)


def test_the_projectors_find_the_extractors_through_the_entry_point_alone() -> None:
    """A fresh process that never imports the pack: `extract` (graph, keyword and vector projectors all
    extract through it) reads a workflow message as a message, not as an unknown event."""
    code = textwrap.dedent(
        """
        import sys
        from tests.test_graph_support import SessionLog
        from projectors.graph import extract
        assert "gateway.packs.workflow.extractors" not in sys.modules
        event = SessionLog("wf").add("workflow.message.recorded",
            {"run_id": "r", "message_id": "m", "role": "user", "content": "hello"})
        print(sorted({op.entity_type for op in extract(event).ops if hasattr(op, "entity_type")}))
        """
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "['workflow_message']"


def test_a_plan_edit_without_original_id_names_its_parent_and_spines_carry_no_text() -> None:
    events = workflow_story().events
    plans = [
        (op.name, op.summary)
        for event in events
        for op in extract(event).ops
        if isinstance(op, EntityAssertion) and op.entity_type == "plan"
    ]
    assert [name for name, _ in plans] == ["p1", "p1", "p1"]  # one lineage, one entity
    assert all(PLAN_V1 not in extract(e).event.summary for e in events)  # its event never quotes it
    assert all("Cron is overkill" not in extract(e).event.summary for e in events)


async def test_messages_of_a_run_are_found_by_their_words_with_role_run_and_citation(
    story: StoryModels,
) -> None:
    result = await ask(story, "scheduler deadlines in local wall-clock time")
    [message] = [hit for hit in of_type(result, "workflow_message") if hit.entity == "m2"]
    assert "assistant message in run run-7" in message.summary and "wall-clock" in message.summary
    event = workflow_story().events[3]
    assert message.citations[0].uri == event.citation and message.citations[0].seq == 4
    asked = await ask(story, "Fix #42")
    assert "m1" in {hit.entity for hit in of_type(asked, "workflow_message")}


async def test_a_review_comment_is_found_by_its_words(story: StoryModels) -> None:
    result = await ask(story, "daylight-saving surprises monotonic")
    [comment] = [hit for hit in of_type(result, "review_comment") if hit.entity == "c1"]
    assert comment.summary.startswith("review by lee of plan version p1, commented (suggests an edit)")
    assert comment.citations[0].seq == 8
    pr = await ask(story, "thundering herd jitter")
    assert "rv1" in {hit.entity for hit in of_type(pr, "review_comment")}


async def test_an_issue_and_a_comment_on_it_are_found_by_their_words(story: StoryModels) -> None:
    result = await ask(story, "expired-token error every night")
    [issue] = [hit for hit in of_type(result, "issue") if hit.entity == ISSUE]
    assert issue.summary.startswith(f"issue {ISSUE} by maya: Token refresh fails at midnight")
    assert issue.citations[0].seq == 1
    edited = await ask(story, "I cannot reproduce this yet")  # the words as first posted
    [comment] = [hit for hit in of_type(edited, "workflow_message") if hit.entity == "ic1"]
    assert comment.summary.startswith(f"comment by maya on issue {ISSUE}: Reproduced on staging")
    assert (comment.version, comment.citations[0].seq) == (2, 13)
    assert not any("cannot reproduce" in hit.summary for hit in edited.hits)


async def test_a_plan_answers_with_its_current_version_only(story: StoryModels) -> None:
    for words in ("regression test refreshes a token", "cron expressions scheduler"):  # new words, old
        result = await ask(story, words)
        [plan] = of_type(result, "plan")
        assert (plan.entity, plan.version, plan.superseded_versions) == ("p1", 3, 2)
        assert PLAN_V3 in plan.summary and plan.valid_to is None
        assert plan.citations[0].seq == 10
        assert not any(PLAN_V1 in hit.summary or "cron expressions" in hit.summary for hit in result.hits)


async def test_a_plan_as_of_before_an_edit_answers_with_the_version_of_then(story: StoryModels) -> None:
    first = of_type(await ask(story, "plan for the refresh scheduler", as_of=ts(8)), "plan")
    assert [(p.version, p.valid_to) for p in first] == [(1, ts(9))]
    assert PLAN_V1 in first[0].summary and first[0].citations[0].seq == 7
    second = of_type(await ask(story, "monotonic timer scheduler plan", as_of=ts(9.5)), "plan")
    assert [(p.version, p.valid_to) for p in second] == [(2, ts(10))]
    assert PLAN_V2 in second[0].summary and "regression test" not in second[0].summary


async def test_checkout_shows_messages_plan_and_comment_cited_and_no_superseded_plan(
    story: StoryModels,
) -> None:
    bundle = await checkout(story, "refresh scheduler plan monotonic timer wall-clock cron")
    facts = {(fact.entity, fact.type): fact for fact in bundle.facts}
    assert {("p1", "plan"), ("m2", "workflow_message"), ("c1", "review_comment")} <= set(facts)
    plan = facts["p1", "plan"]
    assert PLAN_V3 in plan.summary and plan.version == 3
    assert bundle.evidence[plan.evidence[0] - 1].seq == 10
    assert bundle.evidence[facts["m2", "workflow_message"].evidence[0] - 1].seq == 4
    assert "cron expressions" not in bundle.prompt and "regression test" in bundle.prompt
    assert bundle.superseded_excluded >= 2

    then = await checkout(story, "refresh scheduler plan cron", as_of=ts(8))
    [old] = [fact for fact in then.facts if fact.type == "plan"]
    assert PLAN_V1 in old.summary and then.evidence[old.evidence[0] - 1].seq == 7
    assert "monotonic timer and compare" not in then.prompt
