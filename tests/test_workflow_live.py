"""The workflow pack live: a node runs the `workflow` projector (found through its entry point), events
are appended through the log, and every question is asked over NATS through `WorkflowClient`; after
`eventloom rebuild workflow` (a new LadybugDB generation, swapped in) every answer is the same."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import msgspec
import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.node import Node
from gateway.packs.workflow.client import WorkflowClient
from gateway.packs.workflow.neo4j_store import neo4j_workflow_store
from gateway.packs.workflow.reads import (
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    PathQuestion,
    PlanQuestion,
    RunsQuestion,
    SequenceQuestion,
    ToolCallsQuestion,
)
from projectors.generations import Generations
from readmodels.neo4j.local import Neo4jEndpoint
from readmodels.query.answers import ask
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.retrieval.model import QueryError
from tests.conftest import REPO, cli_env, run_cli
from tests.runtime_support import drained
from tests.workflow_support import ISSUE, PULL, rocket_story

pytestmark = pytest.mark.anyio
CONSUMER = "projector-workflow"
SESSION = "w1"


@contextlib.asynccontextmanager
async def workflow_node(settings: Settings, log: EventLog) -> AsyncIterator[Node]:
    """A node that runs the workflow projector alone (no memory models, no producers), once it answers."""
    running, stop = Node(replace(settings, projectors="workflow", producers="none")), asyncio.Event()
    task = asyncio.create_task(running.run(stop))
    await asyncio.wait_for(running.ready.wait(), 30)
    try:
        await answering(WorkflowClient(log.client))
        yield running
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def answering(reads: WorkflowClient, timeout: float = 30) -> None:
    """Until the projector is open and its questions are served (a moment after the node is ready)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await reads.runs(RunsQuestion(limit=1))
            return
        except MemoryUnavailableError:
            assert asyncio.get_running_loop().time() < deadline, "the workflow projector never answered"
            await asyncio.sleep(0.05)


@pytest.fixture
async def node(settings: Settings, log: EventLog) -> AsyncIterator[Node]:
    async with workflow_node(settings, log) as running:
        yield running


class Recorded:
    """The rocket story (tests/workflow_support.py) appended to the real log: id -> the event defining it."""

    def __init__(self) -> None:
        self.by_id: dict[str, Event] = {}

    def citation(self, defined: str) -> str:
        return self.by_id[defined].citation


async def record_story(log: EventLog) -> Recorded:
    story, recorded = rocket_story(), Recorded()
    defined = {seq: name for name, seq in story.seq.items()}
    for told in story.events:
        event = await log.append(SESSION, told.type, told.actor, told.payload)
        if told.seq in defined:
            recorded.by_id[defined[told.seq]] = event
    # the gateway's audit session is not workflow history: the projector leaves it out
    audit = {"run_id": "audited", "workflow_type": "fix-issue", "agent": "claude"}
    await log.append(log.settings.audit_session, "workflow.run.started", "gateway", audit)
    await drained(log, CONSUMER, timeout=60)
    return recorded


async def everything(reads: WorkflowClient) -> dict[str, Any]:
    answers = {
        "runs": await reads.runs(RunsQuestion(limit=50)),
        "issue_runs": await reads.issue_runs(IssueRunsQuestion(issue=ISSUE)),
        "sequence": [await reads.sequence(SequenceQuestion(run_id=r)) for r in ("run-1", "run-2", "run-3")],
        "conversation": await reads.sequence(SequenceQuestion(run_id="run-2", conversation=True)),
        "tool_calls": await reads.tool_calls(ToolCallsQuestion()),
        "errors": await reads.tool_calls(ToolCallsQuestion(errors_only=True)),
        "plan": await reads.plan(PlanQuestion(plan_id="plan-1")),
        "implementation": await reads.implementation(IssueQuestion(issue=ISSUE)),
        "issue": await reads.item(ItemQuestion(key=ISSUE)),
        "pull": await reads.item(ItemQuestion(key=PULL, label="PullRequest")),
        "path": await reads.path(PathQuestion(run_id="run-2")),
    }
    return {name: msgspec.to_builtins(answer) for name, answer in answers.items()}


