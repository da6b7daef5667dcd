"""Bearer tokens for the HTTP gateway: who may call, with which role, on which sessions.

Tokens live in a JSON file (mode 0600) as SHA-256 digests, never in clear: a token is 32 random bytes, so a
fast digest is enough (there is nothing to brute-force) and a leaked file grants nothing. Every presented
token is compared against every entry in constant time, so timing says nothing about which entry is close.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import logging
import re
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import msgspec

from eventloom.errors import EventloomError
from eventloom.keys import atomic_write

log = logging.getLogger(__name__)
Role = Literal["agent", "admin"]
TOKEN_PREFIX: Final = "elt_"  # noqa: S105 (a prefix that makes leaked tokens greppable, not a secret)
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!-]{1,128}$")
_TOOLSET = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_ACTOR_PATTERN = re.compile(r"^[^\x00-\x1f]{1,256}$")
_RELOAD_EVERY_S: Final = 1.0


class TokenFileError(EventloomError):
    """The tokens file is unreadable or an entry is invalid; the message names the entry and field."""


class Principal(msgspec.Struct, frozen=True):
    """Who is calling: a token's name, its role, the session patterns it may touch, the actor patterns
    it may append as, and whether it may review derived memory (`may_review`; an admin always may)."""

    name: str
    role: Role
    sessions: tuple[str, ...]
    actors: tuple[str, ...] = ("*",)
    may_review: bool = False
    toolsets: tuple[str, ...] | None = None  # None: the server's (EVENTLOOM_MCP_TOOLSETS)

    @property
    def reviewer(self) -> bool:
        """May review consolidation candidates and `same_as` edges (verdicts, promotion, retraction)."""
        return self.role == "admin" or self.may_review

    def may_act_as(self, actor: str) -> bool:
        return any(fnmatch.fnmatchcase(actor, pattern) for pattern in self.actors)

    @property
    def unrestricted(self) -> bool:
        return "*" in self.sessions

    def may_touch(self, session: str | None) -> bool:
        """`None` stands for "every session" (a question without a session), so only `*` allows it."""
        if session is None:
            return self.unrestricted
        return any(fnmatch.fnmatchcase(session, pattern) for pattern in self.sessions)


LOCAL_OPERATOR: Final = Principal("local", "admin", ("*",))
"""The stdio server's caller: the user who started it on their own data dir."""


def default_actors(name: str, role: Role) -> list[str]:
    """What a token may append as when it names no actors: an admin anything, an agent its own names."""
    return ["*"] if role == "admin" else [f"mcp:{name}", f"agent:{name}"]


class TokenEntry(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    sha256: str
    role: Role
    sessions: list[str]
    created_at: str
    actors: list[str] | None = None  # None (files written before actors existed): `default_actors`
    may_review: bool = False  # review rights (consolidation verdicts, promotions, retractions)
    toolsets: list[str] | None = None  # the MCP toolsets it sees; None: the server's

    @property
    def actor_patterns(self) -> list[str]:
        return self.actors if self.actors is not None else default_actors(self.name, self.role)

    def check(self, where: str) -> None:
        if not _NAME.match(self.name):
            raise TokenFileError(f"{where}.name: expected 1-64 of letters, digits and _.:-")
        if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise TokenFileError(f"{where}.sha256: expected 64 lowercase hex digits")
        if not self.sessions:
            raise TokenFileError(f"{where}.sessions: expected at least one session pattern")
        for index, pattern in enumerate(self.sessions):
            if not _PATTERN.match(pattern):
                raise TokenFileError(f"{where}.sessions[{index}]: not a session pattern: {pattern!r}")
        if self.actors is not None and not self.actors:
            raise TokenFileError(f"{where}.actors: expected at least one actor pattern")
        for index, pattern in enumerate(self.actors or []):
            if not _ACTOR_PATTERN.match(pattern):
                raise TokenFileError(f"{where}.actors[{index}]: not an actor pattern: {pattern!r}")
        if self.toolsets is not None and not self.toolsets:
            raise TokenFileError(f"{where}.toolsets: expected at least one toolset name")
        for index, name in enumerate(self.toolsets or []):
            if not _TOOLSET.match(name):
                raise TokenFileError(f"{where}.toolsets[{index}]: not a toolset name: {name!r}")


class TokenFile(msgspec.Struct, kw_only=True):
    tokens: list[TokenEntry] = msgspec.field(default_factory=list)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def read_tokens(path: Path) -> TokenFile:
    """The file's entries (none when it does not exist yet)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return TokenFile()
    except OSError as exc:
        raise TokenFileError(f"{path}: {exc}") from None
    try:
        tokens = msgspec.json.decode(data, type=TokenFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TokenFileError(f"{path}: {exc}") from None
    for index, entry in enumerate(tokens.tokens):
        entry.check(f"tokens[{index}]")
    return tokens


def _write_tokens(path: Path, tokens: TokenFile) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, msgspec.json.format(msgspec.json.encode(tokens), indent=2) + b"\n", mode=0o600)


def add_token(
    path: Path,
    name: str,
    role: Role,
    sessions: list[str],
    actors: list[str] | None = None,
    *,
    may_review: bool = False,
    toolsets: list[str] | None = None,
) -> str:
    """Store a new token's digest and return the token itself: the only time it is ever shown."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    entry = TokenEntry(
        name=name,
        sha256=digest(token),
        role=role,
        sessions=sessions,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        actors=actors or default_actors(name, role),
        may_review=may_review,
        toolsets=toolsets,
    )
    entry.check("token")
    tokens = read_tokens(path)
    if any(existing.name == name for existing in tokens.tokens):
        raise TokenFileError(f"name: a token named {name!r} exists; revoke it first")
    tokens.tokens.append(entry)
    _write_tokens(path, tokens)
    return token


def revoke_token(path: Path, name: str) -> bool:
    tokens = read_tokens(path)
    kept = [entry for entry in tokens.tokens if entry.name != name]
    if len(kept) == len(tokens.tokens):
        return False
    _write_tokens(path, TokenFile(tokens=kept))
    return True


class TokenBook:
    """The tokens file, re-read when it changes (at most once a second), so `tokens add` needs no restart."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[TokenEntry] = []
        self._stamp: tuple[int, int] | None = None
        self._checked_at = float("-inf")

    def principal(self, token: str) -> Principal | None:
        """The principal of `token`, or None. Blocking (stats the file): call it from a thread."""
        self._refresh()
        presented = digest(token).encode()
        found: TokenEntry | None = None
        for entry in self._entries:  # no early exit: every entry costs the same
            if hmac.compare_digest(presented, entry.sha256.encode()):
                found = entry
        if found is None:
            return None
        return Principal(
            found.name,
            found.role,
            tuple(found.sessions),
            tuple(found.actor_patterns),
            may_review=found.may_review,
            toolsets=tuple(found.toolsets) if found.toolsets is not None else None,
        )

    def count(self) -> int:
        self._refresh()
        return len(self._entries)

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked_at < _RELOAD_EVERY_S:
            return
        self._checked_at = now
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._entries, self._stamp = [], None
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._entries = read_tokens(self.path).tokens
            except TokenFileError as exc:  # fail closed: a damaged file admits nobody, it never half-admits
                log.error("refusing every token until the tokens file is fixed: %s", exc)
                self._entries = []


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
