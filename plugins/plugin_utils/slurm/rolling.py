"""Drained restarts on compute nodes: the decisions of a rolling converge (pure, no I/O).

A configuration change that needs a service restart on a compute node (slurmd after
slurm.conf, gres.conf or cgroup.conf; the GPU clocks and power unit; the driver's services)
is recorded as a pending marker on the node, one file per systemd unit, and the slurm
role's ``restart.yml`` carries it out:

1. read the node from slurmctld (``scontrol show node <node>``, run on the head), whether
   slurmd runs on the node, and its jobs (``squeue -h -w <node>``);
2. :func:`restart_decision`: a node that cannot hold a job (unknown to slurmctld, slurmd
   stopped and no job listed: the first converge) restarts at once, without a drain;
   otherwise the node is drained with :data:`CONVERGE_REASON` (unless already drained) and
   the role waits for its jobs (policy ``wait``) or leaves the restart pending (policy
   ``skip`` while jobs run);
3. after the restart, :func:`node_state` again: the node is resumed only when its drain
   reason is ours (:data:`CONVERGE_PREFIX`); an operator's drain stays.

The prefix is deliberately not the health check's ``gpucluster:`` (health.REASON_PREFIX):
gpucluster-healthcheck resumes drains starting with that prefix on a healthy node, and
would otherwise lift a converge drain while jobs still run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import DRAIN_POLICIES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import NodeStateRow, RestartDecision

#: Drains whose reason starts with this were set by a converge; only those are resumed by it.
CONVERGE_PREFIX = "gpucluster-converge:"
CONVERGE_REASON = f"{CONVERGE_PREFIX} restart pending"
#: Restart order: the storage and fabric interfaces first (systemd-networkd after their units changed:
#: common role, tasks/network.yml), so what mounts or talks over them restarts after; the driver's
#: daemons before what uses them, slurmd last so the node registers again only when everything under
#: it is in place. Other units go before slurmd.
RESTART_ORDER = (
    "systemd-networkd.service",
    "nvidia-persistenced.service",
    "nvidia-dcgm.service",
    "gpucluster-gpu-clocks.service",
    "gpucluster-dcgm-policy.service",
    "nvidia-dcgm-exporter.service",
    "slurmd.service",
)
#: Base states of a node that never registered (slurm.conf lists it; its slurmd never answered).
#: scontrol(1), "State": UNKNOWN (not yet known) and FUTURE (defined for future use).
_UNREGISTERED = ("UNKNOWN", "FUTURE")
# scontrol(1) prints "Node <name> not found" for a name slurmctld does not have.
_NOT_FOUND = re.compile(r"\bnot found\b", re.IGNORECASE)


class RollingError(ValueError):
    """Output of a Slurm command this module cannot read (a controller that did not answer)."""


@dataclass(frozen=True)
class NodeState:
    """A node as slurmctld sees it."""

    known: bool
    state: str = ""  # scontrol's State=, for example IDLE+DRAIN or MIXED
    reason: str | None = None  # Reason= without its "[user@time]" suffix

    @property
    def drained(self) -> bool:
        """DRAIN flag set (DRAINING while jobs run, DRAINED when idle)."""
        return "DRAIN" in self.state.upper()

    @property
    def ours(self) -> bool:
        """The drain reason is a converge's."""
        return bool(self.reason and self.reason.startswith(CONVERGE_PREFIX))

    @property
    def registered(self) -> bool:
        """slurmd has registered at least once (the base state is not UNKNOWN or FUTURE)."""
        return self.known and self.state.split("+", maxsplit=1)[0].rstrip("*~#!%$@^-").upper() not in _UNREGISTERED

    def as_dict(self) -> NodeStateRow:
        return {
            "known": self.known,
            "state": self.state,
            "reason": self.reason,
            "drained": self.drained,
            "ours": self.ours,
            "registered": self.registered,
        }


def parse_scontrol_node(rc: int, stdout: str, stderr: str = "") -> NodeState:
    """The node from ``scontrol show node <node>`` (multi-line form): rc, stdout and stderr.

    A node slurmctld does not know is ``known=False``; any other failure (no controller) raises.
    """
    if rc != 0:
        if _NOT_FOUND.search(stdout) or _NOT_FOUND.search(stderr):
            return NodeState(known=False)
        raise RollingError(f"scontrol show node failed (rc {rc}): {(stderr or stdout).strip()[:300]}")
    state = re.search(r"\bState=(\S+)", stdout)
    if not state:
        raise RollingError(f"no State= in scontrol output: {stdout.strip()[:300]}")
    # Reason=<text> [<user>@<time>] on its own line (the same parse as gpucluster-healthcheck).
    reason = re.search(r"^\s*Reason=(.*?)(?:\s+\[[^\]]*\])?\s*$", stdout, re.MULTILINE)
    text = reason.group(1).strip() if reason else ""
    return NodeState(known=True, state=state.group(1), reason=text if text and text != "(null)" else None)


