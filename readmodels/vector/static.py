"""The `wordllama` embedder, the default: static token embeddings, offline, no torch, ~17,000 texts/s.

WordLlama's `l2_supercat` model (MIT licence) is a table of 32,000 token vectors, 256 wide, trained so
that the mean of a text's token vectors embeds the text (github.com/dleemiller/WordLlama). The table and
its tokenizer come inside the `wordllama` wheel from PyPI; this module reads the two files from the
installed package with `safetensors` and `tokenizers` and never calls WordLlama's own loader, which can
fetch other models from a hub: nothing here can reach the network.

What runs: the text is tokenized (Llama 2's SentencePiece vocabulary, no special tokens, no truncation),
the token vectors are averaged, and the mean is divided by its Euclidean norm (a text without tokens is
the zero vector). The model was trained Matryoshka-style, so its first 64 or 128 components embed too:
`EVENTLOOM_VECTOR_DIMENSIONS` may ask for 64, 128 or 256 (the default).

Why this one (measured in docs/benchmarks.md, "Choosing the default embedder"): a transformer such as
all-MiniLM-L6-v2 finds more on its own, but on 2 cores it embeds a few hundred sentences a second where
a static table embeds thousands, and the default must keep up with the log and install small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from readmodels.vector.embedders import EmbedderError, LoadedOnce, Vectors, unit_rows

PACKAGE: Final = "wordllama"
WEIGHTS: Final = ("weights", "l2_supercat_256.safetensors")
TOKENIZER: Final = ("tokenizers", "l2_supercat_tokenizer_config.json")
MODEL: Final = "l2_supercat"
FULL_WIDTH: Final = 256
WIDTHS: Final = (64, 128, 256)
BATCH: Final = 1024


@dataclass(frozen=True)
class _Model:
    table: npt.NDArray[np.float16]  # as shipped: float32 would double its 16 MB and change no mean
    tokenizer: Any


class WordLlamaEmbedder:
    """Mean of WordLlama l2_supercat token vectors (the first `dimensions` of them), L2-normalized."""

    name = "wordllama"

    def __init__(self, dimensions: int | None = None) -> None:
        width = FULL_WIDTH if dimensions is None else dimensions
        if width not in WIDTHS:
            raise EmbedderError(
                f"dimensions: the wordllama embedder is {FULL_WIDTH} wide and can be cut to "
                f"{' or '.join(map(str, WIDTHS[:-1]))}, got {dimensions!r} "
                "(set EVENTLOOM_VECTOR_DIMENSIONS to one of these, or leave it unset)"
            )
        try:
            package_version = distribution_version(PACKAGE)
        except PackageNotFoundError as error:
            raise EmbedderError(
                "the wordllama embedder needs the `wordllama` package (a dependency of eventloom-memory)"
            ) from error
        self.dimensions = width
        # The table (the package's version and model), the pooling and the width make the vector space.
        self.version = f"{package_version}-{MODEL}-mean"

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return vectors
        model = _MODEL.get()
        table = model.table[:, : self.dimensions]
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start : start + BATCH])
            for row, encoding in enumerate(model.tokenizer.encode_batch(batch, add_special_tokens=False)):
                if encoding.ids:
                    vectors[start + row] = table[encoding.ids].mean(axis=0, dtype=np.float32)
        return unit_rows(vectors)


def _read_package() -> _Model:
    """The token table and tokenizer from the installed package."""
    try:
        from safetensors.numpy import load_file  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415
    except ImportError as error:
        raise EmbedderError(f"the wordllama embedder could not import its libraries ({error})") from error
    root = resources.files(PACKAGE)
    weights, tokenizer = root.joinpath(*WEIGHTS), root.joinpath(*TOKENIZER)
    try:
        with resources.as_file(weights) as weights_path, resources.as_file(tokenizer) as tokenizer_path:
            tensors = load_file(str(weights_path))
            loaded = Tokenizer.from_file(str(tokenizer_path))
    except (OSError, ValueError) as error:
        raise EmbedderError(f"the wordllama embedder could not read its model ({root}): {error}") from error
    if len(tensors) != 1:
        raise EmbedderError(f"the wordllama embedder expected one table in {weights}: {sorted(tensors)}")
    # The BPE model caches every "word" it splits, and this tokenizer has no pre-tokenizer: its word is the
    # whole text. The cache held ~155 MB after 150,000 distinct texts and saved no time (bench/embedders.py,
    # `rss_growth_mb`): off.
    loaded.model._resize_cache(0)
    table = next(iter(tensors.values()))
    if table.dtype != np.float16 or table.ndim != 2 or table.shape[1] != FULL_WIDTH:
        raise EmbedderError(
            f"the wordllama embedder expected a float16 table {FULL_WIDTH} wide, "
            f"got {table.dtype} {table.shape}"
        )
    return _Model(table=table, tokenizer=loaded)


_MODEL: Final = LoadedOnce(_read_package)
