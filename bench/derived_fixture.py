"""The generated fixture of bench/derived.py: agent sessions with a known truth about what derives from them.

Deterministic for a seed and a number of sessions (the hashes differ between runs: they cover the time of
the append). Each session is a script of steps; a step may cite an earlier step's event (by seq and hash),
which is only known once that event is appended, so a payload can be a function of the events so far.

What the truth records, and what bench/derived.py then asks of the derived memory:
- causal chains A -> B -> C (-> D): a decision about an entity, outcomes explained citing their cause event
  (the decision, then the previous outcome's own event), half of them naming the cause in passing ("Move
  auth-service sessions ...") rather than by its exact text; every link should be found by the causal reads;
- stale causal distractors: a decision and an explained outcome whose causal edge is later contradicted
  (and so retracted by the `retraction` producer), or whose outcome is later invalidated: never current;
- claims: the same relation (or the same entity with the same summary) asserted in 2 to 4 sessions;
- procedures: the same successful command sequence, closed by a passed verification, in several sessions,
  next to failing runs of it;
- episodes: sessions that turn from one topic to another and end (`session.ended` closes a stretch; a
  real 30-minute pause cannot be waited for in a benchmark);
- entity name variants: groups of spellings of one entity, across and within sessions (the same_as truth),
  and near misses: distinct entities with close names, never to be merged.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from eventloom.event import Event

Payload = dict[str, Any]
Events = dict[str, Event]
"""Step key -> the event appended for it, in one session."""

AGENTS = ("agent:planner", "agent:coder", "agent:oncall")
# Entity groups: one entity, several spellings (the same_as truth). Spellings are chosen per session.
ENTITY_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("service", "issues login tokens", ("auth-service", "AuthService", "auth_service", "Auth Service")),
    ("service", "bills customers monthly", ("billing-api", "BillingAPI", "billing_api", "Billing API")),
    ("database", "stores orders", ("postgres database", "Postgres-Database", "postgress database")),
    ("service", "takes card payments", ("payment service", "payments service", "PaymentService")),
    ("cluster", "runs the workloads", ("kubernetes cluster", "Kubernetes-Cluster", "kubernetes clustr")),
    (
        "service",
        "sends e-mail and push",
        ("notification-worker", "NotificationWorker", "notification worker"),
    ),
    ("service", "serves product search", ("search-index", "SearchIndex", "search_index")),
    ("cache", "keeps sessions", ("redis cache", "Redis-Cache", "redis_cache")),
    ("service", "holds user profiles", ("user service", "UserService", "user-service")),
    ("service", "keeps the ledger", ("ledger mirror", "Ledger-Mirror", "ledger mirrors")),
)
# Near misses: distinct entities whose names are close to a group's; each is its own entity.
NEAR_MISSES: tuple[tuple[str, str, str, int], ...] = (  # type, name, summary, the group it looks like
    ("service", "auth server", "runs the legacy SSO pages", 0),
    ("service", "order service", "takes orders", 8),
    ("cache", "redis cluster cache", "shards the rate limits", 7),
    ("service", "search indexer", "builds the search index nightly", 6),
    ("service", "billing ui", "shows invoices", 1),
)
DEPENDENCIES = ("postgres", "redis", "kafka", "s3", "vault", "elasticsearch", "rabbitmq", "consul")
SHARED_FACTS = (
    ("auth-service", "depends_on", "postgres"),
    ("auth-service", "reads_from", "vault"),
    ("billing-api", "depends_on", "kafka"),
    ("billing-api", "writes_to", "s3"),
    ("search-index", "reads_from", "elasticsearch"),
    ("redis cache", "owned_by", "team-platform"),
)
DECISIONS = (
    "Move {svc} sessions to Redis",
    "Add a read replica for {svc}",
    "Cache {svc} lookups in memory",
    "Raise the {svc} connection pool to 64",
    "Batch {svc} writes every 200 ms",
    "Turn on HTTP/2 for {svc}",
)
FIRST_EFFECTS = (
    "{svc} p95 latency fell from 480 ms to 140 ms",
    "{svc} error rate dropped below 0.1 percent",
    "{svc} stopped timing out under load",
    "{svc} CPU use halved at peak",
)
SECOND_EFFECTS = (
    "the {svc} error budget recovered",
    "on-call pages for {svc} stopped",
    "checkout conversion rose after the {svc} fix",
)
THIRD_EFFECTS = ("the quarterly SLO review of {svc} passed", "the {svc} freeze was lifted")
STALE_DECISIONS = ("Shard {svc} by tenant", "Pin {svc} to one zone", "Disable retries in {svc}")
STALE_EFFECTS = (
    "{svc} cold starts doubled",
    "{svc} cross-zone traffic costs fell",
    "{svc} duplicate writes vanished",
)
PROCEDURES: tuple[tuple[str, ...], ...] = (
    ("make lint", "make test", "git push origin main"),
    ("docker build -t app .", "docker push registry/app", "kubectl apply -f deploy.yaml"),
    ("alembic upgrade head", "pytest tests/migrations -q"),
)
TOPICS = (
    ("user", "The invoices for March are wrong for EU customers, VAT is missing on every line."),
    ("assistant", "The VAT rules table has no entry for the new EU region; invoices skip the tax."),
    ("user", "Add the region to the VAT rules table and regenerate the March invoices."),
    ("assistant", "Regenerated 1,204 March invoices with VAT; totals now match the ledger."),
)
OTHER_TOPICS = (
    ("user", "Next: the mobile app crashes on Android 14 when the camera permission is denied."),
    ("assistant", "The camera screen assumes the permission; a denied permission throws on open."),
    ("user", "Show a prompt explaining why the camera is needed, and fall back to gallery upload."),
    ("assistant", "Done: the Android build asks again with an explanation and offers the gallery."),
)

Stale = Literal["retracted", "invalidated"]


@dataclass(frozen=True)
class Step:
    key: str
    type: str
    payload: Payload | Callable[[Events], Payload]
    actor: str = "agent:coder"


@dataclass(frozen=True)
class CausalLink:
    """A true causal link of the fixture: `cause` (a step key) caused the outcome explained at `explained`."""

    session: str
    cause_key: str
    explained_key: str
    cause_names: tuple[str, ...]
    """The names the cause end may have in the graph, most specific first: a decision's id (the entity
    a decision is), then its title (an entity named by the text); an outcome's own text."""
    effect_name: str
    chain: int
    about: tuple[str, str]
    """(name, entity type) of the entity the chain is about (what "why did X happen" names)."""
    stale: Stale | None = None