def restart_order(units: list[str]) -> list[str]:
    """Pending units in restart order (see :data:`RESTART_ORDER`), each once."""
    rank = {u: i for i, u in enumerate(RESTART_ORDER)}
    last = rank["slurmd.service"]
    return sorted(set(units), key=lambda u: (rank.get(u, last - 0.5), u))


@dataclass(frozen=True)
class Decision:
    """What the role does with a node's pending restarts."""

    units: list[str]  # to restart, in order (empty: nothing pending)
    drain: bool  # set our drain now
    wait: bool  # wait for the node's jobs before restarting
    restart: bool  # restart the units now
    defer: bool  # leave them pending (drain_policy skip with jobs running)
    message: str
    reason: str = CONVERGE_REASON  # the drain reason a converge sets
    # and, in the returned dict, timeout_s: the seconds the head waits for the node's jobs
    # (coreutils `timeout`, where 0 would mean no limit: drain_timeout_s 0 waits 1 s, so only
    # a node whose jobs have ended restarts)


def restart_decision(
    node: Mapping[str, object] | NodeState,
    pending: list[str],
    slurmd_active: bool,
    jobs: str,
    policy: str = "wait",
    timeout_s: int = 3600,
) -> RestartDecision:
    """Drain, wait, restart or defer for a node with ``pending`` unit restarts.

    ``node`` is :func:`parse_scontrol_node`'s state (or its dict), ``jobs`` the output of
    ``squeue -h -w <node>`` (one line per job), ``policy`` and ``timeout_s``
    gpucluster_rollout.drain_policy and drain_timeout_s.
    """
    check_choice(policy, "gpucluster_rollout.drain_policy", DRAIN_POLICIES)
    wait_s = max(1, int(check_range(timeout_s, "gpucluster_rollout.drain_timeout_s", 0, integer=True)))

    def _out(decision: Decision) -> RestartDecision:
        return {
            "units": decision.units,
            "drain": decision.drain,
            "wait": decision.wait,
            "restart": decision.restart,
            "defer": decision.defer,
            "message": decision.message,
            "reason": decision.reason,
            "timeout_s": wait_s,
        }

    state = node if isinstance(node, NodeState) else _node_state(node)
    units = restart_order(pending)
    running = [line for line in jobs.splitlines() if line.strip()]
    if not units:
        return _out(Decision([], False, False, False, False, "nothing pending"))
    if not state.known or not (running or (slurmd_active and state.registered)):
        why = "not known to slurmctld" if not state.known else "no slurmd running and no jobs"
        return _out(Decision(units, False, False, True, False, f"{why}: restart without a drain"))
    if running and policy == "skip":
        return _out(
            Decision(
                units,
                False,
                False,
                False,
                True,
                f"{len(running)} job(s) running and drain_policy is skip: restart of {', '.join(units)} "
                "left pending for the next converge",
            )
        )
    if state.drained and not state.ours:
        msg = f"drained by an operator ({state.reason or 'no reason'}): wait, restart, keep the drain"
        return _out(Decision(units, False, True, True, False, msg))
    if state.drained:
        return _out(Decision(units, False, True, True, False, "already drained by a converge: wait, restart"))
    return _out(Decision(units, True, True, True, False, "drain, wait for jobs, restart, resume"))


def _node_state(node: Mapping[str, object]) -> NodeState:
    """A :meth:`NodeState.as_dict` (or its first three keys) read back."""
    reason = node.get("reason")
    return NodeState(bool(node["known"]), str(node.get("state", "")), None if reason is None else str(reason))


def node_state(result: object) -> NodeStateRow:
    """:func:`parse_scontrol_node` of a registered command result (rc, stdout, stderr)."""
    if not isinstance(result, dict) or "rc" not in result:
        raise PlanError("slurm node result", result, "the registered result of `scontrol show node <node>`")
    return parse_scontrol_node(int(result["rc"]), result.get("stdout", ""), result.get("stderr", "")).as_dict()
