"""The questions of `reads` (but `view`: ladybug_view.py), answered on LadybugDB. Each starts from a
primary key (an entity's, a claim's) and walks relationships, so a read touches only the rows it returns;
only `contradictions` scans its (small) relationship table. A `LIMIT` is written into the statement (a
checked int): as a parameter, LadybugDB sizes its top-k for the largest and takes several times as long.
Synchronous: the store runs them on its thread."""

from __future__ import annotations

from typing import Any, Final

from eventloom.event import citation
from gateway.packs.claims.model import entity_key
from gateway.packs.claims.reads import (
    MAX_BASIS_DEPTH,
    AboutQuestion,
    BasisChain,
    BasisLink,
    ClaimQuestion,
    ClaimView,
    ContradictionsQuestion,
    ContradictionView,
    EntityQuestion,
    EntityView,
    InvalidQuestion,
    ObservationsQuestion,
    ObservationView,
    RelationView,
    check_limit,
)
from readmodels.graph.cypher.io import Execute

Row = dict[str, Any]


def _cited(var: str) -> str:
    return f"{var}.session AS session, {var}.seq AS seq, {var}.hash AS hash"


CLAIM: Final = (
    "c.key AS key, c.kind AS kind, c.label AS label, c.subject AS subject, c.subjectKey AS subject_key, "
    "c.predicate AS predicate, c.object AS object, c.confidence AS confidence, "
    "c.sourceAgent AS source_agent, c.negated AS negated, c.statement AS statement, "
    "c.assertedAt AS asserted_at, c.basis AS basis, c.supersedes AS supersedes, "
    "c.supersededBy AS superseded_by, c.supersededAt AS superseded_at, c.accepted AS accepted, "
    f"c.acceptedBy AS accepted_by, c.acceptedAt AS accepted_at, {_cited('c')}"
)
OBSERVATION: Final = (
    "o.key AS key, o.content AS content, o.label AS label, o.source AS source, o.observedAt AS observed_at, "
    f"o.recordedAt AS recorded_at, o.extractedBy AS extracted_by, o.mentions AS mentions, {_cited('o')}"
)
RELATION: Final = f"r.relation AS relation, r.derived AS derived, r.via AS via, r.at AS at, {_cited('r')}"
_PROJECTED: Final = "NOT coalesce({var}.placeholder, false)"


def cited(row: Row) -> str:
    return citation(str(row["session"]), int(row["seq"]), str(row["hash"]))


def key_of(entity: str) -> str:
    """The key of the entity a question names, or InvalidQuestion."""
    try:
        return entity_key(entity)
    except ValueError as exc:
        raise InvalidQuestion(f"entity: {exc}") from None


def missing_basis(execute: Execute, claim: str, basis: list[str]) -> list[str]:
    """The keys of `basis` the model holds no projected node for."""
    rows = execute(
        "MATCH (c:Claim {key: $key})-[:BASIS]->(b) RETURN b.key AS key, b.placeholder AS placeholder",
        {"key": claim},
    )
    present = {str(row["key"]) for row in rows if not row["placeholder"]}
    return [key for key in basis if key not in present]


def claim_view(row: Row, missing: list[str]) -> ClaimView:
    return ClaimView(
        key=row["key"],
        kind=row["kind"],
        subject=row["subject"],
        subject_key=row["subject_key"],
        predicate=row["predicate"],
        object=row["object"],
        confidence=float(row["confidence"]),
        source_agent=row["source_agent"],
        negated=bool(row["negated"]),
        statement=row["statement"],
        asserted_at=row["asserted_at"],
        session=row["session"],
        basis=list(row["basis"] or []),
        missing_basis=missing,
        supersedes=list(row["supersedes"] or []),
        superseded_by=row["superseded_by"],
        accepted=bool(row["accepted"]),
        citation=cited(row),
    )


def observation_view(row: Row) -> ObservationView:
    return ObservationView(
        key=row["key"],
        content=row["content"],
        source=row["source"],
        observed_at=row["observed_at"],
        session=row["session"],
        extracted_by=row["extracted_by"],
        mentions=list(row["mentions"] or []),
        citation=cited(row),
    )


def claim_rows(execute: Execute, keys: list[str]) -> dict[str, Row]:
    """key -> row of the projected claims among `keys`, one primary key lookup each."""
    found: dict[str, Row] = {}
    for key in dict.fromkeys(keys):
        rows = execute(
            f"MATCH (c:Claim {{key: $key}}) WHERE {_PROJECTED.format(var='c')} RETURN {CLAIM}", {"key": key}
        )
        if rows:
            found[key] = rows[0]
    return found


def claims(execute: Execute, keys: list[str]) -> dict[str, ClaimView]:
    return {
        key: claim_view(row, missing_basis(execute, key, list(row["basis"] or [])))
        for key, row in claim_rows(execute, keys).items()
    }


def about(execute: Execute, question: AboutQuestion) -> list[ClaimView]:
    current = "" if question.include_superseded else " AND c.supersededBy IS NULL"
    rows = execute(
        f"MATCH (e:KnownEntity {{key: $key}})<-[:SUBJECT]-(c:Claim) WHERE {_PROJECTED.format(var='c')}"
        f"{current} RETURN c.key AS key, c.confidence AS confidence, c.assertedAt AS asserted_at "
        f"ORDER BY confidence DESC, asserted_at DESC, key LIMIT {check_limit(question.limit)}",
        {"key": key_of(question.entity)},
    )
    keys = [str(row["key"]) for row in rows]
    views = claims(execute, keys)
    return [views[key] for key in keys]


