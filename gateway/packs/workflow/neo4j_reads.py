"""`WorkflowReads` on Neo4j: each question one or two parameterized Cypher statements, then views.

Runs newest first by `startedAt` (indexes `workflow_run_started`, `workflow_run_type_started`); an issue's
runs through `HAS_RUNS`; a run's sequence through `PART_OF`, ordered by `position` (the conversation leaves
out the `ToolCall` and `ToolResult` messages); tool calls by the `ToolCall` label with their `HAS_RESULT`;
a plan's lineage along `PREVIOUS_VERSION` both ways, and its review history from the relationships into
its versions; the `NEXT` path from a message to the end of its run.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.packs.workflow.neo4j_views import (
    cited,
    in_log_order,
    message_view,
    plan_version_view,
    pull_request_view,
    revision,
    run_view,
)
from gateway.packs.workflow.reads import (
    MAX_LIMIT,
    Implementation,
    InvalidQuestion,
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    ItemView,
    MessageView,
    PathQuestion,
    PlanHistory,
    PlanQuestion,
    ReviewView,
    RunsQuestion,
    RunView,
    SequenceQuestion,
    ToolCallsQuestion,
    ToolCallView,
    check_limit,
)
from readmodels.graph.cypher.io import ExecuteAsync, Row

NEWEST_FIRST: Final = "r.startedAt DESC, r.session DESC, r.seq DESC, r.key DESC LIMIT $limit"
_RUNS: Final = (
    f"MATCH (r:WorkflowRun) WHERE r.startedAt IS NOT NULL RETURN properties(r) AS run ORDER BY {NEWEST_FIRST}"
)
_RUNS_OF_TYPE: Final = (  # the type first in the order (it is one): the index gives the rows in order
    "MATCH (r:WorkflowRun) WHERE r.workflowType = $type AND r.startedAt IS NOT NULL "
    f"RETURN properties(r) AS run ORDER BY r.workflowType DESC, {NEWEST_FIRST}"
)
_ISSUE_RUNS: Final = (
    "MATCH (:Issue {key: $issue})-[:HAS_RUNS]->(r:WorkflowRun) "
    f"RETURN properties(r) AS run ORDER BY {NEWEST_FIRST}"
)


def _responds_to(message: str) -> str:
    """The key of the message `message` answers (Cypher on the variable named)."""
    return f"[({message})-[:RESPONDS_TO]->(answered:Message) | answered.key][0]"


_SEQUENCE: Final = (
    "MATCH (:WorkflowRun {key: $run})<-[:PART_OF]-(m:Message) WHERE m.position IS NOT NULL {only} "
    f"RETURN properties(m) AS m, {_responds_to('m')} AS respondsTo ORDER BY m.position"
)
_CONVERSATION: Final = "AND NOT m:ToolCall AND NOT m:ToolResult"
_TOOL_CALLS: Final = (
    "MATCH (c:ToolCall) WHERE c.timestamp IS NOT NULL {where} "
    "WITH c, head([(c)-[:HAS_RESULT]->(res:ToolResult) | res]) AS res {errors} "
    "RETURN properties(c) AS call, properties(res) AS result "
    "ORDER BY {first}c.timestamp, c.session, c.seq, c.key LIMIT $limit"
)
"""Tool calls in time order; of one tool, the tool first in the order (it is one), as its index gives them."""
_PLAN_LINEAGE: Final = (
    "MATCH (p:Message {key: $plan}) WHERE p:Plan "
    "MATCH (p)-[:PREVIOUS_VERSION*0..]->(root:Message) WHERE NOT (root)-[:PREVIOUS_VERSION]->() "
    "MATCH (root)<-[:PREVIOUS_VERSION*0..]-(v:Plan) RETURN DISTINCT properties(v) AS v"
)
_REVIEW_TYPES: Final = "REVIEWS|APPROVES|REJECTS|EDITS|COMMENTS_ON|SUGGESTS_EDIT_TO"
_REVIEWS: Final = (
    "UNWIND $plans AS k MATCH (v:Message {key: k}) "
    f"MATCH (v)<-[e:{_REVIEW_TYPES}]-(who) "
    "RETURN v.key AS plan, type(e) AS type, properties(e) AS rel, properties(who) AS who"
)
_ACTIONS: Final[dict[str, tuple[int, Any]]] = {
    "REVIEWS": (0, "reviewed"),
    "APPROVES": (1, "approved"),
    "REJECTS": (1, "rejected"),
    "EDITS": (1, "edited"),
    "COMMENTS_ON": (2, "commented"),
    "SUGGESTS_EDIT_TO": (3, "suggested_edit"),
}
"""Each relationship into a plan version as a review action, and its rank among those of one event."""
_IMPLEMENTING_PLANS: Final = "MATCH (p:Plan)-[:IMPLEMENTS]->(:Issue {key: $issue}) RETURN properties(p) AS v"
_PULL_REQUESTS: Final = (
    "CALL () { MATCH (pr:PullRequest)-[:RESOLVES]->(:Issue {key: $issue}) RETURN pr "
    "UNION MATCH (:Issue {key: $issue})<-[:IMPLEMENTS]-(:Plan)-[:RESULTS_IN]->(pr:PullRequest) RETURN pr } "
    "RETURN properties(pr) AS pr, [(pr)-[:GENERATED_BY]->(r:WorkflowRun) | r.key][0] AS run"
)
_ITEM: Final = (
    "MATCH (n:{label} {{key: $key}}) "
    "RETURN properties(n) AS item, [(n)-[:HAS_REVISION]->(v:Revision) | properties(v)] AS history"
)
_ITEM_LABELS: Final = ("Issue", "PullRequest")
_PATH_FROM: Final = {
    "message": "MATCH (m:Message {key: $start}) ",
    "run": "MATCH (:WorkflowRun {key: $start})<-[:PART_OF]-(m:Message {position: 1}) ",
}
_PATH: Final = (
    "MATCH path = (m)-[:NEXT*0..]->(last:Message) WHERE NOT (last)-[:NEXT]->() "
    "RETURN [x IN nodes(path) | {m: properties(x), respondsTo: " + _responds_to("x") + "}] AS steps "
    "ORDER BY length(path) DESC LIMIT 1"
)


class Neo4jWorkflowReads:
    """The answers, from statements run by `execute` (each in a read transaction)."""

    def __init__(self, execute: ExecuteAsync) -> None:
        self._execute = execute

    async def _runs(self, cypher: str, params: dict[str, Any]) -> list[RunView]:
        return [run_view(row["run"]) for row in await self._execute(cypher, params)]

    async def runs(self, question: RunsQuestion) -> list[RunView]:
        limit = check_limit(question.limit)
        if question.workflow_type is None:
            return await self._runs(_RUNS, {"limit": limit})
        return await self._runs(_RUNS_OF_TYPE, {"type": question.workflow_type, "limit": limit})

    async def issue_runs(self, question: IssueRunsQuestion) -> list[RunView]:
        return await self._runs(_ISSUE_RUNS, {"issue": question.issue, "limit": check_limit(question.limit)})

    async def sequence(self, question: SequenceQuestion) -> list[MessageView]:
        cypher = _SEQUENCE.replace("{only}", _CONVERSATION if question.conversation else "")
        rows = await self._execute(cypher, {"run": question.run_id})
        return [message_view(row["m"], row["respondsTo"]) for row in rows]

    async def tool_calls(self, question: ToolCallsQuestion) -> list[ToolCallView]:
        conditions, params = "", dict[str, Any](limit=check_limit(question.limit))
        if question.run_id is not None:
            conditions += " AND c.runId = $run"
            params["run"] = question.run_id
        if question.tool is not None:
            conditions += " AND c.toolName = $tool"
            params["tool"] = question.tool
        cypher = _TOOL_CALLS.format(
            where=conditions,
            errors="WHERE res.isError = true" if question.errors_only else "",
            first="c.toolName, " if question.tool is not None and question.run_id is None else "",
        )
        return [
            ToolCallView(
                call=message_view(row["call"]),
                result=None if row["result"] is None else message_view(row["result"]),
            )
            for row in await self._execute(cypher, params)
        ]

    async def plan(self, question: PlanQuestion) -> PlanHistory | None:
        rows = await self._execute(_PLAN_LINEAGE, {"plan": question.plan_id})
        if not rows:
            return None
        stored = sorted(
            (row["v"] for row in rows), key=lambda v: (int(v.get("version") or 1), in_log_order(v))
        )
        versions = [plan_version_view(props) for props in stored]
        current = [version for version in versions if version.current]
        reviews = await self._reviews([version.plan_id for version in versions])
        return PlanHistory(
            plan_id=question.plan_id,
            current=current[-1] if current else None,
            versions=versions,
            reviews=reviews,
        )

    async def _reviews(self, plans: list[str]) -> list[ReviewView]:
        rows = await self._execute(_REVIEWS, {"plans": plans})
        comments = {str(row["who"]["key"]): row["who"] for row in rows if row["type"] == "COMMENTS_ON"}
        ranked: list[tuple[tuple[str, str, int, int, str], ReviewView]] = []
        for row in rows:
            rank, action = _ACTIONS[row["type"]]
            rel, who = row["rel"], row["who"]
            by, comment, comment_id = who.get("key"), None, None
            if row["type"] in ("COMMENTS_ON", "SUGGESTS_EDIT_TO"):
                by, comment, comment_id = who.get("author"), who.get("content"), who.get("key")
            elif row["type"] == "REVIEWS" and rel.get("commentId") is not None:
                comment_id = str(rel["commentId"])
                comment = comments.get(comment_id, {}).get("content")
            elif row["type"] == "EDITS":
                comment = rel.get("message")
            view = ReviewView(
                action=action,
                plan_id=str(row["plan"]),
                by=str(by or ""),
                at=str(rel.get("at") or ""),
                comment=None if comment is None else str(comment),
                comment_id=None if comment_id is None else str(comment_id),
                citation=cited(rel),
            )
            order = (view.at, str(rel.get("session") or ""), int(rel.get("seq") or 0), rank, view.plan_id)
            ranked.append((order, view))
        return [view for _, view in sorted(ranked, key=lambda pair: pair[0])]

    async def implementation(self, question: IssueQuestion) -> Implementation:
        params = {"issue": question.issue}
        plans = [row["v"] for row in await self._execute(_IMPLEMENTING_PLANS, params)]
        plans.sort(key=lambda v: (str(v.get("timestamp") or ""), in_log_order(v)))
        pulls = await self._execute(_PULL_REQUESTS, params)
        pulls.sort(key=lambda row: (str(row["pr"].get("createdAt") or ""), str(row["pr"]["key"])))
        runs = await self.issue_runs(IssueRunsQuestion(issue=question.issue, limit=MAX_LIMIT))
        return Implementation(
            issue=question.issue,
            plans=[plan_version_view(props) for props in plans],
            pull_requests=[pull_request_view(row["pr"], row["run"]) for row in pulls],
            runs=runs,
        )

    async def item(self, question: ItemQuestion) -> ItemView | None:
        if question.label not in _ITEM_LABELS:
            raise InvalidQuestion(f"label: must be one of {', '.join(_ITEM_LABELS)}, got {question.label!r}")
        rows = await self._execute(_ITEM.format(label=question.label), {"key": question.key})
        if not rows:
            return None
        props, history = rows[0]["item"], rows[0]["history"]
        history.sort(key=lambda v: (str(v.get("at") or ""), in_log_order(v)))
        return ItemView(
            key=str(props["key"]),
            label=question.label,
            number=None if props.get("number") is None else int(props["number"]),
            repository=props.get("repository"),
            author=props.get("author"),
            created_at=props.get("createdAt"),
            title=props.get("title"),
            body=props.get("body"),
            state=props.get("state"),
            labels=list(props.get("labels") or []),
            assignees=list(props.get("assignees") or []),
            history=[revision(v) for v in history],
            citation=cited(props),
        )

    async def path(self, question: PathQuestion) -> list[MessageView]:
        start, source = (
            (question.message_id, "message") if question.run_id is None else (question.run_id, "run")
        )
        rows: list[Row] = await self._execute(_PATH_FROM[source] + _PATH, {"start": start})
        if not rows:
            return []
        return [message_view(step["m"], step["respondsTo"]) for step in rows[0]["steps"]]
