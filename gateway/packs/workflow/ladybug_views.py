"""Rows of the LadybugDB workflow store as the answers of `reads`: the columns each view reads, and the
decoding (JSON text back to dicts, citations from the `session`/`seq`/`hash` of the writing event)."""

from __future__ import annotations

import json
from typing import Any, Final

from eventloom.event import citation
from gateway.packs.workflow.reads import MessageView, PlanVersionView, PullRequestView, RunView

Row = dict[str, Any]


def cited(row: Row, prefix: str = "") -> str | None:
    session, seq, digest = row.get(f"{prefix}session"), row.get(f"{prefix}seq"), row.get(f"{prefix}hash")
    if session is None or seq is None or digest is None:
        return None  # a node only referred to so far: no event defines it
    return citation(str(session), int(seq), str(digest))


def decoded(text: object) -> dict[str, Any]:
    if not isinstance(text, str) or not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {"value": value}


def _citation_columns(var: str) -> str:
    return f"{var}.session AS session, {var}.seq AS seq, {var}.hash AS hash"


RUN: Final = (
    "r.key AS key, r.workflowType AS workflow_type, r.status AS status, r.result AS result, "
    "r.startedAt AS started_at, r.completedAt AS completed_at, r.agent AS agent, r.issue AS issue, "
    f"r.messageCount AS messages, r.metadata AS metadata, {_citation_columns('r')}"
)
MESSAGE: Final = (
    "m.key AS key, m.kind AS kind, m.role AS role, m.content AS content, m.timestamp AS timestamp, "
    "m.position AS position, m.runId AS run_id, m.author AS author, m.toolName AS tool_name, "
    "m.parameters AS parameters, m.callId AS call_id, m.isError AS is_error, "
    "m.errorMessage AS error_message, m.status AS status, m.version AS version, m.metadata AS metadata, "
    f"m.respondsTo AS responds_to, m.resultId AS result, {_citation_columns('m')}"
)
PLAN: Final = (
    "p.key AS key, p.version AS version, p.status AS status, p.content AS content, p.current AS current, "
    "p.originalVersion AS original_version, p.parentId AS parent_id, p.supersededBy AS superseded_by, "
    "p.runId AS run_id, p.timestamp AS created_at, p.editedAt AS edited_at, p.editedBy AS edited_by, "
    f"p.editMessage AS edit_message, {_citation_columns('p')}"
)
PULL_REQUEST: Final = (
    "pr.key AS key, pr.title AS title, pr.state AS state, pr.author AS author, pr.createdAt AS created_at, "
    f"{_citation_columns('pr')}"
)


def run_view(row: Row) -> RunView:
    return RunView(
        run_id=row["key"],
        workflow_type=row["workflow_type"],
        status=row["status"],
        result=row["result"],
        started_at=row["started_at"],
        completed_at=row["completed_at"],
        agent=row["agent"],
        issue=row["issue"],
        messages=int(row["messages"] or 0),
        metadata=decoded(row["metadata"]),
        citation=cited(row),
    )


def message_view(row: Row) -> MessageView:
    kind = row["kind"] or "message"
    return MessageView(
        message_id=row["key"],
        kind=kind,
        role=row["role"] or "",
        content=row["content"] or "",
        timestamp=row["timestamp"],
        position=row["position"],
        run_id=row["run_id"],
        author=row["author"],
        responds_to=row["responds_to"],
        tool_name=row["tool_name"],
        parameters=decoded(row["parameters"]) if kind == "tool_call" else None,
        call_id=row["call_id"],
        is_error=row["is_error"],
        error_message=row["error_message"],
        status=row["status"],
        version=row["version"],
        metadata=decoded(row["metadata"]),
        citation=cited(row),
    )


def plan_view(row: Row) -> PlanVersionView:
    current = row["current"]
    return PlanVersionView(
        plan_id=row["key"],
        version=int(row["version"] or 0),
        status=row["status"] or "",
        content=row["content"] or "",
        current=bool(current) if current is not None else row["superseded_by"] is None,
        original_version=row["original_version"],
        parent_id=row["parent_id"],
        superseded_by=row["superseded_by"],
        run_id=row["run_id"],
        created_at=row["created_at"],
        edited_at=row["edited_at"],
        edited_by=row["edited_by"],
        edit_message=row["edit_message"],
        citation=cited(row),
    )


def pull_request_view(row: Row) -> PullRequestView:
    return PullRequestView(
        pull_request=row["key"],
        title=row["title"],
        state=row["state"],
        author=row["author"],
        created_at=row["created_at"],
        run_id=row["run_id"],
        citation=cited(row),
    )
