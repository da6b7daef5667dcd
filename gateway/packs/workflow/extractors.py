"""Graph extraction of the workflow pack's events: what memory search (`memory query`, `checkout`) finds.

`register` (entry point `eventloom.graph_extractors`) gives every workflow event type its extractor, so the
graph, keyword and vector projectors of every node read them without the core importing the pack. What
the extraction asserts becomes memory: each entity with a summary is a document of the keyword and vector
read models, and retrieval answers with the entity's version holding at the asked time.

Entities (type: name):
- `workflow_message`: a run's message (its role, author and run in the summary), or a comment on an issue
  or pull request; `part_of` its `workflow_run`, `responds_to` the message it answers, `references` and
  `comments_on` issues and pull requests.
- `plan`: ONE entity per lineage, named by version 1's id (`original_id` of an edit; absent, its parent,
  which is version 1 for a first edit). Each edit is a new version of it, so memory shows the current
  version and a question `as_of` an earlier time the version of then. Its properties name the version
  (`version_id`, `parent_id`), not its review status (a review names a version, not its lineage: the
  workflow reads answer the status). A run `generated_plan` it; it `references` its issue.
- `review_comment`: a reviewer's comment on a plan version (`plan_id` in its properties: a review names a
  version, not its lineage, so no edge) or a review of a pull request (`comments_on` it).
- `issue`, `pull_request` (`owner/name#number`): title and body; a pull request `resolves` issues and was
  `generated_by` a run. `workflow_run`: its type, agent and issue; `executed_by` its agent; an issue
  `has_runs` it.

Spine summaries name what happened without the text (the entity carries that): an editable text (a plan,
a comment) must not answer in its superseded words through its event's own document. Tool calls and their
results, repositories and implementations project their spine summary only: tool traffic is noisy, and
the workflow reads answer it.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.packs.workflow import events as ev
from projectors.graph import Extraction, Extractor, clip, compact, register_extractor, typed
from readmodels.graph.model import EntityRef

CONTENT_CHARS: Final = 4000
"""A message's or plan's text is cut here in its entity's summary (the document memory search reads)."""
MESSAGE: Final = "workflow_message"
PLAN: Final = "plan"
REVIEW_COMMENT: Final = "review_comment"
RUN: Final = "workflow_run"
ISSUE: Final = "issue"
PULL_REQUEST: Final = "pull_request"


def _text(content: str) -> str:
    return clip(content, CONTENT_CHARS)


def run_ref(run_id: str) -> EntityRef:
    return EntityRef(run_id, RUN)


def item_ref(item: str, on: str = "issue") -> EntityRef:
    return EntityRef(item, ISSUE if on == "issue" else PULL_REQUEST)


def plan_lineage(p: ev.PlanEdited) -> str:
    """The name of the plan entity an edit makes a new version of: version 1 of its lineage."""
    return p.original_id or p.parent_id


def _issue_opened(x: Extraction, p: ev.IssueOpened) -> None:
    _item_opened(x, p.issue, ISSUE, p, p.author)
    x.summary = f"issue {p.issue} opened by {p.author}"


def _pull_request_opened(x: Extraction, p: ev.PullRequestOpened) -> None:
    me = _item_opened(x, p.pull_request, PULL_REQUEST, p, p.author)
    for issue in p.resolves:
        x.relation(me, item_ref(issue), "resolves")
    if p.run_id is not None:
        x.relation(me, run_ref(p.run_id), "generated_by")
    x.summary = f"pull request {p.pull_request} opened by {p.author}"


def _item_opened(x: Extraction, key: str, entity_type: str, p: ev.Change, author: str) -> EntityRef:
    what = entity_type.replace("_", " ")
    summary = f"{what} {key} by {author}: {p.title or ''}" + (f"\n{p.body}" if p.body else "")
    properties = {
        "repository": ev.repository_of(key),
        "number": ev.number_of(key),
        "author": author,
        "title": p.title,
        "state": p.state or "open",
        "labels": p.labels or None,
    }
    return x.entity(key, entity_type, _text(summary), compact(properties))


