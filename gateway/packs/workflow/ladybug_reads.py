"""The questions of `reads`, answered on LadybugDB. Each starts from a primary key and walks relationships
(a run's messages through `PART_OF`, an issue's runs through `HAS_RUNS`), so the hot reads touch only the
rows they return. Synchronous: the store runs them on its thread."""

from __future__ import annotations

from typing import Any, Final, Literal

from gateway.packs.workflow.ladybug_views import (
    MESSAGE,
    PLAN,
    PULL_REQUEST,
    RUN,
    Row,
    cited,
    decoded,
    message_view,
    plan_view,
    pull_request_view,
    run_view,
)
from gateway.packs.workflow.reads import (
    MAX_LIMIT,
    Implementation,
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    ItemView,
    MessageView,
    PathQuestion,
    PlanHistory,
    PlanQuestion,
    ReviewView,
    Revision,
    RunsQuestion,
    RunView,
    SequenceQuestion,
    ToolCallsQuestion,
    ToolCallView,
    check_limit,
)
from readmodels.graph.cypher.io import Execute

_NEWEST: Final = "ORDER BY r.startedAt DESC, r.session DESC, r.seq DESC, r.key DESC LIMIT $limit"
_TOOL_TRAFFIC: Final = "NOT coalesce(m.kind, 'message') IN ['tool_call', 'tool_result']"
Action = Literal["reviewed", "approved", "rejected", "edited", "commented", "suggested_edit"]
_ACTIONS: Final[dict[str, Action]] = {
    "REVIEWS": "reviewed",
    "APPROVES": "approved",
    "REJECTS": "rejected",
    "EDITS": "edited",
    "COMMENTS_ON": "commented",
    "SUGGESTS_EDIT_TO": "suggested_edit",
}
_RANK: Final = {action: rank for rank, action in enumerate(_ACTIONS.values())}


def runs(execute: Execute, question: RunsQuestion) -> list[RunView]:
    where = "r.startedAt IS NOT NULL" + (" AND r.workflowType = $type" if question.workflow_type else "")
    params: dict[str, object] = {"limit": check_limit(question.limit)}
    if question.workflow_type:
        params["type"] = question.workflow_type
    rows = execute(f"MATCH (r:WorkflowRun) WHERE {where} RETURN {RUN} {_NEWEST}", params)
    return [run_view(row) for row in rows]


def issue_runs(execute: Execute, question: IssueRunsQuestion) -> list[RunView]:
    rows = execute(
        f"MATCH (i:Issue {{key: $issue}})-[:HAS_RUNS]->(r:WorkflowRun) RETURN {RUN} {_NEWEST}",
        {"issue": question.issue, "limit": check_limit(question.limit)},
    )
    return [run_view(row) for row in rows]


def _run_messages(
    execute: Execute, run: str, conversation: bool, from_position: int = 1
) -> list[MessageView]:
    where = "m.position >= $from" + (f" AND {_TOOL_TRAFFIC}" if conversation else "")
    rows = execute(
        f"MATCH (r:WorkflowRun {{key: $run}})<-[:PART_OF]-(m:Message) WHERE {where} "
        f"RETURN {MESSAGE} ORDER BY position",
        {"run": run, "from": from_position},
    )
    return [message_view(row) for row in rows]


def sequence(execute: Execute, question: SequenceQuestion) -> list[MessageView]:
    return _run_messages(execute, question.run_id, question.conversation)


def path(execute: Execute, question: PathQuestion) -> list[MessageView]:
    """The `NEXT` chain: `SequenceMessage` links each message of a run to the one after it, so the chain
    from a message is its run's messages from its position on (read by position: one hop, any length)."""
    if question.run_id is not None:
        return _run_messages(execute, question.run_id, False)
    rows = execute(
        f"MATCH (m:Message {{key: $key}}) RETURN {MESSAGE}",
        {"key": question.message_id},
    )
    if not rows:
        return []
    start = message_view(rows[0])
    if start.run_id is None or start.position is None:
        return [start]  # not in a run's sequence: a path of one
    return _run_messages(execute, start.run_id, False, start.position)


