"""`ClaimsReads` on Neo4j: each question one or a few parameterized Cypher statements, then views.

Claims about an entity by their `subjectKey` (index `claims_claim_subject_order`, which also gives them
highest confidence first, then newest); a claim's basis chain level by level (each claim's `basis` in the
order its event gave it, at most `MAX_BASIS_DEPTH` levels, each node once); open contradictions along
`CONTRADICTS` (index `claims_contradiction_trust`), highest trust first, then in the order inferred; an
entity's relations are every relationship between it and another `KnownEntity` (the pack's own types
only ever link an observation or a claim to one); the observations that mention an entity along
`SUBJECT`. Placeholders (`placeholder: true`) are not in the model: no answer names one except as a
missing basis. The web view is `neo4j_view`.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.packs.claims.model import entity_key
from gateway.packs.claims.neo4j_view import claims_view
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
from readmodels.graph.cypher.io import ExecuteAsync, Row
from readmodels.view import ViewGraph, ViewRequest


def _claim_columns(var: str) -> str:
    """A claim's properties and the keys of its projected bases (the rest of `basis` is missing)."""
    return (
        f"properties({var}) AS {var}, "
        f"[({var})-[:BASIS]->(t) WHERE coalesce(t.placeholder, false) = false | t.key] AS {var}Present"
    )


_ABOUT: Final = (
    # the NOT NULL tests let the planner seek the composite index (subjectKey, confidence, assertedAt)
    "MATCH (c:Claim) WHERE c.subjectKey = $key AND c.confidence IS NOT NULL AND c.assertedAt IS NOT NULL "
    "AND c.placeholder = false AND ($superseded OR c.supersededBy IS NULL) "
    f"RETURN {_claim_columns('c')} "
    "ORDER BY c.subjectKey DESC, c.confidence DESC, c.assertedAt DESC, c.key LIMIT $limit"
)
_CLAIMS: Final = (
    f"UNWIND $keys AS k MATCH (c:Claim {{key: k}}) WHERE c.placeholder = false RETURN {_claim_columns('c')}"
)
_OBSERVATIONS: Final = (
    "UNWIND $keys AS k MATCH (o:Observation {key: k}) WHERE o.placeholder = false RETURN properties(o) AS o"
)
_MENTIONING: Final = (
    "MATCH (:KnownEntity {key: $key})<-[:SUBJECT]-(o:Observation) WHERE o.placeholder = false "
    "RETURN properties(o) AS o ORDER BY o.observedAt DESC, o.session DESC, o.seq DESC LIMIT $limit"
)
_OPEN: Final = (
    "a.placeholder = false AND b.placeholder = false AND a.supersededBy IS NULL AND b.supersededBy IS NULL"
)
_IN_ORDER: Final = (
    f"RETURN properties(x) AS x, {_claim_columns('a')}, {_claim_columns('b')} "
    "ORDER BY x.trust DESC, x.session, x.seq LIMIT $limit"
)
_CONTRADICTIONS: Final = f"MATCH (a:Claim)-[x:CONTRADICTS]->(b:Claim) WHERE {_OPEN} {_IN_ORDER}"
_CONTRADICTIONS_ABOUT: Final = (
    "MATCH (c:Claim) WHERE c.subjectKey = $key AND c.confidence IS NOT NULL AND c.assertedAt IS NOT NULL "
    "MATCH (c)-[x:CONTRADICTS]-(:Claim) WITH DISTINCT x "
    f"MATCH (a:Claim)-[x]->(b:Claim) WHERE {_OPEN} {_IN_ORDER}"
)
_ENTITY: Final = (
    "MATCH (e:KnownEntity {key: $key}) RETURN e.key AS key, e.name AS name, "
    "[(e)-[r]->(t:KnownEntity) | {source: e.name, relation: type(r), target: t.name, props: properties(r)}] "
    "+ [(s:KnownEntity)-[r]->(e) WHERE s <> e "
    "| {source: s.name, relation: type(r), target: e.name, props: properties(r)}] AS relations"
)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def claim_view(row: Row, var: str = "c") -> ClaimView:
    props: Row = row[var]
    basis = [str(key) for key in props.get("basis") or []]
    present = {str(key) for key in row[f"{var}Present"] or []}
    return ClaimView(
        key=str(props["key"]),
        kind=str(props.get("kind") or "claim"),
        subject=str(props.get("subject") or ""),
        subject_key=str(props.get("subjectKey") or ""),
        predicate=str(props.get("predicate") or ""),
        object=str(props.get("object") or ""),
        confidence=float(props.get("confidence") or 0.0),
        source_agent=str(props.get("sourceAgent") or ""),
        negated=bool(props.get("negated", False)),
        statement=_text(props.get("statement")),
        asserted_at=str(props.get("assertedAt") or ""),
        session=str(props.get("session") or ""),
        basis=basis,
        missing_basis=[key for key in basis if key not in present],
        supersedes=[str(key) for key in props.get("supersedes") or []],
        superseded_by=_text(props.get("supersededBy")),
        accepted=bool(props.get("accepted", False)),
        citation=str(props.get("citation") or ""),
    )


