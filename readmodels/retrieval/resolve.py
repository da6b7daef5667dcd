"""Entities at the asked time: which version of each candidate entity held then, and how many came before.

A document found by the keyword or vector lane is one assertion of an entity, possibly an old one: the
answer is the entity as it stood at `as_of` (now, by default), never the superseded text. An entity with
no version holding then (invalidated, or not yet asserted) is left out and counted.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from readmodels.graph.identity import entity_key
from readmodels.graph.lookup import current_by_key, versions_by_key
from readmodels.graph.records import EntityVersion
from readmodels.retrieval.lanes import ENTITY_PREFIX, Candidate
from readmodels.retrieval.protocol import GraphReads


class Resolved(msgspec.Struct, frozen=True, kw_only=True):
    version: EntityVersion
    superseded: int
    """Versions of the entity before this one (they stopped holding by the asked time)."""


def holds_at(version: EntityVersion, as_of: str | None) -> bool:
    if as_of is None:
        return version.valid_to is None
    return version.valid_from <= as_of and (version.valid_to is None or version.valid_to > as_of)


def pick(versions: list[EntityVersion], as_of: str | None) -> Resolved | None:
    """The version holding at `as_of` among one entity's versions (oldest first), if any."""
    for index, version in enumerate(versions):
        if holds_at(version, as_of):
            return Resolved(version=version, superseded=index)
    return None


async def resolve_entities(
    graph: GraphReads, candidates: Iterable[Candidate], as_of: str | None
) -> tuple[dict[str, Resolved], set[str]]:
    """(resolved entity per candidate key, keys with no version holding at `as_of`)."""
    wanted = {c.key for c in candidates if c.key.startswith(ENTITY_PREFIX)}
    keys = sorted(key.removeprefix(ENTITY_PREFIX) for key in wanted)
    resolved: dict[str, Resolved] = {}
    if as_of is None:  # the latest version is the one that holds now, unless it was invalidated
        for version, count in await graph.read(current_by_key(keys)):
            if version.valid_to is None:
                resolved[ENTITY_PREFIX + version_key(version)] = Resolved(
                    version=version, superseded=count - 1
                )
        return resolved, wanted - set(resolved)
    known: dict[str, list[EntityVersion]] = {}
    for version in await graph.read(versions_by_key(keys)):
        known.setdefault(ENTITY_PREFIX + version_key(version), []).append(version)
    for key, versions in known.items():
        chosen = pick(sorted(versions, key=lambda v: v.valid_from), as_of)
        if chosen is not None:
            resolved[key] = chosen
    return resolved, wanted - set(resolved)


def version_key(version: EntityVersion) -> str:
    return entity_key(version.session, version.name, version.entity_type)