def tool_calls(execute: Execute, question: ToolCallsQuestion) -> list[ToolCallView]:
    """Calls with their results, oldest first (in the order they were recorded), at most `limit`."""
    params: dict[str, object] = {"limit": check_limit(question.limit)}
    where = ["m.kind = 'tool_call'"]
    start = "MATCH (m:Message)"
    if question.run_id is not None:
        start = "MATCH (r:WorkflowRun {key: $run})<-[:PART_OF]-(m:Message)"
        params["run"] = question.run_id
    if question.tool is not None:
        where.append("m.toolName = $tool")
        params["tool"] = question.tool
    if question.errors_only:
        start += "-[:HAS_RESULT]->(x:Message)"
        where.append("x.isError = true")
    rows = execute(
        f"{start} WHERE {' AND '.join(where)} "
        f"RETURN {MESSAGE} ORDER BY timestamp, session, seq, key LIMIT $limit",
        params,
    )
    results = _messages(execute, [str(row["result"]) for row in rows if row["result"] is not None])
    return [ToolCallView(call=message_view(row), result=results.get(row["result"])) for row in rows]


def _for_each(execute: Execute, cypher: str, keys: list[str], **params: Any) -> list[dict[str, Any]]:
    """`cypher` (matching `$key` by primary key) once per key: LadybugDB plans `UNWIND $keys ... {key: k}`
    as a join that scans the table (10-20 ms at 200,000 messages), one lookup per key as an index probe."""
    return [row for key in dict.fromkeys(keys) for row in execute(cypher, {**params, "key": key})]


def _messages(execute: Execute, keys: list[str]) -> dict[str, MessageView]:
    if not keys:
        return {}
    rows = _for_each(execute, f"MATCH (m:Message {{key: $key}}) RETURN {MESSAGE}", keys)
    return {str(row["key"]): message_view(row) for row in rows}


def plan(execute: Execute, question: PlanQuestion) -> PlanHistory | None:
    found = execute(
        "MATCH (p:Message {key: $key}) WHERE p.kind = 'plan' RETURN coalesce(p.originalVersion, p.key) AS o",
        {"key": question.plan_id},
    )
    if not found:
        return None
    lineage = _lineage(execute, str(found[0]["o"]))
    rows = _for_each(execute, f"MATCH (p:Message {{key: $key}}) WHERE p.kind = 'plan' RETURN {PLAN}", lineage)
    rows.sort(key=lambda row: (row["version"] or 0, str(row["session"]), row["seq"] or 0, str(row["key"])))
    versions = [plan_view(row) for row in rows]
    current = [version for version in versions if version.current]
    return PlanHistory(
        plan_id=question.plan_id,
        current=current[-1] if current else None,
        versions=versions,
        reviews=_reviews(execute, [version.plan_id for version in versions]),
    )


def _lineage(execute: Execute, original: str) -> list[str]:
    """Every version descending from `original`, one PREVIOUS_VERSION hop at a time from its primary key
    (LadybugDB has no index on `originalVersion`: asking by it scans every message)."""
    found, frontier = [original], [original]
    while frontier:
        rows = _for_each(
            execute,
            "MATCH (:Message {key: $key})<-[:PREVIOUS_VERSION]-(p:Message) RETURN p.key AS key",
            frontier,
        )
        frontier = [str(row["key"]) for row in rows if row["key"] not in found]
        found += frontier
    return found