def _item_updated(x: Extraction, key: str, entity_type: str, p: ev.Change) -> None:
    """The latest values win: a new version with what changed (the summary only if the title did)."""
    properties = {"title": p.title, "state": p.state, "labels": p.labels, "assignees": p.assignees}
    summary = None
    if p.title is not None:
        what = entity_type.replace("_", " ")
        summary = _text(f"{what} {key}: {p.title}" + (f"\n{p.body}" if p.body else ""))
    x.entity(key, entity_type, summary, compact(properties))
    x.summary = f"{entity_type.replace('_', ' ')} {key} updated"


def _issue_updated(x: Extraction, p: ev.IssueUpdated) -> None:
    _item_updated(x, p.issue, ISSUE, p)


def _pull_request_updated(x: Extraction, p: ev.PullRequestUpdated) -> None:
    _item_updated(x, p.pull_request, PULL_REQUEST, p)


def _comment_posted(x: Extraction, p: ev.CommentPosted) -> None:
    where = "issue" if p.on == "issue" else "pull request"
    properties = {"role": "user", "author": p.author, "item": p.item, "kind": "comment", "on": p.on}
    me = x.entity(
        p.comment_id, MESSAGE, _text(f"comment by {p.author} on {where} {p.item}: {p.body}"), properties
    )
    x.relation(me, item_ref(p.item, p.on), "comments_on")
    x.summary = f"comment {p.comment_id} by {p.author} on {where} {p.item}"


def _pull_request_reviewed(x: Extraction, p: ev.PullRequestReviewed) -> None:
    x.summary = f"pull request {p.pull_request} reviewed by {p.reviewer}: {p.state}"
    if not p.body.strip():
        return
    state = p.state.replace("_", " ")
    summary = _text(f"review by {p.reviewer} of pull request {p.pull_request} ({state}): {p.body}")
    properties = {"reviewer": p.reviewer, "state": p.state, "pull_request": p.pull_request}
    me = x.entity(p.review_id, REVIEW_COMMENT, summary, properties)
    x.relation(me, item_ref(p.pull_request, "pull_request"), "comments_on")


def _run_started(x: Extraction, p: ev.RunStarted) -> None:
    summary = f"{p.workflow_type} run {p.run_id} by {p.agent}" + (f" for issue {p.issue}" if p.issue else "")
    properties = {"workflow_type": p.workflow_type, "agent": p.agent, "issue": p.issue, "status": "running"}
    me = x.entity(p.run_id, RUN, summary, compact(properties))
    x.relation(me, x.entity(p.agent, "agent"), "executed_by")
    if p.issue is not None:
        x.relation(item_ref(p.issue), me, "has_runs")
    x.summary = f"run {p.run_id} started: {summary}"


def _run_completed(x: Extraction, p: ev.RunCompleted) -> None:
    properties: dict[str, Any] = {"status": p.status, "result": clip(p.result) if p.result else None}
    x.entity(p.run_id, RUN, None, properties)
    x.summary = f"run {p.run_id} {p.status}" + (f": {p.result}" if p.result else "")


def _message_recorded(x: Extraction, p: ev.MessageRecorded) -> None:
    by = f" by {p.author}" if p.author else ""
    summary = _text(f"{p.role} message{by} in run {p.run_id}: {p.content}")
    properties = {"role": p.role, "author": p.author, "run": p.run_id, "kind": "message"}
    me = x.entity(p.message_id, MESSAGE, summary, compact(properties))
    x.relation(me, run_ref(p.run_id), "part_of")
    if p.responds_to is not None:
        x.relation(me, EntityRef(p.responds_to, MESSAGE), "responds_to")
    for issue in p.references:
        x.relation(me, item_ref(issue), "references")
    x.summary = f"{p.role} message {p.message_id}{by} in run {p.run_id}"


def _plan_proposed(x: Extraction, p: ev.PlanProposed) -> None:
    about = f" for issue {p.issue}" if p.issue else ""
    summary = _text(f"plan{about} proposed in run {p.run_id} (version {p.plan_id}): {p.content}")
    properties = {
        "run": p.run_id,
        "issue": p.issue,
        "version_id": p.plan_id,
    }
    me = x.entity(p.plan_id, PLAN, summary, compact(properties))
    x.relation(run_ref(p.run_id), me, "generated_plan")
    if p.issue is not None:
        x.relation(me, item_ref(p.issue), "references")
    x.summary = f"plan {p.plan_id} proposed in run {p.run_id}{about}"


