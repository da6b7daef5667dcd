# ruff: noqa: E501  (example text is kept verbatim, as documented)
"""One example payload of each workflow event type, for agents (`eventloom.describe_event_types`)."""

from __future__ import annotations

from typing import Any, Final

WORKFLOW_EXAMPLES: Final[dict[str, dict[str, Any]]] = {
    "workflow.repository.seen": {"repository": "octo/widgets", "owner": "octo", "github_id": 1296269},
    "workflow.issue.opened": {
        "issue": "octo/widgets#42",
        "author": "carol",
        "created_at": "2026-03-02T09:15:00Z",
        "title": "Parser crashes on empty input",
        "body": "Running `widgets parse ''` raises IndexError.",
        "labels": ["bug"],
    },
    "workflow.issue.updated": {
        "issue": "octo/widgets#42",
        "updated_at": "2026-03-02T10:00:00Z",
        "actor": "dave",
        "assignees": ["coder-1"],
    },
    "workflow.comment.posted": {
        "item": "octo/widgets#42",
        "comment_id": "github-comment-1001",
        "author": "carol",
        "body": "It also happens with whitespace-only input.",
        "created_at": "2026-03-02T09:40:00Z",
    },
    "workflow.pull_request.opened": {
        "pull_request": "octo/widgets#43",
        "author": "coder-1",
        "created_at": "2026-03-02T11:30:00Z",
        "title": "Handle empty input in the parser",
        "body": "Fixes #42",
        "resolves": ["octo/widgets#42"],
        "run_id": "run-7f3a",
    },
    "workflow.pull_request.updated": {
        "pull_request": "octo/widgets#43",
        "updated_at": "2026-03-03T08:00:00Z",
        "actor": "bob",
        "state": "merged",
    },
    "workflow.pull_request.reviewed": {
        "pull_request": "octo/widgets#43",
        "review_id": "github-review-88",
        "reviewer": "bob",
        "state": "approved",
        "body": "Looks good.",
        "submitted_at": "2026-03-02T16:00:00Z",
    },
    "workflow.run.started": {
        "run_id": "run-7f3a",
        "workflow_type": "fix-issue",
        "agent": "coder-1",
        "issue": "octo/widgets#42",
        "metadata": {"model": "claude-sonnet-4", "branch": "fix/empty-input"},
    },
    "workflow.run.completed": {
        "run_id": "run-7f3a",
        "status": "succeeded",
        "result": "Opened octo/widgets#43",
    },
    "workflow.message.recorded": {
        "run_id": "run-7f3a",
        "message_id": "run-7f3a-m2",
        "role": "user",
        "content": "Please fix octo/widgets#42: the parser crashes on empty input.",
        "references": ["octo/widgets#42"],
    },
    "workflow.tool.called": {
        "run_id": "run-7f3a",
        "call_id": "run-7f3a-c1",
        "tool_name": "run_tests",
        "parameters": {"path": "tests/"},
    },
    "workflow.tool.returned": {
        "run_id": "run-7f3a",
        "call_id": "run-7f3a-c1",
        "result_id": "run-7f3a-c1-r",
        "is_error": True,
        "error_message": "1 failed: test_parse_empty (IndexError)",
    },
    "workflow.plan.proposed": {
        "run_id": "run-7f3a",
        "plan_id": "run-7f3a-p1",
        "content": "1. Add a failing test for empty input. 2. Guard the tokenizer. 3. Run the suite.",
        "issue": "octo/widgets#42",
    },
    "workflow.plan.edited": {
        "plan_id": "run-7f3a-p2",
        "parent_id": "run-7f3a-p1",
        "content": "1. Add failing tests for empty and whitespace input. 2. Guard the tokenizer. 3. Run the suite.",
        "edited_by": "alice",
        "edit_message": "cover whitespace too",
        "original_id": "run-7f3a-p1",
    },
    "workflow.plan.reviewed": {
        "plan_id": "run-7f3a-p1",
        "reviewer": "alice",
        "verdict": "commented",
        "comment_id": "run-7f3a-p1-rc1",
        "comment": "Whitespace-only input crashes too; cover it.",
        "suggests_edit": True,
    },
    "workflow.plan.implemented": {
        "plan_id": "run-7f3a-p2",
        "pull_request": "octo/widgets#43",
        "issue": "octo/widgets#42",
    },
}
"""One valid payload per type: the first example of its section in docs/event-types.md (a test keeps the
two equal)."""
