"""docs/workflows.md stays true: its recording example runs as written against a real node, every command
of "5. Ask" answers, and its client example runs and finds what the recording made."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest

from eventloom.log import EventLog
from eventloom.settings import Settings
from tests.conftest import REPO, run_cli
from tests.runtime_support import drained
from tests.test_workflow_live import workflow_node

pytestmark = pytest.mark.anyio
DOC = (REPO / "docs" / "workflows.md").read_text(encoding="utf-8")
PYTHON = re.findall(r"^```python\n(.*?)^```$", DOC, re.M | re.S)
ASK = re.search(r"^## 5\. Ask\n(.*?)^## ", DOC, re.M | re.S)


def ask_commands() -> list[list[str]]:
    assert ASK is not None, "docs/workflows.md has no '## 5. Ask' section"
    block = re.search(r"^```bash\n(.*?)^```$", ASK.group(1), re.M | re.S)
    assert block is not None
    lines = [line.split("#  ", 1)[0].split(" # ", 1)[0].strip() for line in block.group(1).splitlines()]
    commands = [shlex.split(line) for line in lines if line]
    assert all(command[:2] == ["eventloom", "workflow"] for command in commands)
    return [command[1:] for command in commands]


async def record_as_the_doc_does(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTLOOM_DATA_DIR", str(settings.data_dir))
    assert settings.nats_url is not None
    monkeypatch.setenv("EVENTLOOM_NATS_URL", settings.nats_url)
    source = PYTHON[0].replace("asyncio.run(main())", "")
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/workflows.md", "exec"), namespace)  # the doc's own example
    await namespace["main"]()


async def ask_as_the_doc_does(log: EventLog) -> Any:
    body = textwrap.indent(PYTHON[1].replace("print(", "printed.append("), "    ")
    source = f"async def example(log, printed):\n{body}\n    return history"
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/workflows.md", "exec"), namespace)  # the doc's own example
    printed: list[str] = []
    history = await namespace["example"](log, printed)
    return history, printed


async def test_the_doc_records_a_run_and_answers_every_question(
    settings: Settings, log: EventLog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with workflow_node(settings, log):
        opened = {"issue": "octo/widgets#42", "author": "carol", "created_at": "2026-03-02T09:15:00Z",
                  "title": "Parser crashes on empty input"}  # fmt: skip
        await log.append("github-octo-widgets", "workflow.issue.opened", "github:carol", opened)  # as in 4.
        await record_as_the_doc_does(settings, monkeypatch)
        await drained(log, "projector-workflow", timeout=60)
        history, printed = await ask_as_the_doc_does(log)
        assert printed == ["1. Add failing tests for empty and blank input. 2. Guard the tokenizer."]
        assert [version.version for version in history.versions] == [1, 2]
        for command in ask_commands():
            shown = await asyncio.to_thread(run_cli, settings, *command)
            assert shown.returncode == 0, f"eventloom {shlex.join(command)}: {shown.stderr}"
            assert "eventloom://" in shown.stdout, f"eventloom {shlex.join(command)}: no citation shown"
            answered = await asyncio.to_thread(run_cli, settings, *command, "--json")
            assert answered.returncode == 0 and json.loads(answered.stdout), shlex.join(command)
