"""How site.yml rolls changes over the compute nodes (inventory ``gpucluster_rollout``).

site.yml converges the head and the storage first, then the compute nodes in batches: one play
with ``serial: batch_size`` and ``max_fail_percentage``. Per batch the slurm and compute roles
drain a node before restarting what would kill its jobs (``drain_policy``: ``wait`` up to
``drain_timeout_s`` for its jobs to end, or ``skip`` the restart and leave it pending).

Defaults and why:
- ``batch_size: "25%"``: four batches whatever the size (8 nodes: 2 per batch; 4,096: 1,024), so the
  roll's wall time is bounded by four drain waits, three quarters of the cluster keep running jobs,
  and a bad change stops after reaching a quarter of the nodes. Ansible's ``serial`` takes a count
  or a percentage of the play's hosts, rounded down and at least one host
  (https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_strategies.html#setting-the-batch-size-with-serial).
- ``max_fail_percentage: 0``: any failed node in a batch stops the roll (Ansible aborts when MORE
  than this percentage of the batch fails, same page, "Setting a maximum failure percentage").
- ``drain_timeout_s: 3600``, ``drain_policy: wait``: read by the slurm and compute roles.
"""

from __future__ import annotations

import re

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import DRAIN_POLICIES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import RolloutSection

FIELD = "gpucluster_rollout"
DEFAULTS: dict[str, int | str] = {
    "batch_size": "25%",
    "max_fail_percentage": 0,
    "drain_timeout_s": 3600,
    "drain_policy": "wait",
}
_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*\Z")


def _batch_size(value: object) -> int | str:
    field = f"{FIELD}.batch_size"
    allowed = (
        'a node count of at least 1 (e.g. 16) or a whole percentage of the compute nodes from 1% to 100% (e.g. "25%")'
    )
    if isinstance(value, bool):
        raise PlanError(field, value, allowed)
    if isinstance(value, int):
        require(value >= 1, field, value, allowed)
        return value
    if isinstance(value, str):
        if value.strip().isdigit():
            return _batch_size(int(value))
        match = _PERCENT.match(value)
        if match is None or not 0 < int(match.group(1)) <= 100:
            raise PlanError(field, value, allowed)
        return f"{int(match.group(1))}%"
    raise PlanError(field, value, allowed)


def rollout_plan(raw: object) -> RolloutSection:
    """plan["rollout"]: ``{"batch_size": int | "N%", "max_fail_percentage": int, "drain_timeout_s": int,
    "drain_policy": "wait" | "skip"}`` from ``gpucluster_rollout`` (optional; every key has a default)."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise PlanError(FIELD, raw, f"a mapping with keys {', '.join(DEFAULTS)}")
    unknown = sorted(set(raw) - set(DEFAULTS))
    require(not unknown, f"{FIELD}.{unknown[0] if unknown else ''}", unknown, f"only the keys {', '.join(DEFAULTS)}")
    got = {**DEFAULTS, **raw}
    policy = got["drain_policy"]
    require(policy in DRAIN_POLICIES, f"{FIELD}.drain_policy", policy, " or ".join(DRAIN_POLICIES))
    return {
        "batch_size": _batch_size(got["batch_size"]),
        "max_fail_percentage": int(
            check_range(got["max_fail_percentage"], f"{FIELD}.max_fail_percentage", 0, 100, integer=True)
        ),
        "drain_timeout_s": int(
            check_range(got["drain_timeout_s"], f"{FIELD}.drain_timeout_s", 0, 7 * 86400, integer=True)
        ),
        "drain_policy": str(policy),
    }


__all__ = ["DEFAULTS", "DRAIN_POLICIES", "rollout_plan"]
