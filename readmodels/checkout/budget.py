"""Token budgets: a conservative estimate of how many tokens a text costs.

No tokenizer is assumed (the agent's model is unknown), so tokens are estimated from the text: one per
3 UTF-8 bytes, rounded up, plus one per line. English averages about 4 bytes per token with common
tokenizers and code or non-Latin text fewer, so the estimate overshoots, which keeps the budget a promise.
"""

from __future__ import annotations

import math

BYTES_PER_TOKEN = 3
MAX_ITEM_TOKENS = 160
"""The most a single item's text may take in a prompt (longer texts are clipped)."""


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN) + text.count("\n") + 1


def clip(text: str, max_tokens: int) -> str:
    """`text` cut at a word boundary, with an ellipsis, to at most about `max_tokens` tokens."""
    limit = max_tokens * BYTES_PER_TOKEN
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    cut = encoded[: limit - 4].decode("utf-8", "ignore")
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " …"
