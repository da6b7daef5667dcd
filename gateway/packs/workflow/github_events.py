"""GitHub webhook deliveries as workflow events: pure, no I/O (the route is `webhooks`).

| `X-GitHub-Event` | actions | events |
| --- | --- | --- |
| `issues` | opened | `workflow.repository.seen`, `workflow.issue.opened` |
| `issues` | edited, closed, reopened, labeled, unlabeled, assigned, unassigned | `workflow.issue.updated` |
| `pull_request` | opened | `workflow.repository.seen`, `workflow.pull_request.opened` |
| `pull_request` | edited, closed (if merged: `merged`), reopened, (un)labeled, (un)assigned | `...updated` |
| `issue_comment` | created, edited | `workflow.comment.posted` (`on`: `pull_request` for a PR's) |
| `pull_request_review` | submitted | `workflow.pull_request.reviewed` |

Anything else is ignored (`Ignored` says what). An update carries only what the action changed, as of the
item's `updated_at`. Keys: a repository is its `full_name`, an issue or PR `full_name#number`; comments and
reviews are `github-comment-<id>` and `github-review-<id>`. Every event of one repository goes to one session
(`session_of`), as actor `github:<sender.login>`. A payload missing what the mapping needs raises
`DeliveryError` naming the GitHub field; the event schemas check the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from eventloom.event import SESSION_PATTERN
from gateway.packs.workflow.events import REPOSITORY

HANDLED: Final = {
    "issues": ("opened", "edited", "closed", "reopened", "labeled", "unlabeled", "assigned", "unassigned"),
    "pull_request": (
        "opened",
        "edited",
        "closed",
        "reopened",
        "labeled",
        "unlabeled",
        "assigned",
        "unassigned",
    ),
    "issue_comment": ("created", "edited"),
    "pull_request_review": ("submitted",),
}
# GitHub's closing keywords, then `#N` (this repository) or `owner/name#N`.
CLOSING: Final = re.compile(
    rf"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+(?P<repository>{REPOSITORY})?#(?P<number>[1-9][0-9]{{0,9}})\b",
    re.IGNORECASE,
)
_NOT_SESSION: Final = re.compile(r"[^A-Za-z0-9_-]")


class DeliveryError(ValueError):
    """The delivery lacks what the mapping needs; `field` is the dotted GitHub path (`issue.user.login`)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Mapped:
    """The events one delivery (`what`: `event.action`) becomes, in order, for `session` as `actor`; the
    change they record is `version` (the action, with the time GitHub stamped it) of the GitHub object
    `item` (`issue-<id>`, `pr-<id>`, `comment-<id>`, `review-<id>`)."""

    what: str
    session: str
    actor: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    item: str = ""
    version: str = ""


@dataclass(frozen=True)
class Ignored:
    """A delivery that records nothing, and why (`what`: `event.action`)."""

    what: str
    reason: str


def session_of(repository: str) -> str:
    """`github-<owner>-<name>`, with what a session name cannot hold made `_` (and at most 128 characters)."""
    session = _NOT_SESSION.sub("_", f"github-{repository.replace('/', '-')}")[:128]
    assert SESSION_PATTERN.fullmatch(session)
    return session


def resolves(body: str | None, repository: str) -> list[str]:
    """The items a pull request body closes ("Fixes #42", "closes owner/name#7"), each once, in order."""
    found: list[str] = []
    for match in CLOSING.finditer(body or ""):
        key = f"{match.group('repository') or repository}#{match.group('number')}"
        if key not in found:
            found.append(key)
    return found


