"""Embedders: the dependency-free `hash` embedder, tags, and plug-in discovery through entry points."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from eventloom.malloc import live_resident_mb
from readmodels.vector.embedders import (
    Embedder,
    EmbedderError,
    HashEmbedder,
    available_embedders,
    load_embedder,
    tag,
    unit_rows,
)
from readmodels.vector.static import _MODEL, WordLlamaEmbedder


def test_hash_vectors_are_deterministic_unit_vectors_tagged_with_their_space() -> None:
    embedder = HashEmbedder()
    first, again = embedder.embed(["Tokens refresh early"]), HashEmbedder().embed(["Tokens refresh early"])
    assert first.dtype == np.float32 and first.shape == (1, 384)
    assert np.array_equal(first, again)
    assert np.isclose(np.linalg.norm(first[0]), 1.0)
    assert not embedder.embed(["  ...  "]).any()  # no words: the zero vector
    assert tag(embedder) == "hash@1/384" and tag(HashEmbedder(64)) == "hash@1/64"
    assert isinstance(embedder, Embedder)


def test_the_documented_algorithm_is_what_runs() -> None:
    """Step by step as the module's documentation states it, for one word and one pair."""
    dims = 64
    expected = np.zeros(dims)
    for feature, weight in (("tokens", 1.0), ("refresh", 1.0), ("tokens refresh", 0.5)):
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
        expected[h % dims] += -weight if h >> 63 else weight
    expected /= np.linalg.norm(expected)
    assert np.allclose(HashEmbedder(dims).embed(["Tokens, refresh!"])[0], expected, atol=1e-6)


def test_shared_words_and_order_make_texts_closer() -> None:
    query, near, reordered, far = HashEmbedder().embed(
        [
            "why do tokens expire at midnight",
            "tokens expire at midnight",
            "midnight at expire tokens",
            "ship the login page",
        ]
    )
    assert float(query @ near) > float(query @ reordered) > float(query @ far)


def test_embedders_are_found_through_entry_points() -> None:
    assert "hash" in available_embedders()
    loaded = load_embedder("hash", 128)
    assert isinstance(loaded, HashEmbedder) and loaded.dimensions == 128
    with pytest.raises(EmbedderError, match="no embedder named 'nope'"):
        load_embedder("nope")
    for bad in (0, 4, 100_000):
        with pytest.raises(EmbedderError, match="dimensions"):
            HashEmbedder(bad)


def test_the_default_embedder_keeps_nothing_of_the_texts_it_embedded() -> None:
    """Its tokenizer's word is the whole text, so a BPE cache held every text: 20,000 distinct ones grew
    the process ~34 MB, and 150,000 ~155 MB (the vector projector's catch-up). Now a few MB at most."""
    embedder = WordLlamaEmbedder()
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
        "mike",
    ]
    rng = random.Random(5)
    embedder.embed(["warm up: the table and the tokenizer are read once"])
    before = live_resident_mb()
    for start in range(0, 20_000, 1000):
        embedder.embed([f"{start + i} " + " ".join(rng.choices(words, k=30)) for i in range(1000)])
    assert live_resident_mb() - before < 15


def test_the_default_embedder_means_its_half_precision_table_exactly_in_float32() -> None:
    """The table stays in the float16 the wheel ships (16 MB, not 32), and a text's vector is still the
    float32 mean of its token rows, bit for bit, at every width: no stored vector changes meaning."""
    texts = ["Tokens refresh early", "a much longer text " * 40, "", "Ünïcödé and emoji 🚀 too"]
    model = _MODEL.get()
    assert model.table.dtype == np.float16
    widened = model.table.astype(np.float32)
    for width in (64, 256):
        expected = np.zeros((len(texts), width), dtype=np.float32)
        for row, encoding in enumerate(model.tokenizer.encode_batch(texts, add_special_tokens=False)):
            if encoding.ids:
                expected[row] = widened[encoding.ids, :width].mean(axis=0)
        assert np.array_equal(WordLlamaEmbedder(width).embed(texts), unit_rows(expected))
