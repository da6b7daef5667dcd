"""Retrieval: lanes, resolution at the asked time, traversal with trust, citations, fusion, degradation.

Runs on both graph backends (`graph_store` is parametrized: LadybugDB and a real Neo4j server).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from readmodels.documents import DocKind
from readmodels.graph.protocol import GraphStore
from readmodels.keyword.protocol import KeywordHit
from readmodels.retrieval.model import Hit, Query, QueryError, QueryResult
from readmodels.retrieval.read_models import ReadModels
from readmodels.retrieval.retriever import Retriever
from tests.retrieval_support import StoryModels, memory_story, story_models
from tests.test_graph_support import backend, fresh_store, graph_store, ts  # noqa: F401

pytestmark = pytest.mark.anyio


@pytest.fixture
async def story(graph_store: GraphStore, tmp_path: Path) -> AsyncIterator[StoryModels]:  # noqa: F811
    async with story_models(graph_store, tmp_path, memory_story().events) as models:
        yield models


def named(result: QueryResult, entity: str) -> list[Hit]:
    return [hit for hit in result.hits if hit.entity == entity]


async def ask(story: StoryModels, text: str, **options: object) -> QueryResult:
    return await Retriever(story.models).query(Query(text=text, **options))  # type: ignore[arg-type]


async def test_an_entity_named_in_the_question_comes_first_with_its_citation(story: StoryModels) -> None:
    result = await ask(story, "what do we know about auth-service?")
    top = result.hits[0]
    assert (top.kind, top.entity, top.type) == ("entity", "auth-service", "service")
    assert top.summary == "Issues and refreshes OAuth tokens"
    assert top.valid_to is None
    assert {"exact", "keyword"} <= set(top.explanation.lanes)
    event = memory_story().events[1]
    assert top.citations[0].uri == event.citation
    assert (top.citations[0].session, top.citations[0].seq, top.citations[0].hash) == ("r1", 2, event.hash)
    assert result.warnings == []


async def test_every_score_is_explained_by_its_lane_contributions(story: StoryModels) -> None:
    for profile in ("balanced", "precision", "recall", "temporal"):
        result = await ask(story, "postgres cluster upgrade", profile=profile)
        assert result.hits
        for hit in result.hits:
            explanation = hit.explanation
            logit = explanation.base + sum(c.contribution for c in explanation.lanes.values())
            if explanation.fusion == "calibrated":  # a probability: the logistic of base and contributions
                assert 0 < hit.score < 1
                assert hit.score == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-5)
            else:
                assert explanation.base == 0
                assert hit.score == pytest.approx(logit, abs=1e-5)
            contributions = explanation.lanes.values()
            assert all(c.weight > 0 and c.rank >= 0 for c in contributions)
            assert hit.explanation.profile == profile
        assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


async def test_a_superseded_version_stays_out_now_and_answers_as_of_then(story: StoryModels) -> None:
    now = named(await ask(story, "postgres cluster"), "postgres")
    assert [(h.summary, h.version, h.superseded_versions) for h in now] == [
        ("Postgres 16 cluster after the upgrade", 2, 1)
    ]
    then = named(await ask(story, "postgres cluster", as_of=ts(3)), "postgres")
    assert [(h.summary, h.version, h.valid_to) for h in then] == [("Postgres 14 cluster", 1, ts(5))]
    assert then[0].citations[0].seq == 2


async def test_an_invalidated_entity_is_left_out_and_counted(story: StoryModels) -> None:
    now = await ask(story, "legacy-ldap bridge")
    assert named(now, "legacy-ldap") == []
    assert now.excluded_not_current >= 1
    before = await ask(story, "legacy-ldap bridge", as_of=ts(6.5))
    assert [h.summary for h in named(before, "legacy-ldap")] == ["Old LDAP bridge"]


async def test_as_of_sees_only_what_was_logged_by_then(story: StoryModels) -> None:
    result = await ask(story, "refresh early clock skew", as_of=ts(2))
    assert all(c.seq <= 2 for hit in result.hits for c in hit.citations)
    assert not any(hit.entity == "Refresh early" for hit in result.hits)


async def test_verbatim_recall_cites_the_source_path_and_lines(story: StoryModels) -> None:
    result = await ask(story, "tokens refreshed early")
    top = result.hits[0]
    assert top.kind == "source"
    assert top.summary == "Tokens are refreshed five minutes early."
    assert "verbatim" in top.explanation.lanes
    (cited,) = top.citations
    assert (cited.path, cited.line_start, cited.line_end, cited.seq) == ("docs/auth.md", 3, 3, 3)


async def test_traversal_reaches_inferred_neighbours_weighted_by_their_trust(story: StoryModels) -> None:
    result = await ask(story, "auth-service", lanes=["exact", "traversal"])
    by_name = {hit.entity: hit for hit in result.hits}
    assert by_name["postgres"].explanation.lanes["traversal"].raw == 1.0
    assert by_name["postgres"].inferred is None
    billing = by_name["billing-service"]
    link = billing.inferred
    assert link is not None
    # unknown method, no source event, no evidence: 0.6 x 0.75 x 0.8 x 0.7 (see readmodels.inferred.model)
    assert link.trust == pytest.approx(0.252)
    assert billing.explanation.lanes["traversal"].raw == pytest.approx(0.252)
    assert (link.kind, link.method, link.relation_type) == ("inferred", "co_mention_v1", "depends_on")
    assert any("not authoritative" in note for note in billing.explanation.notes)
    without = await ask(story, "auth-service", lanes=["exact", "traversal"], include_inferred=False)
    assert "billing-service" not in {hit.entity for hit in without.hits}


async def test_traversal_uses_the_read_models_trust_once_an_edge_is_retracted(story: StoryModels) -> None:
    keys = ["r1/id/e-1"]
    assert await story.inferred.trust(keys) == {"r1/id/e-1": pytest.approx(0.252)}


async def test_lanes_can_be_restricted(story: StoryModels) -> None:
    result = await ask(story, "auth-service tokens", lanes=["keyword"])
    assert [report.lane for report in result.lanes] == ["keyword"]
    assert all(set(hit.explanation.lanes) == {"keyword"} for hit in result.hits)


class BrokenSearch:
    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[KeywordHit]:
        raise OSError("disk unplugged")


async def test_a_failing_lane_degrades_the_answer_with_a_warning(story: StoryModels) -> None:
    def models() -> ReadModels:
        return ReadModels(
            keyword=BrokenSearch(), vector=story.vector, graph=story.graph, trust=story.inferred
        )

    result = await Retriever(models).query(Query(text="auth-service"))
    assert result.hits[0].entity == "auth-service"
    failed = {report.lane: report.error for report in result.lanes if report.error}
    assert failed == {"keyword": "OSError: disk unplugged", "verbatim": "OSError: disk unplugged"}
    assert any("keyword" in warning and "disk unplugged" in warning for warning in result.warnings)


async def test_without_a_graph_entity_documents_are_still_found_and_flagged(story: StoryModels) -> None:
    result = await Retriever(lambda: ReadModels(keyword=story.keyword)).query(Query(text="auth-service"))
    hit = named(result, "auth-service")[0]
    assert hit.kind == "entity"
    assert any("not checked" in note for note in hit.explanation.notes)
    assert {r.lane: r.error for r in result.lanes if r.error} == {
        "exact": "no graph read model",
        "vector": "no vector read model",
        "traversal": "no graph read model",
    }


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"text": "  "}, "text"),
        ({"text": "x" * 4097}, "text"),
        ({"text": "x", "limit": 0}, "limit"),
        ({"text": "x", "limit": 101}, "limit"),
        ({"text": "x", "depth": 6}, "depth"),
        ({"text": "x", "profile": "fast"}, "profile"),
        ({"text": "x", "lanes": []}, "lanes"),
    ],
)
def test_a_bad_query_names_the_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(QueryError, match=rf"^{field}:"):
        Query(**options)  # type: ignore[arg-type]


async def test_a_bad_as_of_names_the_field(story: StoryModels) -> None:
    with pytest.raises(QueryError, match=r"^as_of:"):
        await ask(story, "x", as_of="yesterday")
