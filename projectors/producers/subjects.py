"""The entity an event is about, for attaching derived edges to it (issue 20, item 5).

A causal edge or an inferred edge that cites an event should end at the entity that event describes, not at
a new entity named after a line of text: "what caused the outage of auth-service" must reach the decision
that caused it. The rule, by the cited event's type:

| cited event | the entity |
|---|---|
| `decision.made` | `decision_id`, type `decision` |
| `issue.diagnosed` | `issue_id`, type `issue` |
| `task.*` | `task_id` (or `taskId`), type `task` |
| `outcome.explained` | `outcome` (its first 512 characters), type `outcome` |
| anything else | none: the caller falls back to an entity named by the text |

These are exactly the entities graph extraction creates for those events (`projectors.graph.extractors`).
"""

from __future__ import annotations

from typing import Any, Final

from eventloom.event import Event
from eventloom.schemas import current_fields

NAME_LIMIT: Final = 512
"""`Name` in the payload schemas, and how much of a name graph extraction keeps."""
ID_LIMIT: Final = 256
_BY_TYPE: Final = {
    "decision.made": ("decision_id", "decision"),
    "issue.diagnosed": ("issue_id", "issue"),
    "outcome.explained": ("outcome", "outcome"),
}


def subject_of(event: Event) -> dict[str, Any] | None:
    """`{"name", "entity_type"}` of the entity `event` is about, or None (see the module)."""
    field, entity_type = _BY_TYPE.get(event.type, ("", ""))
    if event.type.startswith("task."):
        field, entity_type = ("task_id" if "task_id" in event.payload else "taskId"), "task"
    if not field:
        return None
    name = current_fields(event).get(field)
    if not isinstance(name, str) or not name.strip():
        return None
    if entity_type == "outcome":
        name = name[:NAME_LIMIT]  # graph extraction keeps this much of an outcome's name
    elif len(name) > ID_LIMIT:
        return None  # not a valid id: no entity was made of it
    return {"name": name, "entity_type": entity_type}
