"""docker-compose.yml, the Dockerfile and .dockerignore, checked against the code they deploy.

There is no Docker engine here, so nothing is started: every command and healthcheck of an eventloom service
is parsed by the real `eventloom` CLI (click's own parser), every environment variable is read by the real
`Settings.from_env`, and the package is built into a wheel from exactly the files the Dockerfile copies and
.dockerignore lets through.
"""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer
import typer.main
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from eventloom.bus.embedded import nats_server_binary
from eventloom.settings import Settings
from gateway.cli import app
from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, available
from readmodels.neo4j.local.provision import IMAGE as NEO4J_TEST_IMAGE
from tests.compose_support import (
    argv_of,
    command_argv,
    environment,
    healthcheck_argv,
    interpolate,
    load_compose,
    named_volume_mount,
    services,
    volume_mounts,
)

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

EVENTLOOM_SERVICES = ("ledger", "query", "producers", "gateway")
ONE_SHOT_SERVICES = ("nats-auth", "nats-cluster-auth")  # run before NATS starts: no healthcheck to wait for
CLUSTER_MEMBERS = ("nats-1", "nats-2", "nats-3")  # the `cluster` profile's servers
EXPECTED_SERVICES = {"nats", "neo4j", *EVENTLOOM_SERVICES, *ONE_SHOT_SERVICES, *CLUSTER_MEMBERS}
EXPECTED_VOLUMES = {
    "nats-data",
    "nats-auth",
    "neo4j-data",
    "eventloom-data",
    *(f"{member}-data" for member in CLUSTER_MEMBERS),
}
EXPECTED_PUBLISHED = {4222, 7474, 7687, 8787}
HEALTHY = {"condition": "service_healthy"}


# --- the CLI -----------------------------------------------------------------------------------------------


