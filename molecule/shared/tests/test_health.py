"""The node health check drains and resumes through the real Slurm controller of the lab.

Its GPU input is a recorded nvidia-smi --query-gpu line (tests/data/nvidia-smi, H100,
driver 545) repeated for the node's GPUs; the lab has no GPU, so the check reads the
file instead of running nvidia-smi. Everything else is real: the installed script, its
thresholds from the plan, scontrol on the compute node and slurmctld on the head.
"""

from __future__ import annotations

import shlex
from typing import Any

from conftest import hosts_with, node_state, nvidia_smi_rows

CHECK = "/usr/local/sbin/gpucluster-healthcheck"


def _run_check(host: Any, sample: str) -> Any:
    host.run(f"printf %s {shlex.quote(sample)} > /tmp/nvidia-smi.csv")
    return host.run(f"{CHECK} --nvidia-smi-output /tmp/nvidia-smi.csv")


def test_hot_gpu_drains_and_healthy_resumes(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    node = hosts_with(plan, "compute")[0]
    head = hosts[plan["cluster"]["head"]]
    gpus = plan["cluster"]["gpus_per_node"]
    critical = plan["gpu"]["temperature"]["critical_c"]
    try:
        hot = _run_check(hosts[node], nvidia_smi_rows(gpus, gpu=3, column=9, value=str(critical + 2)))
        assert hot.rc == 1, hot.stdout + hot.stderr
        state, reason = node_state(head, node)
        assert state.startswith("drain"), state
        assert f"gpu3 {critical + 2}C >= {critical}C" in reason, reason
        assert reason in head.check_output("sinfo -R --noheader --format='%E'")

        healthy = _run_check(hosts[node], nvidia_smi_rows(gpus))
        assert healthy.rc == 0, healthy.stdout + healthy.stderr
        # resumed: no longer draining (a trailing * only says slurmd has not answered a ping yet)
        assert node_state(head, node)[0].rstrip("*") in ("idle", "mix", "alloc")
        head.run(
            f"scontrol ping; for i in $(seq 120); do sinfo -h -n {node} -o %t | grep -q '[*]' || break; sleep 0.5; done"
        )
    finally:
        head.run(f"scontrol update nodename={node} state=resume")


def test_operator_drain_is_left_alone(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    node = hosts_with(plan, "compute")[-1]
    head = hosts[plan["cluster"]["head"]]
    try:
        head.check_output(f"scontrol update nodename={node} state=drain reason='operator: replace DIMM'")
        healthy = _run_check(hosts[node], nvidia_smi_rows(plan["cluster"]["gpus_per_node"]))
        assert healthy.rc == 0, healthy.stdout + healthy.stderr
        state, reason = node_state(head, node)
        assert state.startswith("drain") and reason == "operator: replace DIMM", (state, reason)
    finally:
        head.run(f"scontrol update nodename={node} state=resume")
