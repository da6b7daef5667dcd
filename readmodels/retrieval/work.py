"""Work state: where the tasks a question reaches stand, and the unfinished ones when it asks about work.

The graph knows each task's status (`task.proposed` -> open, `task.claimed` -> claimed by someone,
`task.completed` -> done), its owner and what it depends on, but a question like "what is left to do?"
shares no word with "task T-12 proposed: migrate the sessions table", so no lane finds it. A question with
work cues (English words and phrases, matched whole and case-insensitively, like `temporal`'s time cues)
is answered with the unfinished tasks in scope; tasks among the hits always come with their state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from readmodels.graph.lookup import dependencies_of, tasks_in
from readmodels.graph.records import EntityVersion
from readmodels.retrieval.hits import event_citation
from readmodels.retrieval.lanes import ENTITY_PREFIX, Candidate
from readmodels.retrieval.model import TaskState
from readmodels.retrieval.protocol import GraphReads
from readmodels.retrieval.resolve import resolve_entities, version_key

MAX_TASKS: Final = 20
TASK_TYPE: Final = "task"
DONE: Final = frozenset({"completed", "done", "closed", "cancelled"})
_WORK_CUES: Final = re.compile(
    r"\b(left to do|to do|todo|to-do|open tasks?|pending|remaining|unfinished|outstanding|backlog|"
    r"in progress|next steps?|what'?s next|blocked|blockers?|blocking|who is working|working on|"
    r"assigned|claimed|not done|still open|tasks?)\b",
    re.IGNORECASE,
)
_STATUS_NAMES: Final = {"proposed": "open", "completed": "done"}


def work_intent(text: str) -> bool:
    """Whether a question asks about work to do (open, claimed, blocked tasks)."""
    return _WORK_CUES.search(text) is not None


async def work_state(
    graph: GraphReads,
    reached: Sequence[EntityVersion],
    *,
    session: str | None,
    as_of: str | None,
    asks_about_work: bool,
) -> list[TaskState]:
    """The state of the `reached` task versions, then (when the question asks about work) every other
    unfinished task in scope, newest first; at most `MAX_TASKS`."""
    tasks = {version_key(v): v for v in reached if v.entity_type == TASK_TYPE}
    if asks_about_work:
        for version in await graph.read(tasks_in(session, as_of, 5 * MAX_TASKS)):
            if not _done(version):
                tasks.setdefault(version_key(version), version)
    chosen = list(tasks.values())[:MAX_TASKS]
    if not chosen:
        return []
    dependencies = await graph.read(dependencies_of([v.uid for v in chosen], as_of))
    blocker_state = await _states(graph, sorted({d.key for d in dependencies}), as_of)
    blockers: dict[str, list[str]] = {}
    for dependency in dependencies:
        blocker = blocker_state.get(dependency.key)
        if blocker is None or not _done(blocker):
            blockers.setdefault(dependency.uid, []).append(dependency.name)
    return [_state(v, blockers.get(v.uid, [])) for v in chosen]


async def _states(graph: GraphReads, keys: list[str], as_of: str | None) -> dict[str, EntityVersion]:
    """The version of each entity key holding at `as_of` (none: not there, or invalidated)."""
    if not keys:
        return {}
    probes = [Candidate(key=ENTITY_PREFIX + key, score=0.0) for key in keys]
    resolved, _ = await resolve_entities(graph, probes, as_of)
    return {key.removeprefix(ENTITY_PREFIX): found.version for key, found in resolved.items()}


def _done(version: EntityVersion) -> bool:
    return str(version.properties.get("status", "")).lower() in DONE


def _state(version: EntityVersion, blocked_by: list[str]) -> TaskState:
    status = str(version.properties.get("status") or "proposed")
    assignee = version.properties.get("assignee")
    return TaskState(
        task=version.name,
        session=version.session,
        title=str(version.properties.get("title") or version.summary or version.name),
        status=_STATUS_NAMES.get(status, status),
        assignee=str(assignee) if assignee else None,
        blocked_by=blocked_by,
        since=version.valid_from,
        citation=event_citation(version.session, version.source_event_seq, version.source_event_hash),
    )
