"""Self-healing through the lab's real Slurm: drain, reboot, re-validation, resume (tier4).

The product is as installed: the health check and the active check on the compute nodes, the head's
gpucluster-heal, slurm.conf's RebootProgram, the maintenance QOS, MAINT reservations. The test (a
fixture, never product code) stands in where the containers have no hardware:
  - the XID: a recorded kernel log line (NVRM: Xid ... 79, "GPU has fallen off the bus", recovery
    action: reboot) and the recorded nvidia-smi rows, read by the health check as test_health.py does;
  - the active check's tools: all_reduce_perf and dcgmi stand-ins in /usr/local/bin that print
    recorded output (tests/data/acceptance), removed afterwards; the shared directory of the storage
    probe, with a small probe file, on the node;
  - the reboot: the lab's containers restart when systemd exits (lab/create.yml restart_policy), but a
    container keeps the host's boot time, which slurmd reports (Slurm keeps a node REBOOT_ISSUED until
    its boot time is newer than the request, or ResumeTimeout sets it DOWN); slurmd's -b ("report node
    rebooted when daemon restarted", slurmd(8)), through a drop-in on that node for the test, makes
    slurmctld see the reboot complete;
  - the policy: the lab's loop is a dry run (lab/overlay); the test runs the installed program as the
    timer does, with a copy of its config that is not (and has no scheduled active checks).
Waits poll every 0.5 s, bounded; no sleep. tier4 only (the dry run needs four compute nodes besides the
one rebooted); GPUCLUSTER_HEALING_TEST=1 runs it on another tier with enough nodes, =0 skips it.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import hosts_with, node_state, nvidia_smi_rows

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "acceptance"
HEAL = "/usr/local/sbin/gpucluster-heal"
CHECK = "/usr/local/sbin/gpucluster-healthcheck"
TEST_CONFIG = "/tmp/gpucluster-heal-test.json"
DROPIN = Path("/etc/systemd/system/slurmd.service.d/zz-gpucluster-heal-test.conf")
SLURMD_ENV = "/etc/gpucluster-heal-test-slurmd.env"
STANDINS = {
    "all_reduce_perf": "all_reduce_h200_1node_dossier.txt",
    "dcgmi": "dcgm_diag_v3_real_pass.txt",
}
# The kernel's XID line (NVRM: Xid (PCI:<bus id>): <xid>, ...), as the health check's parser reads it
XID_79 = "NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus."


def _ok(probe: Callable[[], bool]) -> bool:
    try:
        return probe()
    except RuntimeError:  # ssh refused: the container is restarting
        return False


def wait_for(what: str, probe: Callable[[], bool], limit_s: float) -> None:
    end = time.monotonic() + limit_s
    while not _ok(probe):
        if time.monotonic() > end:
            raise AssertionError(f"no {what} within {limit_s:g} s")
        time.sleep(0.5)


def run_loop(head: Any, *extra: str) -> str:
    res = head.run(f"{HEAL} --config {TEST_CONFIG} {' '.join(extra)}")
    assert res.rc == 0, res.stdout + res.stderr
    return str(res.stdout)


def history(head: Any, plan: dict[str, Any], node: str) -> list[dict[str, Any]]:
    out = head.check_output(f"{HEAL} --config {TEST_CONFIG} --history {node}")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _enabled(plan: dict[str, Any]) -> bool:
    flag = os.environ.get("GPUCLUSTER_HEALING_TEST", "")
    return bool(plan["healing"]["enabled"]) and (flag == "1" or (flag != "0" and plan["cluster"]["name"] == "tier4"))


@pytest.fixture
def healing(hosts: dict[str, Any], plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The loop's config copy on the head (no dry run, no scheduled checks), the stand-ins on the nodes."""
    if not _enabled(plan):
        pytest.skip("self-healing runs on tier4 (GPUCLUSTER_HEALING_TEST=1 elsewhere)")
    head = hosts[plan["cluster"]["head"]]
    cfg = json.loads(head.check_output("cat /etc/gpucluster/heal.json"))
    cfg["dry_run"] = False
    cfg["active"]["enabled"] = False
    head.run(f"printf %s {shlex.quote(json.dumps(cfg))} > {TEST_CONFIG}")
    nodes = hosts_with(plan, "compute")
    probe = cfg["active"]["checks"]["storage_read"]
    for name in nodes:
        node = hosts[name]
        for tool, sample in STANDINS.items():
            body = f"#!/bin/sh\ncat <<'EOF'\n{(DATA / sample).read_text()}EOF\n"
            node.run(f"printf %s {shlex.quote(body)} > /usr/local/bin/{tool} && chmod 0755 /usr/local/bin/{tool}")
        if probe["enabled"]:
            node.run(
                f"mkdir -p {shlex.quote(probe['path'])} && head -c 16777216 /dev/urandom"
                f" > {shlex.quote(probe['path'])}/gpucluster-activecheck-{name}.probe"
            )
    yield cfg
    for name in nodes:
        node = hosts[name]
        wait_for(f"ssh to {name}", lambda node=node: node.run("true").rc == 0, 120)
        node.run("rm -f " + " ".join(f"/usr/local/bin/{tool}" for tool in STANDINS))
        if probe["enabled"]:
            node.run(f"rm -f {shlex.quote(probe['path'])}/gpucluster-activecheck-{name}.probe")
        head.run(f"scontrol delete reservation=gpucluster-heal-{name}")
        head.run(f"scontrol update nodename={name} state=resume")
    head.run(f"rm -rf {TEST_CONFIG} {cfg['state_dir']}")


