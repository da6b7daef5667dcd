"""The claims read model's schema on Neo4j: a unique `key` per label, and the indexes its reads use.

Applied at `open()` as named, checksummed migrations of their own (`claims_...`) through the shared,
concurrency-safe helper (`readmodels.neo4j.schema.apply_migrations`): several openers at once are fine, and
an applied migration is never edited (a change is a new migration). Labels come from the closed sets of
`model` only.

What each read needs: a claim, observation or entity by key (the unique constraints, which also make
concurrent `MERGE`s of one key safe); the claims about an entity, highest confidence first then newest
(`claims_claim_subject_order`: the subject key, then the order asked, so a `LIMIT` stops early); open
contradictions, highest trust first (`claims_contradiction_trust`); the newest observations and claims for
the web view (`claims_observation_recorded`, `claims_claim_asserted`, `claims_entity_first_seen`).
"""

from __future__ import annotations

from typing import Final

from gateway.packs.claims.model import NODE_LABELS
from readmodels.graph.migrations import plan_of
from readmodels.graph.protocol import PlannedMigration

CHECKPOINT: Final = "ClaimsCheckpoint"
"""The label of the claims model's checkpoints: one node per (projector, session)."""
LABELS: Final[tuple[str, ...]] = (*NODE_LABELS, CHECKPOINT)
"""Every label the claims model writes its nodes under (`Resolution` comes on top of `Claim`)."""

_KEYS: Final = tuple(
    f"CREATE CONSTRAINT claims_{label.lower()}_key IF NOT EXISTS FOR (n:{label}) REQUIRE n.key IS UNIQUE"
    for label in LABELS
)
_READ_INDEXES: Final = (
    "CREATE INDEX claims_claim_subject_order IF NOT EXISTS "
    "FOR (c:Claim) ON (c.subjectKey, c.confidence, c.assertedAt)",
    "CREATE INDEX claims_contradiction_trust IF NOT EXISTS FOR ()-[x:CONTRADICTS]-() ON (x.trust)",
    "CREATE INDEX claims_observation_recorded IF NOT EXISTS FOR (o:Observation) ON (o.recordedAt)",
    "CREATE INDEX claims_claim_asserted IF NOT EXISTS FOR (c:Claim) ON (c.assertedAt)",
    "CREATE INDEX claims_entity_first_seen IF NOT EXISTS FOR (e:KnownEntity) ON (e.firstSeen)",
)
MIGRATIONS: Final = (
    ("claims_0001_keys", _KEYS),
    ("claims_0002_read_indexes", _READ_INDEXES),
)


def claims_schema_plan() -> list[PlannedMigration]:
    """The claims model's migrations, in order, with their checksums. Pure: connects to nothing."""
    return plan_of(MIGRATIONS)
