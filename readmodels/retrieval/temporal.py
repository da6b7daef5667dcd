"""The time a question asks about: the newest state of things, the earliest, or no time at all.

"What is the memory usage now?", "which database do we use currently?", "what did I last say about X?"
want the newest evidence when several say different things; "what did I first plan?" wants the oldest.
Cues are English words and phrases, matched whole and case-insensitively; a question with cues of both
kinds (or none) has no time intent. The calibrated fusion turns the intent into a signed recency feature.
"""

from __future__ import annotations

import re
from typing import Final

LATEST: Final = 1
EARLIEST: Final = -1
NONE: Final = 0
_LATEST_CUES: Final = re.compile(
    r"\b(now|current|currently|latest|last|lately|recent|recently|newest|updated|today|"
    r"these days|anymore|still|so far|most recent|at the moment|at present)\b",
    re.IGNORECASE,
)
_EARLIEST_CUES: Final = re.compile(
    r"\b(first|initially|initial|originally|original|earliest|at the start|in the beginning|"
    r"to begin with|at first|used to)\b",
    re.IGNORECASE,
)


def time_intent(text: str) -> int:
    """`LATEST`, `EARLIEST` or `NONE` for a question."""
    latest = bool(_LATEST_CUES.search(text))
    earliest = bool(_EARLIEST_CUES.search(text))
    if latest == earliest:
        return NONE
    return LATEST if latest else EARLIEST