def test_an_xid_79_node_is_rebooted_revalidated_and_resumed(
    hosts: dict[str, Any], plan: dict[str, Any], healing: dict[str, Any]
) -> None:
    node, operator = hosts_with(plan, "compute")[0], hosts_with(plan, "compute")[-1]
    head = hosts[plan["cluster"]["head"]]
    gpus = plan["cluster"]["gpus_per_node"]
    # read by the slurmd that the container's restart starts (the unit's ExecStart passes $SLURMD_OPTIONS;
    # an EnvironmentFile= of a drop-in is read after the package's own /etc/default/slurmd)
    hosts[node].run(
        f"mkdir -p {DROPIN.parent} && printf '[Service]\\nEnvironmentFile={SLURMD_ENV}\\n' > {DROPIN}"
        f" && echo SLURMD_OPTIONS=-b > {SLURMD_ENV}"
    )
    try:
        head.check_output(f"scontrol update nodename={operator} state=drain reason='operator: replace DIMM'")
        hosts[node].run(f"printf %s {shlex.quote(nvidia_smi_rows(gpus))} > /tmp/nvidia-smi.csv")
        hosts[node].run(f"printf '%s\\n' {shlex.quote(XID_79)} > /tmp/xid.log")
        drained = hosts[node].run(f"{CHECK} --nvidia-smi-output /tmp/nvidia-smi.csv --xid /tmp/xid.log")
        assert drained.rc == 1, drained.stdout + drained.stderr
        assert "xid 79" in node_state(head, node)[1]

        run_loop(head)  # drain seen: scontrol reboot under the drain
        wait_for(
            f"{node} back from its reboot",
            lambda: head.run(f"scontrol show node {node} | grep -qE 'State=\\S*(REBOOT|NOT_RESPONDING|DOWN)'").rc != 0,
            240,
        )
        run_loop(head)  # back: reservation, resume into it, the check job
        wait_for(
            "the re-validation job's end",
            lambda: not head.check_output(f"squeue --noheader --name=gpucluster-check-{node} --format=%i").strip(),
            180,
        )
        run_loop(head)  # job completed: the reservation goes, the node is back
        state, reason = node_state(head, node)
        assert state.rstrip("*") in ("idle", "mix", "alloc"), (state, reason)
        assert "gpucluster-heal-" + node not in head.check_output("scontrol show reservation")
        events = [e["event"] for e in history(head, plan, node)]
        # validate twice: back from the reboot, then the check job in the reservation
        assert events[-6:] == ["drain", "remediate", "reboot", "validate", "validate", "resume"], events
        assert node_state(head, operator) == ("drain", "operator: replace DIMM")
    finally:
        hosts[node].run(f"rm -f {DROPIN} {SLURMD_ENV} && systemctl daemon-reload")
        head.run(f"scontrol update nodename={operator} state=resume")


def test_dry_run_lists_two_actions_and_one_waiting(
    hosts: dict[str, Any], plan: dict[str, Any], healing: dict[str, Any]
) -> None:
    head = hosts[plan["cluster"]["head"]]
    three = hosts_with(plan, "compute")[1:4]
    cfg = dict(healing, remediation={**healing["remediation"], "nodes_at_once": 2})
    head.run(f"printf %s {shlex.quote(json.dumps(cfg))} > {TEST_CONFIG}")
    for name in three:
        head.check_output(f"scontrol update nodename={name} state=drain reason='gpucluster: gpu0 xid 79'")
    out = run_loop(head, "--dry-run")
    acting = [json.loads(x)["node"] for x in out.splitlines() if x.startswith("{") and '"remediate"' in x]
    assert acting == three[:2] and f"waiting: {three[2]}" in out, out
    assert "would run: scontrol reboot" in out and "\nrun: " not in out
    assert all(node_state(head, name)[0].startswith("drain") for name in three)  # nothing was run
