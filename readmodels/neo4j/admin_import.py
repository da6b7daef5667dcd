"""`neo4j-admin database import full` of a bulk load's tables: CSV files, the command, and running it.

The import tool is Neo4j's offline loader: it writes a new store directory from CSV files, without
transactions, which makes it the physical bound for filling an empty database. It needs the database's
files (not a Bolt connection) and a database that is not running, so it cannot rebuild a remote server's
live database; `bench/rebuild_neo4j.py` runs it on the very rows its rebuild loaded, into a scratch
directory, as the anchor the rebuild's rate is measured against. The tool comes from the same Maven
classpath as the local server (`org.neo4j:neo4j` depends on `neo4j-import-tool`); its entry point is
`org.neo4j.cli.AdminTool`, with `NEO4J_HOME` naming the directory the store is written under.

CSV conventions (Neo4j's import header format): each node table's key column is its `:ID`, in an ID space
named after the label; a relationship names both ends' ID spaces; list elements are separated by U+001F.
Nulls are empty fields and empty strings `""`; an empty list arrives as an absent property (the tool cannot
tell it from a missing one), which does not change the count of rows or the time taken.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from readmodels.graph.bulk.loader import SpilledFiles
from readmodels.graph.bulk.tables import CopyTarget
from readmodels.neo4j.bulk import node_key, relationship_ends

ENTRY_POINT: Final = "org.neo4j.cli.AdminTool"
ARRAY_DELIMITER: Final = "\x1f"
_HEADER_TYPES: Final = {
    "STRING": "",
    "INT64": ":long",
    "DOUBLE": ":double",
    "BOOLEAN": ":boolean",
    "STRING[]": ":string[]",
    "INT64[]": ":long[]",
}


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """One run of the import tool: rows it was given, wall time of the tool's process, where it wrote."""

    nodes: int
    relationships: int
    seconds: float
    csv_seconds: float
    home: str
    command: list[str]


@dataclass(frozen=True)
class ImportFiles:
    """CSV files for the tool: `--nodes` and `--relationships` arguments, and their row counts."""

    arguments: list[str]
    nodes: int
    relationships: int
    multiline: bool


def _header(target: CopyTarget) -> str:
    names: list[str] = []
    if target.node:
        key = node_key(target.table)
        for name, kind in target.columns:
            names.append(f"{name}:ID({target.table})" if name == key else name + _HEADER_TYPES[kind])
        return ",".join(names)
    start, end = relationship_ends(target)
    for name, kind in target.columns:
        if name == "from":
            names.append(f":START_ID({start})")
        elif name == "to":
            names.append(f":END_ID({end})")
        else:
            names.append(name + _HEADER_TYPES[kind])
    return ",".join(names)


def _flattened(table: pa.Table) -> tuple[pa.Table, bool]:
    """Lists joined with U+001F (the CSV writer has no lists); True if a string holds a line break."""
    multiline = False
    columns: list[Any] = []
    for original in table.columns:
        column: Any = original
        if pa.types.is_list(column.type):
            if column.type != pa.list_(pa.string()):
                column = pc.cast(column, pa.list_(pa.string()))
            column = pc.binary_join(column, ARRAY_DELIMITER)
        if pa.types.is_string(column.type):
            multiline = multiline or bool(pc.any(pc.match_substring_regex(column, "[\r\n]")).as_py())
        columns.append(column)
    return pa.table(columns, names=table.column_names), multiline


def write_csv(files: SpilledFiles, directory: Path) -> ImportFiles:
    """One header file and one data file per spilled Arrow file, and the tool's arguments for them."""
    directory.mkdir(parents=True, exist_ok=True)
    arguments: list[str] = []
    counts = {True: 0, False: 0}
    multiline = False
    options = pa_csv.WriteOptions(include_header=False, quoting_style="needed")
    for number, (target, paths) in enumerate(sorted(files.items(), key=lambda item: _name(item[0]))):
        header = directory / f"{number}-{target.table}-header.csv"
        header.write_text(_header(target) + "\n")
        parts = [str(header)]
        for index, path in enumerate(paths):
            with pa.memory_map(path) as source:
                table, breaks = _flattened(pa.ipc.open_file(source).read_all())
            multiline = multiline or breaks
            counts[target.node] += table.num_rows
            part = directory / f"{number}-{target.table}-{index}.csv"
            pa_csv.write_csv(table, part, options)
            parts.append(str(part))
        kind = "nodes" if target.node else "relationships"
        arguments.append(f"--{kind}={target.table}={','.join(parts)}")
    return ImportFiles(arguments, counts[True], counts[False], multiline)


def _name(target: CopyTarget) -> str:
    return f"{target.table}:{target.pair}"


def import_command(classpath: str, files: ImportFiles, *, database: str = "neo4j") -> list[str]:
    """`neo4j-admin database import full` through the jars' entry point (heap kept small: the tool
    works off-heap)."""
    return [
        "java",
        "-Xmx1g",
        "-cp",
        classpath,
        ENTRY_POINT,
        "database",
        "import",
        "full",
        database,  # before the file lists, which would take it for one more file
        "--overwrite-destination=true",
        f"--array-delimiter=U+{ord(ARRAY_DELIMITER):04X}",
        f"--multiline-fields={'true' if files.multiline else 'false'}",
        "--max-off-heap-memory=2G",
        "--report-file=" + os.devnull,
        *files.arguments,
    ]


def run_import(classpath: str, files: ImportFiles, home: Path, *, database: str = "neo4j") -> float:
    """Run the tool into `home` (a Neo4j home: `data/databases/<database>`); return its wall seconds."""
    (home / "conf").mkdir(parents=True, exist_ok=True)
    command = import_command(classpath, files, database=database)
    environment = {**os.environ, "NEO4J_HOME": str(home), "NEO4J_CONF": str(home / "conf")}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-3000:]
        raise RuntimeError(f"neo4j-admin database import failed (exit {done.returncode}): {tail}")
    return seconds


def import_tables(classpath: str, files: SpilledFiles, scratch: Path) -> ImportReport:
    """CSV from the spilled tables (timed apart), then the import into `scratch / "home"`."""
    started = time.perf_counter()
    csv = write_csv(files, scratch / "csv")
    csv_seconds = time.perf_counter() - started
    home = scratch / "home"
    seconds = run_import(classpath, csv, home)
    return ImportReport(
        nodes=csv.nodes,
        relationships=csv.relationships,
        seconds=round(seconds, 3),
        csv_seconds=round(csv_seconds, 3),
        home=str(home),
        command=[
            part if not part.startswith("--nodes") and not part.startswith("--rel") else part.split(",")[0]
            for part in import_command("<classpath>", csv)
        ],
    )
