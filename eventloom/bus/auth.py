"""Who may do what on the bus: one NATS user per role, with passwords generated into the data dir.

The embedded server accepts no anonymous client. `admin` (the node itself and the operator's CLI) may do
anything, and creates what the others use: the event stream, the dead-letter stream and every KV bucket
(`gateway/buckets.py`). Every other role gets an allow-list of exactly what its process does (`GRANTS`,
`permissions`), never "everything but":

| role | `eventloom` command | appends | queries | consumes (durable, acks, dead letters) | writes buckets |
|---|---|---|---|---|---|
| `gateway` | `gateway http` | yes | asks | no | `IDEMPOTENCY`, `PEERS` |
| `producer` | `producer run` | yes | no | yes | the gateway's, the workers', `FENCES`, `PRODUCER_STATE` |
| `query` | `query serve` | no | answers | yes | `PEERS`, the workers' |
| `projector` | `projector run` | no | no | yes | `PEERS`, the workers' |

"Appends": publishes on the event subjects and writes the idempotency records of its appends. Buckets are
named without their `EVENTLOOM_` prefix; the workers' are `DLQ_RETRY`, `LEASES` and `CONSUMER_STATS`.

Every role may read (`STREAM.INFO`, `STREAM.MSG.GET`, `DIRECT.GET`, and ephemeral or named consumers:
`CONSUMER.CREATE|INFO|MSG.NEXT|DELETE`) the event stream, the dead-letter stream and every bucket's
stream, list the event stream's consumers, ask `eventloom.q.memory.health`, and send and watch heartbeats
on `eventloom_peers.*`. It subscribes to its own inboxes (`_INBOX_<role>.>`: `connect` gives a role's
connections that prefix) and the heartbeats (`query`: the query subjects too).

So no role but `admin` may: create, update, delete, purge, snapshot or restore any stream (KV buckets
included), delete a message from one (the dead letters included: a worker that retried one records it
as resolved, see `eventloom/dlq.py`), touch the ledger mirror's consumer or ack its messages, write the
quarantine, move a leader or a peer, or purge the account; and only the roles that append write
idempotency records. A role's password is handed to its process as `EVENTLOOM_NATS_USER` /
`EVENTLOOM_NATS_PASSWORD` (`eventloom nats credentials ROLE`); an external NATS cluster gets the same users
from `eventloom nats config` (see docs/security.md).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from eventloom.bus.peers import PEERS_SUBJECT_ROOT
from eventloom.bus.stream import DLQ_STREAM, DLQ_SUBJECT_ROOT, SUBJECT_ROOT
from eventloom.errors import EventloomError
from eventloom.keys import atomic_write

ROLES: Final = ("admin", "gateway", "producer", "query", "projector")
QUERY_SUBJECTS: Final = f"{SUBJECT_ROOT}.q.>"
EVENT_SUBJECTS: Final = f"{SUBJECT_ROOT}.*.*"  # <root>.<partition>.<session>
HEALTH_SUBJECT: Final = f"{SUBJECT_ROOT}.q.memory.health"  # every role's healthcheck may ask this one
PEER_SUBJECTS: Final = f"{PEERS_SUBJECT_ROOT}.*"  # every process's heartbeat: every role sends and watches
MIRROR_CONSUMER: Final = "ledger-mirror"
IDEMPOTENCY: Final = "EVENTLOOM_IDEMPOTENCY"
PEERS: Final = "EVENTLOOM_PEERS"
WORKER_BUCKETS: Final = ("EVENTLOOM_DLQ_RETRY", "EVENTLOOM_LEASES", "EVENTLOOM_CONSUMER_STATS")
PRODUCER_BUCKETS: Final = ("EVENTLOOM_FENCES", "EVENTLOOM_PRODUCER_STATE")
BUCKETS: Final = (IDEMPOTENCY, PEERS, *WORKER_BUCKETS, *PRODUCER_BUCKETS, "EVENTLOOM_QUARANTINE")
"""Every KV bucket of a deployment (the names are spelled here, below the modules that own them, and a
test holds them equal to `gateway.buckets.NODE_BUCKETS`)."""


@dataclass(frozen=True)
class Grant:
    """What one role's process does on the bus, beyond what every role may (read, heartbeats, health)."""

    appends: bool = False  # publishes events and the idempotency records of its appends
    consumes: bool = False  # durable consumers on the event stream: pulls, acks, dead letters, retries
    asks_queries: bool = False
    answers_queries: bool = False
    writes: tuple[str, ...] = (PEERS,)  # the KV buckets it puts into (and purges keys of)


