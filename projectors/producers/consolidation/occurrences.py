"""Counting what recurs across sessions, in the producer's state, without a lost update or a double count.

Each recurring thing (a fact, a command sequence) has a family of numbered slots: `<family>-1`,
`<family>-2` ... An occurrence takes the first free slot with a create-only write, so two workers never
take the same number, and a redelivered event finds the slot it already holds and gets the same number
(and so derives the same proposal). The state only has get/create/put, so slots are what make it a counter.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

import msgspec

from projectors.protocol import CitedEvent, ProducerState

PROPOSE_AT: Final = (2, 5, 25)
"""A recurring thing is proposed when its 2nd, 5th and 25th occurrence arrives, each time citing every
occurrence so far (a new candidate id, as it cites more). Past the 25th nothing more is recorded: by then a
reviewer has had three chances, and the state stays bounded."""
MAX_OCCURRENCES: Final = PROPOSE_AT[-1]


class Occurrence(msgspec.Struct, frozen=True):
    """One sighting: the event that recorded it (its id) and the events it rests on."""

    id: str
    cited: list[CitedEvent]


@dataclass(frozen=True)
class Recorded:
    ordinal: int
    occurrences: list[Occurrence]  # slots 1..ordinal, in order


def family_key(prefix: str, identity: object) -> str:
    """A state key prefix for one recurring thing: `<prefix>-` and 40 hex of its canonical identity."""
    digest = hashlib.sha256(msgspec.json.encode(identity, order="sorted")).hexdigest()
    return f"{prefix}-{digest[:40]}"


async def record(state: ProducerState, family: str, occurrence: Occurrence) -> Recorded | None:
    """Take (or find) this occurrence's slot; None once the family is full."""
    seen: list[Occurrence] = []
    encoded = msgspec.json.encode(occurrence)
    for ordinal in range(1, MAX_OCCURRENCES + 1):
        key = f"{family}-{ordinal}"
        if await state.create(key, encoded):
            return Recorded(ordinal, [*seen, occurrence])
        held = await state.get(key)
        if held is None:
            continue  # cannot happen with create-only slots; never count a hole
        taken = msgspec.json.decode(held, type=Occurrence)
        seen.append(taken)
        if taken.id == occurrence.id:
            return Recorded(ordinal, seen)
    return None


def cited_once(occurrences: list[Occurrence]) -> tuple[CitedEvent, ...]:
    """Every event the occurrences cite, each once, first cited first."""
    unique: dict[tuple[str, int], CitedEvent] = {}
    for occurrence in occurrences:
        for cited in occurrence.cited:
            unique.setdefault((cited.session, cited.seq), cited)
    return tuple(unique.values())


def sessions_of(occurrences: list[Occurrence]) -> int:
    return len({cited.session for occurrence in occurrences for cited in occurrence.cited})
