"""Hits of entities that are one: an accepted `same_as` class answers as one hit with all its facts.

The best-ranked hit of a class (`readmodels.graph.equivalence`) keeps its own name, type and window, and
gains the other members' summaries ("same as <name>: <summary>"), the events that asserted them and the
accepted links as citations, and a note; hits of the other members are left out. Nothing stored changes:
retract the link and the next answer shows the entities apart again. Traversal starts from the whole class
too (`readmodels.retrieval.traversal`), so the edges of every member are reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from readmodels.graph.equivalence import Equivalence, same_as_classes
from readmodels.graph.records import EntityVersion
from readmodels.retrieval.hits import event_citation
from readmodels.retrieval.model import Citation, Hit
from readmodels.retrieval.protocol import GraphReads

MAX_SUMMARY_CHARS = 2000


async def classes_of(
    graph: GraphReads, versions: Sequence[EntityVersion], as_of: str | None
) -> dict[str, Equivalence]:
    """The accepted `same_as` class of each version that has one, by version uid."""
    if not versions:
        return {}
    return await graph.read(same_as_classes([v.uid for v in versions], as_of))


def within_session(found: Equivalence, session: str) -> Equivalence | None:
    """What of a class a question about one session may answer from: its members and links there."""
    members = [m for m in found.members if m.session == session]
    links = [link for link in found.links if link.session == session]
    return Equivalence(members=members, links=links) if members else None


def _summary(hit: Hit, found: Equivalence) -> str:
    parts = [hit.summary] if hit.summary else []
    parts += [f"same as {m.name}: {m.summary}" if m.summary else f"same as {m.name}" for m in found.members]
    text = "\n".join(parts)
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1] + "…"


def _citations(hit: Hit, found: Equivalence) -> list[Citation]:
    extra = [event_citation(m.session, m.source_event_seq, m.source_event_hash) for m in found.members] + [
        event_citation(e.session, e.source_event_seq, e.source_event_hash) for e in found.links
    ]
    citations = list(hit.citations)
    known = {c.uri for c in citations}
    for cited in extra:
        if cited.uri not in known:
            known.add(cited.uri)
            citations.append(cited)
    return citations


def merge_same_as(
    hits: Sequence[Hit], uids: Mapping[str, str], classes: Mapping[str, Equivalence]
) -> list[Hit]:
    """`hits` (best first), each class answering once. `uids`: hit key -> the entity version it stands for."""
    merged: list[Hit] = []
    absorbed: set[str] = set()
    for hit in hits:
        uid = uids.get(hit.key)
        if uid is not None and uid in absorbed:
            continue
        found = classes.get(uid) if uid is not None else None
        if found is None:
            merged.append(hit)
            continue
        absorbed.update(m.uid for m in found.members)
        names = ", ".join(m.name for m in found.members)
        note = f"seen as one with {names}: accepted same_as link(s), the originals are unchanged"
        explanation = msgspec.structs.replace(hit.explanation, notes=[*hit.explanation.notes, note])
        merged.append(
            msgspec.structs.replace(
                hit, summary=_summary(hit, found), citations=_citations(hit, found), explanation=explanation
            )
        )
    return merged
