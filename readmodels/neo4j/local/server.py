"""`LocalNeo4j`: a real Neo4j community server from Maven Central jars, started by a tiny launcher.

For the test suite, the benchmarks and `eventloom dev neo4j`, on machines with `java` (17+) and `mvn` but no
Docker engine. The jars are resolved once into a cache outside the repository (`~/.cache/eventloom/
neo4j-<version>`, or `EVENTLOOM_NEO4J_CACHE`), the launcher is compiled once per source change, and the
server listens for Bolt on 127.0.0.1 only, on a free port, with its data in a temporary directory. The
password is random and reaches the JVM through its environment, never its command line; with a data
directory of the caller's, it is kept beside the data (`kept_password`), so the server restarts on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from readmodels.neo4j.local.endpoint import Neo4jEndpoint, Neo4jUnavailable, wait_until_answering

NEO4J_VERSION: Final = "5.26.30"
PACKAGE_DIR: Final = Path(__file__).resolve().parent
LAUNCHER: Final = "Neo4jLauncher"
MIN_JAVA: Final = 17


def cache_dir() -> Path:
    configured = os.environ.get("EVENTLOOM_NEO4J_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "eventloom" / f"neo4j-{NEO4J_VERSION}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing_tools() -> str | None:
    """Why a local server cannot run here (no java 17+, no mvn), or None."""
    java, maven = shutil.which("java"), shutil.which("mvn")
    if java is None or maven is None:
        return "a local Neo4j needs `java` (17+) and `mvn` on PATH" + (
            " (java missing)" if java is None else ""
        )
    version = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', version)
    if match is None or int(match.group(1)) < MIN_JAVA:
        return f"a local Neo4j needs Java {MIN_JAVA}+; found: {version.strip().splitlines()[:1]}"
    return None


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One process at a time prepares the cache (two test runs may start together)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _resolved_classpath(cache: Path) -> str | None:
    listing = cache / "classpath.txt"
    if not listing.exists():
        return None
    classpath = listing.read_text().strip()
    return classpath if all(Path(jar).exists() for jar in classpath.split(os.pathsep)) else None


def prepare_classpath() -> str:
    """The launcher's classes and Neo4j's jars, fetched and compiled on first use, then cached."""
    cache = cache_dir()
    source = PACKAGE_DIR / f"{LAUNCHER}.java"
    classes = cache / f"launcher-{hashlib.sha256(source.read_bytes()).hexdigest()[:12]}"
    with _locked(cache):
        jars = _resolved_classpath(cache)
        if jars is None:
            shutil.copyfile(PACKAGE_DIR / "pom.xml", cache / "pom.xml")
            output = f"-Dmdep.outputFile={cache / 'classpath.txt'}"
            _run(
                ["mvn", "-q", "-B", "-f", str(cache / "pom.xml"), "dependency:build-classpath", output],
                "resolving Neo4j's jars with Maven",
            )
            jars = _resolved_classpath(cache)
            if jars is None:
                raise Neo4jUnavailable("Maven did not produce a usable classpath for Neo4j")
        if not (classes / f"{LAUNCHER}.class").exists():
            building = Path(tempfile.mkdtemp(dir=cache, prefix="build-"))
            _run(["javac", "-cp", jars, "-d", str(building), str(source)], "compiling the Neo4j launcher")
            building.replace(classes)
    return f"{classes}{os.pathsep}{jars}"


def _run(command: list[str], doing: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-2000:]
        raise Neo4jUnavailable(f"{doing} failed (exit {done.returncode}): {tail}")


PASSWORD_FILE: Final = "eventloom-neo4j-password"  # noqa: S105 (a file name, not a password)


def kept_password(home: Path) -> str:
    """The password of the server whose data is in `home`, kept in `home/PASSWORD_FILE` (mode 0600): made
    and written on the first start, read on the next, so `NEO4J_PASSWORD` stays valid across restarts. The
    launcher sets the password at every start, so a lost file costs only a new password, not the data."""
    kept = home / PASSWORD_FILE
    try:
        password = kept.read_text().strip()
    except FileNotFoundError:
        pass
    else:
        if len(password) < 8:
            raise Neo4jUnavailable(
                f"{kept}: expected a Neo4j password of 8+ characters on one line (delete it for a new one)"
            )
        return password
    home.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    descriptor = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(password + "\n")
    return password


class LocalNeo4j:
    """A Neo4j server process on 127.0.0.1; `stop` then `start` keeps its port, password and data."""

    def __init__(
        self,
        home: Path | None = None,
        *,
        port: int | None = None,
        page_cache_mib: int = 512,
        heap: str = "1g",
        startup_timeout_s: float = 180,
    ) -> None:
        self._owns_home = home is None
        self.home = Path(tempfile.mkdtemp(prefix="eventloom-neo4j-")) if home is None else home
        self.port = port or free_port()
        self.password = secrets.token_urlsafe(18) if home is None else kept_password(home)
        self._page_cache_mib = page_cache_mib
        self._heap = heap
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    @property
    def endpoint(self) -> Neo4jEndpoint:
        return Neo4jEndpoint(
            uri=f"bolt://127.0.0.1:{self.port}", user="neo4j", password=self.password, source="local"
        )

    @property
    def log_file(self) -> Path:
        return self.home / "launcher.log"

    def start(self) -> Neo4jEndpoint:
        """Start the server and return once it answers Bolt queries."""
        if self._process is not None and self._process.poll() is None:
            return self.endpoint
        classpath = prepare_classpath()
        self.home.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.log_file, "ab") as log:
            self._process = subprocess.Popen(
                ["java", f"-Xmx{self._heap}", "-XX:+UseG1GC", "-cp", classpath, LAUNCHER,
                 str(self.home / "data"), str(self.port), str(self._page_cache_mib)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "EVENTLOOM_NEO4J_PASSWORD": self.password},
            )  # fmt: skip
        try:
            self._wait_until_ready()
        except BaseException:
            self.kill()
            raise
        return self.endpoint

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        while b"READY bolt://" not in self.log_file.read_bytes()[self._log_start :]:  # not a past start's
            assert self._process is not None
            if self._process.poll() is not None:
                raise Neo4jUnavailable(f"Neo4j exited with {self._process.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise Neo4jUnavailable(
                    f"Neo4j did not start in {self._startup_timeout_s:.0f}s: {self.log_tail()}"
                )
            time.sleep(0.2)
        wait_until_answering(self.endpoint, max(5.0, deadline - time.monotonic()))

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def stop(self, timeout_s: float = 60) -> None:
        """Shut down cleanly (SIGTERM: the launcher's shutdown hook stops the database)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Stop at once (SIGKILL), as a crash would; the next `start` recovers from the transaction log."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def close(self) -> None:
        """Stop, and remove the data directory if this object made it."""
        self.stop()
        if self._owns_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> LocalNeo4j:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