def _reviews(execute: Execute, plans: list[str]) -> list[ReviewView]:
    cite = "r.session AS session, r.seq AS seq, r.hash AS hash"
    by_people = _for_each(
        execute,
        "MATCH (p:Message {key: $key})<-[r:REVIEWS|APPROVES|REJECTS|EDITS]-(u:User) "
        f"RETURN label(r) AS type, p.key AS plan, u.key AS by, r.at AS at, r.commentId AS comment_id, "
        f"r.message AS comment, {cite}",
        plans,
    )
    comments = _for_each(
        execute,
        "MATCH (p:Message {key: $key})<-[r:COMMENTS_ON|SUGGESTS_EDIT_TO]-(c:Message) "
        "RETURN label(r) AS type, p.key AS plan, c.author AS by, r.at AS at, c.key AS comment_id, "
        f"c.content AS comment, {cite}",
        plans,
    )
    said = {str(row["comment_id"]): row["comment"] for row in comments if row["type"] == "COMMENTS_ON"}
    for row in by_people:
        if row["type"] == "REVIEWS":  # a review with a comment: the comment's text
            row["comment"] = said.get(str(row["comment_id"]))
    reviews = sorted(
        by_people + comments,
        key=lambda row: (str(row["at"] or ""), str(row["session"] or ""), row["seq"] or 0, _rank(row)),
    )
    return [_review(row) for row in reviews]


def _rank(row: Row) -> int:
    return _RANK[_ACTIONS[str(row["type"])]]


def _review(row: Row) -> ReviewView:
    return ReviewView(
        action=_ACTIONS[str(row["type"])],
        plan_id=row["plan"],
        by=row["by"] or "",
        at=row["at"] or "",
        comment=row["comment"],
        comment_id=row["comment_id"],
        citation=cited(row),
    )


def implementation(execute: Execute, question: IssueQuestion) -> Implementation:
    issue = {"issue": question.issue}
    plans = execute(
        f"MATCH (i:Issue {{key: $issue}})<-[:IMPLEMENTS]-(p:Message) "
        f"RETURN {PLAN} ORDER BY created_at, session, seq, key",
        issue,
    )
    resulted = execute(
        "MATCH (i:Issue {key: $issue})<-[:IMPLEMENTS]-(:Message)-[:RESULTS_IN]->(pr:PullRequest) "
        "RETURN DISTINCT pr.key AS key",
        issue,
    )
    resolving = execute(
        "MATCH (i:Issue {key: $issue})<-[:RESOLVES]-(pr:PullRequest) RETURN pr.key AS key", issue
    )
    keys = list(dict.fromkeys(str(row["key"]) for row in resulted + resolving))
    pulls = _for_each(
        execute,
        "MATCH (pr:PullRequest {key: $key}) OPTIONAL MATCH (pr)-[:GENERATED_BY]->(r:WorkflowRun) "
        f"RETURN {PULL_REQUEST}, r.key AS run_id",
        keys,
    )
    pulls.sort(key=lambda row: (str(row["created_at"] or ""), str(row["key"])))
    return Implementation(
        issue=question.issue,
        plans=[plan_view(row) for row in plans],
        pull_requests=[pull_request_view(row) for row in pulls],
        runs=issue_runs(execute, IssueRunsQuestion(issue=question.issue, limit=MAX_LIMIT)),
    )


def item(execute: Execute, question: ItemQuestion) -> ItemView | None:
    label = "PullRequest" if question.label == "PullRequest" else "Issue"
    found = execute(
        f"MATCH (n:{label} {{key: $key}}) RETURN n.number AS number, n.repository AS repository, "
        "n.author AS author, n.createdAt AS created_at, n.title AS title, n.body AS body, n.state AS state, "
        "n.labels AS labels, n.assignees AS assignees, n.session AS session, n.seq AS seq, n.hash AS hash",
        {"key": question.key},
    )
    if not found:
        return None
    row = found[0]
    history = execute(
        f"MATCH (n:{label} {{key: $key}})-[:HAS_REVISION]->(v:Revision) RETURN v.at AS at, v.values AS v, "
        "v.session AS session, v.seq AS seq, v.hash AS hash ORDER BY at, session, seq",
        {"key": question.key},
    )
    return ItemView(
        key=question.key,
        label=question.label,
        number=row["number"],
        repository=row["repository"],
        author=row["author"],
        created_at=row["created_at"],
        title=row["title"],
        body=row["body"],
        state=row["state"],
        labels=list(row["labels"] or []),
        assignees=list(row["assignees"] or []),
        history=[Revision(at=str(h["at"]), values=decoded(h["v"]), citation=cited(h)) for h in history],
        citation=cited(row),
    )