async def check_answers(reads: WorkflowClient, story: Recorded) -> None:
    runs = await reads.runs(RunsQuestion())
    assert [run.run_id for run in runs] == ["run-3", "run-2", "run-1"]  # not the audited one
    assert [run.citation for run in runs] == [story.citation(f"run-{n}") for n in (3, 2, 1)]
    latest = await reads.issue_runs(IssueRunsQuestion(issue=ISSUE, limit=1))
    assert [(run.run_id, run.status, run.result) for run in latest] == [("run-2", "succeeded", "PR #43")]
    sequence = await reads.sequence(SequenceQuestion(run_id="run-1"))
    ids = ["m1", "m2", "call-1", "call-1-result", "call-2", "call-2-result"]
    assert [m.message_id for m in sequence] == ids
    assert [m.citation for m in sequence] == [story.citation(i) for i in ids]
    conversation = await reads.sequence(SequenceQuestion(run_id="run-2", conversation=True))
    assert [m.message_id for m in conversation] == ["m3", "plan-1", "plan-2", "m4"]
    (failed,) = await reads.tool_calls(ToolCallsQuestion(errors_only=True))
    assert failed.result is not None
    assert (failed.call.tool_name, failed.result.error_message) == ("run_tests", "3 tests failed")
    assert failed.result.citation == story.citation("call-2-result")
    history = await reads.plan(PlanQuestion(plan_id="plan-1"))
    assert history is not None and history.current is not None
    assert (history.current.plan_id, history.current.status) == ("plan-2", "implemented")
    assert [(r.action, r.by) for r in history.reviews] == [
        ("reviewed", "bob"), ("commented", "bob"), ("suggested_edit", "bob"), ("edited", "bob"),
        ("reviewed", "carol"), ("approved", "carol"),
    ]  # fmt: skip
    assert history.reviews[-1].citation == story.citation("approval")
    done = await reads.implementation(IssueQuestion(issue=ISSUE))
    assert [p.plan_id for p in done.plans] == ["plan-2"]
    assert [(pr.pull_request, pr.run_id) for pr in done.pull_requests] == [(PULL, "run-2")]
    issue = await reads.item(ItemQuestion(key=ISSUE))
    assert issue is not None
    assert (issue.title, issue.state) == ("Rocket wobbles at launch", "closed")  # the latest of each wins
    assert issue.labels == ["bug", "flight"]
    assert issue.citation == story.citation(ISSUE)
    path = await reads.path(PathQuestion(message_id="call-2"))
    assert [m.message_id for m in path] == ["call-2", "call-2-result"]
    assert await reads.plan(PlanQuestion(plan_id="no-such-plan")) is None
    assert await reads.item(ItemQuestion(key="acme/rocket#999")) is None


async def test_every_question_over_nats_and_the_same_after_a_rebuild(
    node: Node, log: EventLog, settings: Settings
) -> None:
    story = await record_story(log)
    reads = WorkflowClient(log.client)
    await check_answers(reads, story)
    before = await everything(reads)

    rebuilt = await asyncio.to_thread(run_cli, settings, "rebuild", "workflow", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    report = json.loads(rebuilt.stdout)
    assert (report["projector"], report["generation"], report["in_place"]) == ("workflow", 2, False)
    assert report["events"] == len(rocket_story().events)  # the audit event is left out
    generations = Generations(settings.data_dir / "readmodels" / "workflow")
    assert generations.current().name == "gen-2"
    deadline = asyncio.get_running_loop().time() + 20
    while generations.adopted(CONSUMER) != 2:  # the live projector reopens on the new generation
        assert asyncio.get_running_loop().time() < deadline, "the node did not follow the swap"
        await asyncio.sleep(0.2)
    assert await everything(reads) == before

    later = await log.append(SESSION, "workflow.run.started", "claude", {"run_id": "run-4",
        "workflow_type": "fix-issue", "agent": "claude", "issue": ISSUE})  # fmt: skip
    await drained(log, CONSUMER)
    newest = await reads.issue_runs(IssueRunsQuestion(issue=ISSUE, limit=1))
    assert [(run.run_id, run.citation) for run in newest] == [("run-4", later.citation)]


async def test_a_bad_question_is_invalid_input_naming_the_field(node: Node, log: EventLog) -> None:
    await drained(log, CONSUMER)
    reads = WorkflowClient(log.client)
    with pytest.raises(QueryError, match="limit"):
        await reads.runs(RunsQuestion(limit=5000))
    with pytest.raises(QueryError, match="question: no workflow question named 'nope'"):
        await ask(log.client, "workflow", "nope", {})
    with pytest.raises(QueryError, match="issue"):
        await ask(log.client, "workflow", "issue_runs", {"limit": 3})
    with pytest.raises(QueryError, match="message_id"):
        await ask(log.client, "workflow", "path", {})
    assert await reads.runs(RunsQuestion()) == []


async def test_without_a_node_running_it_the_client_says_so(log: EventLog) -> None:
    with pytest.raises(MemoryUnavailableError, match="EVENTLOOM_PROJECTORS must include workflow"):
        await WorkflowClient(log.client).runs(RunsQuestion())


async def test_on_neo4j_every_answer_is_the_same_after_an_in_place_rebuild(
    settings: Settings, log: EventLog, neo4j_endpoint: Neo4jEndpoint
) -> None:
    on_neo4j = replace(
        settings,
        graph_backend="neo4j",
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )
    async with neo4j_workflow_store(on_neo4j) as shared:  # the server is shared: start from nothing
        await shared.clear()
    reads = WorkflowClient(log.client)
    async with workflow_node(on_neo4j, log):
        story = await record_story(log)
        await check_answers(reads, story)
        before = await everything(reads)
    # in place: the live projector is stopped meanwhile
    neo4j_env = {"NEO4J_URI": neo4j_endpoint.uri, "NEO4J_USER": neo4j_endpoint.user,
                 "NEO4J_PASSWORD": neo4j_endpoint.password}  # fmt: skip
    command = [sys.executable, "-m", "gateway", "rebuild", "workflow", "--backend", "neo4j", "--json"]
    rebuilt = await asyncio.to_thread(
        subprocess.run, command, env={**cli_env(on_neo4j), **neo4j_env}, capture_output=True, text=True,
        cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert rebuilt.returncode == 0, rebuilt.stderr
    report = json.loads(rebuilt.stdout)
    assert (report["in_place"], report["events"]) == (True, len(rocket_story().events))
    async with workflow_node(on_neo4j, log):
        await drained(log, CONSUMER)
        assert await everything(reads) == before
