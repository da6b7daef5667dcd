"""docs/plugins.md stays true: its example plug-in installs, runs, scales out, rebuilds; its commands exist.

The example package is not copied anywhere: it is extracted from the doc's code blocks (each preceded by a
`<!-- file: PATH -->` line), pip-installed into this interpreter like a user would, and run for real against
a real nats-server, in-process and through the `eventloom` CLI the doc tells users to type.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
import re
import runpy
import shlex
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats.js.errors
import pytest

from eventloom.dlq import list_dead_letters
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.emitter import ProducerProjection
from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, available, load_producer, load_projector
from projectors.protocol import Producer, Projector, Rebuildable
from projectors.runner import ProjectorRunner
from tests.conftest import REPO, cli_env, run_cli
from tests.runtime_support import drained, install_plugin, running

DOC = REPO / "docs" / "plugins.md"
FILE_BLOCK = re.compile(r"^<!-- file: (?P<path>\S+) -->\n```[a-z]*\n(?P<body>.*?)^```$", re.M | re.S)
FENCED = re.compile(r"^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$", re.M | re.S)
INLINE = re.compile(r"`(eventloom [^`]+)`")
PACKAGE_FILES = {
    "pyproject.toml",
    "src/myplugin/__init__.py",
    "src/myplugin/counts.py",
    "src/myplugin/qa.py",
    "tests/test_qa.py",
}
PROJECTOR, PRODUCER = "my-counts", "qa-linker"


def doc_files() -> dict[str, str]:
    files = {m["path"]: m["body"] for m in FILE_BLOCK.finditer(DOC.read_text())}
    assert files, "docs/plugins.md marks no code block with <!-- file: ... -->"
    return files


@pytest.fixture(scope="module")
def plugin_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The doc's files written out as they are shown: `myplugin/...` and the scripts beside it."""
    root = tmp_path_factory.mktemp("from-doc")
    for relative, body in doc_files().items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    return root


@pytest.fixture(scope="module")
def myplugin(plugin_source: Path) -> Path:
    """pip-install the doc's package into this interpreter; its entry points become visible at once."""
    install_plugin(plugin_source / "myplugin")
    return plugin_source


def read_counts(data_dir: Path) -> dict[tuple[str, str], int]:
    """The reader the doc gives (`myplugin.counts.read_counts`), from the installed package."""
    module = importlib.import_module("myplugin.counts")
    counts: dict[tuple[str, str], int] = module.read_counts(data_dir)
    return counts


async def all_events(log: EventLog) -> list[Event]:
    return [event async for event in log.events()]


def expected_counts(events: list[Event]) -> dict[tuple[str, str], int]:
    return dict(Counter((event.session, event.type) for event in events))


async def run_until_drained(log: EventLog, make: Callable[[], Projector], **kwargs: Any) -> ProjectorRunner:
    async with running(log, make(), **kwargs) as runner:
        await drained(log, runner.consumer)
    return runner


async def ask_and_answer(log: EventLog, session: str) -> None:
    """A question, an answer citing it (derives), and an answer citing a wrong hash (derives nothing)."""
    question = await log.append(session, "question.asked", "me", {"text": "Which port?"})
    await log.append(
        session,
        "answer.given",
        "me",
        {"text": "4222", "question_seq": question.seq, "question_hash": question.hash},
    )
    await log.append(
        session,
        "answer.given",
        "me",
        {"text": "guess", "question_seq": question.seq, "question_hash": "0" * 64},
    )


async def append_notes(log: EventLog, sessions: int, per_session: int) -> None:
    await log.append_many(
        [
            AppendRequest(session=f"s{n % sessions}", type="note.added", actor="me", payload={"n": n})
            for n in range(sessions * per_session)
        ]
    )


def test_the_doc_shows_the_whole_example_package() -> None:
    files = doc_files()
    assert {p.removeprefix("myplugin/") for p in files if p.startswith("myplugin/")} == PACKAGE_FILES
    assert "forget_consumer.py" in files
    pyproject = files["myplugin/pyproject.toml"]
    assert f'{PROJECTOR} = "myplugin.counts:EventCounts"' in pyproject
    assert f'{PRODUCER} = "myplugin.qa:QaLinker"' in pyproject


