"""A cluster electing a leader, as a test stands it in: the 503 JetStream answers meanwhile."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import nats.js.errors

from eventloom.bus.transient import JETSTREAM_UNAVAILABLE


def electing_once(call: Callable[..., Awaitable[Any]], refusals: list[int]) -> Callable[..., Awaitable[Any]]:
    """`call`, except that its first call raises 503 "JetStream system temporarily unavailable" (counted in
    `refusals`), as while a cluster elects a leader."""

    async def electing(*args: Any, **kwargs: Any) -> Any:
        if refusals[0] == 0:
            refusals[0] += 1
            raise nats.js.errors.ServiceUnavailableError(
                code=503,
                err_code=JETSTREAM_UNAVAILABLE,
                description="JetStream system temporarily unavailable",
            )
        return await call(*args, **kwargs)

    return electing
