"""From fused keys to hits: what each is, over which window, and the citations that back it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from eventloom.event import citation
from eventloom.schemas.catalogue import DERIVED_EVENT_TYPES
from readmodels.documents import MemoryDoc
from readmodels.graph.lookup import Span
from readmodels.graph.records import EntityVersion
from readmodels.retrieval.fusion import FusedHit, Profile
from readmodels.retrieval.lanes import Candidate
from readmodels.retrieval.model import Citation, Explanation, Hit, InferredLink, Proposal
from readmodels.retrieval.resolve import Resolved

CANDIDATE_ENTITY_TYPE: Final = "consolidation_candidate"
ASSERTED_AS: Final = "asserted_as"
"""The entity property that says what an entity is asserted as; `CLAIM`: an agent's conclusion, never a
fact (a domain pack's extraction sets it, with `claimed_by` and `confidence`)."""
CLAIM: Final = "claim"
MAX_SUMMARY_CHARS: Final = 2000
MAX_MATCHED_CITATIONS: Final = 4
"""An entity found through its documents cites the best few of them, not every assertion ever made."""


def event_citation(session: str, seq: int, event_hash: str, span: Span | None = None) -> Citation:
    return Citation(
        uri=citation(session, seq, event_hash),
        session=session,
        seq=seq,
        hash=event_hash,
        path=span.path if span else None,
        line_start=span.line_start if span else None,
        line_end=span.line_end if span else None,
    )


def doc_citation(doc: MemoryDoc) -> Citation:
    span = Span(path=doc.path, line_start=doc.line_start, line_end=doc.line_end) if doc.path else None
    return event_citation(doc.session, doc.seq, doc.event_hash, span)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1] + "…"


class HitBuilder:
    """Everything the lanes found about each key, to turn a fused key into a `Hit`."""

    def __init__(
        self,
        profile: Profile,
        lanes: Mapping[str, Sequence[Candidate]],
        resolved: Mapping[str, Resolved],
        links: Mapping[str, InferredLink],
        spans: Mapping[str, list[Span]],
    ) -> None:
        self.profile = profile
        self.resolved = resolved
        self.links = links
        self.spans = spans
        self.docs: dict[str, list[MemoryDoc]] = {}
        self.reached: dict[str, EntityVersion] = {}
        for candidates in lanes.values():
            for candidate in candidates:
                if candidate.doc is not None:
                    self.docs.setdefault(candidate.key, []).append(candidate.doc)
                if candidate.neighbour is not None:
                    self.reached.setdefault(candidate.key, candidate.neighbour.entity)

    def build(self, fused: FusedHit) -> Hit | None:
        key = fused.key
        notes: list[str] = []
        resolved = self.resolved.get(key)
        version = resolved.version if resolved else self.reached.get(key)
        docs = self.docs.get(key, [])
        link = self.links.get(key)
        if link is not None:
            notes.append(
                f"reached through {link.kind} edge {link.source} -{link.relation_type}-> {link.target} "
                f"(confidence {link.confidence:.2f}, trust {link.trust:.2f}): not authoritative"
            )
        explanation = Explanation(
            profile=self.profile.name,
            fusion=self.profile.fusion,
            lanes=fused.lanes,
            notes=notes,
            base=round(fused.base, 6),
        )
        if version is not None:
            superseded = resolved.superseded if resolved else 0
            if superseded:
                notes.append(f"version {version.version}; {superseded} earlier version(s) left out")
            return self._entity_hit(fused, version, superseded, docs, explanation, link)
        if not docs:
            return None
        doc = docs[0]
        if doc.kind == "entity":
            notes.append("entity window not checked: the graph did not answer")
        return Hit(
            proposal=proposal_of(doc.event_type, {}),
            key=key,
            kind="source" if key.startswith("source:") else ("entity" if doc.kind == "entity" else "event"),
            session=doc.session,
            entity=doc.entity_name or doc.title or doc.event_type,
            type=doc.entity_type or doc.event_type,
            summary=_clip(doc.text),
            valid_from=doc.ts,
            valid_to=None,
            score=round(fused.score, 6),
            explanation=explanation,
            citations=_unique([doc_citation(d) for d in docs]),
            inferred=link,
        )

    def _entity_hit(
        self,
        fused: FusedHit,
        version: EntityVersion,
        superseded: int,
        docs: list[MemoryDoc],
        explanation: Explanation,
        link: InferredLink | None,
    ) -> Hit:
        spans: list[Span | None] = [*self.spans.get(version.uid, [])] or [None]
        own = [
            event_citation(version.session, version.source_event_seq, version.source_event_hash, span)
            for span in spans
        ]
        return Hit(
            key=fused.key,
            kind="entity",
            session=version.session,
            entity=version.name,
            type=version.entity_type,
            summary=_clip(version.summary or ""),
            valid_from=version.valid_from,
            valid_to=version.valid_to,
            score=round(fused.score, 6),
            explanation=explanation,
            citations=_unique(
                own
                + source_event_citations(version.properties)
                + [doc_citation(d) for d in docs[:MAX_MATCHED_CITATIONS]]
            ),
            version=version.version,
            superseded_versions=superseded,
            inferred=link,
            proposal=proposal_of(version.source_event_type, version.properties, version.entity_type),
        )


def source_event_citations(properties: Mapping[str, object]) -> list[Citation]:
    """The events an entity rests on, when its properties name them (`source_events`: a consolidation
    candidate, and the memory promoted from one, cite the candidate's sources this way)."""
    items = properties.get("source_events")
    if not isinstance(items, list):
        return []
    return [
        event_citation(str(item["session"]), int(item["seq"]), str(item["hash"]))
        for item in items
        if isinstance(item, dict) and {"session", "seq", "hash"} <= item.keys()
    ]


def proposal_of(
    event_type: str, properties: Mapping[str, object], entity_type: str | None = None
) -> Proposal | None:
    """What a derived event asserted is a proposal: its status (default `proposed`), confidence, method.
    A consolidation candidate stays one whatever event touched it last (promoted, its promotion retracted):
    what answers as memory once it is promoted is the memory entity promoted from it. So is an entity a
    plug-in's extraction asserts as a claim (`ASSERTED_AS` `claim`, with `claimed_by` and `confidence`):
    an agent's conclusion, status `claimed` unless its properties give one."""
    claimed = properties.get(ASSERTED_AS) == CLAIM
    if not claimed and event_type not in DERIVED_EVENT_TYPES and entity_type != CANDIDATE_ENTITY_TYPE:
        return None
    default = "claimed" if claimed else "proposed"
    status = properties.get("status", properties.get("review_status", default))
    confidence = properties.get("confidence")
    method = properties.get("method")
    claimed_by = properties.get("claimed_by") if claimed else None
    return Proposal(
        status=str(status),
        source_event_type=event_type,
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        method=str(method) if method is not None else None,
        claimed_by=str(claimed_by or "an agent") if claimed else None,
        candidate_type=_text_or_none(properties.get("candidate_type")),
    )


def _text_or_none(value: object) -> str | None:
    return str(value) if value is not None else None


def _unique(citations: list[Citation]) -> list[Citation]:
    seen: dict[tuple[str, str | None, int | None], Citation] = {}
    for cited in citations:
        seen.setdefault((cited.uri, cited.path, cited.line_start), cited)
    return list(seen.values())
