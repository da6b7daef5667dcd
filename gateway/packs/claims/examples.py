"""One example payload of each claims event type, for agents (`eventloom.describe_event_types`)."""

from __future__ import annotations

from typing import Any, Final

CLAIMS_EXAMPLES: Final[dict[str, dict[str, Any]]] = {
    "claims.observation.recorded": {
        "content": "Alice lives in Paris.",
        "source": "chat",
        "mentions": ["Alice", "Paris"],
        "triples": [{"subject": "Alice", "predicate": "LIVES_IN", "object": "Paris"}],
        "extracted_by": "deterministic",
    },
    "claims.claim.asserted": {
        "subject": "Alice",
        "predicate": "LIVES_IN",
        "object": "Paris",
        "confidence": 0.7,
        "source_agent": "agent:researcher",
        "basis": [
            {
                "session": "chat-1",
                "seq": 1,
                "hash": "5f0c8e1bd4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7",
            }
        ],
        "statement": "Alice said she lives in Paris.",
    },
    "claims.claim.resolved": {
        "subject": "Alice",
        "predicate": "LIVES_IN",
        "object": "Paris",
        "confidence": 0.9,
        "source_agent": "agent:reviewer",
        "basis": [
            {
                "session": "chat-1",
                "seq": 1,
                "hash": "5f0c8e1bd4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7",
            }
        ],
        "supersedes": [
            {
                "session": "chat-2",
                "seq": 4,
                "hash": "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
            }
        ],
        "reason": "She moved back to Paris in May.",
    },
    "claims.claim.accepted": {
        "claim": {
            "session": "chat-1",
            "seq": 2,
            "hash": "0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c",
        },
        "reviewer": "alice",
        "reason": "Checked with her.",
    },
}
"""One valid payload per type: the first example of its section in docs/event-types.md (a test keeps the
two equal)."""
