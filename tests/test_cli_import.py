"""`eventloom append --from FILE`: a bad line writes nothing; a line refused at the tail stops the import
after printing every line written before it, with no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eventloom.settings import Settings
from tests.conftest import run_cli

pytest_plugins = ["tests.cli_support"]  # the `node` and `refusing_node` fixtures


def _line(session: str, **extra: object) -> str:
    return json.dumps({"session": session, "type": "note.added", "actor": "importer", **extra})


def _messages(node: Settings) -> int:
    return int(json.loads(run_cli(node, "status", "--json").stdout)["stream"]["messages"])


def _no_crash(stderr: str) -> None:
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr


def test_a_wrong_expected_seq_stops_the_import_at_its_line(node: Settings, tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    lines = [_line("imp-a"), _line("imp-a", expected_seq=5), _line("imp-a"), _line("imp-b")]
    source.write_text("\n".join(lines) + "\n")
    result = run_cli(node, "append", "--from", str(source))
    _no_crash(result.stderr)
    assert result.returncode == 4, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(p["session"], p["seq"]) for p in printed] == [("imp-a", 1)]  # line 1 written, and printed
    assert f"{source}:2: " in result.stderr and "expected_seq" in result.stderr
    assert "import stopped: 1 line(s) appended (printed on stdout), 3 not, from this one on" in result.stderr
    tailed = run_cli(node, "tail", "--json").stdout.splitlines()
    assert [(e["session"], e["seq"]) for e in map(json.loads, tailed)] == [("imp-a", 1)]  # nor lines 3-4


def test_right_expected_seqs_all_land_in_order(node: Settings, tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    lines = [_line("imp-c", expected_seq=0), _line("imp-d"), _line("imp-c", expected_seq=1), _line("imp-c")]
    source.write_text("\n".join(lines))
    result = run_cli(node, "append", "--from", str(source))
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    expected = [("imp-c", 1), ("imp-d", 1), ("imp-c", 2), ("imp-c", 3)]
    assert [(p["session"], p["seq"]) for p in printed] == expected
    assert _messages(node) == 4


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        ('{"session": "s", "type": "note.added", "actor": ', "line"),
        (_line("s", colour="red"), "colour"),
    ],
    ids=["malformed-json", "unknown-field"],
)
def test_a_malformed_line_writes_nothing(
    refusing_node: Settings, tmp_path: Path, bad: str, names: str
) -> None:
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join([_line("s"), bad, _line("s")]))
    result = run_cli(refusing_node, "append", "--from", str(source))
    _no_crash(result.stderr)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"{source}:2: " in result.stderr and names in result.stderr, result.stderr
    assert _messages(refusing_node) == 0