def resolve(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Walk `eventloom ARGV` down the Typer app to its command and let its parser read the arguments.

    Returns the command path (e.g. ["producer", "run"]) and the parsed parameters: an unknown command, an
    unknown option or a wrong number of arguments fails here exactly as it would in the container."""
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    group = root
    parent = typer.Context(group, info_name="eventloom")
    path: list[str] = []
    rest = list(argv)
    while True:
        where = " ".join(["eventloom", *path])
        while rest and rest[0].startswith("-"):  # the group's own options (e.g. --data-dir)
            option = rest.pop(0).split("=", 1)
            param = next((p for p in group.params if option[0] in p.opts), None)
            assert param is not None, f"{where}: no option {option[0]}"
            if len(option) == 1 and not (isinstance(param, TyperOption) and param.is_flag):
                rest.pop(0)
        assert rest, f"{where}: a subcommand is missing"
        name = rest.pop(0)
        found = group.get_command(parent, name)
        assert found is not None, f"{where}: no command {name!r} (has: {sorted(group.commands)})"
        path.append(name)
        if not isinstance(found, TyperGroup):
            break
        if found.invoke_without_command and not any(not token.startswith("-") for token in rest):
            break  # a group that is a command of its own too (`status --json`, beside `status peers`)
        group = found
        parent = typer.Context(group, info_name=name, parent=parent)
    known = {opt for param in found.params for opt in (*param.opts, *param.secondary_opts)}
    for token in rest:
        if token.startswith("--"):
            used = token.split("=", 1)[0]
            assert used in known, f"eventloom {' '.join(path)}: no option {used} (has: {sorted(known)})"
    context = found.make_context(name, rest, parent=parent)
    return path, dict(context.params)


INVOCATIONS = [(service, kind) for service in EVENTLOOM_SERVICES for kind in ("command", "healthcheck")]


def argv_for(service: str, kind: str) -> list[str]:
    found = services()[service]
    return command_argv(found) if kind == "command" else healthcheck_argv(found)


# --- services, images, ports, volumes ----------------------------------------------------------------------


def test_every_service_exists_and_the_images_are_pinned() -> None:
    found = services()
    assert set(found) == EXPECTED_SERVICES
    for name, service in found.items():
        image = service.get("image")
        assert isinstance(image, str), f"{name}: no image"
        if "build" in service:
            continue  # built here, from the Dockerfile's pinned base (checked below)
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest" and re.search(r"\d", tag), f"{name}: {image} is not pinned"


def test_eventloom_services_build_the_repository_dockerfile() -> None:
    for name in EVENTLOOM_SERVICES:
        service = services()[name]
        assert service["image"] == "eventloom:local", name
        build = service["build"]
        context = ROOT / (build if isinstance(build, str) else build["context"])
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        assert context.resolve() == ROOT, name
        assert (context / dockerfile).resolve() == DOCKERFILE, name
        assert service["restart"] == "unless-stopped", name


def test_every_published_port_is_bound_to_loopback() -> None:
    published: set[int] = set()
    for name, service in services().items():
        assert service.get("network_mode") != "host", f"{name}: host networking publishes everything"
        for port in service.get("ports") or []:
            if isinstance(port, dict):
                host_ip, host_port = port.get("host_ip"), port.get("published")
            else:
                match = re.fullmatch(
                    r"(?:(?P<ip>[\d.]+):)?(?:(?P<host>\d+):)?(?P<container>\d+)(?:/\w+)?", port
                )
                assert match is not None, f"{name}: cannot read port {port!r}"
                host_ip, host_port = match.group("ip"), match.group("host")
            assert host_ip == "127.0.0.1", f"{name}: port {port!r} is not bound to 127.0.0.1"
            assert host_port is not None, f"{name}: port {port!r} publishes on a random host port"
            published.add(int(host_port))
    assert published == EXPECTED_PUBLISHED


def test_named_volumes_are_declared_and_used() -> None:
    compose = load_compose()
    declared = set(compose["volumes"])
    assert declared == EXPECTED_VOLUMES
    used: set[str] = set()
    for name, service in compose["services"].items():
        for source in volume_mounts(service).values():
            if not source.startswith((".", "/", "~")):
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert used == declared
    assert volume_mounts(compose["services"]["neo4j"]) == {"/data": "neo4j-data"}


def test_every_eventloom_role_shares_one_data_volume_at_the_data_dir() -> None:
    """The roles sign with the node's key in <data>/keys, which the verifier trusts: one volume for all."""
    for name in EVENTLOOM_SERVICES:
        service = services()[name]
        assert volume_mounts(service) == {"/data": "eventloom-data"}, name
        assert environment(service)["EVENTLOOM_DATA_DIR"] == "/data", name


def test_nats_runs_jetstream_on_a_named_volume_at_the_tested_version() -> None:
    nats = services()["nats"]
    argv = argv_of(nats["command"])
    if argv[0] == "nats-server":
        argv = argv[1:]
    assert "-js" in argv or "--jetstream" in argv
    store_flag = next(flag for flag in ("-sd", "--store_dir") if flag in argv)
    store_dir = argv[argv.index(store_flag) + 1]
    assert named_volume_mount(nats, store_dir) == "nats-data"
    monitor_port = argv[argv.index(next(flag for flag in ("-m", "--http_port") if flag in argv)) + 1]
    probe = " ".join(argv_of(nats["healthcheck"]["test"]))
    assert f"127.0.0.1:{monitor_port}/healthz" in probe
    # The same nats-server version as the embedded one the tests run against (atomic batches need >= 2.12).
    version = subprocess.run(
        [str(nats_server_binary()), "--version"], capture_output=True, text=True, check=True
    ).stdout
    tested = re.search(r"v(\d+)\.(\d+)\.(\d+)", version)
    assert tested is not None, version
    tag = nats["image"].rpartition(":")[2]
    pinned = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", tag)
    assert pinned is not None, tag
    pinned_parts = [int(part) for part in pinned.groups() if part is not None]
    assert pinned_parts == [int(part) for part in tested.groups()][: len(pinned_parts)], (tag, version)
    assert (int(pinned.group(1)), int(pinned.group(2))) >= (2, 12)


def test_neo4j_is_the_tested_image_with_a_valid_password() -> None:
    neo4j = services()["neo4j"]
    assert neo4j["image"] == NEO4J_TEST_IMAGE
    user, _, password = environment(neo4j)["NEO4J_AUTH"].partition("/")
    assert user == "neo4j"
    assert len(password) >= 8, "Neo4j 5 refuses passwords shorter than 8 characters"
    assert "${NEO4J_PASSWORD:-" in neo4j["environment"]["NEO4J_AUTH"], "the password comes from a variable"
    probe = interpolate(" ".join(argv_of(neo4j["healthcheck"]["test"])))
    assert "cypher-shell" in probe or ":7474" in probe


def test_nats_accepts_only_the_role_users_nats_auth_generates() -> None:
    """nats-auth writes the authorization block where NATS reads it, before NATS starts; each eventloom
    service connects as its role, whose password it finds on the shared data volume."""
    found = services()
    auth = found["nats-auth"]
    path, params = resolve(command_argv(auth))
    assert path == ["nats", "config"] and params["output"] is not None
    written = PurePosixPath(str(params["output"]))
    nats = found["nats"]
    argv = argv_of(nats["command"])
    config = PurePosixPath(argv[argv.index("-c") + 1])
    assert config == written
    assert named_volume_mount(nats, str(config)) == named_volume_mount(auth, str(written)) == "nats-auth"
    assert named_volume_mount(auth, "/data/nats/credentials.json") == "eventloom-data"
    assert nats["depends_on"]["nats-auth"] == {"condition": "service_completed_successfully"}
    users = {name: environment(found[name]).get("EVENTLOOM_NATS_USER") for name in EVENTLOOM_SERVICES}
    assert users == {"ledger": "admin", "query": "query", "producers": "producer", "gateway": "gateway"}
    assert all("EVENTLOOM_NATS_PASSWORD" not in environment(found[n]) for n in EVENTLOOM_SERVICES)


# --- healthchecks and dependencies -------------------------------------------------------------------------


def test_every_service_has_a_healthcheck() -> None:
    for name, service in services().items():
        if name in ONE_SHOT_SERVICES:
            continue
        check = service.get("healthcheck")
        assert isinstance(check, dict), f"{name}: no healthcheck"
        assert not check.get("disable"), name
        test = check["test"]
        assert test not in (["NONE"], "NONE"), name
        assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL"), f"{name}: {test}"


def test_dependencies_wait_for_healthy_services() -> None:
    found = services()
    for name in EVENTLOOM_SERVICES:
        depends = found[name]["depends_on"]
        assert isinstance(depends, dict), f"{name}: depends_on needs conditions"
        assert depends["nats"] == HEALTHY, name
        if name != "ledger":  # the ledger's node creates the signing key and the stream first
            assert depends["ledger"] == HEALTHY, name
        for dependency, condition in depends.items():
            assert condition == HEALTHY, f"{name} -> {dependency}"
            assert "healthcheck" in found[dependency], (
                f"{name} waits for {dependency}, which has no healthcheck"
            )
    assert "neo4j" in found["query"]["depends_on"]


# --- commands and healthchecks are real CLI invocations ----------------------------------------------------


@pytest.mark.parametrize(("service", "kind"), INVOCATIONS)
def test_invocation_parses_against_the_cli(service: str, kind: str) -> None:
    path, params = resolve(argv_for(service, kind))
    if path == ["producer", "run"]:  # NAMES... must be installed producers
        names = set(params["names"])
        installed = set(available(PRODUCERS_GROUP))
        assert names and names <= installed, f"not installed: {sorted(names - installed)}"


@pytest.mark.parametrize(("service", "kind"), INVOCATIONS)
def test_invocation_help_runs(service: str, kind: str, tmp_path: Path) -> None:
    path, _ = resolve(argv_for(service, kind))
    result = CliRunner().invoke(app, [*path, "--help"], env={"EVENTLOOM_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_the_expected_roles_run() -> None:
    commands = {name: command_argv(services()[name]) for name in EVENTLOOM_SERVICES}
    assert commands["ledger"] == ["up"]
    assert commands["query"][:2] == ["query", "serve"]
    assert commands["producers"][:2] == ["producer", "run"]
    # every producer pyproject.toml ships (a test may have installed a sample plug-in beside them)
    assert sorted(commands["producers"][2:]) == sorted(PYPROJECT["project"]["entry-points"][PRODUCERS_GROUP])
    assert commands["gateway"][:2] == ["gateway", "http"]
    assert healthcheck_argv(services()["ledger"]) == ["health", "ledger"]
    assert healthcheck_argv(services()["query"]) == ["health", "query"]
    assert healthcheck_argv(services()["producers"]) == ["status", "--json"]
    assert healthcheck_argv(services()["gateway"])[:2] == ["health", "gateway"]


def test_the_gateway_listens_on_all_interfaces_where_it_is_published_and_probed() -> None:
    gateway = services()["gateway"]
    _, params = resolve(command_argv(gateway))
    host, _, port = str(params["listen"]).rpartition(":")
    assert host == "0.0.0.0", "inside the container the gateway must accept Docker's forwarded connections"
    assert any(str(entry).endswith(f":{port}") for entry in gateway["ports"])
    _, probe = resolve(healthcheck_argv(gateway))
    url = urlsplit(str(probe["url"]))
    assert (url.hostname, str(url.port), url.path) == ("127.0.0.1", port, "/healthz")
    tokens = str(params["tokens"])
    assert named_volume_mount(gateway, tokens) == "eventloom-data"


# --- environment -------------------------------------------------------------------------------------------


def names_from_env_reads() -> set[str]:
    """The string literals `Settings.from_env` passes to `os.environ.get`, `_env_int` and `_env_float`."""
    tree = ast.parse((ROOT / "eventloom" / "settings.py").read_text())
    from_env = next(
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "from_env"
    )
    names: set[str] = set()
    for node in ast.walk(from_env):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        called = ast.unparse(node.func)
        first = node.args[0]
        if called in ("os.environ.get", "_env_int", "_env_float") and isinstance(first, ast.Constant):
            names.add(str(first.value))
    return names


def known_names() -> set[str]:
    everything = Settings(
        nats_url="nats://x:4222",
        graph_backend="neo4j",
        neo4j_uri="bolt://x:7687",
        nats_user="x",
        llm_base_url="http://127.0.0.1:8000/v1",
        llm_model="m",
        llm_api_key_env="KEY",
    )
    return set(everything.to_env())


def test_to_env_covers_every_variable_from_env_reads() -> None:
    reads = names_from_env_reads()
    assert {"EVENTLOOM_DATA_DIR", "EVENTLOOM_NATS_URL", "NEO4J_URI"} <= reads  # the parse found them
    assert reads == known_names()


@pytest.mark.parametrize("service", EVENTLOOM_SERVICES)
def test_every_variable_set_is_one_the_settings_read(service: str) -> None:
    env = environment(services()[service])
    unknown = set(env) - known_names() - names_from_env_reads()
    assert not unknown, f"{service} sets variables nothing reads: {sorted(unknown)}"
    if env.get("EVENTLOOM_GRAPH_BACKEND") == "neo4j":
        assert env.get("NEO4J_URI"), f"{service}: the neo4j backend needs NEO4J_URI"


@pytest.mark.parametrize("service", EVENTLOOM_SERVICES)
def test_the_settings_accept_each_service_environment(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings.from_env, given exactly the service's environment, validates and points at the services."""
    found = services()
    for name in known_names() | names_from_env_reads():
        monkeypatch.delenv(name, raising=False)
    for name, value in environment(found[service]).items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()
    assert settings.data_dir == Path("/data")
    assert settings.nats_url is not None
    nats_url = urlsplit(settings.nats_url)
    assert (nats_url.scheme, nats_url.hostname, nats_url.port) == ("nats", "nats", 4222)
    nats_argv = argv_of(found["nats"]["command"])
    assert "-p" not in nats_argv and "--port" not in nats_argv, "nats-server's client port stays 4222"
    projectors = settings.enabled("projectors", list(available(PROJECTORS_GROUP)))
    producers = settings.enabled("producers", list(available(PRODUCERS_GROUP)))
    if service == "ledger":  # the node runs only the ledger mirror
        assert projectors == [] and producers == []
    if service == "gateway":  # `eventloom tokens add`, run in this container, writes where it reads
        assert settings.tokens_file == Path(resolve(command_argv(found[service]))[1]["tokens"])
    if service == "query":
        assert {"graph", "keyword", "vector", "inferred"} <= set(projectors)
        assert settings.graph_backend == "neo4j"
        assert settings.neo4j_uri is not None
        bolt = urlsplit(settings.neo4j_uri)
        assert (bolt.scheme, bolt.hostname, bolt.port) == ("bolt", "neo4j", 7687)
        user, _, password = environment(found["neo4j"])["NEO4J_AUTH"].partition("/")
        assert (settings.neo4j_user, settings.neo4j_password) == (user, password)
