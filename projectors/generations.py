"""Generations of an embedded read model: rebuild into a new directory, then swap it in atomically.

`<state_dir>/current` is a symlink to `gen-<n>/`. A rebuild fills `gen-<n+1>/` from stream sequence 1 while
the live store keeps answering, then replaces the symlink in one `rename` and writes `resume.json` beside
it: the stream sequence the live projector must continue from after it reopens the new generation.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import msgspec

from eventloom.keys import replace_atomically

_GENERATION = re.compile(r"^gen-(\d+)$")


class SwapRecord(msgspec.Struct, frozen=True):
    generation: int
    resume_stream_seq: int


class Generations:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.current_link = state_dir / "current"
        self.record_path = state_dir / "resume.json"

    def current(self) -> Path:
        """The live generation's directory, creating generation 1 on first use."""
        if not self.current_link.exists():
            first = self.state_dir / "gen-1"
            first.mkdir(parents=True, exist_ok=True)
            try:  # created in one step: two workers starting at once both find generation 1
                self.current_link.symlink_to(first.name)
            except FileExistsError:
                if not self.current_link.exists():  # a link left pointing at a deleted generation
                    self._point_at(first)
        return self.current_link.resolve()

    def live(self) -> Path | None:
        """The live generation's directory, if there is one yet (a reader: nothing is created)."""
        return self.current_link.resolve() if self.current_link.exists() else None

    def current_number(self) -> int:
        match = _GENERATION.match(self.current().name)
        return int(match.group(1)) if match else 1

    def next(self) -> Path:
        """A fresh, empty directory for the next generation."""
        numbers = [int(m.group(1)) for p in self.state_dir.glob("gen-*") if (m := _GENERATION.match(p.name))]
        target = self.state_dir / f"gen-{max(numbers, default=0) + 1}"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        return target

    def swap(self, generation: Path, resume_stream_seq: int) -> None:
        """Make `generation` the live one; the old one is kept until the next rebuild prunes it."""
        number = int(_GENERATION.match(generation.name).group(1))  # type: ignore[union-attr]
        record = msgspec.json.encode(SwapRecord(number, resume_stream_seq))
        replace_atomically(self.record_path, lambda tmp: tmp.write_bytes(record))
        self._point_at(generation)

    def last_swap(self) -> SwapRecord | None:
        try:
            return msgspec.json.decode(self.record_path.read_bytes(), type=SwapRecord)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def adopted(self, consumer: str) -> int:
        """The generation `consumer` last continued on after a swap (0: none)."""
        try:
            return int((self.state_dir / f"adopted-{consumer}").read_text())
        except (OSError, ValueError):
            return 0

    def adopt(self, consumer: str, generation: int) -> None:
        (self.state_dir / f"adopted-{consumer}").write_text(str(generation))

    def prune(self, keep: int = 2) -> None:
        """Delete all but the newest `keep` generations (never the live one)."""
        live = self.current()
        numbered = sorted(
            (int(m.group(1)), p) for p in self.state_dir.glob("gen-*") if (m := _GENERATION.match(p.name))
        )
        for _, path in numbered[:-keep]:
            if path != live:
                shutil.rmtree(path, ignore_errors=True)

    def _point_at(self, generation: Path) -> None:
        # atomic: readers see the old or the new target, never neither
        replace_atomically(self.current_link, lambda tmp: tmp.symlink_to(generation.name))
