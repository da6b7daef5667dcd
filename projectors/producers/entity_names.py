"""Names of entities, compared: normalisation, blocking keys and character n-gram similarity (pure).

- `normalise("Auth-Service")`, `normalise("auth_service")` and `normalise(" auth  service. ")` are all
  `"auth service"`: Unicode NFKC, case folded, every run of characters that are not letters or digits
  (hyphens, underscores, dots, spaces) one space. `name_key` drops the spaces too, so "AuthService" and
  "IdP" / "IDP" / "idp" meet as well (`authservice`, `idp`): that is what "the same name" means.
- `similarity(a, b)` is the cosine of the two names' character trigram count vectors, over the
  normalised names padded with one space at each end (so "auth" and "author" differ at the word's end).
  It is exact arithmetic on counts: the same names give the same number on every machine.
- `blocking_keys(normalised)` are the first and the last three characters of the name without spaces:
  only names sharing one of them are compared, which keeps each comparison set small and bounded (a
  typo in both the first and the last three characters is not found; that is the price of the bound).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Final

GRAM: Final = 3
SIMILAR: Final = 0.8
"""Cosine of trigram vectors at or above which two names of one type are proposed as the same entity.

Chosen on the fixtures of tests/test_entity_resolution.py: spelling variants of one entity score
0.83-0.92 ("postgres database" / "postgress database" 0.92, "payment service" / "payments service" 0.84,
"kubernetes cluster" / "kubernetes clustr" 0.86, "ledger mirror" / "ledger mirrors" 0.89), distinct
entities that share words at most 0.75 ("user service" / "order service" 0.74, "auth service" /
"auth server" 0.70, "redis cache" / "redis cluster" 0.50). Word variants that are other things pass too
("search index" / "search indexer" 0.85): such a proposal waits for a reviewer, with a lower confidence."""
_NOT_WORD: Final = re.compile(r"[\W_]+", re.UNICODE)


def normalise(name: str) -> str:
    """The name in the form two spellings of one entity share (see the module's docstring)."""
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()


def name_key(name: str) -> str:
    """The normalised name without spaces: two names with equal keys are spellings of one name."""
    return normalise(name).replace(" ", "")


def trigrams(normalised: str) -> Counter[str]:
    padded = f" {normalised} "
    return Counter(padded[i : i + GRAM] for i in range(max(1, len(padded) - GRAM + 1)))


def similarity(a: str, b: str) -> float:
    """Cosine of the trigram count vectors of two normalised names, in [0, 1]."""
    left, right = trigrams(a), trigrams(b)
    dot = sum(count * right[gram] for gram, count in left.items())
    norm = math.sqrt(sum(c * c for c in left.values())) * math.sqrt(sum(c * c for c in right.values()))
    return dot / norm if norm else 0.0


def blocking_keys(normalised: str) -> tuple[str, ...]:
    """The blocks a name is compared within: `p:<first three>` and `s:<last three>` of it without spaces."""
    compact = normalised.replace(" ", "")
    if not compact:
        return ()
    return tuple(dict.fromkeys((f"p:{compact[:GRAM]}", f"s:{compact[-GRAM:]}")))
