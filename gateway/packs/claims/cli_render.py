"""How `eventloom claims ...` prints an answer for a person: one block per row, each with what it cites.

A claim always reads as a claim: who concluded it, how sure, on what basis; never as a plain fact. Lines go
to stdout (a script may read them); notes such as "3 claim(s)" go to stderr like every command's.
"""

from __future__ import annotations

from rich.markup import escape

from gateway.cli.common import console
from gateway.packs.claims.reads import (
    BasisChain,
    ClaimView,
    ContradictionView,
    EntityView,
    ObservationView,
)

INDENT = "   "


def note(text: str) -> None:
    console.print(escape(text), highlight=False)


def claim_line(claim: ClaimView) -> str:
    """`claim s1/4 (confidence 0.70, by agent:x, basis: 2 events): Alice LIVES_IN Paris`."""
    kind = "resolution" if claim.kind == "resolution" else "claim"
    relation = f"NOT {claim.predicate}" if claim.negated else claim.predicate
    basis = f"{len(claim.basis)} event" + ("" if len(claim.basis) == 1 else "s")
    return (
        f"{kind} {claim.key} (confidence {claim.confidence:.2f}, by {claim.source_agent}, basis: {basis}): "
        f"{claim.subject} {relation} {claim.object}"
    )


def print_claim(claim: ClaimView, indent: str = "") -> None:
    print(f"{indent}{claim_line(claim)}")
    marks = [f"asserted {claim.asserted_at}"]
    if claim.accepted:
        marks.append("accepted")
    if claim.superseded_by:
        marks.append(f"superseded by {claim.superseded_by}")
    if claim.supersedes:
        marks.append(f"settles {', '.join(claim.supersedes)}")
    if claim.missing_basis:
        marks.append(f"basis not in the model: {', '.join(claim.missing_basis)}")
    print(f"{indent}{INDENT}{'  '.join(marks)}")
    if claim.statement:
        print(f"{indent}{INDENT}in its words: {claim.statement}")
    print(f"{indent}{INDENT}rests on {', '.join(claim.basis)}")
    print(f"{indent}{INDENT}cites {claim.citation}")


def print_claims(claims: list[ClaimView], entity: str) -> None:
    for claim in claims:
        print_claim(claim)
    note(f"{len(claims)} claim(s) about {entity}, highest confidence first")


def print_observation(observation: ObservationView, indent: str = "") -> None:
    print(f"{indent}observation {observation.key} seen at {observation.source}, {observation.observed_at}")
    for line in observation.content.splitlines():
        print(f"{indent}{INDENT}| {line}")
    if observation.mentions:
        print(f"{indent}{INDENT}mentions {', '.join(observation.mentions)} ({observation.extracted_by})")
    print(f"{indent}{INDENT}cites {observation.citation}")


def print_observations(observations: list[ObservationView], entity: str) -> None:
    for observation in observations:
        print_observation(observation)
    note(f"{len(observations)} observation(s) mentioning {entity}, newest first")


def print_basis(chain: BasisChain) -> None:
    print_claim(chain.root)
    print("rests on:")
    for link in chain.links:
        print(f"{INDENT * link.depth}{link.claim} <- {link.basis}")
    for claim in chain.claims:
        print_claim(claim, INDENT)
    for observation in chain.observations:
        print_observation(observation, INDENT)
    if chain.missing:
        print(f"not in the model (yet): {', '.join(chain.missing)}")
    note(f"{len(chain.claims)} claim(s) and {len(chain.observations)} observation(s) under {chain.root.key}")


def print_contradictions(found: list[ContradictionView]) -> None:
    for pair in found:
        print(f"contradiction (trust {pair.trust:.2f}, {pair.method}) {pair.edge_id}")
        print_claim(pair.first, INDENT)
        print_claim(pair.second, INDENT)
        print(f"{INDENT}cites {pair.citation}")
    note(f"{len(found)} open contradiction(s), highest trust first")


def print_entity(entity: EntityView) -> None:
    print(f"entity {entity.name}  [{entity.key}]")
    for relation in entity.relations:
        how = "derived from claim" if relation.derived else "stated by observation"
        print(f"{INDENT}{relation.source} -{relation.relation}-> {relation.target}  ({how} {relation.via})")
        print(f"{INDENT * 2}cites {relation.citation}")
    note(f"{len(entity.relations)} relation(s)")
