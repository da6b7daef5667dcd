"""Runtime settings, from arguments and `EVENTLOOM_*` environment variables."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from eventloom.event import SESSION_PATTERN

DEFAULT_PARTITIONS: Final = 16
SYNC_POLICY = re.compile(r"^(always|default|\d+(ms|s|m))$")
GRAPH_BACKENDS: Final = ("ladybug", "neo4j")
DEFAULT_PROJECTOR_ACK_WAIT_S: Final = 5.0
DEFAULT_PROJECTOR_LEASE_S: Final = 3.0
NODE_PROJECTOR_BATCH: Final = 500
"""Events a worker fetches at once in a node, which runs all its workers (eight by default) in one process,
each holding two batches (one being written, the next being decoded and verified). At 2,000 the node ended
a 100,000-event catch-up ~75 MB larger (what the allocators keep), and caught up no sooner
(docs/benchmarks.md)."""
SOLE_WORKER_PROJECTOR_BATCH: Final = 2000
"""The same in a process of one worker (`eventloom projector run`): nothing else competes for its memory,
and larger batches share each transaction's fixed costs (the graph: ~3,300 events/s against ~2,400)."""
MAX_PROJECTOR_BATCH: Final = 10_000
DEFAULT_PROJECTOR_LINGER_MS: Final = 200
"""Under a trickle a caught-up worker would commit every few events (the graph ~10 commits/s at 20 events/s)
and each commit has fixed costs: a transaction, a statement per kind of row, and in LadybugDB memory held
until the next checkpoint. Waiting this long for more turns them into ~5 larger commits a second; a worker
behind never waits (its fetch fills the batch), and what an agent reads lags at most this much more."""
MAX_PROJECTOR_LINGER_MS: Final = 10_000
CLUSTER_SIZES: Final = (1, 3, 5)
DEFAULT_NATS_MEMORY_LIMIT_MB: Final = 0
"""The soft memory limit (Go's `GOMEMLIMIT`) of each nats-server the node starts itself; 0: Go's default, or
the GOMEMLIMIT of the node's own environment. Off by default: under a steady trickle the server grew 28 ->
85-102 MB in ten minutes (Go collects when its heap has doubled and hands pages back lazily), and 46-53 MB
with a 40 MiB limit; but a limit below what a burst needs makes Go collect all the time, and 100,000 events
appended at full speed went 30-35 % slower with 64 MiB (docs/operations.md#memory)."""
MAX_NATS_MEMORY_LIMIT_MB: Final = 1 << 20
DEFAULT_LADYBUG_BUFFER_POOL_MB: Final = 2048
"""Per LadybugDB database. The engine's default (80 % of memory) costs ~2 MB resident per GiB of pool in
page bookkeeping at open (~37 MB a database on 24 GB); 2 GiB held bench/project.py's 100,000 events."""


def default_replicas(cluster: int) -> int:
    """Replicas when none are set: 3 in a cluster (each stream survives the loss of one server), else 1."""
    return 3 if cluster > 1 else 1


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {raw!r}") from None


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}: expected a number of seconds, got {raw!r}") from None


