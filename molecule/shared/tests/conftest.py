"""testinfra over SSH into the lab containers, with the lab's key and the plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import testinfra


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--lab", required=True, help=".lab/<name> folder: id_ed25519 and plan.json")


@pytest.fixture(scope="session")
def lab(request: pytest.FixtureRequest) -> Path:
    return Path(request.config.getoption("--lab")).resolve()


@pytest.fixture(scope="session")
def plan(lab: Path) -> dict[str, Any]:
    return json.loads((lab / "plan.json").read_text())


@pytest.fixture(scope="session")
def hosts(lab: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """A testinfra host per inventory host, reached at its planned management address."""
    config = lab / "ssh_config"
    lines = []
    for name, host in plan["hosts"].items():
        lines += [
            f"Host {name}",
            f"  HostName {host['addresses']['management']}",
            "  User root",
            f"  IdentityFile {lab / 'id_ed25519'}",
            "  StrictHostKeyChecking no",
            "  UserKnownHostsFile /dev/null",
            "  LogLevel ERROR",
            "  ControlMaster auto",
            f"  ControlPath {lab}/cm-%h",
            "  ControlPersist 60",
        ]
    config.write_text("\n".join(lines) + "\n")
    return {name: testinfra.get_host(f"ssh://{name}", ssh_config=str(config)) for name in plan["hosts"]}


def hosts_with(plan: dict[str, Any], role: str) -> list[str]:
    return [name for name, host in plan["hosts"].items() if role in host["roles"]]
