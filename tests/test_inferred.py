"""The inferred-edge read model: the audit view of inferred and causal edges, trust, status, CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.generational import GenerationalProjector
from projectors.inferred.extract import inferred_changes
from projectors.plugins import load_projector
from readmodels.embedded.inferred_store import SqliteInferredStore
from readmodels.inferred.model import trust_score
from tests.conftest import run_cli
from tests.runtime_support import drained, running
from tests.test_graph_support import HASH_A, SessionLog

pytestmark = pytest.mark.anyio
DECISION = {"decision_id": "d1", "title": "Refresh early"}


def audit_story(decision_hash: str | None = None) -> SessionLog:
    """Edges citing the session's first event, the decision (by its hash in the log the story goes to)."""
    log = SessionLog("i1")
    decision = log.add("decision.made", DECISION)
    cited = {"event_seq": 1, "event_hash": decision_hash or decision.hash}
    log.add(
        "inference.edge.generated",
        {"edge_id": "e1", "source": "task-1", "target": "d1", "relation_type": "likely_implemented_decision",
         "confidence": 0.86, "method": "task_completed_decision_citation_v1", "source_event_seq": 1,
         "source_event_hash": HASH_A, "evidence": [cited]},
    )  # fmt: skip
    log.add(
        "inference.edge.generated",
        {"source": "auth", "target": "db", "relation_type": "depends_on", "confidence": 0.9,
         "method": "guess", "evidence": [{"quote": "auth reads users"}, cited]},
    )  # fmt: skip
    log.add(
        "causal.edge.generated",
        {"cause": "clock skew", "effect": "expired tokens", "taxonomy": "caused",
         "relation_type": "causal_caused", "confidence": 0.6, "method": "outcome_explained_citation_v1",
         "source_event_seq": 1, "source_event_hash": HASH_A, "evidence": [cited]},
    )  # fmt: skip
    log.add("inference.edge.contradicted", {"edge_id": "e1", "reason": "the task never touched it"})
    log.add(
        "inference.edge.retracted",
        {"source": "auth", "target": "db", "relation_type": "depends_on", "reason": "wrong service"},
    )
    log.add("inference.edge.retracted", {"edge_id": "nope", "reason": "names nothing"})
    return log


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    async with SqliteInferredStore(tmp_path / "inferred.sqlite") as opened:
        yield opened


def test_trust_weighs_confidence_method_provenance_and_evidence() -> None:
    assert trust_score(0.8, "task_completed_decision_citation_v1", True, 1.0) == 0.8
    assert trust_score(0.8, "guess", True, 1.0) == 0.6
    assert trust_score(0.8, "task_completed_decision_citation_v1", False, 1.0) == 0.64
    assert trust_score(0.8, "task_completed_decision_citation_v1", True, 0.0) == 0.56
    assert trust_score(1.0, "guess", False, 0.0) == 0.42


async def test_the_audit_view_of_a_session(store: SqliteInferredStore) -> None:
    log = audit_story()
    assert await store.apply("inferred", [inferred_changes(e) for e in log.events]) == len(log.events)
    by_relation = {edge.relation_type: edge for edge in await store.edges("i1")}
    decision = by_relation["likely_implemented_decision"]
    assert (decision.kind, decision.trust, decision.contradictions, decision.retracted_seq) == (
        "inferred",
        0.86,
        1,
        None,
    )
    guessed = by_relation["depends_on"]
    assert (guessed.evidence_total, guessed.evidence_coverage, guessed.retracted_seq) == (2, 0.5, 6)
    assert guessed.trust == 0.0 and guessed.retraction_reason == "wrong service"
    causal = by_relation["causal_caused"]
    assert (causal.kind, causal.source, causal.target, causal.review_status) == (
        "causal", "clock skew", "expired tokens", "proposed"
    )  # fmt: skip
    assert causal.trust == trust_score(0.6, "outcome_explained_citation_v1", True, 1.0)

    status = await store.status("i1")
    assert (status.edges, status.current, status.retracted, status.contradicted) == (3, 2, 1, 1)
    assert status.by_kind == {"inferred": 2, "causal": 1}
    assert status.by_method == {
        "task_completed_decision_citation_v1": 1,
        "guess": 1,
        "outcome_explained_citation_v1": 1,
    }
    assert (status.confidence.min, status.confidence.max, status.confidence.median) == (0.6, 0.9, 0.86)
    assert (
        status.missing_provenance == 1 and status.missing_provenance_samples[0].relation_type == "depends_on"
    )
    assert [edge.relation_type for edge in status.samples] == ["likely_implemented_decision", "causal_caused"]
    assert status.evidence_coverage == round((1.0 + 0.5 + 1.0) / 3, 4)
    assert (await store.status("other")).edges == 0


async def test_exactly_once_and_a_generation_again_replaces_the_record(store: SqliteInferredStore) -> None:
    log = audit_story()
    batch = [inferred_changes(e) for e in log.events]
    await store.apply("inferred", batch[:3])
    assert await store.apply("inferred", batch) == len(batch) - 3
    assert await store.apply("inferred", batch) == 0
    assert len(await store.edges("i1")) == 3
    again = SessionLog("i1")
    again.events = list(log.events)
    again.add(
        "inference.edge.generated",
        {"edge_id": "e1", "source": "task-1", "target": "d1", "relation_type": "likely_implemented_decision",
         "confidence": 0.5, "method": "task_completed_decision_citation_v1"},
    )  # fmt: skip
    await store.apply("inferred", [inferred_changes(again.events[-1])])
    edges = {edge.edge_id: edge for edge in await store.edges("i1")}
    assert edges["e1"].confidence == 0.5 and edges["e1"].generated_seq == len(again.events)


async def test_the_projector_runs_in_the_runtime_and_the_cli_reports(
    log: EventLog, settings: Settings
) -> None:
    decision = await log.append("i1", "decision.made", "agent", DECISION)
    requests = [
        AppendRequest(session="i1", type=e.type, actor="agent", payload=e.payload)
        for e in audit_story(decision.hash).events[1:]
    ]
    await log.append_many(requests)
    projector = load_projector("inferred", settings)
    assert isinstance(projector, GenerationalProjector) and isinstance(projector.store, SqliteInferredStore)
    async with running(log, projector) as runner:
        await drained(log, runner.consumer)
        report = await asyncio.to_thread(
            run_cli, settings, "memory", "inferred-status", "--session", "i1", "--json"
        )
        assert report.returncode == 0, report.stderr
        status = json.loads(report.stdout)
        assert (status["edges"], status["current"], status["retracted"]) == (3, 2, 1)
        text = await asyncio.to_thread(run_cli, settings, "memory", "inferred-status")
        assert "3 (2 current, 1 retracted)" in text.stdout
