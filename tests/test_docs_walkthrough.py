"""The docs stay true: the shell blocks of README.md, docs/mcp.md and docs/plugins.md are run as a user
types them, in order, in a fresh directory with the default data dir (`./.eventloom`), against a real node.

Each ```bash block is one walk. A command runs through bash; one that fails is tried again for a while (the
read models catch up with the log asynchronously), and must then succeed. Commands a user leaves running in
a terminal of their own (`projector run`, `producer run`, `gateway http`) run in the background until the
walk ends, and must still be running then. Placeholders are filled as the doc tells the user to: `<hash of
event N>` is the hash `eventloom tail` shows, and the fixed port 8787 becomes a free one. The few commands a
walk cannot run are listed in `SKIPPED`, each with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest

from tests.conftest import REPO
from tests.test_plugins_doc import myplugin, plugin_source  # noqa: F401 (the example plug-in, pip-installed)

pytestmark = pytest.mark.slow
BLOCK = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.M | re.S)
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
HASH_PLACEHOLDER = re.compile(r"<hash of event (\d+)>")
DOC_PORT = "127.0.0.1:8787"
BACKGROUND = (
    ("eventloom", "projector", "run"),
    ("eventloom", "producer", "run"),
    ("eventloom", "gateway", "http"),
)
SKIPPED = {
    "make": "the walk runs in the project's own interpreter, already installed",
    "source": "the walk puts the interpreter's bin directory first on PATH instead",
    "pip": "the example plug-in is pip-installed by the `myplugin` fixture, as the doc says",
}
RETRY_S = 45.0


@dataclass
class Walk:
    """A shell session in `home`: the commands of one block, run in order."""

    home: Path
    env: dict[str, str]
    background: list[subprocess.Popen[str]] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)

    def run(self, command: str, expect: str | None = None) -> str:
        filled = self._filled(command)
        argv = shlex.split(filled, comments=True)
        if not argv or argv[0] in SKIPPED:
            return ""
        if tuple(argv[:3]) in BACKGROUND:
            self._start(filled)
            return ""
        deadline = time.monotonic() + RETRY_S
        while True:
            done = subprocess.run(
                ["bash", "-c", filled],
                cwd=self.home, env=self.env, capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            ok = done.returncode == 0 and (expect is None or expect in done.stdout + done.stderr)
            if ok or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        output = f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
        assert ok, f"{command}\nexit {done.returncode}\n{output}"
        self.ran.append(" ".join(argv[:2]) if argv[0] == "eventloom" else argv[0])
        return done.stdout

    def _filled(self, command: str) -> str:
        command = command.replace(DOC_PORT, f"127.0.0.1:{self.env['WALK_PORT']}")
        for match in HASH_PLACEHOLDER.finditer(command):
            session = re.search(r"--session (\S+)", command)
            assert session is not None, f"{command}: a hash placeholder needs --session"
            events = subprocess.run(
                ["eventloom", "tail", "--session", session[1], "--json"],
                cwd=self.home, env=self.env, capture_output=True, text=True, timeout=60, check=True,
            ).stdout.splitlines()  # fmt: skip
            seq = int(match[1])
            event = next(json.loads(line) for line in events if json.loads(line)["seq"] == seq)
            command = command.replace(match[0], event["hash"])
        return command

    def _start(self, command: str) -> None:
        log = open(self.home / f"background-{len(self.background)}.log", "w")  # noqa: SIM115 (kept open)
        running = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.home, env=self.env, stdout=log, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.background.append(running)
        time.sleep(3)  # what a user would wait before typing in the next terminal

    def end(self) -> None:
        """Every background command still runs, then stops cleanly on Ctrl-C; the node goes down."""
        alive = [process.poll() is None for process in self.background]
        for process in self.background:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in self.background:
            process.wait(timeout=30)
        subprocess.run(
            ["eventloom", "down"], cwd=self.home, env=self.env, capture_output=True, timeout=60, check=False
        )
        logs = [(self.home / f"background-{i}.log").read_text() for i in range(len(self.background))]
        assert all(alive), f"a background command ended early: {logs}"


def commands(doc: str, containing: str) -> list[str]:
    """The commands of the ```bash block of `doc` that contains `containing`, continuation lines and
    multi-line quotes joined into one command each."""
    blocks = [b["body"] for b in BLOCK.finditer((REPO / doc).read_text()) if containing in b["body"]]
    assert len(blocks) == 1, f"{doc}: {len(blocks)} bash blocks contain {containing!r}"
    joined: list[str] = []
    pending, glue = "", "\n"
    for line in blocks[0].splitlines():
        pending = f"{pending}{glue}{line}" if pending else line
        glue = "\n"
        if pending.endswith("\\"):
            pending, glue = pending[:-1], " "
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on on the next line
            continue
        if pending.strip():
            joined.append(pending)
        pending = ""
    return joined


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walk]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVENTLOOM_", "NEO4J_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["WALK_PORT"] = str(_free_port())
    session = Walk(home=tmp_path, env=env)
    try:
        yield session
    finally:
        session.end()


def test_readme_using_it(walk: Walk) -> None:
    """Every command of the README's walk succeeds; the causal line finds the edge the producer proposed."""
    for command in commands("README.md", "eventloom up --detach  "):
        # the cause, found by a part of the name; the decision, as of the time the command runs
        expect = "Use JetStream" if "memory causal" in command or "--as-of" in command else None
        walk.run(command, expect=expect)
    assert walk.ran.count("eventloom append") == 4
    assert "eventloom down" in walk.ran


def test_readme_http_recipe(walk: Walk) -> None:
    recipe = commands("README.md", "eventloom tokens add ci-agent")
    assert any("gateway http" in c for c in recipe) and any("up --detach --http" in c for c in recipe)
    for command in recipe:  # with a node on HTTP already, the recipe's second way serves on a port of its own
        own_port = f"127.0.0.1:{_free_port()}"
        walk.run(command.replace(DOC_PORT, own_port) if "gateway http" in command else command)
    port = walk.env["WALK_PORT"]
    # healthy once every role is up: on a loaded machine one may still be starting (or restarting) then
    deadline = time.monotonic() + 60
    while (answer := httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=10)).status_code != 200:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.5)


def test_mcp_doc_http_setup(walk: Walk) -> None:
    for command in commands("docs/mcp.md", "eventloom tokens add builder"):
        walk.run(command)
    tokens = json.loads(walk.run("eventloom tokens list --json"))
    assert {t["name"] for t in tokens} >= {"ci-agent", "builder", "ops"}


@pytest.mark.usefixtures("myplugin")
def test_plugins_doc_run_it_alone_then_in_the_node(walk: Walk) -> None:
    for command in commands("docs/plugins.md", "EVENTLOOM_PROJECTORS=all,-my-counts"):
        walk.run(command)
    demo = commands("docs/plugins.md", "question.asked")
    for command in demo[:-1]:
        walk.run(command)
    walk.run(demo[-1], expect="('demo', 'question.answered'): 1")
    tail = walk.run("eventloom tail --session demo --json")
    assert [json.loads(line)["type"] for line in tail.splitlines()] == [
        "question.asked", "answer.given", "question.answered",
    ]  # fmt: skip
    walk.end()
    walk.background.clear()
    for command in commands("docs/plugins.md", "yours included"):
        walk.run(command, expect="* my-counts" if "projector list" in command else None)
    for block in (
        "eventloom projector status --json",
        "eventloom dlq list",
        "eventloom rebuild my-counts --json",
    ):
        for command in commands("docs/plugins.md", block):
            walk.run(command)


def test_readme_python_block_runs_as_a_script(walk: Walk) -> None:
    """The README's Python, saved to a file and run as typed, against the node `eventloom up` starts: it
    prints the append's citation and a prompt that already holds that append (read with `after`)."""
    (block,) = [b for b in PYTHON_BLOCK.findall((REPO / "README.md").read_text()) if "EventLog.open" in b]
    script = walk.home / "readme_example.py"
    script.write_text(block)
    walk.run("eventloom up --detach")
    printed = walk.run(f"python {script}")
    citation, prompt = printed.split("\n", 1)
    assert citation.startswith("eventloom://s1/events/1#")
    assert "Write the release notes" in prompt and citation in prompt  # the task just appended, cited


def test_claims_doc_command_line_runs_as_typed(walk: Walk) -> None:
    """docs/claims.md's command-line block, on a fresh node: every session it cites, it creates first."""
    walk.run("eventloom up --detach")
    for command in commands("docs/claims.md", "eventloom claims resolve"):
        expect = "1 open contradiction" if "claims contradictions" in command else None
        walk.run(command, expect=expect)
    assert walk.ran.count("eventloom claims") >= 10
