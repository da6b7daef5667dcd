"""The Dockerfile and .dockerignore, checked against the package they build (no Docker engine here): a pinned
slim base, a non-root user, no dev extras, and a wheel built from exactly the files the Dockerfile copies and
.dockerignore lets through."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = [pattern.rstrip("*") for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "a continued line at the end of the Dockerfile"
    return instructions


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each starting with its FROM."""
    found: list[list[tuple[str, str]]] = []
    for instruction in dockerfile_instructions():
        if instruction[0] == "FROM":
            found.append([])
        assert found, "the Dockerfile must start with FROM"
        found[-1].append(instruction)
    return found


def dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """(exclude?, regex) per line, in order; the last matching line decides, as in Docker."""
    patterns: list[tuple[bool, re.Pattern[str]]] = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclude = not line.startswith("!")
        glob = line.lstrip("!").strip("/")
        regex = ""
        index = 0
        while index < len(glob):
            if glob.startswith("**/", index):
                regex, index = regex + "(?:.*/)?", index + 3
            elif glob.startswith("**", index):
                regex, index = regex + ".*", index + 2
            elif glob[index] == "*":
                regex, index = regex + "[^/]*", index + 1
            elif glob[index] == "?":
                regex, index = regex + "[^/]", index + 1
            elif glob[index] == "[":
                end = glob.index("]", index)
                regex, index = regex + glob[index : end + 1], end + 1
            else:
                regex, index = regex + re.escape(glob[index]), index + 1
        patterns.append((exclude, re.compile(regex)))
    return patterns


def ignored(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether Docker leaves `relative` out of the build context (a match on any parent counts)."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    decision = False
    for exclude, regex in patterns:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            decision = exclude
    return decision


# --- the Dockerfile ----------------------------------------------------------------------------------------


def test_the_dockerfile_builds_a_non_root_eventloom_image_from_python_3_11_slim() -> None:
    built = stages()
    for stage in built:
        image = stage[0][1].split()[0]
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-[a-z]+)?", image), (
            f"FROM {image}: not python 3.11 slim"
        )
    final = built[-1]
    users = [arguments for keyword, arguments in final if keyword == "USER"]
    assert users, "the final stage runs as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"USER {users[-1]}"
    entrypoints = [arguments for keyword, arguments in final if keyword == "ENTRYPOINT"]
    assert entrypoints and json.loads(entrypoints[-1]) == ["eventloom"]
    env = dict(
        token.split("=", 1)
        for keyword, arguments in final
        if keyword == "ENV"
        for token in shlex.split(arguments)
        if "=" in token
    )
    assert env["EVENTLOOM_DATA_DIR"] == "/data"
    text = " ".join(arguments for _, arguments in dockerfile_instructions())  # comments left out
    assert not re.search(r"\bjava\b|openjdk|default-j[dr]e|temurin|maven", text, re.IGNORECASE), "no Java"
    installs = [
        arguments
        for stage in built
        for keyword, arguments in stage
        if keyword == "RUN" and re.search(r"pip install", arguments)
    ]
    assert installs, "no pip install"
    assert any(re.search(r"pip install(?: -\S+)* \.(?:\s|$)", run) for run in installs), installs
    assert not any("[dev" in run or "-e " in run or "requirements" in run for run in installs), installs


def test_dockerignore_keeps_secrets_and_caches_out_but_the_sources_in() -> None:
    patterns = dockerignore_patterns()
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        ".eventloom/keys/private/abc.key",
        ".eventloom-demo/ledger/s1.jsonl",
        "eventloom/__pycache__/event.cpython-311.pyc",
        ".mypy_cache/3.11/x.json",
        ".pytest_cache/v/cache/nodeids",
        ".ruff_cache/CACHEDIR.TAG",
        ".hypothesis/examples/x",
        "eventloom_memory.egg-info/PKG-INFO",
        "tests/conftest.py",
    ):
        assert ignored(path, patterns), f"{path} reaches the build context"
    for path in ("pyproject.toml", "README.md", "eventloom/event.py", "gateway/cli/__init__.py"):
        assert not ignored(path, patterns), f"{path} is left out of the build context"


def test_the_files_the_dockerfile_copies_build_the_package(tmp_path: Path) -> None:
    """What `pip install .` gets in the build stage: the COPYs, filtered by .dockerignore, build a wheel with
    every module, the package data and the `eventloom` command."""
    patterns = dockerignore_patterns()
    stage = next(s for s in stages() if any(k == "RUN" and "pip install" in a for k, a in s))
    context = tmp_path / "context"
    context.mkdir()
    for keyword, arguments in stage:
        if keyword != "COPY":
            continue
        parts = shlex.split(arguments)
        assert not any(part.startswith("--from") for part in parts), "the build stage copies from the repo"
        *sources, destination = parts
        for source in sources:
            origin = ROOT / source
            assert origin.exists(), f"COPY {source}: not in the repository"
            files = [origin] if origin.is_file() else sorted(p for p in origin.rglob("*") if p.is_file())
            for file in files:
                relative = file.relative_to(ROOT).as_posix()
                if ignored(relative, patterns):
                    continue
                inside = file.name if origin.is_file() else file.relative_to(origin).as_posix()
                target = context / destination / inside
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, target)
    wheels = tmp_path / "wheels"
    offline = ["--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    build = [sys.executable, "-m", "pip", "wheel", *offline, "--wheel-dir", str(wheels), str(context)]
    built = subprocess.run(build, check=False, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(
            archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")
        )
    expected = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    missing = sorted(expected - names)
    assert not missing, f"the image would lack: {missing[:10]}"
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        folder = package.replace(".", "/")
        for pattern in patterns:  # a name or a glob: every file of the checkout it matches is in the wheel
            matched = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / folder).glob(pattern))]
            assert matched, f"package data {package}: {pattern} matches no file"
            absent = [name for name in matched if name not in names]
            assert not absent, f"package data {package}: {absent} not in the wheel"
    assert re.search(r"^eventloom = gateway\.cli:main$", entry_points, re.MULTILINE)
    for group in (PROJECTORS_GROUP, PRODUCERS_GROUP):
        assert f"[{group}]" in entry_points
