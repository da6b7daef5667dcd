"""A lexical pre-check for operator Cypher: exactly one statement, and no transaction control.

The real guard is the read-only transaction the backend runs the statement in; this check only stops a
statement from ending that transaction itself (`COMMIT; CREATE ...`), which a read-only transaction
cannot prevent on every engine.
"""

from __future__ import annotations

import re
from typing import Final

from readmodels.graph.protocol import ReadOnlyQueryError

_TRANSACTION_CONTROL: Final = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|CHECKPOINT)\b", re.IGNORECASE)


def _code_only(cypher: str) -> str:
    """The statement with string literals, quoted names and comments blanked out (same length)."""
    out: list[str] = []
    i, n = 0, len(cypher)
    while i < n:
        char = cypher[i]
        if char in "'\"`":
            end = i + 1
            while end < n and cypher[end] != char:
                end += 2 if cypher[end] == "\\" and char != "`" else 1
            out.append(" " * (min(end, n - 1) - i + 1))
            i = end + 1
        elif cypher.startswith("//", i):
            end = cypher.find("\n", i)
            end = n if end == -1 else end
            out.append(" " * (end - i))
            i = end
        elif cypher.startswith("/*", i):
            end = cypher.find("*/", i + 2)
            end = n if end == -1 else end + 2
            out.append(" " * (end - i))
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def single_read_statement(cypher: str) -> str:
    """`cypher` without a trailing `;`, or `ReadOnlyQueryError` for several statements or none."""
    code = _code_only(cypher)
    statements = [part for part in code.split(";") if part.strip()]
    if not statements:
        raise ReadOnlyQueryError("empty query")
    if len(statements) > 1:
        raise ReadOnlyQueryError("one statement per query: graph queries are read-only")
    if _TRANSACTION_CONTROL.match(code):
        raise ReadOnlyQueryError("transaction control is not allowed: graph queries are read-only")
    last = code.rstrip()
    return cypher[: len(last) - 1] if last.endswith(";") else cypher
