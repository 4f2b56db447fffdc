"""Drained restarts of a rolling converge: parsing `scontrol show node` and the decision table.

The node text is the recorded Slurm 20.11 output in tests/data/slurm (an operator's drain,
"Low RealMemory"), with State= and Reason= replaced where a case needs another node state.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.filter.rolling import FilterModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import health
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import rolling

RECORDED = (ROOT / "tests" / "data" / "slurm" / "scontrol-show-node-drained.txt").read_text()
FILTERS = FilterModule().filters()


def shown(state: str, reason: str | None) -> str:
    text = re.sub(r"State=\S+", f"State={state}", RECORDED)
    line = f"   Reason={reason} [root@2026-11-23T11:10:00]" if reason else ""
    return re.sub(r"^\s*Reason=.*$", line, text, flags=re.MULTILINE)


def test_recorded_operator_drain_is_known_drained_and_not_ours() -> None:
    node = rolling.parse_scontrol_node(0, RECORDED)
    assert (node.known, node.state, node.reason) == (True, "IDLE+DRAIN", "Low RealMemory")
    assert node.drained and node.registered and not node.ours


def test_our_drain_is_recognised_without_the_user_and_time() -> None:
    node = rolling.parse_scontrol_node(0, shown("MIXED+DRAIN", rolling.CONVERGE_REASON))
    assert node.reason == rolling.CONVERGE_REASON
    assert node.drained and node.ours


def test_idle_node_without_reason() -> None:
    node = rolling.parse_scontrol_node(0, shown("IDLE", None))
    assert node.reason is None and not node.drained and not node.ours and node.registered


@pytest.mark.parametrize("state", ["UNKNOWN", "UNKNOWN*", "FUTURE", "UNKNOWN+NOT_RESPONDING"])
def test_a_node_whose_slurmd_never_registered(state: str) -> None:
    assert not rolling.parse_scontrol_node(0, shown(state, None)).registered


def test_unknown_node_and_controller_errors() -> None:
    assert rolling.parse_scontrol_node(1, "", "Node compute09 not found\n") == rolling.NodeState(known=False)
    with pytest.raises(rolling.RollingError, match="Unable to contact"):
        rolling.parse_scontrol_node(1, "", "slurm_load_node error: Unable to contact slurm controller")
    with pytest.raises(rolling.RollingError, match="no State="):
        rolling.parse_scontrol_node(0, "NodeName=compute01\n")


def test_the_converge_prefix_is_not_the_health_checks() -> None:
    # gpucluster-healthcheck resumes drains starting with its prefix on a healthy node:
    # a converge drain must not look like one of those.
    assert not rolling.CONVERGE_REASON.startswith(health.REASON_PREFIX)
    assert not rolling.CONVERGE_PREFIX.startswith(health.REASON_PREFIX)


def test_restart_order_puts_the_driver_first_and_slurmd_last() -> None:
    units = ["slurmd.service", "gpucluster-gpu-clocks.service", "other.service", "nvidia-persistenced.service"]
    order = rolling.restart_order([*units, "slurmd.service"])
    assert order == ["nvidia-persistenced.service", "gpucluster-gpu-clocks.service", "other.service", "slurmd.service"]


IDLE = rolling.parse_scontrol_node(0, shown("IDLE", None))
BUSY = rolling.parse_scontrol_node(0, shown("MIXED", None))
OURS = rolling.parse_scontrol_node(0, shown("MIXED+DRAIN", rolling.CONVERGE_REASON))
OPERATOR = rolling.parse_scontrol_node(0, RECORDED)
NEW = rolling.parse_scontrol_node(0, shown("UNKNOWN*", None))
JOB = "1234 gpu sleep root R 0:05 1 compute01\n"


def decide(node: rolling.NodeState, active: bool = True, jobs: str = "", policy: str = "wait") -> dict:
    return rolling.restart_decision(node, ["slurmd.service"], active, jobs, policy)


def test_nothing_pending_does_nothing() -> None:
    out = rolling.restart_decision(BUSY, [], True, JOB, "wait")
    assert not (out["drain"] or out["wait"] or out["restart"] or out["defer"])


def test_a_node_that_cannot_hold_a_job_restarts_without_a_drain() -> None:
    for node, active in ((rolling.NodeState(known=False), True), (NEW, True), (IDLE, False)):
        out = decide(node, active)
        assert out["restart"] and not out["drain"] and not out["wait"], node


def test_a_job_under_a_stopped_slurmd_still_drains() -> None:
    out = decide(BUSY, active=False, jobs=JOB)
    assert out["drain"] and out["wait"] and out["restart"]


def test_policy_wait_drains_waits_restarts() -> None:
    out = decide(BUSY, jobs=JOB)
    assert (out["drain"], out["wait"], out["restart"], out["defer"]) == (True, True, True, False)
    assert out["units"] == ["slurmd.service"]


def test_policy_skip_defers_while_jobs_run_and_restarts_an_idle_node_under_a_drain() -> None:
    out = decide(BUSY, jobs=JOB, policy="skip")
    assert out["defer"] and not (out["drain"] or out["restart"])
    assert "left pending" in out["message"]
    out = decide(IDLE, policy="skip")
    assert out["drain"] and out["restart"] and not out["defer"]


def test_an_operators_drain_is_kept_and_waited_for() -> None:
    out = decide(OPERATOR, jobs=JOB)
    assert not out["drain"] and out["wait"] and out["restart"]
    assert "Low RealMemory" in out["message"]


def test_our_own_earlier_drain_is_not_set_again() -> None:
    out = decide(OURS, jobs=JOB)
    assert not out["drain"] and out["wait"] and out["restart"]


def test_a_bad_policy_names_the_inventory_field() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_rollout\.drain_policy.*'later'.*wait, skip"):
        decide(IDLE, policy="later")


def test_filters_take_registered_results_and_report_bad_input() -> None:
    node = FILTERS["slurm_node_state"]({"rc": 0, "stdout": shown("ALLOCATED+DRAIN", rolling.CONVERGE_REASON)})
    assert node["ours"] and node["drained"] and node["known"]
    out = FILTERS["rolling_restart"](node, ["slurmd.service"], True, JOB, "wait")
    assert out["wait"] and not out["drain"]
    with pytest.raises(AnsibleFilterError, match="Unable to contact"):
        FILTERS["slurm_node_state"]({"rc": 1, "stdout": "", "stderr": "Unable to contact slurm controller"})
    with pytest.raises(AnsibleFilterError, match="drain_policy"):
        FILTERS["rolling_restart"](node, ["slurmd.service"], True, "", "never")


def test_the_wait_timeout_is_the_rollouts_and_never_unlimited() -> None:
    assert decide(BUSY, jobs=JOB)["timeout_s"] == 3600
    assert rolling.restart_decision(BUSY, ["slurmd.service"], True, JOB, "wait", 600)["timeout_s"] == 600
    # coreutils timeout reads 0 as "no limit": 0 waits one second instead
    assert rolling.restart_decision(BUSY, ["slurmd.service"], True, JOB, "wait", 0)["timeout_s"] == 1
    with pytest.raises(PlanError, match="drain_timeout_s"):
        rolling.restart_decision(BUSY, ["slurmd.service"], True, JOB, "wait", -5)


def test_the_filters_have_docs() -> None:
    root = ROOT
    names = [f"gpucluster.tiers.{n}" for n in sorted(FILTERS)]
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-t", "filter", "--json", *names],
        cwd=root,
        env={**os.environ, "ANSIBLE_CONFIG": str(root / "ansible.cfg")},
        capture_output=True,
        text=True,
        check=True,
    )
    docs = json.loads(out.stdout)
    assert sorted(docs) == names
    assert all(doc["doc"]["short_description"] and doc["examples"] for doc in docs.values())
