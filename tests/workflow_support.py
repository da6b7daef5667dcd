"""Shared by the workflow tests (no tests here): the backend fixtures, a realistic story, projecting it.

`workflow_store` is parametrized by backend, so tests/test_workflow_contract.py runs unchanged on
LadybugDB and on a real Neo4j (`neo4j_endpoint`, provisioned once per run; its one database is cleared
before each test). Events are built the way the appender builds them (hash chain, contiguous seqs, one
second apart: `ts(seq)`) and go through the real `translate.changes`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from eventloom.event import Event
from gateway.packs.workflow.ladybug_store import LadybugWorkflowStore
from gateway.packs.workflow.model import WorkflowChanges
from gateway.packs.workflow.projector import ClearableWorkflowStore, WorkflowStore
from gateway.packs.workflow.translate import changes
from tests.test_graph_support import SessionLog, ts

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

BACKENDS = ["ladybug", "neo4j"]
PROJECTOR = "workflow"
REPO = "acme/rocket"
ISSUE = "acme/rocket#42"
PULL = "acme/rocket#43"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def workflow_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[WorkflowStore]:
    """An empty, open store of `backend` (LadybugDB: under `tmp_path`)."""
    store: WorkflowStore
    if backend == "ladybug":
        store = LadybugWorkflowStore(tmp_path / "workflow.lbug")
        await store.open()
    else:
        store = await _neo4j_store(request.getfixturevalue("neo4j_endpoint"))
    try:
        yield store
    finally:
        await store.close()


async def _neo4j_store(endpoint: Neo4jEndpoint) -> ClearableWorkflowStore:
    from gateway.packs.workflow.neo4j_store import Neo4jWorkflowStore  # noqa: PLC0415 (written in parallel)

    store = Neo4jWorkflowStore(endpoint.uri, user=endpoint.user, password=endpoint.password)
    await store.open()
    await store.clear()
    return store


def translated(events: Sequence[Event]) -> list[WorkflowChanges]:
    return [changes(event) for event in events]


async def project(store: WorkflowStore, events: Sequence[Event], batch: int = 500) -> int:
    applied = 0
    for start in range(0, len(events), batch):
        applied += await store.apply(PROJECTOR, translated(events[start : start + batch]))
    return applied


class Story:
    """Issue #42 of acme/rocket, worked on by two runs of `fix-issue` (and one unrelated `triage` run)."""

    def __init__(self) -> None:
        self.log = SessionLog("w1")
        self.seq: dict[str, int] = {}
        """The seq of the event that defines each id of the story (runs, messages, plans, comments)."""

    def add(self, type: str, payload: dict[str, Any], defines: str | None = None) -> Event:
        event = self.log.add(f"workflow.{type}", payload, actor="claude")
        if defines is not None:
            self.seq[defines] = event.seq
        return event

    @property
    def events(self) -> list[Event]:
        return self.log.events

    def citation(self, defined: str) -> str:
        return self.events[self.seq[defined] - 1].citation

    def at(self, defined: str) -> str:
        return ts(self.seq[defined])

    def message(self, run: str, message: str, role: str, content: str, **more: Any) -> None:
        payload = {"run_id": run, "message_id": message, "role": role, "content": content, **more}
        self.add("message.recorded", payload, message)

    def tool(self, run: str, call: str, tool: str, parameters: dict[str, Any], **result: Any) -> None:
        self.add(
            "tool.called", {"run_id": run, "call_id": call, "tool_name": tool, "parameters": parameters}, call
        )
        self.add(
            "tool.returned",
            {"run_id": run, "call_id": call, "result_id": f"{call}-result", **result},
            f"{call}-result",
        )


