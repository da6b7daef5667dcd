"""Property-based tests of the event decoder and the appender (hypothesis)."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventloom.errors import EventValidationError
from eventloom.event import Event, compute_hash, decode_event, encode_event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.validation import validate_payload_value

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=10),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
payloads = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(lambda k: "\x00" not in k), json_values, max_size=6
)


@given(st.binary(max_size=400))
def test_decoder_rejects_garbage_with_a_decode_error_only(data: bytes) -> None:
    with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
        decode_event(data)


@given(
    st.dictionaries(
        st.sampled_from(["v", "session", "seq", "ts", "type", "hash", "sig", "extra"]), json_values
    )
)
def test_decoder_names_the_field_of_a_wrong_shape(fields: dict[str, Any]) -> None:
    try:
        decode_event(msgspec.json.encode(fields))
    except msgspec.ValidationError as exc:
        assert "`" in str(exc) or "Object" in str(exc)


@given(payloads)
def test_valid_payloads_round_trip_with_the_same_hash(payload: dict[str, Any]) -> None:
    validate_payload_value("note.added", payload)
    event = Event(
        v=1,
        session="s",
        seq=1,
        ts="2026-01-01T00:00:00.000000Z",
        type="note.added",
        actor="a",
        payload=payload,
        caused_by=[],
        prev_hash=None,
        hash="",
        sig="",
        key_id="",
    )
    decoded = decode_event(encode_event(event))
    assert compute_hash(decoded) == compute_hash(event)


@given(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.text(min_size=1, max_size=5).filter(lambda k: "\x00" not in k),
)
def test_non_finite_numbers_are_rejected_by_path(value: float, key: str) -> None:
    with pytest.raises(EventValidationError) as raised:
        validate_payload_value("note.added", {"outer": [{key: value}]})
    assert raised.value.field == f"payload.outer[0].{key}"


@pytest.mark.anyio
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(payloads, min_size=1, max_size=5))
async def test_appended_payloads_come_back_byte_identical_and_signed(
    log: EventLog, batch: list[dict[str, Any]]
) -> None:
    requests = [
        AppendRequest(session="prop", type="note.added", actor="hypothesis", payload=p) for p in batch
    ]
    appended = await log.append_many(requests)
    keyring = KeyStore(log.settings.data_dir).load_keyring()
    stored = {e.seq: e async for e in log.events("prop", from_seq=appended[0].seq)}
    for event, payload in zip(appended, batch, strict=True):
        assert stored[event.seq] == event
        assert encode_event(stored[event.seq]) == encode_event(event)
        canonical = msgspec.json.Encoder(order="sorted")
        assert canonical.encode(stored[event.seq].payload) == canonical.encode(payload)
        assert compute_hash(event) == event.hash
        keyring.verify(event.key_id, event.hash, event.sig)
