"""A synthetic agent memory for the query benchmark: natural-looking word statistics, many sessions.

Words are pseudo-words drawn with a Zipf distribution (a few very common, a long tail of rare ones), as
in real text, so BM25 postings and the vector index see realistic skew. Events mix what agents log:
transcript turns, facts (entities with summaries, relations, revisions), decisions, commands, documents
with line-numbered chunks, tasks, and inferred edges. Deterministic for a seed.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Final

from eventloom.request import AppendRequest

SYLLABLES: Final = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]
VOCABULARY: Final = 4000
NAMES: Final = 2000
ENTITY_TYPES: Final = ("service", "person", "library", "dataset", "team", "incident")


class Corpus:
    def __init__(self, seed: int = 7, sessions: int = 20) -> None:
        self.rng = random.Random(seed)
        self.sessions = [f"bench-{i:03d}" for i in range(sessions)]
        pairs = itertools.product(SYLLABLES, repeat=2)
        self.words = ["".join(next(pairs)) + self.rng.choice(SYLLABLES) for _ in range(VOCABULARY)]
        self.weights = [1 / (rank + 1) for rank in range(VOCABULARY)]
        self.names = [f"{self.word()}-{self.word()}" for _ in range(NAMES)]
        self.types = {name: self.rng.choice(ENTITY_TYPES) for name in self.names}

    def word(self) -> str:
        return self.rng.choices(self.words, self.weights)[0]

    def sentence(self, low: int = 8, high: int = 24) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=self.rng.randint(low, high)))

    def name(self) -> str:
        return self.names[min(int(self.rng.paretovariate(1.2)) - 1, NAMES - 1)]

    def event(self, n: int) -> AppendRequest:
        session = self.sessions[n % len(self.sessions)]
        kind = self.rng.random()
        if kind < 0.40:
            role = "user" if n % 2 else "assistant"
            return self._request(session, "transcript.turn", {"role": role, "text": self.sentence()})
        if kind < 0.62:
            return self._request(session, "memory.fact.asserted", self._fact())
        if kind < 0.72:
            title = self.sentence(3, 6)
            return self._request(
                session,
                "decision.made",
                {"decision_id": f"d{n}", "title": title, "rationale": self.sentence()},
            )
        if kind < 0.82:
            return self._request(
                session,
                "command.completed",
                {
                    "command": f"run {self.word()} {self.word()}",
                    "exit_code": n % 3,
                    "output": self.sentence(),
                },
            )
        if kind < 0.87:
            return self._request(session, "document.indexed", self._document(n))
        if kind < 0.92:
            return self._request(session, "inference.edge.generated", self._inferred())
        return self._request(session, "task.proposed", {"task_id": f"t{n}", "title": self.sentence(3, 7)})

    def _request(self, session: str, event_type: str, payload: dict[str, Any]) -> AppendRequest:
        return AppendRequest(session=session, type=event_type, actor="agent:bench", payload=payload)

    def _fact(self) -> dict[str, Any]:
        name, other = self.name(), self.name()
        entities = [{"name": name, "entity_type": self.types[name], "summary": self.sentence(5, 14)}]
        relations = []
        if other != name and self.rng.random() < 0.5:
            entities.append({"name": other, "entity_type": self.types[other]})
            relations.append({"source": name, "target": other, "relation_type": "depends_on"})
        return {"entities": entities, "relations": relations}

    def _document(self, n: int) -> dict[str, Any]:
        lines = [self.sentence(6, 12) for _ in range(6)]
        chunks = [
            {"text": "\n".join(lines[i : i + 2]), "line_start": i + 1, "line_end": i + 2}
            for i in range(0, 6, 2)
        ]
        return {"path": f"docs/{self.word()}/{n}.md", "content": "\n".join(lines), "chunks": chunks}

    def _inferred(self) -> dict[str, Any]:
        source, target = self.name(), self.name()
        return {
            "source": source,
            "target": target if target != source else self.names[0],
            "relation_type": "related_to",
            "confidence": round(self.rng.uniform(0.3, 0.95), 2),
            "method": "co_mention_v1",
        }

    def questions(self, count: int) -> list[tuple[str, str | None]]:
        """Questions as agents ask them: about a named entity, or in words, in a session or everywhere."""
        asked: list[tuple[str, str | None]] = []
        for i in range(count):
            session = self.rng.choice(self.sessions) if i % 2 == 0 else None
            if i % 3 == 0:
                text = f"what do we know about {self.name()}?"
            elif i % 3 == 1:
                text = f"why did we {self.sentence(3, 6)}"
            else:
                text = f"{self.name()} {self.sentence(2, 5)}"
            asked.append((text, session))
        return asked
