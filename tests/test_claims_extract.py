"""Deterministic extraction (gateway/packs/claims/extract.py): mentions, triples, bounds, and a fuzz."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.packs.claims.events import PREDICATE, RESERVED_PREDICATES, Triple
from gateway.packs.claims.extract import (
    MAX_MENTIONS,
    DeterministicExtractor,
    Extraction,
    TripleExtractor,
    extract,
    predicate_of,
)
from gateway.packs.claims.model import entity_key


def facts(text: str) -> list[tuple[str, str, str]]:
    return [(t.subject, t.predicate, t.object) for t in extract(text).triples]


def test_names_are_capitalised_spans_without_sentence_initial_function_words() -> None:
    found = extract("The report says Alice Smith met Bob. She thanked him. I saw Carol at Acme Corp.")
    assert found.mentions == ["Alice Smith", "Bob", "Carol", "Acme Corp"]


def test_quoted_strings_are_mentions_as_written() -> None:
    found = extract('Bob called it "project apollo" and “the red door”.')
    assert found.mentions == ["Bob", "project apollo", "the red door"]


def test_one_mention_per_entity_the_first_spelling_kept() -> None:
    assert extract('Alice met ALICE. "alice" left.').mentions == ["Alice"]


def test_relations_between_names_in_upper_snake() -> None:
    assert facts("Alice works at Acme. Bob Jones lives in Paris!") == [
        ("Alice", "WORKS_AT", "Acme"),
        ("Bob Jones", "LIVES_IN", "Paris"),
    ]
    assert facts("Alice visited the Louvre; Carol met an Engineer") == [
        ("Alice", "VISITED", "Louvre"),
        ("Carol", "MET", "Engineer"),
    ]


def test_naming_and_kinds() -> None:
    assert facts("My name is Dana Scully. Alice's name is Ally. Robert is called Bob.") == [
        ("user", "IS_NAMED", "Dana Scully"),
        ("Alice", "IS_NAMED", "Ally"),
        ("Robert", "IS_NAMED", "Bob"),
    ]
    assert facts("Carol is a senior software engineer at Google. Rex is an Alsatian.") == [
        ("Carol", "IS_A", "senior software engineer"),
        ("Rex", "IS_A", "Alsatian"),
    ]
    assert "user" in extract("my name is Ed").mentions


def test_no_fact_across_conjunctions_negations_breaks_or_sentences() -> None:
    for text in (
        "Alice and Bob went home.",
        "Alice never met Bob.",
        "Alice does not know Bob.",
        "Alice, Bob and Carol.",
        "Alice left. Bob stayed.",
        "Alice was seen many times near the old harbour by Bob.",  # more than three words between
    ):
        assert facts(text) == [], text


def test_never_a_reserved_or_malformed_predicate() -> None:
    assert facts("Alice basis Bob. Alice subject Bob. Alice relates Bob.") == []
    assert predicate_of(["co-founded"]) == "CO_FOUNDED"
    assert predicate_of(["contradicts"]) is None
    assert predicate_of(["café"]) is None
    assert predicate_of(["x" * 70]) is None


def test_bounded_on_a_megabyte() -> None:
    text = ('Alice Smith works at Acme Corp. She lives in Paris; "a quote" and 42 more, Bob\'s. ' * 13_000)[
        :1_000_000
    ]
    started = time.perf_counter()
    found = extract(text)
    assert time.perf_counter() - started < 5
    assert ("Alice Smith", "WORKS_AT", "Acme Corp") in [
        (t.subject, t.predicate, t.object) for t in found.triples
    ]
    many = extract(" ".join(f"Person{i} met Person{i + 1}." for i in range(2_000)))
    assert len(many.mentions) == MAX_MENTIONS
    assert extract("A" * 1_000_000) == Extraction()


@pytest.mark.anyio
async def test_the_deterministic_extractor() -> None:
    extractor: TripleExtractor = DeterministicExtractor()
    assert extractor.name == "deterministic"
    assert await extractor.extract("Alice works at Acme.") == extract("Alice works at Acme.")
    long = "Alice works at Acme. " * 10_000  # extracted on a thread
    assert (await extractor.extract(long)).triples == [
        Triple(subject="Alice", predicate="WORKS_AT", object="Acme")
    ]


_WORDS = st.sampled_from(
    [
        "Alice",
        "Bob Smith",
        "the",
        "The",
        "is",
        "a",
        "an",
        "named",
        "name",
        "my",
        "My",
        "'s",
        "works",
        "at",
        "and",
        "not",
        "Acme",
        "lives",
        "in",
        "é",
        "Über",
        "x-ray",
        '"',
        "“",
        "”",
        ".",
        ",",
        "\n",
        "42",
        "I",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), st.lists(_WORDS, max_size=60).map(" ".join)))
def test_fuzz_never_raises_and_every_fact_is_valid(text: str) -> None:
    found = extract(text)
    assert found == extract(text)  # deterministic
    keys = {entity_key(name) for name in found.mentions}
    assert len(keys) == len(found.mentions)
    assert all(0 < len(name) <= 512 for name in found.mentions)
    for triple in found.triples:
        assert re.fullmatch(PREDICATE, triple.predicate)
        assert triple.predicate not in RESERVED_PREDICATES
        assert entity_key(triple.subject) in keys and entity_key(triple.object) in keys