def test_the_installed_example_is_found_and_listed(myplugin: Path, settings: Settings) -> None:
    assert available(PROJECTORS_GROUP)[PROJECTOR].value == "myplugin.counts:EventCounts"
    assert available(PRODUCERS_GROUP)[PRODUCER].value == "myplugin.qa:QaLinker"
    projector = load_projector(PROJECTOR, settings)
    assert isinstance(projector, Projector) and isinstance(projector, Rebuildable)
    assert projector.name == PROJECTOR
    assert isinstance(load_producer(PRODUCER, settings), Producer)
    for group, name in (("projector", PROJECTOR), ("producer", PRODUCER)):
        listed = run_cli(settings, group, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert {"name": name, "enabled": True}.items() <= next(
            row for row in json.loads(listed.stdout) if row["name"] == name
        ).items()


def test_the_example_unit_tests_pass(myplugin: Path) -> None:
    module = runpy.run_path(str(myplugin / "myplugin" / "tests" / "test_qa.py"))
    tests = [function for name, function in module.items() if name.startswith("test_")]
    assert len(tests) == 2
    for test in tests:
        test()


@pytest.mark.anyio
async def test_projector_and_producer_run_exactly_once_across_restarts_and_redelivery(
    myplugin: Path, log: EventLog, settings: Settings
) -> None:
    await ask_and_answer(log, "demo")
    await append_notes(log, sessions=3, per_session=4)

    def producer() -> Projector:
        return ProducerProjection(load_producer(PRODUCER, settings), log)

    def projector() -> Projector:
        return load_projector(PROJECTOR, settings)

    await run_until_drained(log, producer, role="producer")
    await run_until_drained(log, projector)
    events = await all_events(log)
    answered = [e for e in events if e.type == "question.answered"]
    assert len(answered) == 1, "the producer must derive once, and nothing for the wrong citation"
    question, answer = events[0], events[1]
    assert answered[0].session == "demo" and answered[0].actor == "producer:qa-linker"
    assert answered[0].caused_by == [answer.hash]
    assert answered[0].payload == {"question_seq": 1, "question_hash": question.hash, "answer_seq": 2}
    assert read_counts(settings.data_dir) == expected_counts(events)
    assert read_counts(settings.data_dir)[("demo", "question.answered")] == 1

    await ask_and_answer(log, "later")  # a restart picks up where it stopped
    await run_until_drained(log, producer, role="producer")
    await run_until_drained(log, projector)
    events = await all_events(log)
    assert read_counts(settings.data_dir) == expected_counts(events)

    js = log.client.jetstream()  # forget both positions: everything is delivered again
    await js.delete_consumer(log.layout.name, f"producer-{PRODUCER}")
    await js.delete_consumer(log.layout.name, f"projector-{PROJECTOR}")
    await run_until_drained(log, producer, role="producer")
    runner = await run_until_drained(log, projector)
    assert runner.stats.skipped == len(events) and runner.stats.applied == 0
    assert await all_events(log) == events, "redelivery derived something again"
    assert read_counts(settings.data_dir) == expected_counts(events)
    assert len([e for e in events if e.type == "question.answered"]) == 2


@pytest.mark.anyio
async def test_two_cli_workers_on_disjoint_partitions_project_everything_once(
    myplugin: Path, log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    await append_notes(log, sessions=12, per_session=5)
    workers = []
    for spec in ("0-7", "8-15"):
        output = open(tmp_path / f"worker-{spec}.log", "w")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "projector", "run", PROJECTOR, "--partitions", spec],
            env=cli_env(settings),
            cwd=REPO,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        workers.append((process, output))
    try:
        for spec in ("0-7", "8-15"):
            await drained(log, f"projector-{PROJECTOR}-p{spec}", timeout=60)
        await append_notes(log, sessions=12, per_session=1)  # both keep going while they run
        for spec in ("0-7", "8-15"):
            await drained(log, f"projector-{PROJECTOR}-p{spec}")
    except AssertionError as exc:  # what the workers said is the lead
        logs = {spec: (tmp_path / f"worker-{spec}.log").read_text() for spec in ("0-7", "8-15")}
        raise AssertionError(f"{exc}; the workers' output: {logs}") from exc
    finally:
        for process, _ in workers:
            process.send_signal(signal.SIGINT)
        for process, output in workers:
            process.wait(30)
            output.close()
    for (process, _), spec in zip(workers, ("0-7", "8-15"), strict=True):
        assert process.returncode == 0, (tmp_path / f"worker-{spec}.log").read_text()
    assert read_counts(settings.data_dir) == {(f"s{i}", "note.added"): 6 for i in range(12)}

    status = await asyncio.to_thread(run_cli, settings, "projector", "status", "--json")
    rows = {row["consumer"]: row for row in json.loads(status.stdout)}
    for spec in ("0-7", "8-15"):
        row = rows[f"projector-{PROJECTOR}-p{spec}"]
        assert row["lag"] == 0 and row["dead_letters"] == 0 and row["applied"] > 0
    assert await list_dead_letters(log.client) == []


@pytest.mark.anyio
async def test_eventloom_rebuild_swaps_in_a_fresh_generation_while_the_live_worker_goes_on(
    myplugin: Path, log: EventLog, settings: Settings
) -> None:
    await ask_and_answer(log, "q")
    await append_notes(log, sessions=4, per_session=5)
    projector = load_projector(PROJECTOR, settings)
    assert isinstance(projector, Rebuildable)
    async with running(log, projector) as live:
        await drained(log, live.consumer)
        assert projector.generation == 1
        incremental = read_counts(settings.data_dir)

        rebuilt = await asyncio.to_thread(run_cli, settings, "rebuild", PROJECTOR, "--json")
        assert rebuilt.returncode == 0, rebuilt.stderr
        report = json.loads(rebuilt.stdout)
        assert report["projector"] == PROJECTOR and report["generation"] == 2
        assert report["events"] == len(await all_events(log))
        state = settings.data_dir / "readmodels" / PROJECTOR
        assert (state / "current").resolve() == state / "gen-2"
        assert read_counts(settings.data_dir) == incremental  # the fresh generation, built from seq 1

        deadline = asyncio.get_running_loop().time() + 20
        while projector.generation != 2:  # the live worker adopts the swap
            assert asyncio.get_running_loop().time() < deadline, "the live worker did not adopt gen-2"
            await asyncio.sleep(0.05)
        await append_notes(log, sessions=4, per_session=2)
        await drained(log, live.consumer)
    assert read_counts(settings.data_dir) == expected_counts(await all_events(log))


@pytest.mark.anyio
async def test_the_manual_rebuild_of_a_plain_projector_works(
    myplugin: Path, log: EventLog, settings: Settings
) -> None:
    await append_notes(log, sessions=3, per_session=4)

    def projector() -> Projector:
        return load_projector(PROJECTOR, settings)

    await run_until_drained(log, projector)
    before = read_counts(settings.data_dir)
    consumer = f"projector-{PROJECTOR}"
    shutil.rmtree(settings.data_dir / "readmodels" / PROJECTOR)  # step 2
    forgot = await asyncio.to_thread(  # step 3: the doc's script, as a user runs it
        subprocess.run,
        [sys.executable, str(myplugin / "forget_consumer.py"), consumer],
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert forgot.returncode == 0, forgot.stderr
    with pytest.raises(nats.js.errors.NotFoundError):
        await log.client.jetstream().consumer_info(log.layout.name, consumer)
    runner = await run_until_drained(log, projector)  # step 4
    assert runner.stats.applied == 12
    assert read_counts(settings.data_dir) == before


def doc_commands() -> list[list[str]]:
    """Every `eventloom ...` command line the doc shows, in shell blocks and inline code, as argv."""
    text = DOC.read_text()
    lines: list[str] = []
    for block in FENCED.finditer(text):
        if block["lang"] == "bash":
            lines += block["body"].replace("\\\n", " ").splitlines()
    lines += INLINE.findall(text)
    commands = []
    for line in lines:
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value eventloom ...
            words.pop(0)
        if words and words[0] == "eventloom":
            commands.append(words[1:])
    return commands


@functools.cache
def cli_help(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *words, "--help"],
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def test_every_eventloom_command_in_the_doc_exists_with_its_options() -> None:
    commands = doc_commands()
    paths = {tuple(words[:2]) for words in commands}
    for required in (
        ("projector", "list"),
        ("projector", "run"),
        ("projector", "status"),
        ("producer", "list"),
        ("producer", "run"),
        ("dlq", "list"),
        ("dlq", "retry"),
        ("up", "--detach"),
        ("rebuild", PROJECTOR),
    ):
        assert required in paths, f"the doc does not show `eventloom {' '.join(required)}`"
    checked: set[tuple[str, ...]] = set()
    for words in commands:
        command = tuple(words[:1])
        if "Commands" in cli_help(*command).stdout and len(words) > 1 and not words[1].startswith("-"):
            command = tuple(words[:2])  # a group: `projector run`, `dlq retry`, `keys trust`
        result = cli_help(*command)
        assert result.returncode == 0, f"`eventloom {' '.join(command)}` does not exist: {result.stderr}"
        for option in (word.split("=", 1)[0] for word in words if word.startswith("-")):
            assert option in result.stdout, f"`eventloom {' '.join(command)}` has no option {option}"
        checked.add(command)
    assert len(checked) >= 10


def test_the_doc_imports_eventloom_only_through_its_front_doors() -> None:
    """A plug-in author needs `eventloom` and `projectors` (their `__all__`), nothing deeper."""
    imports = re.findall(
        r"^\s*from ((?:eventloom|projectors|readmodels)[\w.]*) import (.+)$", DOC.read_text(), re.M
    )
    assert imports, "docs/plugins.md imports nothing from Eventloom"
    for module, names in imports:
        assert module in {"eventloom", "projectors", "projectors.graph"}, f"docs/plugins.md imports {module}"
        exported = set(importlib.import_module(module).__all__)
        assert {n.strip() for n in names.split(",")} <= exported, (module, names)
