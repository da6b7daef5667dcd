"""The `eventloom` CLI as a user runs it: a detached node, append, tail, status, verify, keys, bad input."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest

from eventloom.event import os_principal
from eventloom.runtime import read_runtime
from eventloom.settings import Settings
from gateway.cli.common import piped_width
from gateway.cli.demo import _show as show_demo
from gateway.cli.demo_story import Told
from gateway.node_process import NodeProcess
from readmodels.embedded import graph_schema as ladybug_schema
from readmodels.neo4j import schema as neo4j_schema
from tests.conftest import run_cli

pytest_plugins = ["tests.cli_support"]  # the `node` fixture


def appended(result_stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in result_stdout.splitlines() if line.strip()]


def test_commands_that_need_a_node_say_how_to_start_one(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "nothing-here")
    for args in (
        ["status"],
        ["tail"],
        ["append", "--session", "s", "--type", "x.a.b", "--actor", "x"],
        ["verify"],
    ):
        result = run_cli(settings, *args)
        assert result.returncode == 3, args
        assert "eventloom up --detach" in result.stderr


def test_detached_node_serves_append_tail_status_verify(node: Settings) -> None:
    runtime = json.loads((node.data_dir / "runtime.json").read_text())
    assert runtime["embedded"] is True and runtime["nats_url"].startswith("nats://127.0.0.1:")
    first = run_cli(
        node,
        "append",
        "--session",
        "cli-1",
        "--type",
        "decision.made",
        "--actor",
        "me",
        "--payload",
        '{"decision_id": "d1", "title": "Use JetStream"}',
    )
    assert first.returncode == 0, first.stderr
    (line,) = appended(first.stdout)
    assert line["seq"] == 1 and line["session"] == "cli-1"
    assert line["citation"] == f"eventloom://cli-1/events/1#{str(line['hash'])[:12]}"

    tailed = run_cli(node, "tail", "--session", "cli-1", "--json")
    assert json.loads(tailed.stdout)["payload"]["title"] == "Use JetStream"

    status = json.loads(run_cli(node, "status", "--json").stdout)
    assert status["stream"]["messages"] == 1 and status["stream"]["partitions"] == 16
    durable = [c["name"] for c in status["consumers"] if c["durable"]]
    assert "ledger-mirror" in durable
    assert any(name.startswith("producer-") and "decision_citation" in name for name in durable)

    verified = run_cli(node, "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)
    assert report["ok"] is True and report["sessions"][0]["ledger_events"] == 1


def test_import_from_jsonl_and_idempotency_key(node: Settings, tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    source.write_text(
        "\n".join(
            json.dumps(
                {"session": f"imp-{n % 2}", "type": "note.added", "actor": "importer", "payload": {"n": n}}
            )
            for n in range(1500)
        )
    )
    result = run_cli(node, "append", "--from", str(source))
    assert result.returncode == 0, result.stderr
    lines = appended(result.stdout)
    assert len(lines) == 1500
    assert [line["seq"] for line in lines if line["session"] == "imp-0"] == list(range(1, 751))
    args = [
        "append",
        "--session",
        "imp-0",
        "--type",
        "note.added",
        "--actor",
        "a",
        "--idempotency-key",
        "once",
    ]
    first, second = run_cli(node, *args), run_cli(node, *args)
    assert appended(first.stdout) == appended(second.stdout)
    assert run_cli(node, "verify").returncode == 0


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--session", "no spaces", "--type", "x.a.b", "--actor", "x"], "session"),
        (["--session", "s", "--type", "Bad", "--actor", "x"], "type"),
        (["--session", "s", "--type", "x.a.b", "--actor", "x", "--payload", "{not json"], "payload"),
        (["--session", "s", "--type", "x.a.b", "--actor", "x", "--payload", '{"x": NaN}'], "payload"),
        (["--session", "s", "--type", "x.a.b", "--actor", "x", "--payload", "[1]"], "payload"),
        (
            ["--session", "s", "--type", "task.claimed", "--actor", "x", "--payload", '{"task_id": "t"}'],
            "payload.assignee",
        ),
    ],
)
def test_bad_input_names_the_field_exits_non_zero_and_writes_nothing(
    refusing_node: Settings, args: list[str], field: str
) -> None:
    result = run_cli(refusing_node, "append", *args)
    assert result.returncode == 2
    assert f"{field}" in result.stderr
    assert json.loads(run_cli(refusing_node, "status", "--json").stdout)["stream"]["messages"] == 0


def test_a_bad_line_rejects_the_whole_import(refusing_node: Settings, tmp_path: Path) -> None:
    node = refusing_node
    source = tmp_path / "events.jsonl"
    good = json.dumps({"session": "s", "type": "note.added", "actor": "a", "payload": {}})
    bad = json.dumps({"session": "s", "type": "x", "actor": "a"})
    source.write_text("\n".join([good, "", good, bad]))  # a blank line is skipped, and still counted
    result = run_cli(node, "append", "--from", str(source))
    assert result.returncode == 2 and f"{source}:4: " in result.stderr and "type" in result.stderr
    assert json.loads(run_cli(node, "status", "--json").stdout)["stream"]["messages"] == 0


def test_expected_seq_conflict_exits_4_and_writes_nothing(node: Settings) -> None:
    args = ["append", "--session", "cas", "--type", "note.added", "--actor", "a"]
    assert run_cli(node, *args, "--expected-seq", "0").returncode == 0
    conflict = run_cli(node, *args, "--expected-seq", "0")
    assert conflict.returncode == 4 and "expected_seq" in conflict.stderr and "at seq 1" in conflict.stderr
    assert appended(run_cli(node, *args, "--expected-seq", "1").stdout)[0]["seq"] == 2
    both = run_cli(node, *args, "--expected-seq", "2", "--from", "/dev/null")
    assert both.returncode == 2 and "--expected-seq" in both.stderr
    assert json.loads(run_cli(node, "status", "--json").stdout)["stream"]["messages"] == 2
    tailed = [json.loads(x) for x in run_cli(node, "tail", "--session", "cas", "--json").stdout.splitlines()]
    assert {event["principal"] for event in tailed} == {os_principal()}  # who ran `append`


def test_keys_rotate_and_old_events_still_verify(node: Settings) -> None:
    run_cli(node, "append", "--session", "k", "--type", "note.added", "--actor", "a")
    private = node.data_dir / "keys" / "private"
    for key_file in private.iterdir():
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o700
    before = json.loads(run_cli(node, "keys", "list", "--json").stdout)
    assert run_cli(node, "keys", "new", "--comment", "rotation").returncode == 0
    after = json.loads(run_cli(node, "keys", "list", "--json").stdout)
    assert len(after) == len(before) + 1 and sum(k["active"] for k in after) == 1
    # the running node signs with the key it loaded; a fresh CLI process signs with the new one
    result = run_cli(node, "append", "--session", "k", "--type", "note.added", "--actor", "a")
    tailed = [json.loads(x) for x in run_cli(node, "tail", "--session", "k", "--json").stdout.splitlines()]
    assert [e["key_id"] for e in tailed] == [
        before[0]["key_id"],
        next(k["key_id"] for k in after if k["active"]),
    ]
    assert result.returncode == 0
    assert run_cli(node, "verify").returncode == 0
    exported = json.loads(run_cli(node, "keys", "export-public").stdout)
    assert {k["key_id"] for k in exported["keys"]} == {k["key_id"] for k in after}
    assert "private" not in json.dumps(exported)


def test_help_lists_every_command() -> None:
    result = run_cli(Settings(), "--help")
    for command in ("up", "down", "status", "append", "tail", "verify", "keys", "demo"):
        assert command in result.stdout


def test_projector_producer_and_dlq_commands(node: Settings) -> None:
    listed = json.loads(run_cli(node, "producer", "list", "--json").stdout)
    assert {"decision_citation", "retraction", "causal"} <= {row["name"] for row in listed}
    assert all(row["enabled"] and row["running"] for row in listed)
    decision = appended(
        run_cli(
            node,
            "append",
            "--session",
            "w",
            "--type",
            "decision.made",
            "--actor",
            "a",
            "--payload",
            '{"decision_id": "d1", "title": "Cache tokens"}',
        ).stdout
    )[0]
    payload = {
        "task_id": "t1",
        "decision": "Cache tokens",
        "decision_event_seq": decision["seq"],
        "decision_event_hash": decision["hash"],
    }
    run_cli(
        node,
        "append",
        "--session",
        "w",
        "--type",
        "task.completed",
        "--actor",
        "a",
        "--payload",
        json.dumps(payload),
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # the node's producers derive the inferred edge
        tailed = run_cli(node, "tail", "--session", "w", "--json").stdout.splitlines()
        if any(json.loads(line)["type"] == "inference.edge.generated" for line in tailed):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("no inferred edge was derived")
    status = json.loads(run_cli(node, "projector", "status", "--json").stdout)
    assert any(s["consumer"].startswith("producer-") for s in status)
    assert all(s["dead_letters"] == 0 for s in status)
    letters = run_cli(node, "dlq", "list", "--json")
    assert letters.returncode == 0 and json.loads(letters.stdout) == []
    assert run_cli(node, "projector", "run", "nope").returncode != 0
    assert run_cli(node, "dlq", "retry", "--consumer", "ledger-mirror").returncode == 2


def test_graph_query_rebuild_and_schema_plan(node: Settings) -> None:
    for title in ("Use JetStream", "Use JetStream with R3"):
        run_cli(
            node,
            "append",
            "--session",
            "g",
            "--type",
            "decision.made",
            "--actor",
            "a",
            "--payload",
            json.dumps({"decision_id": "d1", "title": title}),
        )
    count = "MATCH (e:Event) WHERE e.session = 'g' RETURN count(e) AS n"
    deadline = time.monotonic() + 20
    while json.loads(run_cli(node, "graph", "query", count, "--json").stdout or "[{}]")[0].get("n") != 2:
        assert time.monotonic() < deadline, "the node's graph projector did not catch up"
        time.sleep(0.2)
    refused = run_cli(node, "graph", "query", "CREATE (e:Session {id: 'x'})")
    assert refused.returncode == 2 and "read" in refused.stderr.lower()
    secret = node.data_dir.parent / "secret.csv"
    secret.write_text("k\nnot-for-the-graph-4d1e\n")
    for reading_a_file in (f"LOAD FROM '{secret}' RETURN *", f"load /* x */ from '{secret}' return *"):
        refused = run_cli(node, "graph", "query", reading_a_file, "--json")
        assert refused.returncode == 2 and "read-only" in refused.stderr, refused.stderr
        assert "not-for-the-graph" not in refused.stdout + refused.stderr
    rebuilt = run_cli(node, "rebuild", "graph", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    report = json.loads(rebuilt.stdout)
    assert report["generation"] == 2 and report["events"] >= 2
    time.sleep(6)  # the node's projector adopts the new generation within its check interval
    assert json.loads(run_cli(node, "graph", "query", count, "--json").stdout)[0]["n"] == 2
    plan = run_cli(node, "schema-plan", "--json")
    assert plan.returncode == 0, plan.stderr
    listed = json.loads(plan.stdout)
    assert listed["backend"] == "ladybug"
    assert [m["name"] for m in listed["migrations"]] == [m.name for m in ladybug_schema.schema_plan()]
    neo = json.loads(run_cli(node, "schema-plan", "--backend", "neo4j", "--json").stdout)
    names = [m["name"] for m in neo["migrations"]]
    assert neo["backend"] == "neo4j" and names == [
        m.name for m in neo4j_schema.schema_plan()
    ]  # no Neo4j needed


def test_up_right_after_kill_9_is_not_refused(tmp_path: Path) -> None:
    """The killed node is left unreaped (a zombie, whose pid still answers kill 0): its lock died with it."""
    settings = Settings(data_dir=tmp_path / "data", projectors="none", producers="none")
    first = NodeProcess(settings)
    info = first.start()
    second = run_cli(settings, "up", "--detach")
    assert second.returncode == 1 and "already running" in second.stderr  # while it lives: refused
    assert first.process is not None
    first.process.send_signal(signal.SIGKILL)
    time.sleep(0.2)
    os.kill(info.pid, 0)  # still there as a zombie: a pid check would call it alive
    assert read_runtime(settings.runtime_file) is None
    again = NodeProcess(settings)
    try:
        assert again.start().pid != info.pid
    finally:
        again.stop()
        first.process.wait()


def test_verify_says_how_many_sessions_are_broken(tmp_path: Path) -> None:
    fixtures = Path(__file__).resolve().parent / "fixtures" / "format"
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    for name in ("example-session.jsonl", "MANIFEST.json"):
        (ledger / name).write_bytes((fixtures / name).read_bytes())
    (ledger / "other.jsonl").write_bytes(b"not an event\n")
    result = run_cli(
        Settings(data_dir=tmp_path / "data"),
        "verify", "--ledger-only", str(ledger), "--keyring", str(fixtures / "keyring.json"),
    )  # fmt: skip
    assert result.returncode == 1
    assert "verification failed: 1 of 2 session(s) broken" in " ".join(result.stdout.split())


def test_the_demo_prints_the_checkout_citations_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    long_line = "a fact " * 50 + "end-of-the-long-line"
    cited = "[1] eventloom://work/events/3#abc [bold]x[/bold]"
    prompt = f"Cite them as [1]; each [n] is an event.\n{cited}\n{long_line}"
    told = Told(
        citations={"decision": "eventloom://work/events/3#abc"},
        events={"fact": {"ts": "2026-11-25T00:00:00.000000Z"}},
        answers={
            "handoff": {
                "summary": {"events": 3},
                "integrity": {"ok": True},
                "replay": [
                    {"type": "goal.created", "digest": "Checkout p95 under 200 ms"},
                    {"type": "x.note.added", "digest": "x.note.added"},  # it says nothing more
                ],
            },
            "checkout": {"prompt": prompt, "answerability": {"answer_from_memory": True}},
            "as_of": {"hits": [{"entity": "cache", "summary": "TTL [5] minutes", "citations": []}]},
            "inferred": {
                "edges": 0,
                "by_kind": {},
                "by_method": {},
                "confidence": {},
                "evidence_coverage": 0,
                "missing_provenance": 0,
            },
            "causes": {"steps": []},
            "effects": {"steps": []},
            "verify": {"ok": True, "sessions": []},
        },
    )
    show_demo(told)
    printed = capsys.readouterr().err
    for kept in ("[1]", "[n]", "[bold]x[/bold]", "TTL [5] minutes"):
        assert kept in printed, kept
    assert "goal.created (Checkout p95 under 200 ms); x.note.added" in " ".join(printed.split())
    assert "x.note.added (x.note.added)" not in printed
    assert "end-of-the-long-line" in printed  # piped, the panel is a sane width and wraps, cutting nothing
    panel = [line for line in printed.splitlines() if line[:1] in ("╭", "│", "╰")]
    assert len(panel) > 4 and max(len(line) for line in panel) <= piped_width(), panel
