"""Extraction of the work an agent does: sessions, goals, tasks, decisions, issues, checks, handoffs."""

from __future__ import annotations

from typing import Final

from eventloom.schemas.catalogue import (
    DecisionMade,
    GoalCreated,
    HandoffCreated,
    IssueDiagnosed,
    SessionEnded,
    SessionStarted,
    TaskClaimed,
    TaskCompleted,
    TaskProposed,
    UserPreferenceChanged,
    VerificationRecorded,
)
from projectors.graph.extraction import Extraction, Extractor, clip, compact, typed
from readmodels.graph.identity import encode_json
from readmodels.graph.model import EntityRef


def task(task_id: str) -> EntityRef:
    return EntityRef(task_id, "task")


def session_started(x: Extraction, p: SessionStarted) -> None:
    x.entity(p.agent, "agent")
    x.summary = f"session started by {p.agent}" + (f": {p.goal}" if p.goal else "")


def session_ended(x: Extraction, p: SessionEnded) -> None:
    x.summary = "session ended" + "".join(f"; {part}" for part in (p.reason, p.summary) if part)


def goal_created(x: Extraction, p: GoalCreated) -> None:
    x.entity(
        p.goal_id,
        "goal",
        p.title,
        compact({"title": p.title, "description": p.description, "tags": p.tags or None}),
    )
    x.summary = f"goal {p.goal_id}: {p.title}"


def task_proposed(x: Extraction, p: TaskProposed) -> None:
    properties = {
        "title": p.title,
        "description": p.description,
        "status": "proposed",
        "tags": p.tags or None,
    }
    me = x.entity(p.task_id, "task", p.title, compact(properties))
    if p.goal_id:
        x.relation(me, EntityRef(p.goal_id, "goal"), "part_of")
    for other in p.depends_on:
        x.relation(me, task(other), "depends_on")
    x.summary = f"task {p.task_id} proposed: {p.title}"


def task_claimed(x: Extraction, p: TaskClaimed) -> None:
    me = x.entity(p.task_id, "task", None, {"status": "claimed", "assignee": p.assignee})
    x.relation(me, x.entity(p.assignee, "agent"), "assigned_to")
    x.summary = f"task {p.task_id} claimed by {p.assignee}"


def task_completed(x: Extraction, p: TaskCompleted) -> None:
    properties = {
        "status": "completed",
        "completion_summary": p.summary,
        "decision": p.decision,
        "decision_event_seq": p.decision_event_seq,
        "decision_event_hash": p.decision_event_hash,
    }
    x.entity(p.task_id, "task", None, compact(properties))
    x.summary = f"task {p.task_id} completed" + (f": {p.summary}" if p.summary else "")


def decision_made(x: Extraction, p: DecisionMade) -> None:
    properties = {
        "title": p.title,
        "rationale": p.rationale,
        "alternatives": p.alternatives or None,
        "tags": p.tags or None,
    }
    me = x.entity(p.decision_id, "decision", p.title, compact(properties))
    if p.effective_task_id:
        x.relation(me, task(p.effective_task_id), "decided_for")
    for subject in p.about:
        x.relation(me, EntityRef(subject.name, subject.entity_type), "concerns")
    x.summary = f"decision {p.decision_id}: {p.title}"


def issue_diagnosed(x: Extraction, p: IssueDiagnosed) -> None:
    properties = {"cause": p.cause, "severity": p.severity, "tags": p.tags or None}
    me = x.entity(p.issue_id, "issue", p.summary, compact(properties))
    if p.effective_task_id:
        x.relation(me, task(p.effective_task_id), "found_in")
    x.summary = f"issue {p.issue_id}: {p.summary}"


def verification_recorded(x: Extraction, p: VerificationRecorded) -> None:
    verdict = "passed" if p.passed else "failed"
    summary = f"{verdict}: {clip(p.details)}" if p.details else verdict
    me = x.entity(p.subject, "verification", summary, compact({"passed": p.passed, "method": p.method}))
    if p.effective_task_id:
        x.relation(me, task(p.effective_task_id), "verifies")
    x.summary = f"verification {verdict}: {p.subject}"


def handoff_created(x: Extraction, p: HandoffCreated) -> None:
    properties = {"from_actor": p.from_actor, "to_actor": p.to_actor, "open_tasks": p.open_tasks or None}
    me = x.entity(f"handoff-{x.event.seq}", "handoff", p.summary, compact(properties))
    x.relation(me, x.entity(p.from_actor, "agent"), "handed_off_by")
    x.relation(me, x.entity(p.to_actor, "agent"), "handed_off_to")
    for open_task in p.open_tasks:
        x.relation(me, task(open_task), "includes_task")
    x.summary = f"handoff {p.from_actor} -> {p.to_actor}: {p.summary}"


def preference_changed(x: Extraction, p: UserPreferenceChanged) -> None:
    name = p.key if p.scope is None else f"{p.key}@{p.scope}"
    value = encode_json(p.value)
    properties = {"key": p.key, "value": p.value, "previous": p.previous, "scope": p.scope}
    x.entity(name, "preference", f"{p.key} = {clip(value)}", properties)
    x.summary = f"preference {name} = {value}"


EXTRACTORS: Final[dict[str, Extractor]] = {
    "session.started": typed(SessionStarted, session_started),
    "session.ended": typed(SessionEnded, session_ended),
    "goal.created": typed(GoalCreated, goal_created),
    "task.proposed": typed(TaskProposed, task_proposed),
    "task.claimed": typed(TaskClaimed, task_claimed),
    "task.completed": typed(TaskCompleted, task_completed),
    "decision.made": typed(DecisionMade, decision_made),
    "issue.diagnosed": typed(IssueDiagnosed, issue_diagnosed),
    "verification.recorded": typed(VerificationRecorded, verification_recorded),
    "handoff.created": typed(HandoffCreated, handoff_created),
    "user.preference_changed": typed(UserPreferenceChanged, preference_changed),
}
