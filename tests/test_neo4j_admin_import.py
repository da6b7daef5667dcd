"""The CSV files and the command `neo4j-admin database import full` is given for a bulk load's tables."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from readmodels.graph.bulk.loader import SpilledFiles
from readmodels.graph.bulk.tables import EVENT, EVENT_CITES, HAS_EVENT, SESSION, CopyTarget
from readmodels.neo4j.admin_import import import_command, write_csv


def spill(directory: Path, target: CopyTarget, rows: list[dict[str, object]]) -> str:
    path = directory / f"{target.table}-{target.pair}.arrow"
    table = pa.Table.from_pylist(rows, schema=target.schema)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, target.schema) as writer:
        writer.write_table(table)
    return str(path)


def event(seq: int, summary: str | None, caused_by: list[str]) -> dict[str, object]:
    return {"uid": f"s1:{seq}", "session": "s1", "seq": seq, "summary": summary, "caused_by": caused_by}


def test_headers_name_id_spaces_and_types_and_values_keep_nulls_and_lists(tmp_path: Path) -> None:
    files: SpilledFiles = {
        EVENT: [spill(tmp_path, EVENT, [event(1, "", ["a", "b"]), event(2, None, [])])],
        SESSION: [spill(tmp_path, SESSION, [{"id": "s1", "event_count": 2}])],
        HAS_EVENT: [spill(tmp_path, HAS_EVENT, [{"from": "s1", "to": "s1:1"}, {"from": "s1", "to": "s1:2"}])],
        EVENT_CITES: [spill(tmp_path, EVENT_CITES, [{"from": "s1:1", "to": "src", "line_start": 3}])],
    }
    written = write_csv(files, tmp_path / "csv")
    assert (written.nodes, written.relationships, written.multiline) == (3, 3, False)
    headers = {path.name: path.read_text() for path in (tmp_path / "csv").glob("*-header.csv")}
    event_header = next(text for name, text in headers.items() if "-Event-" in name)
    assert event_header.startswith("uid:ID(Event),session,seq:long,")
    assert event_header.rstrip().endswith("caused_by:string[]")
    assert (
        next(t for n, t in headers.items() if "-HAS_EVENT-" in n).strip()
        == ":START_ID(Session),:END_ID(Event)"
    )
    cites = next(t for n, t in headers.items() if "-CITES_SOURCE-" in n)
    assert cites.startswith(":START_ID(Event),:END_ID(Source),path,line_start:long")
    data = next(p for p in (tmp_path / "csv").glob("*-Event-0.csv")).read_text().splitlines()
    assert data[0].split(",")[8] == '""' and data[0].endswith('"a\x1fb"')  # an empty string, a list
    assert data[1].split(",")[8] == ""  # null
    command = import_command("cp", written)
    assert command[5:9] == ["database", "import", "full", "neo4j"]
    assert "--array-delimiter=U+001F" in command
    assert sum(part.startswith(("--nodes=", "--relationships=")) for part in command) == 4


def test_a_line_break_in_a_value_turns_multiline_fields_on(tmp_path: Path) -> None:
    files: SpilledFiles = {EVENT: [spill(tmp_path, EVENT, [event(1, "two\nlines", [])])]}
    written = write_csv(files, tmp_path / "csv")
    assert written.multiline
    assert "--multiline-fields=true" in import_command("cp", written)
