"""playbooks/secrets.yml: the backup and rotation of the munge key and slurmdbd's password parses, holds
every secret out of the logs and refuses a backup folder under build/ before any host is contacted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT

BIN = Path(sys.executable).parent
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
PLAYBOOK = ROOT / "playbooks" / "secrets.yml"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "inventories/tier3", str(PLAYBOOK), *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _tasks(node: Any) -> list[dict[str, Any]]:
    out = []
    for task in node or []:
        out.append(task)
        out += _tasks(task.get("block"))
    return out


def test_it_parses() -> None:
    run = _run("--syntax-check")
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_task_that_holds_a_secret_has_no_log() -> None:
    plays = yaml.safe_load(PLAYBOOK.read_text())
    for task in (t for play in plays for t in _tasks(play.get("tasks")) if "block" not in t):
        text = yaml.safe_dump(task)
        holds = (
            "ansible.builtin.slurp" in task
            or "ansible.builtin.fetch" in task
            or "gpucluster_secrets_password.content" in text
            or "gpucluster_secrets_munge.content" in text
            or "token_urlsafe" in text
        )
        if holds:
            assert task.get("no_log") is True, task["name"]


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (["-e", "gpucluster_secrets_backup_dir=build/secrets"], "relative"),
        (["-e", f"gpucluster_secrets_backup_dir={ROOT}/build/secrets"], "under build/"),
        ([], "missing"),
        (["-e", "gpucluster_secrets_backup_dir=/root/x", "-e", "gpucluster_secrets_rotate=everything"], "rotate"),
    ],
)
def test_a_bad_request_stops_before_any_host(extra: list[str], why: str) -> None:
    run = _run(*extra)
    assert run.returncode != 0, why
    out = run.stdout + run.stderr
    assert "gpucluster_secrets_backup_dir must be an absolute folder outside build/" in out, why
    # stopped at the check on localhost: the lock on the head was never asked for
    assert "Converge lock on the head" not in out, why
