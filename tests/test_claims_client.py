"""The claims pack's front door (`ClaimsClient`): an observation records what extraction found and never a
claim; a claim whose basis (or a Resolution whose superseded claim) is not what it must be in the log is
refused naming the argument, with nothing appended. And the optional LLM extractor, against a real HTTP
server on loopback: checked answers, the deterministic extractor on any failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eventloom.errors import EventValidationError
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.packs.claims import ClaimsClient
from gateway.packs.claims.extract import DeterministicExtractor
from gateway.packs.claims.llm_extract import OpenAICompatibleTriples
from gateway.packs.claims.predicates import normalise_predicate
from tests.test_consolidation_llm import ChatServer

pytestmark = pytest.mark.anyio
TEXT = "Alice lives in Paris. Alice works at Acme."


@pytest.mark.parametrize(
    ("written", "predicate"),
    [
        ("lives in", "LIVES_IN"),
        ("LIVES_IN", "LIVES_IN"),
        (" works-at ", "WORKS_AT"),
        ("Is  named", "IS_NAMED"),
    ],
)
def test_a_relation_in_words_becomes_its_predicate(written: str, predicate: str) -> None:
    assert normalise_predicate(written) == predicate


@pytest.mark.parametrize(("written", "why"), [("does not live in", "negat"), ("basis", "own"), ("", "not a")])
def test_what_is_not_a_positive_relation_is_refused_saying_why(written: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        normalise_predicate(written)


async def test_the_llm_extractor_is_off_by_default_checks_its_answer_and_falls_back_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert OpenAICompatibleTriples.from_settings(Settings(data_dir=tmp_path)) is None
    reply = {
        "mentions": ["Alice", "  ", "Paris"],
        "triples": [
            {"subject": "Alice", "predicate": "lives in", "object": "Paris"},
            {"subject": "Alice", "predicate": "does not work at", "object": "Acme"},  # negated: dropped
            {"subject": "Alice", "predicate": "SUBJECT", "object": "Bob"},  # reserved: dropped
            {"subject": "...", "predicate": "knows", "object": "Bob"},  # no entity: dropped
        ],
    }
    monkeypatch.setenv("CLAIMS_TEST_KEY", "sekret")
    with ChatServer("```json\n" + json.dumps(reply) + "\n```") as chat:
        configured = Settings(
            data_dir=tmp_path,
            llm_base_url=chat.url + "/v1",
            llm_model="tiny",
            llm_api_key_env="CLAIMS_TEST_KEY",
        )
        llm = OpenAICompatibleTriples.from_settings(configured)
        assert llm is not None and llm.name == "llm:tiny"
        by, found = await llm.extract_named(TEXT)
        assert (
            chat.requests[0]["auth"] == "Bearer sekret" and chat.requests[0]["path"] == "/v1/chat/completions"
        )
    assert by == "llm:tiny"
    assert [(t.subject, t.predicate, t.object) for t in found.triples] == [("Alice", "LIVES_IN", "Paris")]
    assert found.mentions == ["Alice", "Paris"]
    deterministic = await DeterministicExtractor().extract(TEXT)
    for failing in (ChatServer("not json"), ChatServer("{}", status=500)):
        with failing as chat:
            by, found = await OpenAICompatibleTriples(chat.url, "tiny", timeout_s=5).extract_named(TEXT)
        assert (by, found) == ("deterministic", deterministic)


async def test_the_front_door_records_observations_and_refuses_a_claim_on_nothing(log: EventLog) -> None:
    claims = ClaimsClient(log)
    seen = await claims.observe(TEXT, source="chat", session="c1")
    [observed] = [e async for e in log.events("c1")]
    assert observed.type == "claims.observation.recorded" and observed.citation == seen
    assert observed.payload["extracted_by"] == "deterministic"
    assert {"subject": "Alice", "predicate": "LIVES_IN", "object": "Paris"} in observed.payload["triples"]
    note = await log.append("c1", "note.added", "someone", {"text": "not an observation"})

    said = await claims.claim(
        "Alice", "lives in", "Paris", confidence=0.7, basis=[seen], agent="agent:x", session="c2"
    )
    [claimed] = [e async for e in log.events("c2")]
    assert claimed.citation == said and claimed.actor == "agent:x"
    assert claimed.payload["predicate"] == "LIVES_IN" and claimed.payload["source_agent"] == "agent:x"
    assert claimed.payload["basis"] == [{"session": "c1", "seq": 1, "hash": observed.hash}]

    def claim_on(basis: list[object], **changes: object) -> object:
        args: dict[str, object] = {"confidence": 0.5, "basis": basis, "agent": "agent:y", "session": "c2"}
        return claims.claim("Alice", changes.pop("predicate", "lives in"), "London", **(args | changes))  # type: ignore[arg-type]

    refusals = {
        "basis[1]": claim_on([seen, "c1/9"]),  # no such event
        "basis[0]": claim_on([seen.replace(observed.hash[:12], "0" * 12)]),  # another hash
        "basis[2]": claim_on([seen, said, note.citation]),  # not an observation or a claim
        "basis": claim_on([]),
        "predicate": claim_on([seen], predicate="does not live in"),
        "confidence": claim_on([seen], confidence=1.5),
        "supersedes[0]": claims.resolve(
            "Alice",
            "lives in",
            "Rome",
            confidence=0.9,
            basis=[said],
            supersedes=[seen],
            agent="a",
            session="c2",
        ),
        "claim": claims.accept(seen, "reviewer:r", session="c2"),
    }
    for field, attempt in refusals.items():
        with pytest.raises(EventValidationError) as refused:
            await attempt  # type: ignore[misc]
        assert refused.value.field == field, refused.value
    with pytest.raises(EventValidationError, match="subject"):
        await claims.claim("", "knows", "Bob", confidence=0.5, basis=[seen], agent="a", session="c2")
    assert len([e async for e in log.events("c2")]) == 1  # nothing else appended

    settled = await claims.resolve(
        "Alice",
        "lives in",
        "Rome",
        confidence=0.9,
        basis=[said],
        supersedes=["c2/1"],
        agent="a",
        session="c2",
    )
    accepted = await claims.accept(settled, "reviewer:r", session="c2", reason="checked")
    events = [e async for e in log.events("c2")]
    assert [e.citation for e in events[1:]] == [settled, accepted]
    assert events[1].payload["supersedes"] == [{"session": "c2", "seq": 1, "hash": claimed.hash}]
    assert events[2].payload["claim"]["hash"] == events[1].hash
