"""The preflight and the login user, in the lab (tier1 only; docs/inventory.md, "Supported systems").

1. A host of another OS is refused before any change: one tier1 host is pointed (an extra inventory,
   over the podman connection) at a container of Debian 13 (trixie), built by
   tools/lab/other_os_image.sh (cached by its recipe's hash). site.yml stops in the preflight
   (playbooks/preflight.yml) with a message naming the host, what it runs (Debian 13.x (trixie)) and
   the supported systems; the converge lock play never starts and no host records a change.
2. The converge ran as a non-root admin with sudo (molecule/tier1 sets GPUCLUSTER_LAB_REMOTE_USER; the
   lab's connection inventory, written by lab/create.yml, names that user): the admin exists, is not
   root, logged in over SSH and escalated with sudo to root for the plays, and the files the converge
   wrote are root's.

GPUCLUSTER_PREFLIGHT_TEST=1 runs the first check on another tier, =0 skips it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
#: the text the preflight's message ends with (plugins/filter/os_support.py, plan.support.summary)
SUPPORTED = "Supported: Debian 12 (bookworm) x86_64; kernel >= 5.12, systemd >= 249, Python >= 3.10"
LOCK_PLAY = "PLAY [Take the converge lock on the head]"  # playbooks/site.yml, right after the preflight


def _enabled(plan: dict[str, Any]) -> bool:
    flag = os.environ.get("GPUCLUSTER_PREFLIGHT_TEST", "")
    return flag == "1" or (flag != "0" and plan["cluster"]["name"] == "tier1")


def _recap(out: str) -> dict[str, dict[str, int]]:
    rows = re.findall(r"^(\S+)\s+:\s+(ok=.*)$", re.sub(r"\x1b\[[0-9;]*m", "", out), re.MULTILINE)
    return {host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", stats)} for host, stats in rows}


def _login_user(lab: Path) -> str:
    inventory = yaml.safe_load((lab / "inventory.yml").read_text())
    return str(inventory["all"]["vars"]["ansible_user"])


@pytest.fixture
def other_os(lab: Path) -> Any:
    """A running Debian 13 container (systemd as PID 1, no network), its name; removed afterwards."""
    built = subprocess.run(
        ["bash", str(ROOT / "tools" / "lab" / "other_os_image.sh")], capture_output=True, text=True, timeout=900
    )
    assert built.returncode == 0, built.stderr[-2000:]
    image = built.stdout.split()[-1]
    name = f"gpucluster-{lab.name}-other-os"
    subprocess.run(["podman", "rm", "--force", "--ignore", name], capture_output=True, check=False)
    subprocess.run(
        ["podman", "run", "-d", "--rm", "--name", name, "--network=none", "--systemd=always", image,
         "/lib/systemd/systemd"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    try:
        # systemctl answers only once PID 1 has opened its socket: ask again until it does
        deadline = time.monotonic() + 120
        while True:
            state = subprocess.run(
                ["podman", "exec", name, "systemctl", "is-system-running", "--wait"],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            if state.stdout.strip() in ("running", "degraded") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert state.stdout.strip() in ("running", "degraded"), state
        yield name
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "2", name], capture_output=True, check=False)


def test_a_host_of_another_os_is_refused_before_any_change(
    lab: Path, plan: dict[str, Any], other_os: str, tmp_path: Path
) -> None:
    if not _enabled(plan):
        pytest.skip("the preflight's lab check runs on tier1 (GPUCLUSTER_PREFLIGHT_TEST=1 elsewhere)")
    victim = list(plan["hosts"])[-1]
    # the last inventory source wins for the host's variables: this one host is reached in the other container
    override = tmp_path / "other-os.yml"
    override.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        victim: {
                            "ansible_connection": "containers.podman.podman",
                            "ansible_host": other_os,
                            "ansible_user": "root",
                            "ansible_python_interpreter": "/usr/bin/python3",
                        }
                    }
                }
            }
        )
    )
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "site.yml")]
    for inv in (ROOT / "inventories" / lab.name, ROOT / "lab" / "overlay", lab / "inventory.yml", override):
        argv += ["-i", str(inv)]
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}
    # the facts of the other container must not land in the lab's fact cache under the lab host's name
    # (and one JSON line per result: the cfg's yaml format folds the long message across lines)
    env.update(
        {
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_CACHE_PLUGIN": "memory",
            "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        }
    )
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    (lab / "preflight-other-os.log").write_text(out)
    flat = re.sub(r"[\\\s]+", " ", out)
    assert proc.returncode != 0, out[-3000:]
    # one message: the host, what it runs, why, and the supported systems
    assert re.search(
        rf"{victim} is not supported: it runs Debian 13\.\d+ \(trixie\) x86_64, kernel \S+, systemd \d+", flat
    ), out[-3000:]
    assert "Debian 13" in flat and "is not a supported system" in flat, out[-3000:]
    assert SUPPORTED in flat, out[-3000:]
    # stopped before any change: the lock play never started, nothing changed anywhere
    assert LOCK_PLAY not in out, out[-3000:]
    recap = _recap(out)
    assert recap[victim]["failed"] == 1, recap
    assert all(stats["changed"] == 0 for stats in recap.values()), recap
    print(f"preflight refusal in {time.monotonic() - start:.0f} s")


def test_the_converge_ran_as_the_admin_with_sudo(lab: Path, plan: dict[str, Any], hosts: dict[str, Any]) -> None:
    user = _login_user(lab)
    if user == "root":
        pytest.skip("this scenario logs in as root (molecule/tier1 runs as an admin with sudo)")
    for name in plan["hosts"]:
        host = hosts[name]
        account = host.user(user)
        assert account.exists and account.uid != 0, (name, user)
        assert "(ALL : ALL) NOPASSWD: ALL" in host.check_output(f"sudo -l -U {user}"), name
        # the converge's SSH logins were the admin's, and each task escalated with sudo to root
        sshd = host.check_output("journalctl -q --no-pager -o cat _COMM=sshd")
        assert f"Accepted publickey for {user} " in sshd, name
        sudo = host.check_output("journalctl -q --no-pager -o cat SYSLOG_IDENTIFIER=sudo")
        escalations = [
            line for line in sudo.splitlines() if line.lstrip().startswith(f"{user} :") and "USER=root" in line
        ]
        assert any("BECOME-SUCCESS" in line for line in escalations), (name, sudo[-2000:])
    # what the plays wrote is root's, written through sudo (the SSH user could not have written it)
    head = hosts[plan["cluster"]["head"]]
    for path in ("/etc/slurm/slurm.conf", "/etc/security/limits.d/90-gpucluster.conf"):
        f = head.file(path)
        assert f.exists and f.user == "root", path
