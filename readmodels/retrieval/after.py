"""Which read models a question waits on when it is given `after` (see `readmodels.consistency`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final, TypeVar

import msgspec

from eventloom.position import Position
from readmodels.consistency import Consistency, wait_applied
from readmodels.retrieval.fusion import LANES, Lane
from readmodels.retrieval.model import Query, QueryResult
from readmodels.retrieval.read_models import ReadModels

LANE_MODELS: Final[Mapping[Lane, str]] = {
    "exact": "graph",
    "traversal": "graph",
    "keyword": "keyword",
    "verbatim": "keyword",
    "vector": "vector",
}
"""The read model each lane searches (by projector name)."""
GRAPH_READS: Final = ("graph",)
"""What the causal walks, the candidates and the graph view read."""

S = TypeVar("S", bound=msgspec.Struct)


def query_models(query: Query) -> set[str]:
    """The read models a query reads: its lanes' (every hit is resolved in the graph), and the inferred
    model's trust when inferred edges may be walked."""
    names = {"graph"} | {LANE_MODELS[lane] for lane in (query.lanes or LANES)}
    if query.include_inferred:
        names.add("inferred")
    return names


async def waited(
    after: Position | None,
    wait_ms: int,
    models: Callable[[], ReadModels],
    names: Iterable[str],
) -> Consistency | None:
    """Wait for the named read models (those running here) to apply `after`, hurrying their projectors;
    None when not asked to (the read models are then not even looked at)."""
    if after is None:
        return None
    now = models()
    waited_on = {name: now.progress[name] for name in names if name in now.progress}
    return await wait_applied(after, waited_on, wait_ms, now.hurry)


def with_consistency(result: S, consistency: Consistency | None) -> S:
    """`result` saying how it waited; a result with `warnings` also gets the lag in words."""
    if consistency is None:
        return result
    warning = consistency.warning()
    if warning is not None and isinstance(result, QueryResult):
        return msgspec.structs.replace(result, consistency=consistency, warnings=[*result.warnings, warning])
    return msgspec.structs.replace(result, consistency=consistency)
