"""One deployment, three ways in: a run recorded with `WorkflowRecorder`, the same run recorded by an agent
over MCP, and an issue's life delivered by GitHub webhooks. Every answer reads back the same after
`eventloom rebuild workflow`, and the two runs read back identically (but for their ids and citations).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from eventloom.event import citation
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.packs.workflow.client import WorkflowClient
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
from gateway.packs.workflow.recorder import WorkflowRecorder
from projectors.generations import Generations
from tests.conftest import run_cli
from tests.runtime_support import drained
from tests.test_workflow_live import answering, workflow_node
from tests.test_workflow_mcp import OPERATOR, mcp_story, tools
from tests.test_workflow_recorder import REPO, RUN, record_story
from tests.test_workflow_webhooks import STORY, Hook, fixture, hook

pytestmark = pytest.mark.anyio
__all__ = ["hook"]  # the fixture, used by name

CONSUMER = "projector-workflow"
OVER_MCP = "fix-43"  # the MCP run: the recorder's story, under its own ids
ISSUE, PULL = "octo/widgets#42", "octo/widgets#43"
GITHUB_ISSUE, GITHUB_PULL = "acme/rocket#42", "acme/rocket#57"
_CITATION = re.compile(r"eventloom://([A-Za-z0-9_-]+)/events/(\d+)#([0-9a-f]{12})")


async def record_three_ways(hook: Hook, log: EventLog) -> None:
    for name in STORY:
        response = await hook.deliver(name.split(".", 1)[0], fixture(name))
        assert response.status_code == 200, response.text
    recorder = WorkflowRecorder(log, "team-a-recorder", agent="fixer", repository=REPO)
    async with recorder.run(42, workflow_type="fix-issue", run_id=RUN, metadata={"ticket": "T-1"}) as run:
        await record_story(run)
    async with tools(log, OPERATOR) as call:
        for name, arguments in mcp_story():
            renamed = json.loads(json.dumps(arguments).replace(f'"{RUN}-', f'"{OVER_MCP}-'))
            await call(name, {"session": "team-a-mcp", "run_id": OVER_MCP} | renamed)
    await drained(log, CONSUMER, timeout=60)


async def run_answers(reads: WorkflowClient, run_id: str) -> dict[str, Any]:
    answers = {
        "sequence": await reads.sequence(SequenceQuestion(run_id=run_id)),
        "conversation": await reads.sequence(SequenceQuestion(run_id=run_id, conversation=True)),
        "tool_calls": await reads.tool_calls(ToolCallsQuestion(run_id=run_id)),
        "errors": await reads.tool_calls(ToolCallsQuestion(run_id=run_id, errors_only=True)),
        "plan": await reads.plan(PlanQuestion(plan_id=f"{run_id}-p1")),
        "path": await reads.path(PathQuestion(run_id=run_id)),
    }
    return {name: msgspec.to_builtins(answer) for name, answer in answers.items()}


async def everything(reads: WorkflowClient) -> dict[str, Any]:
    answers = {
        "runs": await reads.runs(RunsQuestion(workflow_type="fix-issue")),
        "issue_runs": await reads.issue_runs(IssueRunsQuestion(issue=ISSUE)),
        "implementation": await reads.implementation(IssueQuestion(issue=ISSUE)),
        "pull": await reads.item(ItemQuestion(key=PULL, label="PullRequest")),
        "github_issue": await reads.item(ItemQuestion(key=GITHUB_ISSUE)),
        "github_pull": await reads.item(ItemQuestion(key=GITHUB_PULL, label="PullRequest")),
        "github_implementation": await reads.implementation(IssueQuestion(issue=GITHUB_ISSUE)),
    }
    built = {name: msgspec.to_builtins(answer) for name, answer in answers.items()}
    return built | {run_id: await run_answers(reads, run_id) for run_id in (RUN, OVER_MCP)}


MOMENTS = {"citation", "timestamp", "started_at", "completed_at", "created_at", "edited_at", "at"}
"""What differs between two recordings of the same run: the events that cite it, and when they happened."""


def without_citations(answer: Any) -> Any:
    if isinstance(answer, dict):
        return {key: without_citations(value) for key, value in answer.items() if key not in MOMENTS}
    if isinstance(answer, list):
        return [without_citations(value) for value in answer]
    return answer


async def check_citations(answers: dict[str, Any], log: EventLog) -> int:
    """Every citation names an event of the log, by its hash; returns how many were checked."""
    cited = set(_CITATION.findall(json.dumps(answers)))
    hashes = {
        (session, event.seq): event.hash
        for session in {session for session, _, _ in cited}
        async for event in log.events(session)
    }
    for session, seq, prefix in cited:
        assert citation(session, int(seq), hashes[(session, int(seq))]).endswith(prefix)
    return len(cited)


async def rebuild(settings: Settings) -> None:
    rebuilt = await asyncio.to_thread(run_cli, settings, "rebuild", "workflow", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    generations = Generations(settings.data_dir / "readmodels" / "workflow")
    deadline = asyncio.get_running_loop().time() + 30
    while generations.adopted(CONSUMER) != json.loads(rebuilt.stdout)["generation"]:
        assert asyncio.get_running_loop().time() < deadline, "the node did not follow the swap"
        await asyncio.sleep(0.2)


@pytest.fixture
async def deployment(settings: Settings, log: EventLog, hook: Hook) -> AsyncIterator[Hook]:
    async with workflow_node(settings, log):
        yield hook


async def test_recorder_mcp_and_webhooks_read_back_the_same_after_a_rebuild(
    deployment: Hook, log: EventLog, settings: Settings
) -> None:
    await record_three_ways(deployment, log)
    reads = WorkflowClient(log.client)
    before = await everything(reads)
    assert await check_citations(before, log) >= 30

    recorded, over_mcp = before[RUN], before[OVER_MCP]
    renamed = json.loads(json.dumps(without_citations(over_mcp)).replace(f"{OVER_MCP}-", f"{RUN}-"))
    renamed = json.loads(json.dumps(renamed).replace(f'"{OVER_MCP}"', f'"{RUN}"'))
    assert renamed == without_citations(recorded)  # the same run, whichever way it was recorded
    assert len(recorded["sequence"]) == 10 and recorded["plan"]["current"]["status"] == "implemented"
    assert {run["run_id"] for run in before["issue_runs"]} == {RUN, OVER_MCP}
    assert before["github_issue"]["state"] == "closed" and len(before["github_issue"]["history"]) >= 4
    assert [p["pull_request"] for p in before["github_implementation"]["pull_requests"]] == [GITHUB_PULL]
    assert before["github_pull"]["state"] == "merged"

    await rebuild(settings)
    await answering(reads)
    assert await everything(reads) == before
