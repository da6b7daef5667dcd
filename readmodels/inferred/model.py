"""What the inferred-edge read model records, the changes events make to it, and the trust score.

An edge is named by its `edge_id` or, without one, by (source, target, relation_type) in its session.
Trust is what retrieval weights an inferred edge by, from four things an auditor can check:

    trust = confidence x method x provenance x (0.7 + 0.3 x evidence coverage), and 0 once retracted

with method 1.0 for a known producer method (the built-in ones, plus any the deployment names) and 0.75
otherwise; provenance 1.0 when the edge cites the event it was derived from (seq and hash) and 0.8 when
not; evidence coverage the share of its evidence items that point at the log (an event seq and hash, or a
citation), 0 without evidence. A confident edge from an unknown method with no provenance and no
evidence keeps 0.42 of its confidence; a cited edge from a known method with cited evidence keeps all of it.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

KNOWN_METHODS: Final = frozenset({"task_completed_decision_citation_v1", "outcome_explained_citation_v1"})
UNKNOWN_METHOD_FACTOR: Final = 0.75
UNCITED_FACTOR: Final = 0.8
EdgeKind = Literal["inferred", "causal"]


def edge_key(session: str, edge_id: str | None, source: str, target: str, relation_type: str) -> str:
    return (
        f"{session}/id/{edge_id}" if edge_id else f"{session}/triple/{source}\x1f{target}\x1f{relation_type}"
    )


def evidence_coverage(evidence: list[dict[str, Any]]) -> float:
    if not evidence:
        return 0.0
    cited = sum(
        1 for item in evidence if (item.get("event_seq") and item.get("event_hash")) or item.get("citation")
    )
    return cited / len(evidence)


def trust_score(
    confidence: float,
    method: str,
    cited_source: bool,
    coverage: float,
    known_methods: frozenset[str] = KNOWN_METHODS,
) -> float:
    method_factor = 1.0 if method in known_methods else UNKNOWN_METHOD_FACTOR
    provenance = 1.0 if cited_source else UNCITED_FACTOR
    return round(confidence * method_factor * provenance * (0.7 + 0.3 * coverage), 4)


class InferredEdge(msgspec.Struct, kw_only=True):
    """One inferred or causal edge as the log has shaped it so far."""

    key: str
    session: str
    kind: EdgeKind
    edge_id: str | None
    source: str
    target: str
    relation_type: str
    method: str
    confidence: float
    review_status: str | None
    authority_status: str | None
    source_event_seq: int | None
    source_event_hash: str | None
    evidence_total: int
    evidence_coverage: float
    generated_seq: int
    generated_hash: str
    generated_ts: str
    contradictions: int = 0
    retracted_seq: int | None = None
    retracted_ts: str | None = None
    retraction_reason: str | None = None
    trust: float = 0.0

    @property
    def has_provenance(self) -> bool:
        return self.source_event_seq is not None and self.source_event_hash is not None


class Generated(msgspec.Struct, frozen=True, kw_only=True, tag="generated"):
    edge: InferredEdge
    triple_key: str
    """The edge's name by (source, target, relation_type): a retraction may use either name."""


class Retracted(msgspec.Struct, frozen=True, kw_only=True, tag="retracted"):
    session: str
    keys: tuple[str, ...]
    """By `edge_id`, or by the triple: either may name the edge."""
    seq: int
    ts: str
    reason: str


class Contradicted(msgspec.Struct, frozen=True, kw_only=True, tag="contradicted"):
    session: str
    keys: tuple[str, ...]


Change = Generated | Retracted | Contradicted


class EventChanges(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    seq: int
    event_hash: str
    changes: tuple[Change, ...] = ()


class Stats(msgspec.Struct, frozen=True, kw_only=True):
    count: int
    min: float | None
    mean: float | None
    median: float | None
    max: float | None


class InferredStatus(msgspec.Struct, frozen=True, kw_only=True):
    """`eventloom memory inferred-status`: what an auditor wants to know about the inferred edges."""

    session: str | None
    edges: int
    current: int
    retracted: int
    contradicted: int
    by_kind: dict[str, int]
    by_method: dict[str, int]
    by_relation: dict[str, int]
    confidence: Stats
    trust: Stats
    evidence_coverage: float | None
    missing_provenance: int
    samples: list[InferredEdge]
    missing_provenance_samples: list[InferredEdge]
