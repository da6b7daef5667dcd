"""The LadybugDB schema of the claims read model: a node table per label, relationship tables, migrations.

LadybugDB has one label per node, so a Resolution is a `Claim` row whose `kind` is `resolution` (on Neo4j,
`Claim:Resolution`), and the entity-to-entity edges of every relation are rows of one `RELATES` table whose
`relation` column holds the predicate (on Neo4j, the relationship type itself). Every relationship table
has the same columns (`REL_COLUMNS`), so a read that walks any of them reads one shape.

Columns kept for the reads besides what the operations carry: `placeholder` (a node only linked to so
far), `Observation.label` / `Claim.label` (the text the web view draws and searches), `Observation.
recordedAt` (the event's time, for `as_of`), `Observation.mentions` (the names in the order given),
`Claim.basis` / `supersedes` (the keys in the order given), `Claim.supersededAt` (the superseding
Resolution's time), `KnownEntity.firstSeen` and `sessions` (every session that mentioned or related it:
what a caller limited to some sessions may see of it).

A basis not projected yet is a placeholder `Observation` (what a basis is, observation or claim, is
unknown until it is projected); recording a `Claim` of that key moves the `BASIS` links to it and drops
the placeholder. A superseded, accepted or contradicted claim not projected yet is a placeholder `Claim`.
"""

from __future__ import annotations

from typing import Final

from gateway.packs.claims.model import NODE_LABELS, NodeLabel
from readmodels.graph.migrations import plan_of
from readmodels.graph.protocol import PlannedMigration

CITED: Final = {"session": "STRING", "seq": "INT64", "hash": "STRING"}
COLUMNS: Final[dict[NodeLabel, dict[str, str]]] = {
    "Observation": {
        "placeholder": "BOOLEAN",
        "content": "STRING",
        "label": "STRING",
        "source": "STRING",
        "observedAt": "STRING",
        "recordedAt": "STRING",
        "extractedBy": "STRING",
        "mentions": "STRING[]",
    },
    "Claim": {
        "placeholder": "BOOLEAN",
        "kind": "STRING",
        "label": "STRING",
        "subject": "STRING",
        "subjectKey": "STRING",
        "predicate": "STRING",
        "object": "STRING",
        "objectKey": "STRING",
        "confidence": "DOUBLE",
        "sourceAgent": "STRING",
        "negated": "BOOLEAN",
        "statement": "STRING",
        "assertedAt": "STRING",
        "basis": "STRING[]",
        "supersedes": "STRING[]",
        "supersededBy": "STRING",
        "supersededAt": "STRING",
        "accepted": "BOOLEAN",
        "acceptedBy": "STRING",
        "acceptedAt": "STRING",
    },
    "KnownEntity": {"name": "STRING", "firstSeen": "STRING", "sessions": "STRING[]"},
}
"""The columns of each node table besides `key` and the citation (`CITED`)."""

REL_COLUMNS: Final = {
    "at": "STRING",
    "relation": "STRING",
    "derived": "BOOLEAN",
    "via": "STRING",
    "trust": "DOUBLE",
    "method": "STRING",
    "edgeId": "STRING",
    **CITED,
}
"""The columns of every relationship table: `at` (when the writing event happened), what `RELATES` and
`CONTRADICTS` carry, and the citation of the writing event."""

PAIRS: Final[dict[str, tuple[tuple[NodeLabel, NodeLabel], ...]]] = {
    "SUBJECT": (("Observation", "KnownEntity"), ("Claim", "KnownEntity")),
    "BASIS": (("Claim", "Observation"), ("Claim", "Claim")),
    "SUPERSEDES": (("Claim", "Claim"),),
    "CONTRADICTS": (("Claim", "Claim"),),
    "RELATES": (("KnownEntity", "KnownEntity"),),
}
"""The (from, to) label pairs each relationship table joins (`ACCEPTS` is the `accepted*` columns)."""
REL_TABLES: Final = tuple(PAIRS)


def _columns(types: dict[str, str]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in types.items())


def node_ddl(label: NodeLabel) -> str:
    columns = _columns({"key": "STRING", **CITED, **COLUMNS[label]})
    return f"CREATE NODE TABLE IF NOT EXISTS {label}({columns}, PRIMARY KEY(key))"


def rel_ddl(rel: str) -> str:
    pairs = ", ".join(f"FROM {source} TO {target}" for source, target in PAIRS[rel])
    return f"CREATE REL TABLE IF NOT EXISTS {rel}({pairs}, {_columns(REL_COLUMNS)})"


_MIGRATION_TABLE: Final = (
    "CREATE NODE TABLE IF NOT EXISTS Migration("
    "name STRING, checksum STRING, statements INT64, applied_at STRING, PRIMARY KEY(name))"
)
CHECKPOINT_TABLE: Final = "ClaimsCheckpoint"
LINKS_TABLE: Final = "ClaimsLink"
"""The key of every relationship (`link_key`): finding a relationship between two nodes is a scan in
LadybugDB, a primary key lookup is not; it keeps each one relationship per what identifies it."""
_MIGRATIONS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("0000_migration_table", (_MIGRATION_TABLE,)),
    (
        "0001_claims",
        (
            *(node_ddl(label) for label in NODE_LABELS),
            *(rel_ddl(rel) for rel in REL_TABLES),
            f"CREATE NODE TABLE IF NOT EXISTS {CHECKPOINT_TABLE}(id STRING, projector STRING, "
            "session STRING, seq INT64, event_hash STRING, PRIMARY KEY(id))",
            f"CREATE NODE TABLE IF NOT EXISTS {LINKS_TABLE}(key STRING, PRIMARY KEY(key))",
        ),
    ),
)


def schema_plan() -> list[PlannedMigration]:
    """The claims store's migrations, in order, with their checksums (pure)."""
    return plan_of(_MIGRATIONS)
