"""What bench/derived.py asks the node's reads: causal recall and stale distractors, entity resolution
against the fixture's spellings, and the checkout's boundary between facts and candidates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from derived_fidelity import CANDIDATE_TYPES, LogIndex, norm
from derived_fixture import CausalLink, Events, Fixture

from eventloom.event import Event
from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.query.local import LocalMemory
from readmodels.retrieval.causal_chains import CausalChain, CausalRequest, CausalStep
from readmodels.retrieval.causal_reads import CausalExplainRequest, CausalPathRequest

MEMORY_TYPES = frozenset({"episode", "claim", "procedure"})

# ---- causal reads ------------------------------------------------------------------------------------


async def _walk(
    memory: LocalMemory, session: str, names: Iterable[str], direction: str, depth: int
) -> CausalChain | None:
    """The chain from the first of `names` the graph knows (a decision by its id, else by its title)."""
    for name in names:
        request = CausalRequest(session=session, name=name[:512], direction=direction, depth=depth)  # type: ignore[arg-type]
        chain = await memory.causal(request)
        if chain.start:
            return chain
    return None


def _cites(step: CausalStep, event: Event) -> bool:
    return any(event.hash.startswith(c.hash[:12]) and c.seq == event.seq for c in step.citations)


def _found(chain: CausalChain | None, explained: Event) -> bool:
    return chain is not None and any(
        _cites(step, explained) and step.valid_to is None for step in chain.steps
    )


def _chains(fixture: Fixture) -> dict[tuple[str, int], list[CausalLink]]:
    chains: dict[tuple[str, int], list[CausalLink]] = {}
    for link in fixture.truth.causal:
        if link.stale is None:
            chains.setdefault((link.session, link.chain), []).append(link)
    return chains


def _ratio(found: int, total: int) -> float | None:
    return round(found / total, 4) if total else None


async def causal_recall(memory: LocalMemory, fixture: Fixture, events: dict[str, Events]) -> dict[str, Any]:
    """The fraction of the true links (stale ones aside) each causal read finds, a link counting when a
    step cites the outcome.explained event that stated it:
    - `successors`: the walk from each chain's head (its decision), as deep as the chain;
    - `predecessors`: the walk from each chain's tail (its last outcome), as deep as the chain;
    - `explain`: "why" asked of the entity the chain is about (`auth-service`), as deep as the chain;
    and `path`: the fraction of chains whose shortest path from head to tail cites every link."""
    found = {"successors": 0, "predecessors": 0, "explain": 0, "path": 0}
    chains, total = _chains(fixture), 0
    for (session, _), links in sorted(chains.items()):
        total += len(links)
        depth = len(links)
        head = await _walk(memory, session, links[0].cause_names, "successors", depth)
        tail = await _walk(memory, session, (links[-1].effect_name,), "predecessors", depth)
        name, kind = links[0].about
        why = await memory.causal_explain(
            CausalExplainRequest(session=session, name=name, entity_type=kind, depth=depth)
        )
        source = head.resolved_name or head.name if head is not None else links[0].cause_names[-1]
        paths = await memory.causal_path(
            CausalPathRequest(session=session, source=source, target=links[-1].effect_name, depth=depth)
        )
        explained = [events[session][link.explained_key] for link in links]
        for event in explained:
            found["successors"] += _found(head, event)
            found["predecessors"] += _found(tail, event)
            found["explain"] += any(_cites(step, event) and step.valid_to is None for step in why.steps)
        found["path"] += any(
            all(any(_cites(step, event) for step in path.steps) for event in explained)
            for path in paths.paths
        )
    result = {read: _ratio(found[read], total) for read in ("successors", "predecessors", "explain")}
    return result | {"path": _ratio(found["path"], len(chains)), "links": total, "chains": len(chains)}


async def stale_rejected(memory: LocalMemory, fixture: Fixture, events: dict[str, Events]) -> float | None:
    """The fraction of stale links (edge retracted, or outcome invalidated) that none of the successors of
    their cause, the predecessors of their outcome and the explanation of their entity returns as current."""
    stale = [link for link in fixture.truth.causal if link.stale is not None]
    rejected = 0
    for link in stale:
        explained = events[link.session][link.explained_key]
        forward = await _walk(memory, link.session, link.cause_names, "successors", 1)
        backward = await _walk(memory, link.session, (link.effect_name,), "predecessors", 1)
        name, kind = link.about
        why = await memory.causal_explain(
            CausalExplainRequest(session=link.session, name=name, entity_type=kind, depth=1)
        )
        current = any(_cites(step, explained) and step.valid_to is None for step in why.steps)
        rejected += not (current or _found(forward, explained) or _found(backward, explained))
    return _ratio(rejected, len(stale))


# ---- entity resolution -------------------------------------------------------------------------------


def entity_resolution(index: LogIndex, fixture: Fixture) -> dict[str, Any]:
    """Pairwise precision and recall of the proposed same_as links, closed transitively per session, against
    the fixture's spellings of one entity in one session."""
    proposed = [
        e for e in index.of_type("inference.edge.generated") if e.payload.get("relation_type") == "same_as"
    ]
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(node: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(node, node) != node:
            node = parent[node]
        return node

    for edge in proposed:
        a, b = (edge.session, str(edge.payload["source"])), (edge.session, str(edge.payload["target"]))
        parent[root(a)] = root(b)
    groups: dict[tuple[str, str], list[str]] = {}
    for node in list(parent):
        groups.setdefault(root(node), []).append(node[1])
    predicted = {
        (session, frozenset((a, b)))
        for (session, _), names in groups.items()
        for a in names
        for b in names
        if a < b
    }
    truth, near = fixture.truth.same_as_pairs(), fixture.truth.near_miss_pairs()
    hits = len(predicted & truth)
    return {
        "precision": round(hits / len(predicted), 4) if predicted else None,
        "recall": round(hits / len(truth), 4) if truth else None,
        "proposed": len(proposed),
        "pairs_predicted": len(predicted),
        "pairs_true": len(truth),
        "near_miss_pairs": len(near),
        "near_misses_proposed": sorted(" / ".join(sorted(pair)) for _, pair in predicted & near)[:10],
        "false_pairs": sorted(" / ".join(sorted(pair)) for _, pair in predicted - truth)[:10],
        "by_method": _count(str(e.payload.get("method")) for e in proposed),
    }


def _count(items: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


# ---- the checkout boundary ---------------------------------------------------------------------------


async def candidate_checkouts(memory: LocalMemory, index: LogIndex) -> dict[str, Any]:
    """One checkout per candidate, asking its title in its session: how many pending, deferred or
    rejected candidates appear among any checkout's facts: a fact named by a candidate's id (the entity
    graph extraction makes of it), typed as a candidate or consolidated memory while none was promoted
    under that name, or citing a candidate's own event as its evidence. Promoted ones may: they are
    memory. (A title is not an identity: an episode titled "release checks" is not the fact of that name.)"""
    verdicts, promoted = index.verdicts(), index.promoted()
    candidates = index.candidates()
    unpromoted = [c for c in candidates if c.payload["candidate_id"] not in promoted]
    names = {norm(c.payload["candidate_id"]): c for c in unpromoted}
    own_event = {(c.session, c.seq): c for c in unpromoted}
    as_facts: dict[str, dict[str, str]] = {}
    shown_as_proposed: set[str] = set()
    promoted_facts: set[str] = set()
    facts_seen = 0
    for candidate in candidates:
        request = CheckoutRequest(
            text=str(candidate.payload["title"])[:1000], session=candidate.session, token_budget=4000
        )
        checkout = await memory.checkout(request)
        facts_seen += len(checkout.facts)
        for item in checkout.inferred:
            if item.kind == "proposed" and norm(item.about) in names:
                shown_as_proposed.add(str(names[norm(item.about)].payload["candidate_id"]))
        as_facts |= _candidates_among_facts(checkout, names, own_event, promoted)
        promoted_facts |= {
            f.entity for f in checkout.facts if f.entity in promoted and f.type in MEMORY_TYPES
        }
    for candidate_id, shown in as_facts.items():
        shown["status"] = verdicts.get(candidate_id, "pending")
    statuses = [verdicts.get(str(c.payload["candidate_id"]), "pending") for c in candidates]
    return {
        "pending_candidates_as_facts": len(as_facts),
        "as_facts": [{"candidate": key, **shown} for key, shown in sorted(as_facts.items())][:10],
        "checkouts": len(candidates),
        "facts_seen": facts_seen,
        "candidates_shown_as_proposed": len(shown_as_proposed),
        "statuses": _count(statuses),
        "promoted": len(promoted),
        "promoted_among_facts": len(promoted_facts),  # the control: promoted memory does answer as a fact
    }


def _candidates_among_facts(
    checkout: MemoryCheckout,
    names: dict[str, Event],
    own_event: dict[tuple[str, int], Event],
    promoted: set[str],
) -> dict[str, dict[str, str]]:
    """Candidate id -> the fact that showed it, and why it is that candidate."""
    found: dict[str, dict[str, str]] = {}
    for fact in checkout.facts:
        shown = {"fact": f"{fact.entity} ({fact.type})", "question": checkout.request.text[:80]}
        by_name = names.get(norm(fact.entity))
        if by_name is not None:
            found[str(by_name.payload["candidate_id"])] = shown | {"why": "named as the candidate"}
        elif fact.type in CANDIDATE_TYPES and fact.entity not in promoted:
            found[f"{fact.type}:{fact.entity}"] = shown | {"why": "typed as a candidate"}
        for number in fact.evidence:
            cited = checkout.evidence[number - 1]
            event = own_event.get((cited.session, cited.seq))
            if event is not None:
                found[str(event.payload["candidate_id"])] = shown | {"why": "cites the candidate's event"}
    return found
