"""Opening LadybugDB databases from several threads at once, in a process that has not loaded the driver's
native backend yet (a node starting its graph, claims and workflow stores): every one opens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_OPEN_FOUR_AT_ONCE = """
import sys, threading
from readmodels.embedded.ladybug_io import open_database
failures = []
def open_one(i):
    try:
        open_database(f"{sys.argv[1]}/db{i}", buffer_pool_size=64 * 1024 * 1024)
    except Exception as exc:
        failures.append(repr(exc))
threads = [threading.Thread(target=open_one, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(failures)
"""


def test_four_databases_opened_at_once_in_a_fresh_process_all_open(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _OPEN_FOUR_AT_ONCE, str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db0", "db1", "db2", "db3"]
