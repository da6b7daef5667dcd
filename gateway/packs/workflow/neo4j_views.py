"""Stored workflow nodes back as the answers of `reads`: property maps (camelCase, as written) to views.

Dict properties (`metadata`, `parameters`, a revision's `values`) are stored as JSON text and decoded here;
every view carries the citation of the event that defined its node (none for a node only referred to).
"""

from __future__ import annotations

import json
from typing import Any

from eventloom.event import citation
from gateway.packs.workflow.reads import MessageView, PlanVersionView, PullRequestView, Revision, RunView
from readmodels.graph.cypher.io import Row


def cited(props: Row) -> str | None:
    session, seq, event_hash = props.get("session"), props.get("seq"), props.get("hash")
    if session is None or seq is None or event_hash is None:
        return None
    return citation(str(session), int(seq), str(event_hash))


def decoded(text: Any) -> dict[str, Any]:
    """A JSON object property as a dict (absent or not an object: empty)."""
    if not isinstance(text, str) or not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def run_view(props: Row) -> RunView:
    return RunView(
        run_id=str(props["key"]),
        workflow_type=_text(props.get("workflowType")),
        status=_text(props.get("status")),
        result=_text(props.get("result")),
        started_at=_text(props.get("startedAt")),
        completed_at=_text(props.get("completedAt")),
        agent=_text(props.get("agent")),
        issue=_text(props.get("issue")),
        messages=int(props.get("messageCount") or 0),
        metadata=decoded(props.get("metadata")),
        citation=cited(props),
    )


def message_view(props: Row, responds_to: Any = None) -> MessageView:
    is_error = props.get("isError")
    return MessageView(
        message_id=str(props["key"]),
        kind=str(props.get("kind") or "message"),
        role=str(props.get("role") or ""),
        content=str(props.get("content") or ""),
        timestamp=_text(props.get("timestamp")),
        position=_int(props.get("position")),
        run_id=_text(props.get("runId")),
        author=_text(props.get("author")),
        responds_to=_text(responds_to),
        tool_name=_text(props.get("toolName")),
        parameters=decoded(props["parameters"]) if props.get("parameters") is not None else None,
        call_id=_text(props.get("callId")),
        is_error=None if is_error is None else bool(is_error),
        error_message=_text(props.get("errorMessage")),
        status=_text(props.get("status")),
        version=_int(props.get("version")),
        metadata=decoded(props.get("metadata")),
        citation=cited(props),
    )


def plan_version_view(props: Row) -> PlanVersionView:
    return PlanVersionView(
        plan_id=str(props["key"]),
        version=int(props.get("version") or 1),
        status=str(props.get("status") or "pending_review"),
        content=str(props.get("content") or ""),
        current=bool(props.get("current", False)),
        original_version=_text(props.get("originalVersion")),
        parent_id=_text(props.get("parentId")),
        superseded_by=_text(props.get("supersededBy")),
        run_id=_text(props.get("runId")),
        created_at=_text(props.get("timestamp")),
        edited_at=_text(props.get("editedAt")),
        edited_by=_text(props.get("editedBy")),
        edit_message=_text(props.get("editMessage")),
        citation=cited(props),
    )


def pull_request_view(props: Row, run_id: Any) -> PullRequestView:
    return PullRequestView(
        pull_request=str(props["key"]),
        title=_text(props.get("title")),
        state=_text(props.get("state")),
        author=_text(props.get("author")),
        created_at=_text(props.get("createdAt")),
        run_id=_text(run_id),
        citation=cited(props),
    )


def revision(props: Row) -> Revision:
    return Revision(at=str(props["at"]), values=decoded(props.get("values")), citation=cited(props))


def in_log_order(props: Row) -> tuple[str, int, str]:
    """The place of a node's defining event (undefined nodes last), then its key: a stable tie-break."""
    return (str(props.get("session") or "\uffff"), int(props.get("seq") or 0), str(props.get("key") or ""))
