"""Who may do what on the bus: one NATS user per role, with passwords generated into the data dir.

The embedded server accepts no anonymous client. `admin` (the node itself and the operator's CLI) may do
anything; every other role gets what its process needs and no more:

| role | publishes events | asks queries | answers queries | consumes, acks, dead-letters |
|---|---|---|---|---|
| `gateway` | yes | yes | no | yes (replay, verify) |
| `producer` | yes (derived events) | no | no | yes |
| `query` | no | no | yes | yes (its projectors) |
| `projector` | no | no | no | yes |

Every role may publish its heartbeat on `eventloom_peers.<id>` (and into the `EVENTLOOM_PEERS` bucket, like
any KV bucket but the admin's) and subscribe to everyone's (docs/operations.md#peers).

No role but `admin` may create, update, delete or purge the event stream, delete a message from it, delete
or purge any stream, delete the ledger mirror's consumer, or clear a quarantine. A role's password is handed
to its process as `EVENTLOOM_NATS_USER` / `EVENTLOOM_NATS_PASSWORD` (`eventloom nats credentials ROLE`);
an external NATS cluster gets the same users from `eventloom nats config` (see docs/security.md).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from eventloom.bus.peers import PEERS_SUBJECT_ROOT
from eventloom.bus.stream import DLQ_SUBJECT_ROOT, SUBJECT_ROOT
from eventloom.errors import EventloomError
from eventloom.keys import atomic_write

ROLES: Final = ("admin", "gateway", "producer", "query", "projector")
QUERY_SUBJECTS: Final = f"{SUBJECT_ROOT}.q.>"
EVENT_SUBJECTS: Final = f"{SUBJECT_ROOT}.*.*"  # <root>.<partition>.<session>
HEALTH_SUBJECT: Final = f"{SUBJECT_ROOT}.q.memory.health"  # every role's healthcheck may ask this one
ADMIN_ONLY_BUCKETS: Final = ("EVENTLOOM_QUARANTINE",)
PEER_SUBJECTS: Final = f"{PEERS_SUBJECT_ROOT}.*"  # every process's heartbeat: every role sends and watches


@dataclass(frozen=True)
class NatsCredentials:
    user: str
    password: str


def credentials_path(data_dir: Path) -> Path:
    return data_dir / "nats" / "credentials.json"


def ensure_passwords(data_dir: Path) -> dict[str, str]:
    """Every role's password, generated (mode 0600) on first use and kept."""
    path = credentials_path(data_dir)
    existing = read_passwords(path)
    if existing is not None and set(ROLES) <= set(existing):
        return existing
    passwords = {role: (existing or {}).get(role) or secrets.token_urlsafe(32) for role in ROLES}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps(passwords, indent=2).encode() + b"\n", mode=0o600)
    return passwords


def read_passwords(path: Path) -> dict[str, str] | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=dict[str, str])
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventloomError(f"{path}: not a readable credentials file ({exc})") from None


def role_credentials(data_dir: Path, role: str) -> NatsCredentials | None:
    """`role`'s user and password from the data dir's credentials file, if it has them."""
    passwords = read_passwords(credentials_path(data_dir))
    if passwords is None or role not in passwords:
        return None
    return NatsCredentials(role, passwords[role])


def authorization_block(passwords: dict[str, str], stream: str) -> str:
    """The nats-server `authorization` block for these passwords (for the embedded server or a cluster)."""
    users = []
    for role in ROLES:
        user: dict[str, object] = {"user": role, "password": passwords[role]}
        if role != "admin":
            user["permissions"] = _permissions(role, stream)
        users.append("    " + json.dumps(user))
    return "authorization {\n  users = [\n" + "\n".join(users) + "\n  ]\n}\n"


def _permissions(role: str, stream: str) -> dict[str, object]:
    publish = ["$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>", f"{DLQ_SUBJECT_ROOT}.>", HEALTH_SUBJECT]
    publish.append(PEER_SUBJECTS)
    if role in ("gateway", "producer"):
        publish.append(EVENT_SUBJECTS)
    if role == "gateway":
        publish.append(QUERY_SUBJECTS)
    deny = [
        f"$JS.API.STREAM.CREATE.{stream}",
        f"$JS.API.STREAM.UPDATE.{stream}",
        f"$JS.API.STREAM.MSG.DELETE.{stream}",
        "$JS.API.STREAM.DELETE.>",
        "$JS.API.STREAM.PURGE.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.ledger-mirror",
        *(f"$KV.{bucket}.>" for bucket in ADMIN_ONLY_BUCKETS),
    ]
    subscribe = ["_INBOX.>", PEER_SUBJECTS]
    if role == "query":
        subscribe.append(QUERY_SUBJECTS)
    return {
        "publish": {"allow": publish, "deny": deny},
        "subscribe": {"allow": subscribe, "deny": [EVENT_SUBJECTS, f"{DLQ_SUBJECT_ROOT}.>", "$KV.>"]},
        "allow_responses": role == "query",
    }
