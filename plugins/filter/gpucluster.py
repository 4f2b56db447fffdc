"""Filters of gpucluster.tiers: thin wrappers around the planning engine.

Each filter parses its arguments, calls one engine function and turns a PlanError into
an AnsibleFilterError that names the inventory field, the value and what is allowed.
Documentation: ``ansible-doc -t filter gpucluster.tiers.<name>`` (YAML beside this file).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.module_utils import (
    catalog,
    clocks,
    cooling,
    fabric,
    lustre,
    nccl,
    netplan,
    parallelism,
    plan,
    power,
    storage,
    tiers,
    validation,
)
from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.module_utils.plain import plain


def _run(name: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
    except PlanError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: {exc}") from None
    except TypeError as exc:
        raise AnsibleFilterError(f"gpucluster.tiers.{name}: bad arguments: {exc}") from None


def _kwargs_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def run(options: Mapping[str, Any], **more: Any) -> Any:
        if not isinstance(options, Mapping):
            raise AnsibleFilterError(f"gpucluster.tiers.{name}: input must be a mapping of the function's arguments")
        return _run(name, func, **{**plain(options), **more})

    run.__name__ = name
    return run


def cluster_plan(site_vars: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, Any]:
    """The whole plan from the gpucluster_* variables and the inventory groups."""
    site = {k: v for k, v in plain(site_vars).items() if k.startswith("gpucluster_") and k != "gpucluster_plan"}
    return _run("cluster_plan", plan.cluster_plan, site, groups)


def gpu_clocks(model: str, policy: str = "max_performance", **kwargs: Any) -> dict[str, Any]:
    """Clock locks and power limit for a GPU model and policy."""
    return _run(
        "gpu_clocks", lambda m, p, **kw: clocks.gpu_clocks(catalog.gpu_model(m), p, **kw), model, policy, **kwargs
    )


def gpu_model(model: str) -> dict[str, Any]:
    """The catalog entry of a GPU model, with sources."""
    return _run("gpu_model", lambda m: catalog.gpu_model_as_dict(catalog.gpu_model(m)), model)


def tier_profile(name: str) -> dict[str, Any]:
    """A reference tier profile (tier1..tier4)."""
    return _run("tier_profile", lambda n: tiers.tier_as_dict(tiers.tier_profile(n)), name)


def roce_traffic_class(dscp: int) -> int:
    """NCCL_IB_TC for a RoCE DSCP value (ToS = DSCP*4 + ECT)."""
    return _run("roce_traffic_class", nccl.roce_traffic_class, dscp)


class FilterModule:
    """gpucluster.tiers filters."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "cluster_plan": cluster_plan,
            "gpu_model": gpu_model,
            "gpu_clocks": gpu_clocks,
            "tier_profile": tier_profile,
            "roce_traffic_class": roce_traffic_class,
            "nccl_conf": _kwargs_filter("nccl_conf", nccl.nccl_conf),
            "lustre_layouts": _kwargs_filter("lustre_layouts", lustre.lustre_layouts),
            "lustre_client_tunables": _kwargs_filter("lustre_client_tunables", lustre.lustre_client_tunables),
            "power_budget": _kwargs_filter("power_budget", power.power_budget),
            "dlc_thresholds": _kwargs_filter("dlc_thresholds", cooling.dlc_thresholds),
            "storage_sizing": _kwargs_filter("storage_sizing", storage.storage_sizing),
            "parallelism": _kwargs_filter("parallelism", parallelism.parallelism),
            "address_plan": _kwargs_filter("address_plan", netplan.address_plan),
            "expected_cabling": _kwargs_filter("expected_cabling", fabric.expected_cabling),
            "validation_floors": _kwargs_filter(
                "validation_floors",
                lambda tier, **kw: validation.validation_floors(tier=tiers.tier_profile(tier), **kw),
            ),
        }
