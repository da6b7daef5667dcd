"""A node in its own process: what `eventloom up --detach`, the benchmarks and the crash tests start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from eventloom.errors import EventloomError
from eventloom.runtime import RuntimeInfo, read_runtime
from eventloom.settings import Settings


class NodeProcess:
    """`python -m gateway --data-dir D up` as a child process, ready once its runtime.json names it.

    Only the given settings reach the child (as `EVENTLOOM_*` variables); stray ones from the caller's
    environment do not, so a node without a NATS URL always starts its own embedded server.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        log_path: Path | None = None,
        new_session: bool = True,
        http: str | None = None,
    ) -> None:
        self.settings = settings
        self.http = http
        self.log_path = log_path or settings.data_dir / "node.log"
        self.new_session = new_session
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise EventloomError("the node process was not started")
        return self.process.pid

    def start(self, timeout: float = 30.0) -> RuntimeInfo:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")} | self.settings.to_env()
        command = [sys.executable, "-m", "gateway", "--data-dir", str(self.settings.data_dir), "up"]
        if self.http is not None:
            command += ["--http", self.http]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=self.new_session,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = read_runtime(self.settings.runtime_file)
            if info is not None and info.pid == self.process.pid:
                return info
            if self.process.poll() is not None:
                raise EventloomError(f"node exited with {self.process.returncode}:\n{self.log_tail()}")
            time.sleep(0.05)
        self.stop()
        raise EventloomError(f"node did not become ready within {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not stopped within `timeout`; returns the exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def kill(self) -> None:
        """kill -9, then reap it (an unreaped pid still looks alive to `eventloom up`)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no node log)"