def _plan_edited(x: Extraction, p: ev.PlanEdited) -> None:
    lineage = plan_lineage(p)
    note = f": {p.edit_message}" if p.edit_message else ""
    summary = _text(f"plan {lineage}, version {p.plan_id} edited by {p.edited_by}{note}; plan: {p.content}")
    properties: dict[str, Any] = {  # a `None` removes what an earlier version said
        "version_id": p.plan_id,
        "parent_id": p.parent_id,
        "edited_by": p.edited_by,
        "edit_message": p.edit_message,
    }
    if p.run_id is not None:
        properties["run"] = p.run_id
    x.entity(lineage, PLAN, summary, properties)
    x.summary = f"plan {lineage}: version {p.plan_id} (from {p.parent_id}) edited by {p.edited_by}"


def _plan_reviewed(x: Extraction, p: ev.PlanReviewed) -> None:
    x.summary = f"plan version {p.plan_id} reviewed by {p.reviewer}: {p.verdict}"
    if p.comment is None or p.comment_id is None:
        return
    suggests = " (suggests an edit)" if p.suggests_edit else ""
    summary = _text(f"review by {p.reviewer} of plan version {p.plan_id}, {p.verdict}{suggests}: {p.comment}")
    properties = {
        "reviewer": p.reviewer,
        "verdict": p.verdict,
        "plan_id": p.plan_id,
        "suggests_edit": p.suggests_edit,
    }
    x.entity(p.comment_id, REVIEW_COMMENT, summary, properties)


def _plan_implemented(x: Extraction, p: ev.PlanImplemented) -> None:
    into = f" in pull request {p.pull_request}" if p.pull_request else ""
    x.summary = f"plan version {p.plan_id} implemented{into}"


def _repository_seen(x: Extraction, p: ev.RepositorySeen) -> None:
    x.summary = f"repository {p.repository} seen"


def _tool_called(x: Extraction, p: ev.ToolCalled) -> None:
    x.summary = f"tool {p.tool_name} called in run {p.run_id} (call {p.call_id})"


def _tool_returned(x: Extraction, p: ev.ToolReturned) -> None:
    failed = f" an error: {p.error_message or 'no message'}" if p.is_error else ""
    x.summary = f"tool call {p.call_id} in run {p.run_id} returned{failed}"


def _run_of(p: Any) -> str | None:
    run = getattr(p, "run_id", None)
    return run if isinstance(run, str) else None


EXTRACTORS: Final[dict[str, Extractor]] = {
    "workflow.repository.seen": typed(ev.RepositorySeen, _repository_seen),
    "workflow.issue.opened": typed(ev.IssueOpened, _issue_opened),
    "workflow.issue.updated": typed(ev.IssueUpdated, _issue_updated),
    "workflow.comment.posted": typed(ev.CommentPosted, _comment_posted),
    "workflow.pull_request.opened": typed(ev.PullRequestOpened, _pull_request_opened),
    "workflow.pull_request.updated": typed(ev.PullRequestUpdated, _pull_request_updated),
    "workflow.pull_request.reviewed": typed(ev.PullRequestReviewed, _pull_request_reviewed),
    "workflow.run.started": typed(ev.RunStarted, _run_started, thread=_run_of),
    "workflow.run.completed": typed(ev.RunCompleted, _run_completed, thread=_run_of),
    "workflow.message.recorded": typed(ev.MessageRecorded, _message_recorded, thread=_run_of),
    "workflow.tool.called": typed(ev.ToolCalled, _tool_called, thread=_run_of),
    "workflow.tool.returned": typed(ev.ToolReturned, _tool_returned, thread=_run_of),
    "workflow.plan.proposed": typed(ev.PlanProposed, _plan_proposed, thread=_run_of),
    "workflow.plan.edited": typed(ev.PlanEdited, _plan_edited, thread=_run_of),
    "workflow.plan.reviewed": typed(ev.PlanReviewed, _plan_reviewed),
    "workflow.plan.implemented": typed(ev.PlanImplemented, _plan_implemented),
}
"""The extractor of every workflow event type (built once: registering again is a no-op)."""


def register() -> None:
    """Entry point `eventloom.graph_extractors`: make the graph projector read the pack's event types."""
    for event_type, extractor in EXTRACTORS.items():
        register_extractor(event_type, extractor)
