"""The workflow benchmark's load: runs of coding agents for issues, as the recorder would append them.

Each run is one session: `workflow.run.started` for an issue, then `messages` items in order (a system
prompt, the user's request, tool calls each followed by its result, one in ten failing, assistant turns, a
plan and an edited second version of it, a final answer), two reviews of the plan, `workflow.run.completed`;
one run in four also opens a pull request that resolves the issue and marks the plan implemented. Issues
(five runs each) are opened in their repository's session first. `concurrent` runs are
interleaved, as agents running side by side would append them. Events are built in memory (hashed, not
signed: the stores never see a signature) so the benchmark measures the projection, not the bus.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from eventloom.event import Event, compute_hash, utc_timestamp

REPOSITORIES = ("acme/api", "acme/web", "acme/infra", "octo/widgets")
WORKFLOW_TYPES = ("fix-issue", "triage", "review-pr", "write-tests")
TOOLS = ("read_file", "grep", "run_tests", "edit_file", "git_diff", "search_docs")
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass
class Sessions:
    """Builds hashed events, one chain per session, with a clock that only moves forward."""

    clock: datetime = START
    heads: dict[str, tuple[int, str | None]] = field(default_factory=dict)

    def event(self, session: str, type: str, payload: dict[str, Any]) -> Event:
        seq, prev = self.heads.get(session, (0, None))
        self.clock += timedelta(milliseconds=250)
        draft = Event(
            v=1,
            session=session,
            seq=seq + 1,
            ts=utc_timestamp(self.clock),
            type=type,
            actor="agent:bench",
            payload=payload,
            caused_by=[],
            prev_hash=prev,
            hash="",
            sig="",
            key_id="bench",
        )
        hashed = Event(
            **{**{f: getattr(draft, f) for f in draft.__struct_fields__}, "hash": compute_hash(draft)}
        )
        self.heads[session] = (seq + 1, hashed.hash)
        return hashed


def issue_key(index: int) -> str:
    return f"{REPOSITORIES[index % len(REPOSITORIES)]}#{index + 1}"


def run_items(run_id: str, messages: int, rng: random.Random) -> Iterator[tuple[str, dict[str, Any]]]:
    """The run's sequence: `messages` items (a tool pair counts two), then the reviews of its plan."""
    plan_v1, plan_v2 = f"{run_id}-plan1", f"{run_id}-plan2"
    fixed = 6  # system, user, plan, edited plan, assistant turn, final answer
    pairs = max(0, (messages - fixed) // 2)
    yield "workflow.message.recorded", _message(run_id, 1, "system", "You are a careful coding agent.")
    yield (
        "workflow.message.recorded",
        _message(run_id, 2, "user", f"Please fix the bug described in {run_id}."),
    )
    position = 3
    for pair in range(pairs):
        tool = rng.choice(TOOLS)
        call_id = f"{run_id}-c{pair + 1}"
        yield (
            "workflow.tool.called",
            {
                "run_id": run_id,
                "call_id": call_id,
                "tool_name": tool,
                "parameters": {"path": f"src/module_{rng.randrange(200)}.py"},
            },
        )
        failed = rng.random() < 0.1
        result: dict[str, Any] = {
            "run_id": run_id,
            "call_id": call_id,
            "result_id": f"{call_id}-r",
            "content": "" if failed else f"{tool} output: {rng.randrange(10**6)} lines",
        }
        if failed:
            result |= {"is_error": True, "error_message": f"{tool} failed: timeout after 30 s"}
        yield "workflow.tool.returned", result
        position += 2
    yield (
        "workflow.message.recorded",
        _message(run_id, position, "assistant", "I found the cause in the parser."),
    )
    yield (
        "workflow.plan.proposed",
        {
            "run_id": run_id,
            "plan_id": plan_v1,
            "content": "1. Reproduce with a test. 2. Fix the parser. 3. Run the suite.",
        },
    )
    yield (
        "workflow.plan.reviewed",
        {
            "plan_id": plan_v1,
            "reviewer": "alice",
            "verdict": "commented",
            "comment_id": f"{plan_v1}-rc",
            "comment": "Add a regression test first.",
            "suggests_edit": True,
        },
    )
    yield (
        "workflow.plan.edited",
        {
            "plan_id": plan_v2,
            "parent_id": plan_v1,
            "original_id": plan_v1,
            "run_id": run_id,
            "content": "1. Write a regression test. 2. Fix the parser. 3. Run the suite.",
            "edited_by": "alice",
            "edit_message": "test first",
        },
    )
    yield "workflow.plan.reviewed", {"plan_id": plan_v2, "reviewer": "bob", "verdict": "approved"}
    yield (
        "workflow.message.recorded",
        _message(run_id, position + 3, "assistant", "Done: the parser is fixed."),
    )


def _message(run_id: str, n: int, role: str, content: str) -> dict[str, Any]:
    return {"run_id": run_id, "message_id": f"{run_id}-m{n}", "role": role, "content": content}


def runs(count: int, messages: int, concurrent: int, seed: int = 7) -> Iterator[Event]:
    """Every event of `count` runs, `concurrent` of them interleaved at a time, issues opened first."""
    rng = random.Random(seed)
    sessions = Sessions()
    issues = max(1, count // 5)
    for index in range(issues):
        key = issue_key(index)
        repo = key.split("#", 1)[0]
        yield sessions.event(
            f"github-{repo.replace('/', '-')}",
            "workflow.issue.opened",
            {
                "issue": key,
                "author": "carol",
                "created_at": utc_timestamp(sessions.clock),
                "title": f"Parser crashes on input {index}",
                "labels": ["bug"],
            },
        )
    for first in range(0, count, concurrent):
        batch = range(first, min(count, first + concurrent))
        streams = [_run(sessions, index, issue_key(index % issues), messages, rng) for index in batch]
        while streams:
            for stream in list(streams):
                item = next(stream, None)
                if item is None:
                    streams.remove(stream)
                else:
                    yield item


def _run(sessions: Sessions, index: int, issue: str, messages: int, rng: random.Random) -> Iterator[Event]:
    run_id = f"run-{index + 1:06d}"
    yield sessions.event(
        run_id,
        "workflow.run.started",
        {
            "run_id": run_id,
            "workflow_type": WORKFLOW_TYPES[index % len(WORKFLOW_TYPES)],
            "agent": "coder-1",
            "issue": issue,
        },
    )
    for event_type, payload in run_items(run_id, messages, rng):
        yield sessions.event(run_id, event_type, payload)
    if index % 4 == 0:
        pull = f"{issue.split('#', 1)[0]}#{100_000 + index}"
        yield sessions.event(
            run_id,
            "workflow.pull_request.opened",
            {
                "pull_request": pull,
                "author": "coder-1",
                "created_at": utc_timestamp(sessions.clock),
                "title": f"Fix {issue}",
                "resolves": [issue],
                "run_id": run_id,
            },
        )
        yield sessions.event(
            run_id,
            "workflow.plan.implemented",
            {"plan_id": f"{run_id}-plan2", "pull_request": pull, "issue": issue},
        )
    yield sessions.event(
        run_id, "workflow.run.completed", {"run_id": run_id, "status": "succeeded", "result": "fixed"}
    )
