"""The ledger's signed manifest: every session's head (seq and hash), signed by the node that mirrors.

A hash chain proves that nothing inside a session file changed, but not that its end, or the whole file, is
still there: cut the last lines, or delete the file, and what remains verifies. The mirror therefore keeps
`<ledger>/MANIFEST.json`, written after the lines it names are fsynced (so it never claims more than the
files hold) and at least once a second while events arrive. A verifier holding only the files and the
public keys then finds a lost tail (the file ends before the manifest's seq, or holds another event there)
and a lost session (the manifest names a file that is gone). Format: docs/eventloom-format.md, section 6.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Final

import msgspec

from eventloom.chain import ChainTip
from eventloom.errors import EventloomError, SignatureError
from eventloom.event import utc_timestamp
from eventloom.keys import Keyring, Signer, atomic_write

MANIFEST_NAME: Final = "MANIFEST.json"  # not *.jsonl: never taken for a session
MANIFEST_VERSION: Final = 1
_canonical = msgspec.json.Encoder(order="sorted")


class Head(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int
    hash: str


class _Signed(msgspec.Struct, frozen=True):
    """What the signature covers: everything but `sig`."""

    v: int
    written_at: str
    heads: dict[str, Head]
    key_id: str


class Manifest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    v: int
    written_at: str
    heads: dict[str, Head]
    key_id: str
    sig: str

    def digest(self) -> str:
        return _digest(_Signed(self.v, self.written_at, self.heads, self.key_id))


class ManifestError(EventloomError):
    """The manifest is unreadable or its signature does not verify."""


def _digest(signed: _Signed) -> str:
    return hashlib.sha256(_canonical.encode(signed)).hexdigest()


def manifest_path(ledger_dir: Path) -> Path:
    return ledger_dir / MANIFEST_NAME


def sign_manifest(tips: dict[str, ChainTip], signer: Signer, written_at: str | None = None) -> Manifest:
    heads = {session: Head(tip.seq, tip.hash) for session, tip in tips.items() if tip.hash is not None}
    signed = _Signed(MANIFEST_VERSION, written_at or utc_timestamp(), heads, signer.key_id)
    return Manifest(signed.v, signed.written_at, heads, signed.key_id, signer.sign_hash(_digest(signed)))


def encode_manifest(manifest: Manifest) -> bytes:
    return _canonical.encode(manifest) + b"\n"


def write_manifest(ledger_dir: Path, manifest: Manifest) -> None:
    """Atomically, and durably (the directory entry too): a crash leaves the old manifest or the new."""
    ledger_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(manifest_path(ledger_dir), encode_manifest(manifest))
    handle = os.open(ledger_dir, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def read_manifest(ledger_dir: Path, keyring: Keyring) -> Manifest | None:
    """The verified manifest; None when there is none; ManifestError when it is damaged or forged."""
    path = manifest_path(ledger_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ManifestError(f"{path}: {exc.strerror}") from None
    try:
        manifest = msgspec.json.decode(data, type=Manifest)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: not a manifest ({exc})") from None
    if manifest.v != MANIFEST_VERSION:
        raise ManifestError(f"{path}: unsupported manifest version {manifest.v}")
    try:
        keyring.verify(manifest.key_id, manifest.digest(), manifest.sig)
    except SignatureError as exc:
        raise ManifestError(f"{path}: {exc}") from None
    return manifest


def losses(manifest: Manifest, tips: dict[str, ChainTip]) -> list[str]:
    """What the files lack against the manifest, one line per session (their tips as read from disk)."""
    found = []
    for session, head in sorted(manifest.heads.items()):
        tip = tips.get(session)
        if tip is None or tip.seq == 0:
            found.append(
                f"session {session}: its file is gone (the signed manifest has it at seq {head.seq})"
            )
        elif tip.seq < head.seq:
            found.append(
                f"session {session}: the file ends at seq {tip.seq}, the signed manifest has seq {head.seq}"
            )
        elif tip.seq == head.seq and tip.hash != head.hash:
            found.append(f"session {session}: seq {head.seq} is not the event the signed manifest names")
    return found
