"""The audit on the converged lab (tier1 only): as planned vs as built (playbooks/audit.yml, docs/audit.md).

On the converged lab the audit finds nothing (the GPU and HCA probes are "not checked": no nvidia-smi
or ibstat in a container) and changes nothing. Then four drifts the lab can hold: a planned file
edited (limits.conf), a GRES line changed (gres.conf; slurmd not restarted, so Slurm's view stays as
planned), a planned service stopped (node-exporter), and an NCCL variable in /etc/environment that a
job's tasks see (the audit's srun). The audit finds exactly those, as drift, the first three with the
fix "run site.yml --limit dgx01", the NCCL one with "remove NCCL_P2P_DISABLE from the job environment"
(site.yml does not manage /etc/environment: the test removes it, as the operator would). site.yml heals
the rest and the audit is clean again. Cables (ibsim: tests/unit/plugins/plugin_utils/audit/
test_audit_ibsim.py), Lustre/BeeGFS layouts (no lfs in a container: "not checked") and GPU or HCA
hardware are proven at unit level (tests/unit/plugins/plugin_utils/audit).
GPUCLUSTER_AUDIT_TEST=1 runs it on another tier, =0 skips it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
LIMITS = "/etc/security/limits.d/90-gpucluster.conf"
GRES = "/etc/slurm/gres.conf"
SERVICE = "prometheus-node-exporter"
ENVIRONMENT = "/etc/environment"
NCCL_OVERRIDE = "NCCL_P2P_DISABLE"


def _enabled(plan: dict[str, Any]) -> bool:
    flag = os.environ.get("GPUCLUSTER_AUDIT_TEST", "")
    return flag == "1" or (flag != "0" and plan["cluster"]["name"] == "tier1")


def _playbook(lab: Path, playbook: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / playbook)]
    for inv in (ROOT / "inventories" / lab.name, ROOT / "lab" / "overlay", lab / "inventory.yml"):
        argv += ["-i", str(inv)]
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}
    env.update({"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    proc = subprocess.run([*argv, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    (lab / f"audit-{Path(playbook).stem}.log").write_text(proc.stdout + proc.stderr)
    return proc


def _audit(lab: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = _playbook(lab, "playbooks/audit.yml", "-e", f"audit_report_root={lab / 'audit'}")
    report = lab / "audit" / lab.name / "audit.json"
    assert report.is_file(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, json.loads(report.read_text())


def _changed(out: str) -> dict[str, int]:
    rows = re.findall(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", out, re.MULTILINE)
    return {host: int(n) for host, n in rows}


def test_audit_finds_exactly_the_injected_drifts_and_site_heals_them(
    lab: Path, plan: dict[str, Any], hosts: dict[str, Any]
) -> None:
    if not _enabled(plan):
        pytest.skip("the audit's lab check runs on tier1 (GPUCLUSTER_AUDIT_TEST=1 elsewhere)")
    node = plan["cluster"]["head"]
    host = hosts[node]
    times: dict[str, float] = {}

    start = time.monotonic()
    proc, clean = _audit(lab)
    times["audit"] = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert clean["findings"] == [], clean["findings"]
    assert clean["unreachable"] == []
    # no GPU or HCA in a container: not checked, never a finding
    assert {(u["host"], u["check"]) for u in clean["unchecked"]} >= {(node, "gpu")}
    # the job environment was read (one srun from the head): not in "not checked"
    assert (node, "nccl_env") not in {(u["host"], u["check"]) for u in clean["unchecked"]}
    # read-only: nothing on the host changed
    assert all(n == 0 for h, n in _changed(proc.stdout).items() if h != "localhost"), proc.stdout[-2000:]

    host.check_output(f"echo '# lab drift (test_audit)' >> {LIMITS}")
    host.check_output(rf"sed -i '0,/^NodeName=.*Type=/s/Type=\([a-z0-9_]*\)/Type=\1x/' {GRES}")
    host.check_output(f"systemctl stop {SERVICE}")
    host.check_output(f"echo '{NCCL_OVERRIDE}=1' >> {ENVIRONMENT}")
    try:
        start = time.monotonic()
        proc, drifted = _audit(lab)
        times["audit_drifted"] = time.monotonic() - start
        assert proc.returncode != 0, "findings at audit_fail_on (warning) fail the run"
        got = sorted((f["host"], f["cls"], f["check"], f["subject"]) for f in drifted["findings"])
        assert got == [
            (node, "drift", "file", LIMITS),
            (node, "drift", "file", GRES),
            (node, "drift", "nccl_env", NCCL_OVERRIDE),
            (node, "drift", "service", SERVICE),
        ], drifted["findings"]
        nccl = next(f for f in drifted["findings"] if f["check"] == "nccl_env")
        assert (nccl["planned"], nccl["found"]) == ("unset (NCCL's default)", "1")
        assert nccl["fix"].startswith(f"remove {NCCL_OVERRIDE} from the job environment on {node}")
        assert all(f["fix"].startswith(f"run site.yml --limit {node}") for f in drifted["findings"] if f is not nccl)
        md = (lab / "audit" / lab.name / "audit.md").read_text()
        assert sum(1 for line in md.splitlines() if line.startswith("- **")) == 4
    finally:
        host.check_output(f"sed -i '/^{NCCL_OVERRIDE}=/d' {ENVIRONMENT}")
        start = time.monotonic()
        healed = _playbook(lab, "site.yml", "--limit", f"{node}:localhost")
        times["site"] = time.monotonic() - start
    assert healed.returncode == 0, healed.stdout[-3000:]

    start = time.monotonic()
    proc, after = _audit(lab)
    times["audit_after"] = time.monotonic() - start
    assert proc.returncode == 0 and after["findings"] == [], after["findings"]
    print("audit lab seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in times.items()))