def one_claim(execute: Execute, key: str) -> ClaimView | None:
    return claims(execute, [key]).get(key)


def claim(execute: Execute, question: ClaimQuestion) -> ClaimView | None:
    return one_claim(execute, question.claim)


def basis(execute: Execute, question: ClaimQuestion) -> BasisChain | None:
    """The chain under a claim, breadth first (nearest first), each node once, down to observations."""
    root = one_claim(execute, question.claim)
    if root is None:
        return None
    below: list[ClaimView] = []
    observations: list[ObservationView] = []
    links: list[BasisLink] = []
    missing: list[str] = []
    seen = {root.key}
    frontier = [root]
    for depth in range(1, MAX_BASIS_DEPTH + 1):
        found: list[ClaimView] = []
        for upper in frontier:
            targets = _basis_targets(execute, upper.key)
            for key in upper.basis:
                links.append(BasisLink(claim=upper.key, basis=key, depth=depth))
                if key in seen:
                    continue
                seen.add(key)
                label = targets.get(key)
                if label == "Claim" and (view := one_claim(execute, key)) is not None:
                    found.append(view)
                elif label == "Observation" and (observed := _observation(execute, key)) is not None:
                    observations.append(observed)
                else:
                    missing.append(key)
        below += found
        frontier = found
        if not frontier:
            break
    return BasisChain(root=root, claims=below, observations=observations, links=links, missing=missing)


def _basis_targets(execute: Execute, claim: str) -> dict[str, str]:
    """basis key -> the label of its projected node (placeholders left out)."""
    rows = execute(
        "MATCH (c:Claim {key: $key})-[:BASIS]->(b) RETURN b.key AS key, label(b) AS label, "
        "b.placeholder AS placeholder",
        {"key": claim},
    )
    return {str(row["key"]): str(row["label"]) for row in rows if not row["placeholder"]}


def _observation(execute: Execute, key: str) -> ObservationView | None:
    rows = execute(
        f"MATCH (o:Observation {{key: $key}}) WHERE {_PROJECTED.format(var='o')} RETURN {OBSERVATION}",
        {"key": key},
    )
    return observation_view(rows[0]) if rows else None


def contradictions(execute: Execute, question: ContradictionsQuestion) -> list[ContradictionView]:
    """Open contradictions between projected claims: highest trust first, then in the order inferred."""
    where = [
        _PROJECTED.format(var="a"),
        _PROJECTED.format(var="b"),
        "a.supersededBy IS NULL",
        "b.supersededBy IS NULL",
    ]
    params: dict[str, object] = {}
    if question.entity is not None:
        where.append("(a.subjectKey = $key OR b.subjectKey = $key)")
        params["key"] = key_of(question.entity)
    rows = execute(
        f"MATCH (a:Claim)-[r:CONTRADICTS]->(b:Claim) WHERE {' AND '.join(where)} "
        "RETURN a.key AS first, b.key AS second, r.trust AS trust, r.method AS method, r.edgeId AS edge_id, "
        f"{_cited('r')} ORDER BY trust DESC, session, seq LIMIT {check_limit(question.limit)}",
        params,
    )
    views = claims(execute, [str(row[end]) for row in rows for end in ("first", "second")])
    return [
        ContradictionView(
            first=views[row["first"]],
            second=views[row["second"]],
            trust=float(row["trust"]),
            method=row["method"],
            edge_id=row["edge_id"],
            session=row["session"],
            citation=cited(row),
        )
        for row in rows
    ]


def entity(execute: Execute, question: EntityQuestion) -> EntityView | None:
    """An entity with every relation from or to it, by relation, then source, target and `via`."""
    key = key_of(question.entity)
    found = execute("MATCH (e:KnownEntity {key: $key}) RETURN e.name AS name", {"key": key})
    if not found:
        return None
    outgoing = execute(
        f"MATCH (e:KnownEntity {{key: $key}})-[r:RELATES]->(t:KnownEntity) "
        f"RETURN e.name AS source, t.name AS target, {RELATION}",
        {"key": key},
    )
    incoming = execute(
        f"MATCH (e:KnownEntity {{key: $key}})<-[r:RELATES]-(s:KnownEntity) "
        f"RETURN s.name AS source, e.name AS target, {RELATION}",
        {"key": key},
    )
    relations = {
        (row["relation"], row["source"], row["target"], row["via"], bool(row["derived"])): RelationView(
            source=row["source"],
            relation=row["relation"],
            target=row["target"],
            derived=bool(row["derived"]),
            via=row["via"],
            session=row["session"],
            citation=cited(row),
        )
        for row in outgoing + incoming
    }
    return EntityView(key=key, name=found[0]["name"], relations=[relations[k] for k in sorted(relations)])


def observations(execute: Execute, question: ObservationsQuestion) -> list[ObservationView]:
    rows = execute(
        f"MATCH (e:KnownEntity {{key: $key}})<-[:SUBJECT]-(o:Observation) "
        f"WHERE {_PROJECTED.format(var='o')} RETURN {OBSERVATION} "
        f"ORDER BY observed_at DESC, session DESC, seq DESC LIMIT {check_limit(question.limit)}",
        {"key": key_of(question.entity)},
    )
    return [observation_view(row) for row in rows]
