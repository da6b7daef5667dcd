"""The node's consumers all read the same events: each signature is verified once per process, and a
remembered success never vouches for other bytes, another signature or another key."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from nacl.bindings import crypto_sign_open
from nacl.signing import SigningKey

from eventloom import keys
from eventloom.errors import SignatureError
from eventloom.keys import Keyring, Signer, TrustedKey, VerifiedSignatures, b64url


def trusted(signer: Signer) -> TrustedKey:
    return TrustedKey(signer.key_id, b64url(signer.public_key), datetime.now(UTC).isoformat())


def event_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every signed message libsodium is asked to check, in a fresh cache."""
    calls: list[bytes] = []

    def counting(signed: bytes, public_key: bytes) -> bytes:
        calls.append(signed)
        return crypto_sign_open(signed, public_key)

    monkeypatch.setattr(keys, "crypto_sign_open", counting)
    monkeypatch.setattr(keys, "VERIFIED", VerifiedSignatures())
    return calls


def test_a_signature_is_checked_once_for_every_keyring_of_the_process(opened: list[bytes]) -> None:
    signer = Signer(SigningKey.generate())
    digest = event_hash("one event")
    sig = signer.sign_hash(digest)
    for _consumer in range(8):
        Keyring([trusted(signer)]).verify(signer.key_id, digest, sig)
    assert len(opened) == 1


def test_a_remembered_success_vouches_for_nothing_else(opened: list[bytes]) -> None:
    signer, other = Signer(SigningKey.generate()), Signer(SigningKey.generate())
    keyring = Keyring([trusted(signer), trusted(other)])
    digest = event_hash("signed")
    sig = signer.sign_hash(digest)
    keyring.verify(signer.key_id, digest, sig)

    with pytest.raises(SignatureError, match="does not verify"):
        keyring.verify(signer.key_id, event_hash("other bytes"), sig)
    with pytest.raises(SignatureError, match="does not verify"):
        keyring.verify(other.key_id, digest, sig)
    with pytest.raises(SignatureError, match="does not verify"):
        keyring.verify(signer.key_id, digest, signer.sign_hash(event_hash("x"))[:-2] + "AA")
    assert len(opened) == 4


def test_a_failure_is_never_remembered(opened: list[bytes]) -> None:
    signer = Signer(SigningKey.generate())
    keyring = Keyring([trusted(signer)])
    digest = event_hash("tampered")
    forged = Signer(SigningKey.generate()).sign_hash(digest)
    for _attempt in range(2):
        with pytest.raises(SignatureError):
            keyring.verify(signer.key_id, digest, forged)
    assert len(opened) == 2
    assert len(keys.VERIFIED) == 0


def test_the_memory_of_successes_is_bounded_oldest_first() -> None:
    seen = VerifiedSignatures(capacity=3)
    digests = [VerifiedSignatures.digest(b"k" * 32, bytes([n]) * 32, b"s" * 64) for n in range(5)]
    for digest in digests:
        seen.add(digest)
    assert len(seen) == 3
    assert [digest in seen for digest in digests] == [False, False, True, True, True]
