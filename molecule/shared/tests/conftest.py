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


#: A recorded ``nvidia-smi --query-gpu`` line (H100, driver 545; the health check's fields).
RECORDED_NVIDIA_SMI = Path(__file__).resolve().parents[3] / "tests" / "data" / "nvidia-smi" / "h100-545-query.txt"


def nvidia_smi_rows(gpus: int, gpu: int | None = None, column: int = 0, value: str = "") -> str:
    """The recorded row for GPUs 0..gpus-1; with ``gpu``, that GPU's field ``column`` holds ``value``
    (9: temperature.gpu, 10: ecc.errors.uncorrected.volatile.total)."""
    fields = [f.strip() for f in RECORDED_NVIDIA_SMI.read_text().splitlines()[0].split(",")]
    rows = []
    for i in range(gpus):
        row = [str(i), *fields[1:]]
        if i == gpu:
            row[column] = value
        rows.append(", ".join(row))
    return "\n".join(rows) + "\n"


def node_state(head: Any, node: str) -> tuple[str, str]:
    """``node``'s state (sinfo %t) and reason (%E), asked on ``head``."""
    out = head.check_output(f"sinfo --noheader --Node --nodes={node} --format='%t|%E'")
    state, reason = out.splitlines()[0].split("|", 1)
    return state.strip(), reason.strip()
