"""The consolidation producer: cited episode, claim and procedure candidates for review."""

from projectors.producers.consolidation.producer import ConsolidationProducer, ConsolidationRules
from projectors.producers.consolidation.summaries import ExtractiveSummaries, SummaryWriter

__all__ = ["ConsolidationProducer", "ConsolidationRules", "ExtractiveSummaries", "SummaryWriter"]