@dataclass
class Truth:
    causal: list[CausalLink] = field(default_factory=list)
    named: dict[str, dict[tuple[str, str], str]] = field(default_factory=dict)
    """Session -> (entity type, name) -> the entity it is (a group's first spelling, or the name itself):
    every typed name a session asserts or is `about`. Entities are resolved within a session (the graph
    keeps entities per session), so the same_as truth is per session too."""
    claims: dict[tuple[str, ...], list[str]] = field(default_factory=dict)
    """A fact's identity -> the sessions asserting it."""
    procedures: dict[tuple[str, ...], list[str]] = field(default_factory=dict)

    def name(self, session: str, entity_type: str, name: str, entity: str) -> None:
        self.named.setdefault(session, {})[(entity_type, name)] = entity

    def same_as_pairs(self) -> set[tuple[str, frozenset[str]]]:
        """(session, two spellings of one entity of one type, both named in that session)."""
        return {
            (session, frozenset((a, b)))
            for session, names in self.named.items()
            for (kind_a, a), entity_a in names.items()
            for (kind_b, b), entity_b in names.items()
            if a < b and kind_a == kind_b and entity_a == entity_b
        }

    def near_miss_pairs(self) -> set[tuple[str, frozenset[str]]]:
        """(session, two names of distinct entities of one type sharing a word): never the same entity."""
        return {
            (session, frozenset((a, b)))
            for session, names in self.named.items()
            for (kind_a, a), entity_a in names.items()
            for (kind_b, b), entity_b in names.items()
            if a < b and kind_a == kind_b and entity_a != entity_b and _close(a, b)
        }


@dataclass
class Script:
    session: str
    steps: list[Step] = field(default_factory=list)

    def add(
        self, key: str, type_: str, payload: Payload | Callable[[Events], Payload], actor: str = ""
    ) -> None:
        self.steps.append(Step(key, type_, payload, actor or "agent:coder"))


def cite(event: Event) -> Payload:
    return {"event_seq": event.seq, "event_hash": event.hash}


@dataclass
class Fixture:
    scripts: list[Script]
    truth: Truth


