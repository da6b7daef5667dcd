"""The built-in event types and their payload schemas, registered when `eventloom.schemas` is imported.

The Structs live beside this file, one module per idea; docs/event-types.md documents every type below.
"""

from __future__ import annotations

from typing import Final

import msgspec

from eventloom.schemas.catalogue_activity import (
    AccessRefused,
    CommandCompleted,
    FileEditApplied,
    HookCheckpoint,
    ToolCallCompleted,
    TranscriptTurn,
)
from eventloom.schemas.catalogue_common import Evidence, Payload, SourceEvent, SubjectRef, TaskRef
from eventloom.schemas.catalogue_inference import (
    CausalEdgeGenerated,
    CausalEdgeGeneratedV1,
    EdgeTarget,
    InferenceEdgeContradicted,
    InferenceEdgeGenerated,
    InferenceEdgeRetracted,
    OutcomeExplained,
)
from eventloom.schemas.catalogue_memory import (
    CandidateType,
    ConsolidationCandidateCreated,
    ConsolidationCandidateCreatedV1,
    ConsolidationCandidatePromoted,
    ConsolidationCandidateReviewed,
    ConsolidationCandidateReviewedV1,
    ConsolidationPromotionRetracted,
    EntityFact,
    EntityRef,
    MemoryFactAsserted,
    MemoryInvalidated,
    RelationFact,
    RelationRef,
    Verdict,
)
from eventloom.schemas.catalogue_seed import (
    CausalEdgeGeneratedSeed,
    ConsolidationCandidateCreatedSeed,
    ConsolidationCandidateReviewedSeed,
    InferenceEdgeGeneratedSeed,
    OutcomeExplainedSeed,
)
from eventloom.schemas.catalogue_sources import (
    CodeFileIndexed,
    CodeSymbolIndexed,
    DocumentChunk,
    DocumentIndexed,
)
from eventloom.schemas.catalogue_work import (
    DecisionMade,
    GoalCreated,
    HandoffCreated,
    IssueDiagnosed,
    SessionEnded,
    SessionStarted,
    TaskClaimed,
    TaskCompleted,
    TaskProposed,
    UserPreferenceChanged,
    VerificationRecorded,
)
from eventloom.schemas.examples import BUILTIN_EXAMPLES
from eventloom.schemas.registry import register_event_type

BUILTIN_EVENT_TYPES: Final[dict[str, type[msgspec.Struct]]] = {
    # work
    "session.started": SessionStarted,
    "session.ended": SessionEnded,
    "goal.created": GoalCreated,
    "task.proposed": TaskProposed,
    "task.claimed": TaskClaimed,
    "task.completed": TaskCompleted,
    "decision.made": DecisionMade,
    "issue.diagnosed": IssueDiagnosed,
    "verification.recorded": VerificationRecorded,
    "handoff.created": HandoffCreated,
    "user.preference_changed": UserPreferenceChanged,
    # activity observed by agent hooks
    "hook.checkpoint": HookCheckpoint,
    "command.completed": CommandCompleted,
    "file.edit.applied": FileEditApplied,
    "tool.call.completed": ToolCallCompleted,
    "access.refused": AccessRefused,
    "transcript.turn": TranscriptTurn,
    # sources
    "document.indexed": DocumentIndexed,
    "code.file.indexed": CodeFileIndexed,
    "code.symbol.indexed": CodeSymbolIndexed,
    # authoritative memory
    "memory.fact.asserted": MemoryFactAsserted,
    "memory.invalidated": MemoryInvalidated,
    "consolidation.candidate.created": ConsolidationCandidateCreated,
    "consolidation.candidate.reviewed": ConsolidationCandidateReviewed,
    "consolidation.candidate.promoted": ConsolidationCandidatePromoted,
    "consolidation.promotion.retracted": ConsolidationPromotionRetracted,
    # non-authoritative inference
    "inference.edge.generated": InferenceEdgeGenerated,
    "inference.edge.contradicted": InferenceEdgeContradicted,
    "inference.edge.retracted": InferenceEdgeRetracted,
    "causal.edge.generated": CausalEdgeGenerated,
    "outcome.explained": OutcomeExplained,
}
"""Every built-in event type and its payload Struct (the current payload version)."""

DERIVED_EVENT_TYPES: Final = frozenset(
    {
        "consolidation.candidate.created",
        "consolidation.candidate.reviewed",
        "inference.edge.generated",
        "inference.edge.contradicted",
        "inference.edge.retracted",
        "causal.edge.generated",
    }
)
"""Types whose events propose, infer or review: what they assert is never a fact. (A promotion,
`consolidation.candidate.promoted`, is authoritative: a reviewer with review rights accepted it.)"""

LEGACY_PAYLOADS: Final[dict[str, tuple[type[msgspec.Struct], ...]]] = {
    "consolidation.candidate.created": (ConsolidationCandidateCreatedV1, ConsolidationCandidateCreatedSeed),
    "consolidation.candidate.reviewed": (
        ConsolidationCandidateReviewedV1,
        ConsolidationCandidateReviewedSeed,
    ),
    "causal.edge.generated": (CausalEdgeGeneratedV1, CausalEdgeGeneratedSeed),
    "inference.edge.generated": (InferenceEdgeGeneratedSeed,),
    "outcome.explained": (OutcomeExplainedSeed,),
}
"""Earlier payload versions still readable from the log (see `decode_payload`): Eventloom's own (`V1`: read,
never accepted again), and the design's
(`Seed`: accepted, and read in the current shape, see `current_payload`)."""

for _event_type, _schema in BUILTIN_EVENT_TYPES.items():
    _legacy = LEGACY_PAYLOADS.get(_event_type, ())
    register_event_type(_event_type, _schema, legacy=_legacy, example=BUILTIN_EXAMPLES[_event_type])

__all__ = [
    "BUILTIN_EVENT_TYPES",
    "DERIVED_EVENT_TYPES",
    "LEGACY_PAYLOADS",
    "AccessRefused",
    "CandidateType",
    "CausalEdgeGenerated",
    "CausalEdgeGeneratedV1",
    "CodeFileIndexed",
    "CodeSymbolIndexed",
    "CommandCompleted",
    "ConsolidationCandidateCreated",
    "ConsolidationCandidateCreatedV1",
    "ConsolidationCandidatePromoted",
    "ConsolidationCandidateReviewed",
    "ConsolidationCandidateReviewedV1",
    "ConsolidationPromotionRetracted",
    "DecisionMade",
    "DocumentChunk",
    "DocumentIndexed",
    "EdgeTarget",
    "EntityFact",
    "EntityRef",
    "Evidence",
    "FileEditApplied",
    "GoalCreated",
    "HandoffCreated",
    "HookCheckpoint",
    "InferenceEdgeContradicted",
    "InferenceEdgeGenerated",
    "InferenceEdgeRetracted",
    "IssueDiagnosed",
    "MemoryFactAsserted",
    "MemoryInvalidated",
    "OutcomeExplained",
    "Payload",
    "RelationFact",
    "RelationRef",
    "SessionEnded",
    "SessionStarted",
    "SourceEvent",
    "SubjectRef",
    "TaskClaimed",
    "TaskCompleted",
    "TaskProposed",
    "TaskRef",
    "ToolCallCompleted",
    "TranscriptTurn",
    "UserPreferenceChanged",
    "Verdict",
    "VerificationRecorded",
]
