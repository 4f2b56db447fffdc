"""The health check as Slurm's Epilog drains a node after a real job, through the lab's slurmctld.

slurmd runs /usr/local/sbin/gpucluster-epilog (slurm.conf Epilog=) when a job ends. The lab has
no GPU: the plan's health config names a recorded nvidia-smi CSV (health.recorded, lab only)
that every mode reads when it exists. Without it the lab's check sees no GPU and passes, so the
other tests' jobs leave healthy nodes. Here the file holds the recorded H100 row
(tests/data/nvidia-smi, as test_health.py uses) with 2 volatile uncorrected (double-bit) ECC
errors on GPU 2; a job ends, the epilog drains the node with a reason naming the ECC check, a
clean check resumes it, and a node an operator drained keeps the operator's reason.
Runs on tier2 (one tier proves it; each run holds a node for about half a minute).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import hosts_with, node_state, nvidia_smi_rows

CHECK = "/usr/local/sbin/gpucluster-healthcheck"
ECC_REASON = "gpucluster: gpu2 dbe ecc 2"
OPERATOR = "operator: replace DIMM"


def _wait(head: Any, node: str, pattern: str) -> tuple[str, str]:
    """Poll sinfo until the node's state matches ``pattern`` (a shell case pattern), 60 s at most.

    sinfo -N prints one line per partition the node is in (tier2: gpu and debug), the same state on
    each: ``sort -u`` makes it one word, or the pattern would never match and every wait would last
    its whole 60 s.
    """
    head.run(
        f"for i in $(seq 120); do s=$(sinfo -h -N -n {node} -o %t | sort -u); "
        f"case $s in {pattern}) break;; esac; sleep 0.5; done"
    )
    return node_state(head, node)


@pytest.fixture
def lab_node(hosts: dict[str, Any], plan: dict[str, Any]) -> Iterator[tuple[Any, Any, str, str]]:
    """(head, node host, node name, recorded file) on an idle node; afterwards: no file, node idle."""
    health = plan["health"]
    if plan["cluster"].get("tier") != "tier2":
        pytest.skip("the epilog drain is proven on tier2 (one tier suffices)")
    if not health.get("modes", {}).get("epilog", {}).get("enabled") or not health.get("recorded"):
        pytest.skip("no Slurm Epilog or no recorded GPU input in this plan")
    head = hosts[plan["cluster"]["head"]]
    name = hosts_with(plan, "compute")[0]
    node = hosts[name]
    recorded = health["recorded"]["nvidia_smi_output"]
    assert _wait(head, name, "idle")[0] == "idle"
    try:
        yield head, node, name, recorded
    finally:
        node.run(f"rm -f {recorded}")
        head.run(f"scontrol update nodename={name} state=resume")
        _wait(head, name, "idle")


def _inject(node: Any, path: str, text: str) -> None:
    node.check_output(f"mkdir -p {shlex.quote(str(Path(path).parent))} && printf %s {shlex.quote(text)} > {path}")


def _job(head: Any, name: str) -> str:
    """Run a one-task job on the node; its job id."""
    out = head.check_output(f"srun --nodes=1 -w {name} --time=1 --job-name=lab-epilog bash -c 'echo $SLURM_JOB_ID'")
    return out.strip().splitlines()[-1]


def test_epilog_drains_after_a_job_and_a_clean_check_resumes(
    lab_node: tuple[Any, Any, str, str], plan: dict[str, Any]
) -> None:
    head, node, name, recorded = lab_node
    gpus = plan["cluster"]["gpus_per_node"]
    healthy = _job(head, name)  # the lab's default: no recorded file, the epilog passes
    assert _wait(head, name, "idle")[0] == "idle"
    assert f"epilog job {healthy}: healthy" in node.check_output("journalctl -q -t gpucluster-healthcheck -n 50")

    _inject(node, recorded, nvidia_smi_rows(gpus, gpu=2, column=10, value="2"))
    job = _job(head, name)
    state, reason = _wait(head, name, "drain*")
    assert state.startswith("drain"), (state, reason)
    assert reason == ECC_REASON, reason  # ours, not Slurm's "Epilog error"
    assert ECC_REASON in head.check_output(f"scontrol show node {name}")
    log = node.check_output("journalctl -q -t gpucluster-healthcheck -n 50")
    assert f"epilog job {job}: " in log and ECC_REASON in log, log

    node.check_output(f"rm -f {recorded}")
    clean = node.run(CHECK)  # the periodic check by hand, as slurmd runs it every HealthCheckInterval
    assert clean.rc == 0, clean.stdout + clean.stderr
    assert _wait(head, name, "idle")[0] == "idle"


def test_epilog_keeps_an_operator_drain(lab_node: tuple[Any, Any, str, str], plan: dict[str, Any]) -> None:
    head, node, name, recorded = lab_node
    gpus = plan["cluster"]["gpus_per_node"]
    _inject(node, recorded, nvidia_smi_rows(gpus, gpu=2, column=10, value="2"))
    job = head.check_output(f"sbatch --parsable -w {name} --time=1 --job-name=lab-epilog --wrap 'sleep 4'").strip()
    head.check_output(f"for i in $(seq 30); do squeue -h -j {job} -t R | grep -q . && break; sleep 1; done")
    head.check_output(f"scontrol update nodename={name} state=drain reason={shlex.quote(OPERATOR)}")
    head.check_output(f"for i in $(seq 60); do squeue -h -j {job} | grep -q . || break; sleep 1; done")
    state, reason = _wait(head, name, "drain")  # sinfo %t: "drain" is drained, "drng" still draining
    assert state == "drain" and reason == OPERATOR, (state, reason)
    assert f"epilog job {job}: " in node.check_output("journalctl -q -t gpucluster-healthcheck -n 50")

    node.check_output(f"rm -f {recorded}")
    clean = node.run(CHECK)
    assert clean.rc == 0, clean.stdout + clean.stderr
    assert node_state(head, name) == ("drain", OPERATOR)