def rocket_story() -> Story:
    """The whole story: the repository, issue #42 and its updates (two delivered out of order), run-1 with
    a failing tool call, run-2 proposing a plan that is commented, edited, approved and implemented in PR
    #43 (which resolves #42), and an unrelated triage run."""
    s = Story()
    s.add("repository.seen", {"repository": REPO, "owner": "acme", "github_id": 7})
    s.add(
        "issue.opened",
        {
            "issue": ISSUE,
            "author": "alice",
            "created_at": "2025-04-30T10:00:00Z",
            "title": "Rocket wobbles",
            "body": "It wobbles on the pad.",
            "labels": ["bug"],
        },
        ISSUE,
    )
    s.add(
        "run.started",
        {
            "run_id": "run-1",
            "workflow_type": "fix-issue",
            "agent": "claude",
            "issue": ISSUE,
            "metadata": {"model": "opus", "attempt": 1},
        },
        "run-1",
    )
    s.message("run-1", "m1", "user", "Please fix #42", author="alice", references=[ISSUE])
    s.message("run-1", "m2", "assistant", "Reading the fin code.", responds_to="m1", metadata={"tokens": 12})
    s.tool("run-1", "call-1", "read_file", {"path": "rocket/fins.py"}, content="def fins(): ...")
    s.tool(
        "run-1",
        "call-2",
        "run_tests",
        {"target": "tests/"},
        content="3 failed",
        is_error=True,
        error_message="3 tests failed",
    )
    s.add("run.completed", {"run_id": "run-1", "status": "failed", "result": "tests still fail"})
    s.add(
        "run.started",
        {"run_id": "run-2", "workflow_type": "fix-issue", "agent": "claude", "issue": ISSUE},
        "run-2",
    )
    s.message("run-2", "m3", "user", "Try again, plan first.", author="alice")
    s.add(
        "plan.proposed",
        {"run_id": "run-2", "plan_id": "plan-1", "content": "Stiffen the fins.", "issue": ISSUE},
        "plan-1",
    )
    s.add(
        "plan.reviewed",
        {
            "plan_id": "plan-1",
            "reviewer": "bob",
            "verdict": "commented",
            "comment_id": "c1",
            "comment": "Also check the thrust vector.",
            "suggests_edit": True,
        },
        "c1",
    )
    s.add(
        "plan.edited",
        {
            "plan_id": "plan-2",
            "parent_id": "plan-1",
            "content": "Stiffen the fins; check thrust.",
            "edited_by": "bob",
            "edit_message": "add the thrust check",
            "run_id": "run-2",
        },
        "plan-2",
    )
    s.add("plan.reviewed", {"plan_id": "plan-2", "reviewer": "carol", "verdict": "approved"}, "approval")
    s.tool("run-2", "call-3", "edit_file", {"path": "rocket/fins.py"}, content="ok")
    s.message("run-2", "m4", "assistant", "Done: fins stiffened, thrust checked.", responds_to="m3")
    s.add(
        "pull_request.opened",
        {
            "pull_request": PULL,
            "author": "claude",
            "created_at": "2025-05-01T09:30:00Z",
            "title": "Stiffen the fins",
            "resolves": [ISSUE],
            "run_id": "run-2",
        },
        PULL,
    )
    s.add("plan.implemented", {"plan_id": "plan-2", "pull_request": PULL, "issue": ISSUE}, "implemented")
    s.add("run.completed", {"run_id": "run-2", "status": "succeeded", "result": "PR #43"})
    # two updates delivered out of order: the later one (closed) arrives first
    s.add(
        "issue.updated", {"issue": ISSUE, "updated_at": "2025-05-02T12:00:00Z", "state": "closed"}, "closed"
    )
    s.add(
        "issue.updated",
        {
            "issue": ISSUE,
            "updated_at": "2025-05-01T12:00:00Z",
            "state": "open",
            "title": "Rocket wobbles at launch",
            "labels": ["bug", "flight"],
        },
        "retitled",
    )
    s.add("run.started", {"run_id": "run-3", "workflow_type": "triage", "agent": "haiku"}, "run-3")
    s.message("run-3", "m5", "system", "Triage the backlog.")
    return s
