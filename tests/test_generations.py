"""A read model's generations and the files written whole: safe when several writers start at once.

Two workers of one projector on disjoint partitions start together on a fresh data dir and both create
generation 1. They once shared one temporary link name, so one could unlink or rename the other's half-made
link and die with FileNotFoundError (seen in CI as a worker that never drained).
"""

from __future__ import annotations

import functools
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from eventloom.keys import atomic_write
from projectors.generations import Generations

WRITERS, ROUNDS = 4, 60


def all_at_once(work: Callable[[int], object]) -> list[BaseException]:
    """Run `work(i)` on WRITERS threads released together; what they raised."""
    barrier = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        barrier.wait()
        try:
            work(index)
        except BaseException as exc:  # every failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def first_use(state: Path, found: list[Path], _: int) -> None:
    found.append(Generations(state).current())


def test_workers_starting_at_once_all_find_generation_one(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        state = tmp_path / f"round-{round_}"
        found: list[Path] = []
        errors = all_at_once(functools.partial(first_use, state, found))
        assert errors == []
        assert found == [state / "gen-1"] * WRITERS
        assert sorted(p.name for p in state.iterdir()) == ["current", "gen-1"], "a temporary name was left"


def test_a_link_to_a_deleted_generation_is_pointed_at_generation_one_again(tmp_path: Path) -> None:
    (tmp_path / "current").symlink_to("gen-7")
    assert Generations(tmp_path).current() == tmp_path / "gen-1"


def test_a_swap_points_at_the_new_generation_and_records_where_to_resume(tmp_path: Path) -> None:
    generations = Generations(tmp_path)
    generations.current()
    fresh = generations.next()
    generations.swap(fresh, resume_stream_seq=42)
    assert generations.current() == tmp_path / "gen-2"
    record = generations.last_swap()
    assert record is not None and (record.generation, record.resume_stream_seq) == (2, 42)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "gen-1", "gen-2", "resume.json"]


def test_atomic_writes_at_once_leave_one_whole_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "secret.json"
    for _ in range(ROUNDS):
        errors = all_at_once(lambda i: atomic_write(target, f"writer {i}\n".encode() * 1000, mode=0o600))
        assert errors == []
        body = target.read_bytes()
        assert body in {f"writer {i}\n".encode() * 1000 for i in range(WRITERS)}, "a torn or mixed file"
        assert os.listdir(tmp_path) == ["secret.json"]
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
