"""The front door's check of what a claim cites: every basis, superseded claim or accepted claim must be an
event in the log, with the hash cited, of a type it may cite. Checked before anything is appended, so a
claim resting on nothing is refused with the field at fault (`basis[1]`), not dead-lettered later.

A cited event may be named three ways: its `eventloom://<session>/events/<seq>#<hash>` citation (the 12 hex
every answer carries, or the whole hash), a `(session, seq, hash)` triple, or its key `<session>/<seq>`
(`model.event_key`, as the reads name observations and claims; the hash is then the one the log holds).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, TypeAlias

from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.schemas.catalogue_common import SourceEvent
from gateway.packs.claims.events import CLAIM_TYPES, OBSERVATION

CitedRef: TypeAlias = str | tuple[str, int, str] | SourceEvent
"""A cited event: a citation URI, a key `<session>/<seq>`, `(session, seq, hash)` or a `SourceEvent`."""
BASIS_TYPES: Final = frozenset({OBSERVATION, *CLAIM_TYPES})
_CITATION: Final = re.compile(
    r"^eventloom://([A-Za-z0-9_-]{1,128})/events/([1-9][0-9]{0,18})#([0-9a-f]{12,64})$"
)
_KEY: Final = re.compile(r"^([A-Za-z0-9_-]{1,128})/([1-9][0-9]{0,18})$")
_HASH: Final = re.compile(r"^[0-9a-f]{64}$")


def parse_ref(field: str, ref: CitedRef) -> tuple[str, int, str]:
    """(session, seq, the hash or its start, empty for a key) of `ref`; EventValidationError of `field`."""
    if isinstance(ref, SourceEvent):
        return ref.session, ref.seq, ref.hash
    if isinstance(ref, tuple):
        if len(ref) != 3 or not isinstance(ref[1], int) or not _HASH.fullmatch(str(ref[2])):
            raise EventValidationError(field, f"{ref!r} is not (session, seq, 64-hex hash)")
        return str(ref[0]), ref[1], str(ref[2])
    text = ref.strip()
    if (found := _CITATION.fullmatch(text)) is not None:
        return found[1], int(found[2]), found[3]
    if (found := _KEY.fullmatch(text)) is not None:
        return found[1], int(found[2]), ""
    raise EventValidationError(
        field, f"{ref!r} is neither an eventloom://<session>/events/<seq>#<hash> citation nor <session>/<seq>"
    )


async def cited_event(log: EventLog, field: str, ref: CitedRef, types: frozenset[str]) -> Event:
    """The event `ref` names, checked: it exists, has the cited hash and is one of `types`."""
    session, seq, cited_hash = parse_ref(field, ref)
    stored = await log.event(session, seq)
    if stored is None:
        raise EventValidationError(field, f"{ref!s} names no event: session {session!r} has no event {seq}")
    event = stored.event
    if not event.hash.startswith(cited_hash):
        raise EventValidationError(
            field, f"{ref!s} names event {seq} of session {session!r}, whose hash is {event.hash[:12]}, not "
            f"{cited_hash[:12]}"
        )  # fmt: skip
    if event.type not in types:
        allowed = " or ".join(sorted(types))
        raise EventValidationError(field, f"{ref!s} is a {event.type}, not a {allowed}")
    return event


async def cited_sources(
    log: EventLog, field: str, refs: Sequence[CitedRef], types: frozenset[str] = BASIS_TYPES
) -> list[SourceEvent]:
    """Each of `refs` checked (`cited_event`, naming `field[i]`), as the `SourceEvent` a payload holds."""
    if isinstance(refs, str):
        refs = [refs]  # one citation given where a list was meant
    if not refs:
        raise EventValidationError(field, "cite at least one event")
    sources = []
    for i, ref in enumerate(refs):
        event = await cited_event(log, f"{field}[{i}]", ref, types)
        sources.append(SourceEvent(session=event.session, seq=event.seq, hash=event.hash))
    return sources
