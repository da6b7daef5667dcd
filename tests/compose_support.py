"""Reading docker-compose.yml as Docker Compose would (anchors, `${VAR:-default}`, command forms); shared
by tests/test_compose.py (no tests here)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def load_compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def services() -> dict[str, dict[str, Any]]:
    found = load_compose()["services"]
    assert isinstance(found, dict)
    return found


_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|\$(?P<bare>[A-Za-z_]\w*)"
)


def interpolate(value: str) -> str:
    """Compose's variable interpolation, with no variables set: what a bare `docker compose up` runs with.

    Every reference must carry a default: the deployment works with no configuration."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("braced") or match.group("bare")
        op, arg = match.group("op"), match.group("arg")
        assert op in ("-", ":-"), f"${{{name}}} has no default (in {value!r})"
        return str(arg)

    return _VARIABLE.sub(replace, value)


def argv_of(command: object) -> list[str]:
    if isinstance(command, str):
        return shlex.split(command)
    assert isinstance(command, list)
    assert all(isinstance(part, str) for part in command), command
    return [str(part) for part in command]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment`, either syntax, interpolated."""
    raw = service.get("environment") or {}
    pairs = dict(item.split("=", 1) for item in raw) if isinstance(raw, list) else raw
    assert isinstance(pairs, dict)
    return {str(name): interpolate(str(value)) for name, value in pairs.items()}


def healthcheck_argv(service: dict[str, Any]) -> list[str]:
    test = service["healthcheck"]["test"]
    assert isinstance(test, list), "an eventloom healthcheck is an exec-form list: [CMD, eventloom, ...]"
    assert test[0] == "CMD", f"{test}: exec form, no shell"
    argv = argv_of(test[1:])
    assert argv[0] == "eventloom", argv
    return argv[1:]


def command_argv(service: dict[str, Any]) -> list[str]:
    """The arguments of `eventloom`: the image's ENTRYPOINT is eventloom and the service keeps it."""
    assert "entrypoint" not in service, "the eventloom entrypoint comes from the Dockerfile"
    return argv_of(service["command"])


def volume_mounts(service: dict[str, Any]) -> dict[str, str]:
    """target -> source of a service's volumes, short or long syntax."""
    mounts: dict[str, str] = {}
    for entry in service.get("volumes") or []:
        if isinstance(entry, str):
            source, target = entry.split(":")[:2]
        else:
            source, target = entry["source"], entry["target"]
        mounts[target] = source
    return mounts


def named_volume_mount(service: dict[str, Any], path: str) -> str | None:
    """The named volume `path` lives on in this service's container, if any."""
    best: tuple[int, str] | None = None
    for target, source in volume_mounts(service).items():
        if source.startswith((".", "/", "~")):
            continue  # a bind mount
        if PurePosixPath(path).is_relative_to(target) and (best is None or len(target) > best[0]):
            best = (len(target), source)
    return best[1] if best else None
