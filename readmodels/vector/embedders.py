"""Embedders: text to unit vectors, each vector tagged with the embedder, its version and its width.

Vectors of different tags are never compared: a tag names a vector space. Built in: `wordllama`, the
default (static token embeddings, `readmodels.vector.static`), and `hash`, deterministic and
dependency-free (below), for tests. Others are plug-ins: an entry point in the group
`eventloom.embedders` whose object, called with `dimensions` (or `None` for the embedder's own width),
returns an `Embedder`.

The `hash` embedder (version 1) is feature hashing over words and word pairs:

1. Lower-case the text and split it into words (`\\w+`, Unicode).
2. Features are every word (weight 1.0) and every pair of adjacent words joined by a space (weight 0.5).
3. For each feature, `h` = the first 8 bytes of BLAKE2b(feature, UTF-8), as a big-endian unsigned integer;
   add `weight` (if the top bit of `h` is 0) or `-weight` (if it is 1) to component `h mod dimensions`.
4. Divide by the Euclidean norm (a text without words stays the zero vector).

Texts sharing words (and word order) point the same way, so cosine similarity is a lexical-overlap
score that needs no model: no semantics at all, which is what tests that want exact, explainable
similarities need; memory that should find paraphrases uses a real model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import re
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, Final, Generic, Protocol, TypeAlias, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from eventloom.settings import Settings

EMBEDDERS_GROUP: Final = "eventloom.embedders"
DEFAULT_DIMENSIONS: Final = 384
MAX_DIMENSIONS: Final = 4096
_WORD: Final = re.compile(r"\w+", re.UNICODE)
Vectors: TypeAlias = npt.NDArray[np.float32]
T = TypeVar("T")


class EmbedderError(Exception):
    """An embedder could not be found or made."""


class VectorSpaceError(EmbedderError):
    """A vector store holds vectors of another embedder than the configured one: they cannot be compared."""

    def __init__(self, store: str, found: list[str], configured: str) -> None:
        super().__init__(
            f"{store} holds vectors of {', '.join(found)}, not of the configured embedder {configured}: "
            "a store never compares two vector spaces; run `eventloom rebuild vector` to re-embed "
            "everything with the configured embedder (or configure the embedder that built it)"
        )
        self.found = found
        self.configured = configured


@runtime_checkable
class Embedder(Protocol):
    name: str
    version: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, `dimensions` wide, each of unit length (or zero for an empty text)."""
        ...


class LoadedOnce(Generic[T]):
    """A model loaded on first use, once per process, whichever thread asks first (under a lock)."""

    def __init__(self, load: Callable[[], T]) -> None:
        self._load = load
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._load()
        return self._value


def absent_modules(modules: Sequence[str]) -> list[str]:
    """The modules among `modules` that cannot be imported here (an extra's, before loading it)."""
    absent = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            absent.append(module)
    return absent


def unit_rows(vectors: Vectors) -> Vectors:
    """`vectors` with every row divided by its Euclidean norm, in place (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


def tag(embedder: Embedder) -> str:
    """The vector space an embedder's vectors live in: `name@version/dimensions`."""
    return f"{embedder.name}@{embedder.version}/{embedder.dimensions}"


def _check_dimensions(dimensions: int) -> int:
    if not isinstance(dimensions, int) or not 8 <= dimensions <= MAX_DIMENSIONS:
        raise EmbedderError(f"dimensions: expected an integer from 8 to {MAX_DIMENSIONS}, got {dimensions!r}")
    return dimensions


class HashEmbedder:
    """Feature hashing of words and word pairs (see the module's documentation for the exact algorithm)."""

    name = "hash"
    version = "1"

    def __init__(self, dimensions: int | None = None) -> None:
        self.dimensions = _check_dimensions(DEFAULT_DIMENSIONS if dimensions is None else dimensions)

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            features = [(word, 1.0) for word in words]
            features += [(f"{a} {b}", 0.5) for a, b in itertools.pairwise(words)]
            for feature, weight in features:
                h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
                vectors[row, h % self.dimensions] += -weight if h >> 63 else weight
        return unit_rows(vectors)


def available_embedders() -> list[str]:
    return sorted(entry.name for entry in entry_points(group=EMBEDDERS_GROUP))


def configured_embedder(settings: Settings) -> Embedder:
    """The embedder the settings name, at their width (`None`: the embedder's own)."""
    return load_embedder(settings.embedder, settings.vector_dimensions)


def vector_width(settings: Settings) -> int:
    """The width of the configured vector space (what Neo4j's vector indexes are created with)."""
    return configured_embedder(settings).dimensions


def load_embedder(name: str, dimensions: int | None = None) -> Embedder:
    """The embedder registered as `name` (`hash` is built in), at `dimensions` when it supports a choice."""
    entries = {entry.name: entry for entry in entry_points(group=EMBEDDERS_GROUP)}
    entry = entries.get(name)
    if entry is None:
        raise EmbedderError(f"no embedder named {name!r} (available: {', '.join(sorted(entries)) or 'none'})")
    factory: Any = entry.load()
    embedder = factory(dimensions)
    if not isinstance(embedder, Embedder):
        raise EmbedderError(f"embedder {name!r}: its entry point did not return an Embedder")
    return embedder
