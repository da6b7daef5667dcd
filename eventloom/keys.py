"""Ed25519 signing keys in the data dir, and the keyring of public keys trusted for verification."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from nacl.bindings import crypto_sign, crypto_sign_open, crypto_sign_seed_keypair
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey

from eventloom.errors import EventloomError, SignatureError, UnknownKeyError


def b64url(data: bytes) -> str:
    """RFC 4648 section 5 base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id_of(public_key: bytes) -> str:
    """First 16 hex of sha256(raw 32-byte public key)."""
    return hashlib.sha256(public_key).hexdigest()[:16]


class VerifiedSignatures:
    """Signatures this process has already verified, so that the node's consumers, which all read the same
    events, pay for each Ed25519 verification once instead of once per consumer.

    Only successes are kept, under a digest of everything the verification covered (public key, signed
    bytes, signature): a hit means these exact bytes verified with this exact key. Bounded; the oldest go
    first."""

    def __init__(self, capacity: int = 65_536) -> None:
        self._capacity = capacity
        self._seen: dict[bytes, None] = {}
        self._lock = threading.Lock()

    @staticmethod
    def digest(public_key: bytes, signed: bytes, signature: bytes) -> bytes:
        return hashlib.blake2b(public_key + signed + signature, digest_size=16).digest()

    def __contains__(self, digest: object) -> bool:
        return digest in self._seen

    def add(self, digest: bytes) -> None:
        with self._lock:
            self._seen[digest] = None
            while len(self._seen) > self._capacity:
                del self._seen[next(iter(self._seen))]

    def __len__(self) -> int:
        return len(self._seen)


VERIFIED = VerifiedSignatures()


class TrustedKey(msgspec.Struct, frozen=True):
    key_id: str
    public_key: str
    added_at: str
    comment: str = ""


class _KeyringFile(msgspec.Struct):
    keys: list[TrustedKey] = msgspec.field(default_factory=list)


class Keyring:
    """Public keys whose signatures verification accepts; any of them, so keys can rotate."""

    def __init__(self, keys: list[TrustedKey] | None = None) -> None:
        self._keys: dict[str, TrustedKey] = {}
        self._public: dict[str, bytes] = {}
        for key in keys or []:
            self.add(key)

    def add(self, key: TrustedKey) -> None:
        raw = b64url_decode(key.public_key)
        if len(raw) != 32 or key_id_of(raw) != key.key_id:
            raise SignatureError(f"keyring: key {key.key_id} does not match its public key")
        self._keys[key.key_id] = key
        self._public[key.key_id] = raw

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    @property
    def keys(self) -> list[TrustedKey]:
        return list(self._keys.values())

    def verify(self, key_id: str, event_hash: str, sig: str) -> None:
        """Raise UnknownKeyError or SignatureError unless `sig` signs the 32 raw hash bytes."""
        public_key = self._public.get(key_id)
        if public_key is None:
            raise UnknownKeyError(key_id)
        try:
            raw = b64url_decode(sig)
            if len(raw) != 64 or b64url(raw) != sig:  # one event, one spelling of its signature
                raise SignatureError("sig: not the unpadded base64url of a 64-byte Ed25519 signature")
            signed = bytes.fromhex(event_hash)
            digest = VerifiedSignatures.digest(public_key, signed, raw)
            if digest in VERIFIED:
                return
            crypto_sign_open(raw + signed, public_key)  # releases the GIL
            VERIFIED.add(digest)
        except (BadSignatureError, ValueError, binascii.Error):
            raise SignatureError(f"sig: signature does not verify with key {key_id}") from None


class Signer:
    """The node's active private key."""

    def __init__(self, signing_key: SigningKey) -> None:
        self._key = signing_key
        self.public_key, self._secret = crypto_sign_seed_keypair(bytes(signing_key))
        self.key_id = key_id_of(self.public_key)

    def sign_hash(self, event_hash: str) -> str:
        return self.sign_digest(bytes.fromhex(event_hash))

    def sign_digest(self, digest: bytes) -> str:
        """Signature over the 32 raw hash bytes (libsodium directly: this is on every append's path)."""
        return b64url(crypto_sign(digest, self._secret)[:64])

    def sign_digests(self, digests: list[bytes]) -> list[str]:
        secret = self._secret
        return [b64url(crypto_sign(digest, secret)[:64]) for digest in digests]


class KeyStore:
    """`<data>/keys/`: private seeds (0600) in `private/`, the active key id, and `keyring.json`."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "keys"
        self.private_dir = self.root / "private"
        self.keyring_path = self.root / "keyring.json"
        self.active_path = self.root / "active"

    def load_keyring(self) -> Keyring:
        if not self.keyring_path.exists():
            return Keyring()
        parsed = msgspec.json.decode(self.keyring_path.read_bytes(), type=_KeyringFile)
        return Keyring(parsed.keys)

    def active_signer(self) -> Signer:
        """The active key, generated on first use."""
        if not self.active_path.exists():
            return self.new_key(comment="generated on first use")
        key_id = self.active_path.read_text().strip()
        seed_path = self.private_dir / f"{key_id}.key"
        try:
            seed = seed_path.read_bytes()
        except FileNotFoundError:
            raise EventloomError(
                f"{self.active_path} names key {key_id}, but {seed_path} is missing: restore it from your "
                "backup, or make a new key (`eventloom keys new`; events signed by the old one still verify "
                "while its public key stays in the keyring)"
            ) from None
        return Signer(SigningKey(bytes.fromhex(seed.decode().strip())))

    def new_key(self, comment: str = "") -> Signer:
        """Generate a key, trust it, and make it the one new events are signed with."""
        signer = Signer(SigningKey.generate())
        self.private_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        os.chmod(self.private_dir, 0o700)
        seed_path = self.private_dir / f"{signer.key_id}.key"
        fd = os.open(seed_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(bytes(signer._key).hex() + "\n")
        self.trust(TrustedKey(signer.key_id, b64url(signer.public_key), _now(), comment))
        atomic_write(self.active_path, (signer.key_id + "\n").encode())
        return signer

    def trust(self, key: TrustedKey) -> None:
        keyring = self.load_keyring()
        keyring.add(key)
        self.root.mkdir(parents=True, exist_ok=True)
        data = msgspec.json.format(msgspec.json.encode(_KeyringFile(keyring.keys)), indent=2)
        atomic_write(self.keyring_path, data + b"\n")

    def active_key_id(self) -> str | None:
        return self.active_path.read_text().strip() if self.active_path.exists() else None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` whole (fsynced), created with `mode` so a secret is never readable."""

    def write(tmp: Path) -> None:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    replace_atomically(path, write)


def replace_atomically(path: Path, make: Callable[[Path], object]) -> None:
    """`make` a file (or a link) under a name no other process or thread uses, then rename it over `path`.
    Two writers at once each rename a whole one of their own; neither finds the other's half-made one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        make(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
