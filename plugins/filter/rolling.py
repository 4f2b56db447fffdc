"""Filters of gpucluster.tiers for drained restarts (rolling converge of compute nodes).

Thin wrappers around plugins/module_utils/rolling.py; documentation:
``ansible-doc -t filter gpucluster.tiers.slurm_node_state`` and ``gpucluster.tiers.rolling_restart``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.module_utils import rolling
from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.module_utils.plain import plain


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


def rolling_restart(
    node: dict[str, Any],
    pending: list[str],
    slurmd_active: bool,
    jobs: str,
    policy: str = "wait",
    timeout_s: int = 3600,
) -> dict[str, Any]:
    """Drain, wait, restart or defer a node's pending restarts."""
    return _run(
        "rolling_restart",
        rolling.restart_decision,
        node,
        pending,
        slurmd_active=bool(slurmd_active),
        jobs=jobs,
        policy=policy,
        timeout_s=timeout_s,
    )


class FilterModule:
    """Drained restarts."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"slurm_node_state": slurm_node_state, "rolling_restart": rolling_restart}
