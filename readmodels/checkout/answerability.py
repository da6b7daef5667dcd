"""Answerability: whether a checkout can answer its question, decided from what made it into the prompt.

- `ask_user` when no fact, snippet or task did;
- `answer_from_memory` when at least one of them was found by the exact lane or by two lanes or more (or is
  a task's state, read from the graph), unless the question attributes what it asks to someone who said
  none of it: it names a speaker of the conversation, and none of the best snippets was said by them or
  names them (LoCoMo's adversarial questions are built this way: "What did Jonah name the greyhound he
  adopted?" when Maya adopted it);
- `refresh_recommended` when a lane failed, when only inferred context was found, or when the newest
  evidence of a "now" question is older than `STALE_AFTER_DAYS`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from readmodels.checkout.model import Answerability, CheckoutRequest, InferredContext
from readmodels.retrieval.model import Hit, QueryResult

STALE_AFTER_DAYS: Final = 30
TURN_TYPE: Final = "transcript.turn"
ATTRIBUTION_SNIPPETS: Final = 3
"""How many of the best turns must not be the named speaker's for an attribution to count as wrong."""


def answerability_of(
    result: QueryResult,
    request: CheckoutRequest,
    placed: list[Hit],
    inferred: list[InferredContext],
    tasks: int = 0,
    left_out: int = 0,
) -> Answerability:
    """Whether the checkout can answer, from what made it into the prompt (`placed` hits, `inferred`
    context, `tasks` of the work state); items `left_out` for the budget are not nothing."""
    reasons: list[str] = []
    grounded = [hit for hit in placed if "exact" in hit.explanation.lanes or len(hit.explanation.lanes) >= 2]
    misattributed = _misattributed(request.text, result.hits)
    refresh = False
    if tasks:
        reasons.append(f"{tasks} task(s) from the work state the graph keeps")
    if not placed and not tasks and left_out:
        reasons.append(f"{left_out} item(s) were found but did not fit the token budget")
        refresh = True
    elif not placed and not tasks:
        reasons.append(
            "nothing in memory matches the question" + (" (only inferred context)" if inferred else "")
        )
        refresh = bool(inferred)
    elif misattributed:
        reasons.append(misattributed)
    elif grounded:
        reasons.append(f"{len(grounded)} item(s) found by the exact lane or by two lanes or more")
    else:
        reasons.append("only weak matches (one lane each): treat them as leads, not answers")
    if result.warnings:
        refresh = True
        reasons.append("some lanes failed: " + "; ".join(result.warnings))
    newest = max((hit.valid_from for hit in placed), default=None)
    if newest is not None and request.as_of is None and _older_than(newest, STALE_AFTER_DAYS):
        refresh = True
        reasons.append(f"the newest evidence is from {newest}, over {STALE_AFTER_DAYS} days ago")
    return Answerability(
        answer_from_memory=(bool(grounded) or tasks > 0) and not misattributed,
        refresh_recommended=refresh,
        ask_user=not placed and not tasks and not left_out,
        reasons=reasons,
    )


def _misattributed(question: str, hits: list[Hit]) -> str | None:
    """Why the question's speaker cannot be the one who said what matched, or None.

    Speakers are the titles of the turns found; a speaker is named when the question has their name as
    a whole word. Only the best `ATTRIBUTION_SNIPPETS` turns are looked at, and a turn that names the
    speaker counts as theirs (it is about them).
    """
    turns = [hit for hit in hits if hit.kind == "event" and hit.type == TURN_TYPE and hit.entity]
    speakers = {hit.entity for hit in turns}
    named = {name for name in speakers if _names(question, name)}
    best = turns[:ATTRIBUTION_SNIPPETS]
    if not named or not best or len(named) == len(speakers):
        return None
    for hit in best:
        if hit.entity in named or any(_names(hit.summary, name) for name in named):
            return None
    said_by = ", ".join(sorted({hit.entity for hit in best}))
    return (
        f"the question is about {', '.join(sorted(named))}, but what matches was said by {said_by}: "
        "memory may not hold this about them"
    )


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def _older_than(ts: str, days: int) -> bool:
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return False
    return datetime.now(UTC) - moment > timedelta(days=days)