class _Doc:
    """A JSON object of the delivery, read by dotted path: each miss names the field."""

    def __init__(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            raise DeliveryError(path or "body", "must be a JSON object")
        self.value: dict[str, Any] = value
        self.path = path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def obj(self, key: str) -> _Doc:
        return _Doc(self.value.get(key), self._name(key))

    def has(self, key: str) -> bool:
        return self.value.get(key) is not None

    def text(self, key: str) -> str:
        value = self.value.get(key)
        if not isinstance(value, str) or not value:
            raise DeliveryError(self._name(key), "must be a non-empty string")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self.value.get(key)
        if value is not None and not isinstance(value, str):
            raise DeliveryError(self._name(key), "must be a string or null")
        return value

    def integer(self, key: str) -> int:
        value = self.value.get(key)
        if type(value) is not int:
            raise DeliveryError(self._name(key), "must be an integer")
        return value

    def names(self, key: str, name_key: str) -> list[str]:
        """`[{name_key: ...}, ...]` (labels by `name`, assignees by `login`) as the names."""
        values = self.value.get(key)
        if values is None:
            return []
        if not isinstance(values, list):
            raise DeliveryError(self._name(key), "must be a list")
        return [_Doc(item, f"{self._name(key)}[{index}]").text(name_key) for index, item in enumerate(values)]

    def login(self, key: str) -> str:
        return self.obj(key).text("login")


def map_delivery(event: str, body: object) -> Mapped | Ignored:
    """The events of one delivery (`X-GitHub-Event` `event`, its JSON `body`), or why it records none."""
    actions = HANDLED.get(event)
    if actions is None:
        return Ignored(event, f"{event!r} events are not recorded")
    doc = _Doc(body, "")
    action = doc.opt_text("action") or ""
    if action not in actions:
        return Ignored(f"{event}.{action}", f"{event} {action or '(no action)'!r} is not recorded")
    repository = doc.obj("repository").text("full_name")
    item, version = _change(event, action, doc)
    mapped = Mapped(
        f"{event}.{action}",
        session_of(repository),
        f"github:{doc.login('sender')}",
        item=item,
        version=version,
    )
    mapped.events.extend(_MAPPERS[event](doc, action, repository))
    return mapped


_OBJECTS: Final = {
    "issues": ("issue", "issue"),
    "pull_request": ("pull_request", "pr"),
    "issue_comment": ("comment", "comment"),
    "pull_request_review": ("review", "review"),
}
"""Per `X-GitHub-Event`: the field holding the object it changes, and the object's kind in `Mapped.item`."""


def _change(event: str, action: str, doc: _Doc) -> tuple[str, str]:
    """The object a delivery changes (its GitHub id, which no rename moves) and which change: an opening
    or a review's submission happens once; any other action is told apart by the object's `updated_at`."""
    field_name, kind = _OBJECTS[event]
    changed = doc.obj(field_name)
    item = f"{kind}-{changed.integer('id')}"
    if action in ("opened", "submitted"):
        return item, action
    return item, f"{action}@{changed.text('updated_at')}"


Events = list[tuple[str, dict[str, Any]]]


def _lean(payload: dict[str, Any]) -> dict[str, Any]:
    """Absent rather than null: an event says only what it knows."""
    return {key: value for key, value in payload.items() if value is not None}


def _seen(doc: _Doc, repository: str) -> tuple[str, dict[str, Any]]:
    repo = doc.obj("repository")
    github_id = repo.value.get("id")
    payload = {
        "repository": repository,
        "owner": repo.login("owner"),
        "github_id": github_id if type(github_id) is int else None,
    }
    return "workflow.repository.seen", _lean(payload)


def _first_properties(item: _Doc) -> dict[str, Any]:
    return {
        "title": item.text("title"),
        "body": item.opt_text("body"),
        "state": "open",
        "labels": item.names("labels", "name"),
        "assignees": item.names("assignees", "login"),
        "author": item.login("user"),
        "created_at": item.text("created_at"),
        "github_id": item.integer("id"),
    }


def _changed(doc: _Doc, item: _Doc, action: str) -> dict[str, Any]:
    """What `action` changed, as the item now has it."""
    if action == "edited":
        changes = doc.value.get("changes")
        keys = [key for key in ("title", "body") if isinstance(changes, dict) and key in changes]
        return {
            key: item.text(key) if key == "title" else item.opt_text(key) or ""
            for key in keys or ("title", "body")
        }
    if action == "closed":
        return {"state": "merged" if item.value.get("merged") is True else "closed"}
    if action == "reopened":
        return {"state": "open"}
    if action in ("labeled", "unlabeled"):
        return {"labels": item.names("labels", "name")}
    return {"assignees": item.names("assignees", "login")}  # assigned, unassigned


def _issues(doc: _Doc, action: str, repository: str) -> Events:
    issue = doc.obj("issue")
    key = f"{repository}#{issue.integer('number')}"
    if action == "opened":
        return [
            _seen(doc, repository),
            ("workflow.issue.opened", _lean({"issue": key, **_first_properties(issue)})),
        ]
    update = {"issue": key, "updated_at": issue.text("updated_at"), "actor": doc.login("sender")}
    return [("workflow.issue.updated", _lean({**update, **_changed(doc, issue, action)}))]


def _pull_request(doc: _Doc, action: str, repository: str) -> Events:
    pull = doc.obj("pull_request")
    key = f"{repository}#{pull.integer('number')}"
    if action == "opened":
        payload = {
            "pull_request": key,
            **_first_properties(pull),
            "resolves": resolves(pull.opt_text("body"), repository),
        }
        return [_seen(doc, repository), ("workflow.pull_request.opened", _lean(payload))]
    update = {"pull_request": key, "updated_at": pull.text("updated_at"), "actor": doc.login("sender")}
    return [("workflow.pull_request.updated", _lean({**update, **_changed(doc, pull, action)}))]


def _issue_comment(doc: _Doc, action: str, repository: str) -> Events:
    issue, comment = doc.obj("issue"), doc.obj("comment")
    payload = {
        "item": f"{repository}#{issue.integer('number')}",
        "on": "pull_request" if issue.has("pull_request") else "issue",
        "comment_id": f"github-comment-{comment.integer('id')}",
        "author": comment.login("user"),
        "body": comment.opt_text("body") or "",
        "created_at": comment.text("created_at"),
    }
    return [("workflow.comment.posted", payload)]


def _pull_request_review(doc: _Doc, action: str, repository: str) -> Events:
    pull, review = doc.obj("pull_request"), doc.obj("review")
    payload = {
        "pull_request": f"{repository}#{pull.integer('number')}",
        "review_id": f"github-review-{review.integer('id')}",
        "reviewer": review.login("user"),
        "state": review.text("state").lower(),  # webhooks say `approved`; the REST API says `APPROVED`
        "body": review.opt_text("body") or "",
        "submitted_at": review.text("submitted_at"),
    }
    return [("workflow.pull_request.reviewed", payload)]


_MAPPERS: Final[dict[str, Callable[[_Doc, str, str], Events]]] = {
    "issues": _issues,
    "pull_request": _pull_request,
    "issue_comment": _issue_comment,
    "pull_request_review": _pull_request_review,
}
