"""docker-compose.yml's `cluster` profile: three NATS members routed with the generated secret and users."""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

import pytest
from typer.testing import CliRunner

from eventloom.bus.embedded import nats_server_binary
from eventloom.settings import Settings
from gateway.cli import app
from tests.compose_support import (
    argv_of,
    command_argv,
    environment,
    load_compose,
    named_volume_mount,
    services,
)
from tests.test_compose import CLUSTER_MEMBERS, known_names, names_from_env_reads, resolve


def test_the_cluster_profile_routes_three_members_with_the_generated_secret_and_users() -> None:
    """nats-cluster-auth writes one config (users and a `cluster` block routing to all three) that each
    member reads, under its own server name and store."""
    found = services()
    auth = found["nats-cluster-auth"]
    path, params = resolve(command_argv(auth))
    assert path == ["nats", "config"] and auth["profiles"] == ["cluster"]
    written = PurePosixPath(str(params["output"]))
    routes = str(params["cluster"]).split(",")
    listen_port = str(params["cluster_listen"]).rpartition(":")[2]
    assert routes == [f"{member}:{listen_port}" for member in CLUSTER_MEMBERS]
    for member in CLUSTER_MEMBERS:
        service = found[member]
        assert service["profiles"] == ["cluster"] and service["image"] == found["nats"]["image"]
        argv = argv_of(service["command"])
        assert PurePosixPath(argv[argv.index("-c") + 1]) == written
        assert (
            named_volume_mount(service, str(written)) == named_volume_mount(auth, str(written)) == "nats-auth"
        )
        assert argv[argv.index("--name") + 1] == member
        assert named_volume_mount(service, argv[argv.index("-sd") + 1]) == f"{member}-data"
        assert service["depends_on"]["nats-cluster-auth"] == {"condition": "service_completed_successfully"}


def test_the_cluster_config_is_one_nats_server_accepts_and_the_roles_reach_all_three(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated file holds both blocks and passes `nats-server -t`; with the profile's URL list and
    replicas the settings load with three replicas."""
    _, params = resolve(command_argv(services()["nats-cluster-auth"]))
    routes = str(params["cluster"]).split(",")
    config_path = tmp_path / "c.conf"
    args = ["--data-dir", str(tmp_path), "nats", "config", "--output", str(config_path)]
    result = CliRunner().invoke(app, [*args, "--cluster", str(params["cluster"])])
    assert result.exit_code == 0, result.output
    config = config_path.read_text()
    assert "authorization {" in config and all(f"@{route}" in config for route in routes)
    checked = subprocess.run(
        [str(nats_server_binary()), "-c", str(config_path), "-t"], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    for name in known_names() | names_from_env_reads():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVENTLOOM_NATS_URL", ",".join(f"nats://{m}:4222" for m in CLUSTER_MEMBERS))
    monkeypatch.setenv("EVENTLOOM_REPLICAS", "3")
    for name, value in environment(services()["ledger"]).items():
        if name not in ("EVENTLOOM_NATS_URL", "EVENTLOOM_REPLICAS"):
            monkeypatch.setenv(name, value)
    assert "${EVENTLOOM_NATS_URL:-" in load_compose()["x-eventloom-env"]["EVENTLOOM_NATS_URL"]
    assert "${EVENTLOOM_REPLICAS:-" in load_compose()["x-eventloom-env"]["EVENTLOOM_REPLICAS"]
    assert Settings.from_env().replicas == 3
