"""`ReadModels`: the read models a retriever reads, and how far each has got through the log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from readmodels.consistency import Hurry, Progress
from readmodels.retrieval.protocol import DocumentSearch, GraphReads, TrustLookup, VectorSearch


@dataclass(frozen=True)
class ReadModels:
    """The read models a retriever may use; any may be missing (its lanes then report so)."""

    keyword: DocumentSearch | None = None
    vector: VectorSearch | None = None
    graph: GraphReads | None = None
    trust: TrustLookup | None = None
    progress: Mapping[str, Progress] = field(default_factory=dict)
    """Each read model's progress through the log, by projector name (`graph`, `keyword`, `vector`,
    `inferred`): what a read given `after` waits on."""
    hurry: Hurry | None = None
    """Tells the projectors of lagging read models that a reader waits (those running in this process)."""
