"""How the document lanes' scores spread over the documents in scope, for the gated fusion.

Asked of the stores that can say (`DocumentSpread`) alongside the lanes' searches; a store that cannot,
fails or times out is left out, and the fusion estimates its spread from the lane's own candidates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from readmodels.documents import ScoreSpread
from readmodels.retrieval.protocol import DocumentSpread


async def lane_spreads(
    stores: Mapping[str, object],
    text: str,
    *,
    session: str | None,
    as_of: str | None,
    wanted: Sequence[str],
    timeout_s: float,
) -> dict[str, ScoreSpread | None]:
    """The spread of each wanted lane whose store (`stores[lane]`) can measure it."""
    asked: dict[str, DocumentSpread] = {}
    for lane, store in stores.items():
        if lane in wanted and isinstance(store, DocumentSpread):
            asked[lane] = store
    found = await asyncio.gather(
        *(
            asyncio.wait_for(store.spread(text, session=session, as_of=as_of), timeout_s)
            for store in asked.values()
        ),
        return_exceptions=True,
    )
    return {lane: s for lane, s in zip(asked, found, strict=True) if isinstance(s, ScoreSpread)}