@dataclass(frozen=True)
class Settings:
    """Where data lives and how to reach (or start) NATS.

    `sync` is the JetStream fsync policy of the embedded server: `always` (fsync every message before the
    ack), `default` (the server's own interval, 2 minutes) or a duration such as `1s`. See docs/durability.md.
    """

    data_dir: Path = field(default_factory=lambda: Path(".eventloom"))
    nats_url: str | None = None
    partitions: int = DEFAULT_PARTITIONS
    sync: str = "default"
    duplicate_window_s: float = 120.0
    stream: str = "EVENTLOOM"
    replicas: int = 1  # of the streams and buckets; from_env's default: 3 in a cluster, else 1
    cluster: int = 1  # nats-servers the node starts on loopback when no nats_url is set: 1, 3 or 5
    # The event stream's size limit in bytes, at which appends are refused (never old events dropped); 0: no
    # limit; None: leave the stream's limit as it is (a process other than the node need not know it).
    stream_max_bytes: int | None = None
    projectors: str = "all"  # which installed projectors the node runs: all, none, or a comma list
    producers: str = "all"  # likewise for producers
    graph_backend: str = "ladybug"  # where the graph read model lives: embedded LadybugDB or a Neo4j server
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str = field(default="", repr=False)
    neo4j_database: str = "neo4j"
    vector_dimensions: int | None = None  # embedding width (vector model, Neo4j's index); None: embedder's
    embedder: str = "wordllama"  # the vector read model's embedder (an `eventloom.embedders` entry point)
    tokens_path: Path | None = None  # the HTTP gateway's bearer tokens (default <data>/tokens.json)
    audit_session: str = "eventloom-audit"  # where the gateway appends its `tool.call.completed` audit
    gateway_rate: float = 50.0  # HTTP gateway: calls per second per token, bursts of twice that
    mcp_toolsets: str = "default"  # the MCP toolsets served to callers whose token names none (docs/mcp.md)
    nats_user: str | None = None  # a role's NATS user (default: the data dir's admin, for the operator)
    nats_password: str = field(default="", repr=False)
    # The optional LLM that may write consolidation summaries (never citations); off unless both are set.
    llm_base_url: str | None = None  # an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1
    llm_model: str | None = None
    llm_api_key_env: str | None = None  # the name of the variable holding the API key, never the key
    llm_timeout_s: float = 20.0
    # Peer status (docs/operations.md#peers): every process heartbeats this often; a peer unheard of for
    # `peer_suspect_after_s` is suspect, for `peer_dead_after_s` dead.
    heartbeat_interval_s: float = 2.0
    peer_suspect_after_s: float = 6.0
    peer_dead_after_s: float = 20.0
    # Projector and producer workers (docs/operations.md#projector-failover): what a worker holds
    # unacknowledged this long goes to another worker of its consumer; a live one keeps its batch alive.
    projector_ack_wait_s: float = DEFAULT_PROJECTOR_ACK_WAIT_S
    # How long a caught-up worker waits for more events before it applies a batch smaller than its largest
    # (docs/operations.md, settings table), in ms: fewer, larger commits under a trickle (0: apply at once).
    projector_linger_ms: int = DEFAULT_PROJECTOR_LINGER_MS
    # Memory bounds (docs/operations.md#memory): events per worker's batch, each LadybugDB database's buffer
    # pool in MiB (0: the engine's default, 80 % of the machine's memory), glibc malloc arenas (0: glibc's
    # default, 8 per core), the size from which a block is mapped on its own in KiB (0: glibc's sliding
    # threshold) and how often the node hands freed memory back to the system (0: never).
    projector_batch: int | None = None  # None: the process's default (`worker_batch`)
    ladybug_buffer_pool_mb: int = DEFAULT_LADYBUG_BUFFER_POOL_MB
    # The soft memory limit of each nats-server the node starts itself, in MiB (0: Go's default, or the
    # GOMEMLIMIT of the node's own environment): a smaller server under a trickle, a slower one in a burst.
    nats_memory_limit_mb: int = DEFAULT_NATS_MEMORY_LIMIT_MB
    malloc_arenas: int = 2
    malloc_mmap_threshold_kib: int = 256
    memory_trim_s: float = 30.0
    # One worker of a projector consumer applies, the others stand by; a holder silent this long is
    # taken over (docs/operations.md#projector-failover).
    projector_lease_s: float = DEFAULT_PROJECTOR_LEASE_S

    def __post_init__(self) -> None:
        if not 1 <= self.partitions <= 1024:
            raise ValueError("partitions: must be between 1 and 1024")
        if not 1 <= self.replicas <= 5:
            raise ValueError("replicas: must be between 1 and 5 (JetStream's limit)")
        if self.cluster not in CLUSTER_SIZES:
            raise ValueError("cluster: must be 1 (one server), 3 or 5 (EVENTLOOM_CLUSTER, up --cluster)")
        if self.cluster > 1 and not self.nats_url and self.replicas > self.cluster:
            raise ValueError(f"replicas: {self.replicas} is more than the cluster's {self.cluster} servers")
        if self.stream_max_bytes is not None and self.stream_max_bytes < 0:
            raise ValueError(
                "stream_max_bytes: must be 0 (no limit) or a size in bytes (EVENTLOOM_STREAM_MAX_BYTES)"
            )
        if not SYNC_POLICY.fullmatch(self.sync):
            raise ValueError("sync: must be 'always', 'default' or a duration like 500ms, 1s, 2m")
        if self.graph_backend not in GRAPH_BACKENDS:
            raise ValueError(f"graph_backend: must be one of {', '.join(GRAPH_BACKENDS)}")
        if self.graph_backend == "neo4j" and not self.neo4j_uri:
            raise ValueError("neo4j_uri: required when the graph backend is neo4j (set NEO4J_URI)")
        if not self.gateway_rate > 0:
            raise ValueError("gateway_rate: must be more than 0 calls per second (EVENTLOOM_GATEWAY_RATE)")
        if not SESSION_PATTERN.fullmatch(self.audit_session):
            raise ValueError("audit_session: must match ^[A-Za-z0-9_-]{1,128}$ (EVENTLOOM_AUDIT_SESSION)")
        self._check_peer_times()
        self._check_memory_bounds()
        if not self.projector_ack_wait_s >= 0.5:  # also refuses NaN; below that a busy worker loses its batch
            raise ValueError(
                "projector_ack_wait_s: must be at least 0.5 seconds (EVENTLOOM_PROJECTOR_ACK_WAIT_S)"
            )
        if not self.projector_lease_s > 0:  # also refuses NaN
            raise ValueError("projector_lease_s: must be more than 0 seconds (EVENTLOOM_PROJECTOR_LEASE_S)")

    def _check_memory_bounds(self) -> None:
        if not 0 <= self.projector_linger_ms <= MAX_PROJECTOR_LINGER_MS:
            raise ValueError(
                f"projector_linger_ms: must be 0 to {MAX_PROJECTOR_LINGER_MS:,} ms "
                "(EVENTLOOM_PROJECTOR_LINGER_MS)"
            )
        if self.projector_linger_ms / 1000 >= self.projector_ack_wait_s / 2:  # events wait unkept meanwhile
            raise ValueError(
                "projector_linger_ms: must be under half the ack wait, or what a lingering worker holds goes "
                "to another (EVENTLOOM_PROJECTOR_LINGER_MS, EVENTLOOM_PROJECTOR_ACK_WAIT_S)"
            )
        if self.projector_batch is not None and not 1 <= self.projector_batch <= MAX_PROJECTOR_BATCH:
            raise ValueError(
                f"projector_batch: must be 1 to {MAX_PROJECTOR_BATCH:,} events (EVENTLOOM_PROJECTOR_BATCH)"
            )
        if not 0 <= self.ladybug_buffer_pool_mb <= 1 << 22:
            raise ValueError(
                "ladybug_buffer_pool_mb: must be 0 (the engine's default) or a size in MiB "
                "(EVENTLOOM_LADYBUG_BUFFER_POOL_MB)"
            )
        if self.nats_memory_limit_mb != 0 and not 16 <= self.nats_memory_limit_mb <= MAX_NATS_MEMORY_LIMIT_MB:
            raise ValueError(
                f"nats_memory_limit_mb: must be 0 (Go's default) or 16 to {MAX_NATS_MEMORY_LIMIT_MB:,} MiB "
                "(EVENTLOOM_NATS_MEMORY_LIMIT_MB)"
            )
        if not 0 <= self.malloc_arenas <= 1024:
            raise ValueError("malloc_arenas: must be 0 (glibc's default) to 1024 (EVENTLOOM_MALLOC_ARENAS)")
        if not 0 <= self.malloc_mmap_threshold_kib <= 32 * 1024:  # glibc's largest: half a 64 MiB heap
            raise ValueError(
                "malloc_mmap_threshold_kib: must be 0 (glibc's sliding threshold) to 32768 KiB "
                "(EVENTLOOM_MALLOC_MMAP_THRESHOLD_KIB)"
            )
        if not self.memory_trim_s >= 0:  # also refuses NaN
            raise ValueError("memory_trim_s: must be 0 (never) or more seconds (EVENTLOOM_MEMORY_TRIM_S)")

    def _check_peer_times(self) -> None:
        for name, value in (
            ("heartbeat_interval_s", self.heartbeat_interval_s),
            ("peer_suspect_after_s", self.peer_suspect_after_s),
            ("peer_dead_after_s", self.peer_dead_after_s),
        ):
            if not value > 0:  # also refuses NaN
                raise ValueError(f"{name}: must be more than 0 seconds (EVENTLOOM_{name.upper()})")
        if not self.heartbeat_interval_s < self.peer_suspect_after_s < self.peer_dead_after_s:
            raise ValueError(
                "peer_suspect_after_s: must be more than the heartbeat interval and less than "
                f"peer_dead_after_s (got interval {self.heartbeat_interval_s:g}, suspect after "
                f"{self.peer_suspect_after_s:g}, dead after {self.peer_dead_after_s:g}; "
                "EVENTLOOM_HEARTBEAT_INTERVAL_S, EVENTLOOM_PEER_SUSPECT_AFTER_S, EVENTLOOM_PEER_DEAD_AFTER_S)"
            )

    @classmethod
    def from_env(cls, data_dir: Path | None = None, nats_url: str | None = None) -> Settings:
        env_dir = os.environ.get("EVENTLOOM_DATA_DIR")
        tokens = os.environ.get("EVENTLOOM_TOKENS_FILE")
        interval = _env_float("EVENTLOOM_HEARTBEAT_INTERVAL_S", 2.0)  # the peer times default to multiples
        cluster = _env_int("EVENTLOOM_CLUSTER", 1)
        return cls(
            data_dir=(data_dir or Path(env_dir or ".eventloom")).absolute(),
            nats_url=nats_url or os.environ.get("EVENTLOOM_NATS_URL") or None,
            partitions=_env_int("EVENTLOOM_PARTITIONS", DEFAULT_PARTITIONS),
            sync=os.environ.get("EVENTLOOM_SYNC", "default"),
            duplicate_window_s=float(_env_int("EVENTLOOM_DUPLICATE_WINDOW_S", 120)),
            replicas=_env_int("EVENTLOOM_REPLICAS", default_replicas(cluster)),
            cluster=cluster,
            stream_max_bytes=_env_int("EVENTLOOM_STREAM_MAX_BYTES", 0)
            if os.environ.get("EVENTLOOM_STREAM_MAX_BYTES")
            else None,
            projectors=os.environ.get("EVENTLOOM_PROJECTORS", "all"),
            producers=os.environ.get("EVENTLOOM_PRODUCERS", "all"),
            graph_backend=os.environ.get("EVENTLOOM_GRAPH_BACKEND") or "ladybug",
            neo4j_uri=os.environ.get("NEO4J_URI") or None,
            neo4j_user=os.environ.get("NEO4J_USER") or "neo4j",
            neo4j_password=os.environ.get("NEO4J_PASSWORD", ""),
            neo4j_database=os.environ.get("NEO4J_DATABASE") or "neo4j",
            vector_dimensions=_env_int("EVENTLOOM_VECTOR_DIMENSIONS", 0) or None,
            embedder=os.environ.get("EVENTLOOM_EMBEDDER") or "wordllama",
            tokens_path=Path(tokens).absolute()
            if (tokens := os.environ.get("EVENTLOOM_TOKENS_FILE"))
            else None,
            audit_session=os.environ.get("EVENTLOOM_AUDIT_SESSION") or "eventloom-audit",
            gateway_rate=float(os.environ.get("EVENTLOOM_GATEWAY_RATE") or 50.0),
            mcp_toolsets=os.environ.get("EVENTLOOM_MCP_TOOLSETS") or "default",
            nats_user=os.environ.get("EVENTLOOM_NATS_USER") or None,
            nats_password=os.environ.get("EVENTLOOM_NATS_PASSWORD", ""),
            llm_base_url=os.environ.get("EVENTLOOM_LLM_BASE_URL") or None,
            llm_model=os.environ.get("EVENTLOOM_LLM_MODEL") or None,
            llm_api_key_env=os.environ.get("EVENTLOOM_LLM_API_KEY_ENV") or None,
            llm_timeout_s=float(os.environ.get("EVENTLOOM_LLM_TIMEOUT_S") or 20.0),
            heartbeat_interval_s=interval,
            peer_suspect_after_s=_env_float("EVENTLOOM_PEER_SUSPECT_AFTER_S", 3 * interval),
            peer_dead_after_s=_env_float("EVENTLOOM_PEER_DEAD_AFTER_S", 10 * interval),
            projector_ack_wait_s=_env_float("EVENTLOOM_PROJECTOR_ACK_WAIT_S", DEFAULT_PROJECTOR_ACK_WAIT_S),
            projector_linger_ms=_env_int("EVENTLOOM_PROJECTOR_LINGER_MS", DEFAULT_PROJECTOR_LINGER_MS),
            projector_batch=_env_int("EVENTLOOM_PROJECTOR_BATCH", 0) or None,
            ladybug_buffer_pool_mb=_env_int(
                "EVENTLOOM_LADYBUG_BUFFER_POOL_MB", DEFAULT_LADYBUG_BUFFER_POOL_MB
            ),
            nats_memory_limit_mb=_env_int("EVENTLOOM_NATS_MEMORY_LIMIT_MB", DEFAULT_NATS_MEMORY_LIMIT_MB),
            malloc_arenas=_env_int("EVENTLOOM_MALLOC_ARENAS", 2),
            malloc_mmap_threshold_kib=_env_int("EVENTLOOM_MALLOC_MMAP_THRESHOLD_KIB", 256),
            memory_trim_s=_env_float("EVENTLOOM_MEMORY_TRIM_S", 30.0),
            projector_lease_s=_env_float("EVENTLOOM_PROJECTOR_LEASE_S", DEFAULT_PROJECTOR_LEASE_S),
        )

    def to_env(self) -> dict[str, str]:
        """These settings as the `EVENTLOOM_*` variables `from_env` reads (for child processes)."""
        env = {
            "EVENTLOOM_DATA_DIR": str(self.data_dir),
            "EVENTLOOM_PARTITIONS": str(self.partitions),
            "EVENTLOOM_SYNC": self.sync,
            "EVENTLOOM_DUPLICATE_WINDOW_S": str(int(self.duplicate_window_s)),
            "EVENTLOOM_REPLICAS": str(self.replicas),
            "EVENTLOOM_CLUSTER": str(self.cluster),
            "EVENTLOOM_STREAM_MAX_BYTES": "" if self.stream_max_bytes is None else str(self.stream_max_bytes),
            "EVENTLOOM_PROJECTORS": self.projectors,
            "EVENTLOOM_PRODUCERS": self.producers,
            "EVENTLOOM_GRAPH_BACKEND": self.graph_backend,
            "NEO4J_USER": self.neo4j_user,
            "NEO4J_PASSWORD": self.neo4j_password,
            "NEO4J_DATABASE": self.neo4j_database,
            "EVENTLOOM_VECTOR_DIMENSIONS": str(self.vector_dimensions or ""),
            "EVENTLOOM_EMBEDDER": self.embedder,
            "EVENTLOOM_TOKENS_FILE": str(self.tokens_file),
            "EVENTLOOM_AUDIT_SESSION": self.audit_session,
            "EVENTLOOM_GATEWAY_RATE": f"{self.gateway_rate:g}",
            "EVENTLOOM_MCP_TOOLSETS": self.mcp_toolsets,
            "EVENTLOOM_HEARTBEAT_INTERVAL_S": repr(self.heartbeat_interval_s),
            "EVENTLOOM_PEER_SUSPECT_AFTER_S": repr(self.peer_suspect_after_s),
            "EVENTLOOM_PEER_DEAD_AFTER_S": repr(self.peer_dead_after_s),
            "EVENTLOOM_PROJECTOR_ACK_WAIT_S": repr(self.projector_ack_wait_s),
            "EVENTLOOM_PROJECTOR_LINGER_MS": str(self.projector_linger_ms),
            "EVENTLOOM_PROJECTOR_BATCH": str(self.projector_batch or ""),
            "EVENTLOOM_LADYBUG_BUFFER_POOL_MB": str(self.ladybug_buffer_pool_mb),
            "EVENTLOOM_NATS_MEMORY_LIMIT_MB": str(self.nats_memory_limit_mb),
            "EVENTLOOM_MALLOC_ARENAS": str(self.malloc_arenas),
            "EVENTLOOM_MALLOC_MMAP_THRESHOLD_KIB": str(self.malloc_mmap_threshold_kib),
            "EVENTLOOM_MEMORY_TRIM_S": repr(self.memory_trim_s),
            "EVENTLOOM_PROJECTOR_LEASE_S": repr(self.projector_lease_s),
        }
        if self.nats_url:
            env["EVENTLOOM_NATS_URL"] = self.nats_url
        if self.neo4j_uri:
            env["NEO4J_URI"] = self.neo4j_uri
        for variable, value in (
            ("EVENTLOOM_LLM_BASE_URL", self.llm_base_url),
            ("EVENTLOOM_LLM_MODEL", self.llm_model),
            ("EVENTLOOM_LLM_API_KEY_ENV", self.llm_api_key_env),
        ):
            if value:
                env[variable] = value
        if self.llm_base_url:
            env["EVENTLOOM_LLM_TIMEOUT_S"] = f"{self.llm_timeout_s:g}"
        if self.nats_user:
            env["EVENTLOOM_NATS_USER"] = self.nats_user
            env["EVENTLOOM_NATS_PASSWORD"] = self.nats_password
        return env

    def worker_batch(self, *, sole_worker: bool) -> int:
        """The most events a projector or producer worker fetches at once: `projector_batch` when set, else
        the default of a process that runs many workers (a node) or only this one."""
        if self.projector_batch is not None:
            return self.projector_batch
        return SOLE_WORKER_PROJECTOR_BATCH if sole_worker else NODE_PROJECTOR_BATCH

    def enabled(self, kind: str, installed: list[str]) -> list[str]:
        """The installed projectors or producers (`kind`) this node runs, per the setting: `all`, `none`, a
        comma list of names, or `all,-name,...` (every installed one but those)."""
        choice = self.projectors if kind == "projectors" else self.producers
        names = [name.strip() for name in choice.split(",") if name.strip()]
        if names in ([], ["none"]):
            return []
        if names[0] == "all":
            left_out = [name.removeprefix("-") for name in names[1:]]
            if any(not name.startswith("-") for name in names[1:]):
                raise ValueError(f"{kind}: after 'all', only exclusions like -name may follow: {choice!r}")
            _check_installed(kind, left_out, installed)
            return sorted(set(installed) - set(left_out))
        _check_installed(kind, names, installed)
        return names

    @property
    def ledger_dir(self) -> Path:
        return self.data_dir / "ledger"

    @property
    def nats_dir(self) -> Path:
        return self.data_dir / "nats"

    @property
    def tokens_file(self) -> Path:
        return self.tokens_path or self.data_dir / "tokens.json"

    @property
    def runtime_file(self) -> Path:
        return self.data_dir / "runtime.json"


def _check_installed(kind: str, names: list[str], installed: list[str]) -> None:
    missing = sorted(set(names) - set(installed))
    if missing:
        raise ValueError(f"{kind}: not installed: {', '.join(missing)}")
