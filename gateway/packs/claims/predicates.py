"""A relation as a person or a model writes it ("lives in", "works-at", `LIVES_IN`) -> its `Predicate`."""

from __future__ import annotations

import re
from typing import Final

from gateway.packs.claims.events import PREDICATE, RESERVED_PREDICATES

NEGATIONS: Final = frozenset({"not", "no", "never", "nor", "neither", "dont", "doesnt", "isnt", "without"})
"""Words a predicate must not hold: a negated claim says so with `negated`, not with its predicate."""
_SEPARATORS: Final = re.compile(r"[\s_\-]+")
_WORD: Final = re.compile(r"[a-z][a-z0-9]*")
_PREDICATE: Final = re.compile(PREDICATE)


def normalise_predicate(text: str) -> str:
    """`text` in UPPER_SNAKE_CASE; a ValueError saying why when it is not a relation."""
    words = [w for w in _SEPARATORS.split(text.strip().casefold().replace("'", "")) if w]
    if not words or not all(_WORD.fullmatch(w) for w in words):
        raise ValueError(f"{text!r} is not a relation: use words of letters and digits, e.g. 'lives in'")
    if NEGATIONS & set(words):
        raise ValueError(f"{text!r} holds a negation: state the positive relation and set `negated`")
    predicate = "_".join(words).upper()
    if not _PREDICATE.fullmatch(predicate):
        raise ValueError(f"{text!r} is not a relation: at most 64 characters in UPPER_SNAKE_CASE")
    if predicate in RESERVED_PREDICATES:
        raise ValueError(f"{predicate} is one of the pack's own relationship types, not a relation")
    return predicate
