"""`ConsolidationProducer`: proposes episodes, claim merges and procedures as cited candidates.

Every proposal is a `consolidation.candidate.created` (payload version 2) that cites the events it rests on
(`requires`, so the runtime checks them before appending) and waits for a review: nothing here is a fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from eventloom.event import Event
from projectors.plugins import PluginContext
from projectors.producers.consolidation.claims import claim_proposals
from projectors.producers.consolidation.episodes import EpisodeRules, episode_proposals
from projectors.producers.consolidation.llm import OpenAICompatibleSummaries
from projectors.producers.consolidation.procedures import procedure_proposals
from projectors.producers.consolidation.proposal import Proposal
from projectors.producers.consolidation.summaries import ExtractiveSummaries, Summary, SummaryWriter
from projectors.producers.consolidation.text import is_derived
from projectors.protocol import DerivedEvent, LogView, ProducerState


@dataclass(frozen=True)
class ConsolidationRules:
    episodes: EpisodeRules = field(default_factory=EpisodeRules)
    skipped_sessions: frozenset[str] = field(default_factory=frozenset)
    """Sessions that are not memory (the gateway's audit of tool calls)."""


class _StoredSummary(msgspec.Struct, frozen=True):
    title: str
    summary: str
    summary_by: str


class ConsolidationProducer:
    """A `ProcessProducer`: reads back a session's stretch for episodes and keeps counts of recurring facts
    and procedures in its state."""

    name: str = "consolidation"

    def __init__(
        self,
        context: PluginContext | None = None,
        *,
        rules: ConsolidationRules | None = None,
        writer: SummaryWriter | None = None,
    ) -> None:
        """With a plug-in context: its audit session is skipped, and its LLM settings choose the writer."""
        skipped = context.memory_skips if context is not None else frozenset()
        self._rules = rules or ConsolidationRules(skipped_sessions=skipped)
        configured = OpenAICompatibleSummaries.from_settings(context.settings) if context else None
        self._writer: SummaryWriter = writer or configured or ExtractiveSummaries()

    async def process(self, event: Event, log: LogView) -> list[DerivedEvent]:
        if is_derived(event) or event.session in self._rules.skipped_sessions:
            return []  # never consolidate what producers derived (our own candidates included)
        proposals = [
            *await episode_proposals(event, log, self._rules.episodes),
            *await claim_proposals(event, log.state),
            *await procedure_proposals(event, log, self._rules.episodes.segments.gap_s),
        ]
        return [proposal.derived(await self._summary(proposal, log.state)) for proposal in proposals]

    async def _summary(self, proposal: Proposal, state: ProducerState) -> Summary:
        """The writer's summary; a non-extractive one is kept in the state, so a redelivered event derives
        the very same payload (the runtime recognises an appended derivation by it)."""
        if isinstance(self._writer, ExtractiveSummaries):
            return proposal.summary
        key = f"summary-{proposal.candidate_id}"
        if (held := await state.get(key)) is not None:
            stored = msgspec.json.decode(held, type=_StoredSummary)
            return Summary(stored.title, stored.summary, stored.summary_by)
        written = await self._writer.write(proposal.request())
        stored = _StoredSummary(written.title, written.summary, written.summary_by)
        if await state.create(key, msgspec.json.encode(stored)):
            return written
        return await self._summary(proposal, state)  # another worker wrote it first: use theirs
