"""Filters of gpucluster.tiers for drained restarts (rolling converge of compute nodes).

Thin wrappers around plugins/plugin_utils/slurm/rolling.py; documentation:
``ansible-doc -t filter gpucluster.tiers.slurm_node_state`` and ``gpucluster.tiers.rolling_restart``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import rolling


def _run(name: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
    except (PlanError, rolling.RollingError) as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: {exc}") from None
    except (TypeError, KeyError) as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: bad arguments: {exc}") from None


def slurm_node_state(result: dict[str, Any]) -> dict[str, Any]:
    """The node as slurmctld sees it, from the registered result of `scontrol show node <node>`."""
    return _run("slurm_node_state", rolling.node_state, result)


def rolling_restart(node: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Drain, wait, restart or defer a node's pending restarts.

    The arguments of ``restart_decision`` (plugins/plugin_utils/slurm/rolling.py): pending,
    slurmd_active, jobs, policy, timeout_s; documented in rolling_restart.yml.
    """
    return _run("rolling_restart", rolling.restart_decision, node, *args, **kwargs)


class FilterModule:
    """Drained restarts."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"slurm_node_state": slurm_node_state, "rolling_restart": rolling_restart}
