"""Payload schemas of the work an agent does: sessions, goals, tasks, decisions, findings, handoffs."""

from __future__ import annotations

from typing import Any

import msgspec

from eventloom.schemas.catalogue_common import (
    EventHash,
    Id,
    Name,
    Payload,
    Seq,
    SubjectRef,
    Tag,
    TaskRef,
    Text,
    Title,
)


class SessionStarted(Payload, kw_only=True):
    """`session.started`: an agent begins a session of work."""

    agent: Name
    goal: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    tags: list[Tag] = msgspec.field(default_factory=list)


class SessionEnded(Payload, kw_only=True):
    """`session.ended`: the session is over."""

    reason: str | None = None
    summary: str | None = None


class GoalCreated(Payload, kw_only=True):
    """`goal.created`: an objective tasks can serve."""

    goal_id: Id
    title: Title
    description: str | None = None
    tags: list[Tag] = msgspec.field(default_factory=list)


class TaskProposed(Payload, kw_only=True):
    """`task.proposed`: a unit of work is put forward."""

    task_id: Id
    title: Title
    description: str | None = None
    goal_id: Id | None = None
    depends_on: list[Id] = msgspec.field(default_factory=list)
    tags: list[Tag] = msgspec.field(default_factory=list)


class TaskClaimed(Payload, kw_only=True):
    """`task.claimed`: an actor takes a task on."""

    task_id: Id
    assignee: Name


class TaskCompleted(Payload, kw_only=True):
    """`task.completed`: a task is done, optionally citing the decision it carried out."""

    task_id: Id
    summary: str | None = None
    decision: str | None = None
    decision_event_seq: Seq | None = None
    decision_event_hash: EventHash | None = None


class DecisionMade(TaskRef, kw_only=True):
    """`decision.made`: a choice, why it was made, and what was turned down."""

    decision_id: Id
    title: Title
    rationale: str | None = None
    alternatives: list[str] = msgspec.field(default_factory=list)
    tags: list[Tag] = msgspec.field(default_factory=list)
    about: list[SubjectRef] = msgspec.field(default_factory=list)
    """The entities the decision concerns; the graph links the decision to each."""


class IssueDiagnosed(TaskRef, kw_only=True):
    """`issue.diagnosed`: a problem was found and (perhaps) its cause understood."""

    issue_id: Id
    summary: Text
    cause: str | None = None
    severity: Tag | None = None
    tags: list[Tag] = msgspec.field(default_factory=list)


class VerificationRecorded(TaskRef, kw_only=True):
    """`verification.recorded`: something was checked, and whether it passed."""

    subject: Title
    passed: bool
    details: str | None = None
    method: Name | None = None


class HandoffCreated(Payload, kw_only=True):
    """`handoff.created`: one actor hands the work over to another."""

    from_actor: Name
    to_actor: Name
    summary: Text
    open_tasks: list[Id] = msgspec.field(default_factory=list)


class UserPreferenceChanged(Payload, kw_only=True):
    """`user.preference_changed`: the user set a preference; `value` is any JSON value."""

    key: Name
    value: Any
    previous: Any = None
    scope: Name | None = None