def observation_view(props: Row) -> ObservationView:
    return ObservationView(
        key=str(props["key"]),
        content=str(props.get("content") or ""),
        source=str(props.get("source") or ""),
        observed_at=str(props.get("observedAt") or ""),
        session=str(props.get("session") or ""),
        extracted_by=str(props.get("extractedBy") or ""),
        mentions=[str(name) for name in props.get("mentions") or []],
        citation=str(props.get("citation") or ""),
    )


def relation_view(row: Row) -> RelationView:
    props: Row = row["props"]
    return RelationView(
        source=str(row["source"]),
        relation=str(row["relation"]),
        target=str(row["target"]),
        derived=bool(props.get("derived", False)),
        via=str(props.get("via") or ""),
        session=str(props.get("session") or ""),
        citation=str(props.get("citation") or ""),
    )


def _contradiction(row: Row) -> ContradictionView:
    props: Row = row["x"]
    return ContradictionView(
        first=claim_view(row, "a"),
        second=claim_view(row, "b"),
        trust=float(props.get("trust") or 0.0),
        method=str(props.get("method") or ""),
        edge_id=str(props.get("edgeId") or ""),
        session=str(props.get("session") or ""),
        citation=str(props.get("citation") or ""),
    )


def asked_entity(name: str) -> str:
    """The key of the entity a question names (InvalidQuestion when the name normalises to nothing)."""
    try:
        return entity_key(name)
    except ValueError as exc:
        raise InvalidQuestion(f"entity: {exc}") from None


class Neo4jClaimsReads:
    """The answers, from statements run by `execute` (each in a read transaction)."""

    def __init__(self, execute: ExecuteAsync) -> None:
        self._execute = execute

    async def about(self, question: AboutQuestion) -> list[ClaimView]:
        params = {
            "key": asked_entity(question.entity),
            "superseded": question.include_superseded,
            "limit": check_limit(question.limit),
        }
        return [claim_view(row) for row in await self._execute(_ABOUT, params)]

    async def _claims(self, keys: list[str]) -> dict[str, ClaimView]:
        if not keys:
            return {}
        views = (claim_view(row) for row in await self._execute(_CLAIMS, {"keys": keys}))
        return {view.key: view for view in views}

    async def _observations(self, keys: list[str]) -> dict[str, ObservationView]:
        if not keys:
            return {}
        views = (observation_view(row["o"]) for row in await self._execute(_OBSERVATIONS, {"keys": keys}))
        return {view.key: view for view in views}

    async def claim(self, question: ClaimQuestion) -> ClaimView | None:
        return (await self._claims([question.claim])).get(question.claim)

    async def basis(self, question: ClaimQuestion) -> BasisChain | None:
        """Level by level from the root: each level's basis keys in order, each key once (nearest)."""
        root = await self.claim(question)
        if root is None:
            return None
        claims: list[ClaimView] = []
        observations: list[ObservationView] = []
        links: list[BasisLink] = []
        missing: list[str] = []
        seen, level, depth = {root.key}, [root], 0
        while level and depth < MAX_BASIS_DEPTH:
            depth += 1
            below: list[str] = []
            for claim in level:
                for key in claim.basis:
                    links.append(BasisLink(claim=claim.key, basis=key, depth=depth))
                    if key not in seen:
                        seen.add(key)
                        below.append(key)
            found = await self._claims(below)
            seen_observations = await self._observations([key for key in below if key not in found])
            level = [found[key] for key in below if key in found]
            claims += level
            observations += [seen_observations[key] for key in below if key in seen_observations]
            missing += [key for key in below if key not in found and key not in seen_observations]
        return BasisChain(root=root, claims=claims, observations=observations, links=links, missing=missing)

    async def contradictions(self, question: ContradictionsQuestion) -> list[ContradictionView]:
        params: dict[str, Any] = {"limit": check_limit(question.limit)}
        cypher = _CONTRADICTIONS
        if question.entity is not None:
            params["key"] = asked_entity(question.entity)
            cypher = _CONTRADICTIONS_ABOUT
        return [_contradiction(row) for row in await self._execute(cypher, params)]

    async def entity(self, question: EntityQuestion) -> EntityView | None:
        rows = await self._execute(_ENTITY, {"key": asked_entity(question.entity)})
        if not rows:
            return None
        relations = [relation_view(row) for row in rows[0]["relations"]]
        relations.sort(key=lambda r: (r.relation, r.source, r.target, r.via))
        return EntityView(key=str(rows[0]["key"]), name=str(rows[0]["name"] or ""), relations=relations)

    async def observations(self, question: ObservationsQuestion) -> list[ObservationView]:
        params = {"key": asked_entity(question.entity), "limit": check_limit(question.limit)}
        return [observation_view(row["o"]) for row in await self._execute(_MENTIONING, params)]

    async def view(self, question: ViewRequest) -> ViewGraph:
        return await claims_view(self._execute, question)
