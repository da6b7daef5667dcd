"""Whatever a signed delivery holds, the webhook answers 2xx or 4xx, never a crash, and writes nothing unless
it answers 200; the mapping and the signature check, alone, raise nothing but their own refusals."""

from __future__ import annotations

import hashlib
import hmac
import json
import string
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from eventloom.errors import EventValidationError
from gateway.packs.workflow.github_events import HANDLED, DeliveryError, Ignored, map_delivery
from gateway.packs.workflow.webhooks import _requests, signature_matches
from tests.test_workflow_webhooks import FIXTURES, Hook, fixture, hook

__all__ = ["hook"]  # the fixture, imported for the tests here

NAMES = sorted(path.stem for path in FIXTURES.glob("*.json"))
ITEM_KEYS = (
    "number",
    "title",
    "body",
    "state",
    "labels",
    "assignees",
    "user",
    "id",
    "merged",
    "pull_request",
)
# Where a delivery's meaning lives: each may be replaced by anything.
PLACES = [
    ("action",),
    ("sender",),
    ("sender", "login"),
    ("repository",),
    ("repository", "full_name"),
    ("repository", "owner"),
    ("repository", "id"),
    ("changes",),
    *((item, key) for item in ("issue", "pull_request") for key in ITEM_KEYS),
    ("issue", "created_at"),
    ("issue", "updated_at"),
    ("pull_request", "created_at"),
    ("pull_request", "updated_at"),
    ("comment", "id"),
    ("comment", "body"),
    ("comment", "user"),
    ("comment", "created_at"),
    ("review", "id"),
    ("review", "state"),
    ("review", "body"),
    ("review", "submitted_at"),
    ("labels", 0),
    ("issue", "labels", 0, "name"),
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
# Values of the right JSON type that a schema may still refuse.
near_misses = st.sampled_from(
    [
        "",
        " ",
        "yesterday",
        "2026-13-45T99:00:00Z",
        "x" * 3000,
        "a/b/c",
        "has space",
        "APPROVED",
        0,
        -7,
        10**12,
    ]
)


def replaced(body: Any, place: tuple[str | int, ...], value: Any) -> Any:
    """`body` with the value at `place` replaced (where the path exists)."""
    target = body
    for step in place[:-1]:
        try:
            target = target[step]
        except (KeyError, IndexError, TypeError):
            return body
    last = place[-1]
    fits_dict = isinstance(target, dict) and isinstance(last, str)
    if fits_dict or (isinstance(target, list) and isinstance(last, int) and len(target) > last):
        target[last] = value
    return body


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[str, Any]:
    """A fixture's event with a few places replaced by arbitrary JSON, or any JSON at all."""
    events = st.sampled_from([*HANDLED, "ping", "star"]) | st.text(string.ascii_letters + "_.-", min_size=1)
    if draw(st.booleans()):
        return draw(events), draw(json_values)
    name = draw(st.sampled_from(NAMES))
    body = fixture(name)
    for place, value in draw(
        st.lists(st.tuples(st.sampled_from(PLACES), json_values | near_misses), min_size=1, max_size=3)
    ):
        body = replaced(body, place, value)
    return name.split(".")[0], body


@settings(max_examples=400, deadline=None)
@given(delivery=deliveries())
def test_the_mapping_maps_ignores_or_names_the_field(delivery: tuple[str, Any]) -> None:
    name, body = delivery
    try:
        mapped = map_delivery(name, body)
    except DeliveryError as exc:
        assert exc.field and exc.reason
        event("refused by the mapping")
        return
    if isinstance(mapped, Ignored):
        event("ignored")
        assert name not in HANDLED or body.get("action") not in HANDLED[name]
        return
    try:
        requests = _requests(mapped)
    except EventValidationError as exc:
        assert exc.field.startswith("workflow.")
        event("refused by a schema")
        return
    event("mapped")
    assert [r.type for r in requests] == [t for t, _ in mapped.events] and requests


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=64),
    header=st.text(max_size=80) | st.just("sha256="),
    secret=st.binary(max_size=16),
)
def test_the_signature_check_only_says_yes_to_the_right_signature(
    body: bytes, header: str, secret: bytes
) -> None:
    right = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    assert signature_matches(secret, body, header) == (header == right)
    assert signature_matches(secret, body, right) and not signature_matches(secret, body, None)


@pytest.mark.anyio
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(delivery=deliveries(), raw=st.none() | st.binary(max_size=200))
async def test_any_signed_delivery_is_answered_2xx_or_4xx_and_only_200_writes(
    hook: Hook, delivery: tuple[str, Any], raw: bytes | None
) -> None:
    name, body = delivery
    seq = await hook.last_seq()
    content = raw if raw is not None else json.dumps(body).encode()
    response = await hook.deliver(name, content, delivery=str(uuid.uuid4()))
    assert response.status_code in (200, 202, 400), response.text
    event(f"HTTP {response.status_code}")
    if response.status_code != 200 or not response.json()["events"]:
        assert await hook.last_seq() == seq
    else:
        # the same change delivered by an earlier example (keys follow the content) is not written again
        written = await hook.last_seq() - seq
        assert 0 <= written <= len(response.json()["events"])
        assert (written == 0) == response.json()["duplicate"]