GRANTS: Final[dict[str, Grant]] = {
    "gateway": Grant(appends=True, asks_queries=True, writes=(IDEMPOTENCY, PEERS)),
    "producer": Grant(
        appends=True, consumes=True, writes=(IDEMPOTENCY, PEERS, *WORKER_BUCKETS, *PRODUCER_BUCKETS)
    ),
    "query": Grant(consumes=True, answers_queries=True, writes=(PEERS, *WORKER_BUCKETS)),
    "projector": Grant(consumes=True, writes=(PEERS, *WORKER_BUCKETS)),
}


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
            user["permissions"] = permissions(role, stream)
        users.append("    " + json.dumps(user))
    return "authorization {\n  users = [\n" + "\n".join(users) + "\n  ]\n}\n"


def inbox_prefix(role: str) -> str:
    """Where `role`'s replies come: its own inboxes, so no role reads the answers to another's requests."""
    return "_INBOX" if role == "admin" else f"_INBOX_{role}"


def permissions(role: str, stream: str) -> dict[str, object]:
    """The nats-server permissions of `role` (not `admin`) on a deployment whose event stream is `stream`."""
    grant = GRANTS[role]
    read = (stream, DLQ_STREAM, *(f"KV_{bucket}" for bucket in BUCKETS))
    publish = [HEALTH_SUBJECT, PEER_SUBJECTS, "$JS.FC.>", f"$JS.API.CONSUMER.LIST.{stream}"]
    publish += [subject for name in read for subject in _reads(name)]
    publish += [f"$KV.{bucket}.>" for bucket in grant.writes]
    if grant.appends:
        publish.append(EVENT_SUBJECTS)
    if grant.asks_queries:
        publish.append(QUERY_SUBJECTS)
    if grant.consumes:
        publish += [f"$JS.ACK.{stream}.>", f"{DLQ_SUBJECT_ROOT}.>"]
    subscribe = [f"{inbox_prefix(role)}.>", PEER_SUBJECTS]
    if grant.answers_queries:
        subscribe.append(QUERY_SUBJECTS)
    # The reads' wildcards would take in the ledger mirror's consumer: it is the node's alone.
    mirror = f"{stream}.{MIRROR_CONSUMER}"
    deny = [f"$JS.API.CONSUMER.{verb}.{mirror}" for verb in ("CREATE", "DELETE", "MSG.NEXT")]
    deny += [f"$JS.API.CONSUMER.CREATE.{mirror}.>", f"$JS.ACK.{mirror}.>"]
    return {
        "publish": {"allow": publish, "deny": deny},
        "subscribe": {"allow": subscribe},
        "allow_responses": grant.answers_queries,
    }


def _reads(stream: str) -> list[str]:
    """What reading `stream` takes: its info, single messages, and consumers of the reader's own."""
    api = "$JS.API"
    return [
        f"{api}.STREAM.INFO.{stream}",
        f"{api}.STREAM.MSG.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}.>",
        f"{api}.CONSUMER.CREATE.{stream}",
        f"{api}.CONSUMER.CREATE.{stream}.>",
        f"{api}.CONSUMER.INFO.{stream}.*",
        f"{api}.CONSUMER.MSG.NEXT.{stream}.*",
        f"{api}.CONSUMER.DELETE.{stream}.*",
    ]