def generate(sessions: int, seed: int = 20) -> Fixture:
    """`sessions` agent sessions (at least 2) and the truth about them."""
    rng = random.Random(seed)
    truth = Truth()
    scripts = [Script(f"derived-{index:03d}") for index in range(max(2, sessions))]
    for number, script in enumerate(scripts):
        agent = AGENTS[number % len(AGENTS)]
        script.add("start", "session.started", {"agent": agent, "goal": "keep the services healthy"}, agent)
        _entities(script, number, rng, truth)
        _claims(script, rng, truth)
        _chains(script, number, rng, truth)
        _stale(script, number, rng, truth)
        _procedure(script, number, rng, truth)
        _topics(script, number)
        script.add("end", "session.ended", {"reason": "done", "summary": "work of the session recorded"})
    return Fixture(scripts, truth)


def _words(name: str) -> set[str]:
    return set(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).lower().replace("-", " ").replace("_", " ").split())


def _close(a: str, b: str) -> bool:
    return bool(_words(a) & _words(b))


def _entities(script: Script, number: int, rng: random.Random, truth: Truth) -> None:
    """Two or three entity groups in their session's spellings, sometimes two spellings in one session;
    in every other session a near miss, next to the entity it looks like."""
    groups = rng.sample(range(len(ENTITY_GROUPS)), 3 if number % 2 else 2)
    near = NEAR_MISSES[(number // 2) % len(NEAR_MISSES)]
    if number % 2 == 0 and near[3] not in groups:
        groups[0] = near[3]
    entities: list[Payload] = []
    for g in groups:
        kind, summary, names = ENTITY_GROUPS[g]
        chosen = rng.sample(names, 2) if rng.random() < 0.25 else [rng.choice(names)]
        for name in chosen:
            truth.name(script.session, kind, name, names[0])
            entities.append({"name": name, "entity_type": kind, "summary": f"{name} {summary}"})
    if number % 2 == 0:
        kind, name, summary, _ = near
        entities.append({"name": name, "entity_type": kind, "summary": summary})
        truth.name(script.session, kind, name, name)
    script.add("entities", "memory.fact.asserted", {"entities": entities})


def _claims(script: Script, rng: random.Random, truth: Truth) -> None:
    """A relation from a small pool of shared facts (so most recur across sessions) and a one-off one."""
    for index in range(2):
        if index == 0:
            service, relation, target = rng.choice(SHARED_FACTS)
        else:
            service = rng.choice(ENTITY_GROUPS)[2][0]
            target, relation = f"{rng.choice(DEPENDENCIES)}-{rng.randrange(10_000)}", "writes_to"
        fact = {"relations": [{"source": service, "target": target, "relation_type": relation}]}
        script.add(f"claim{index}", "memory.fact.asserted", fact)
        truth.claims.setdefault(("relation", service, relation, target), []).append(script.session)


def _chains(script: Script, number: int, rng: random.Random, truth: Truth) -> None:
    """One or two causal chains about distinct services, 3 or 4 links long (A -> B -> C (-> D))."""
    services = rng.sample([names[0] for _, _, names in ENTITY_GROUPS], 2)
    for chain, svc in enumerate(services[: 1 + number % 2]):
        kind = next(k for k, _, names in ENTITY_GROUPS if names[0] == svc)
        about = [{"name": svc, "entity_type": kind}]
        truth.name(script.session, kind, svc, svc)
        decision = rng.choice(DECISIONS).format(svc=svc)
        names = [
            decision,
            rng.choice(FIRST_EFFECTS).format(svc=svc),
            rng.choice(SECOND_EFFECTS).format(svc=svc),
        ]
        if rng.random() < 0.5:
            names.append(rng.choice(THIRD_EFFECTS).format(svc=svc))
        keys = [f"c{chain}-decision"] + [f"c{chain}-outcome{i}" for i in range(1, len(names))]
        decision_id = f"dec-{script.session}-{chain}"
        script.add(
            keys[0],
            "decision.made",
            {"decision_id": decision_id, "title": decision, "about": about},
            "agent:planner",
        )
        task = f"task-{script.session}-{chain}"
        script.add(f"c{chain}-task", "task.completed", _task(task, decision, keys[0]))
        for i in range(1, len(names)):
            taxonomy = "caused" if i == 1 else rng.choice(("enabled", "caused"))
            line = names[i - 1] if rng.random() < 0.5 else shorthand(names[i - 1])
            script.add(keys[i], "outcome.explained", _explained(names[i], line, keys[i - 1], taxonomy, about))
            cause = (decision_id, decision) if i == 1 else (names[i - 1],)
            link = CausalLink(script.session, keys[i - 1], keys[i], cause, names[i], chain, (svc, kind))
            truth.causal.append(link)


def shorthand(text: str) -> str:
    """How an agent refers to an earlier event in passing: its first words ("Move auth-service sessions
    ..."), not the exact text. The cited event, not the line, says which event it is."""
    return " ".join(text.split()[:3]) + " ..."


def _task(task: str, decision: str, decision_key: str) -> Callable[[Events], Payload]:
    def payload(events: Events) -> Payload:
        made = events[decision_key]
        return {
            "task_id": task,
            "summary": f"carried out: {decision}",
            "decision": decision,
            "decision_event_seq": made.seq,
            "decision_event_hash": made.hash,
        }

    return payload


def _explained(
    outcome: str, cause: str, cause_key: str, taxonomy: str, about: list[Payload]
) -> Callable[[Events], Payload]:
    def payload(events: Events) -> Payload:
        cause_event = events[cause_key]
        return {
            "outcome": outcome,
            "explanation": f"{outcome}, because {cause[0].lower()}{cause[1:]}",
            "taxonomy": taxonomy,
            "cause": cause,
            "cause_event_seq": cause_event.seq,
            "cause_event_hash": cause_event.hash,
            "confidence": 0.7,
            "about": about,
        }

    return payload


def _stale(script: Script, number: int, rng: random.Random, truth: Truth) -> None:
    """A decision and an explained outcome that will not hold: its edge contradicted, or it invalidated."""
    svc = ENTITY_GROUPS[(number * 3 + 1) % len(ENTITY_GROUPS)][2][0]
    kind = next(k for k, _, names in ENTITY_GROUPS if names[0] == svc)
    about = [{"name": svc, "entity_type": kind}]
    truth.name(script.session, kind, svc, svc)
    which = number % len(STALE_DECISIONS)
    decision, effect = STALE_DECISIONS[which].format(svc=svc), STALE_EFFECTS[which].format(svc=svc)
    stale: Stale = "retracted" if number % 2 == 0 else "invalidated"
    decision_id = f"dec-{script.session}-stale"
    script.add(
        "stale-decision", "decision.made", {"decision_id": decision_id, "title": decision, "about": about}
    )
    script.add(
        "stale-outcome", "outcome.explained", _explained(effect, decision, "stale-decision", "caused", about)
    )
    link = CausalLink(
        script.session,
        "stale-decision",
        "stale-outcome",
        (decision_id, decision),
        effect,
        9,
        (svc, kind),
        stale,
    )
    truth.causal.append(link)
    del rng


def _procedure(script: Script, number: int, rng: random.Random, truth: Truth) -> None:
    """A known procedure run to a passed verification; every third session also a failing run of one."""
    commands = PROCEDURES[number % len(PROCEDURES)]
    if number % 3 == 2:
        failing = PROCEDURES[(number + 1) % len(PROCEDURES)]
        for index, command in enumerate(failing):
            code = 1 if index == len(failing) - 1 else 0
            script.add(
                f"fail{index}",
                "command.completed",
                {"command": command, "exit_code": code, "duration_ms": 900.0},
            )
        script.add("fail-check", "verification.recorded", {"subject": "release checks", "passed": False})
    for index, command in enumerate(commands):
        output = f"ok ({rng.randrange(20, 400)} items)"
        script.add(
            f"step{index}", "command.completed", {"command": command, "exit_code": 0, "output": output}
        )
    script.add(
        "check", "verification.recorded", {"subject": "release checks", "passed": True, "method": "ci"}
    )
    truth.procedures.setdefault(commands, []).append(script.session)


def _topics(script: Script, number: int) -> None:
    """Two topics in a row, four turns each: the shift the episode segmentation should cut at."""
    first, second = (TOPICS, OTHER_TOPICS) if number % 2 == 0 else (OTHER_TOPICS, TOPICS)
    for index, (role, text) in enumerate((*first, *second)):
        script.add(f"turn{index}", "transcript.turn", {"role": role, "text": text})
