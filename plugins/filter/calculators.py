"""Filters of gpucluster.tiers that answer one question each: catalog entries, tier profiles and the
calculators (clocks, power, cooling, storage sizing, parallelism, addresses, cabling, fabric TCO).

Thin wrappers: each filter checks its arguments and calls one engine function (plugins/plugin_utils)
through plugin_utils/filter_calls.py, which turns a PlanError into an AnsibleFilterError naming the
inventory field, the value and what is allowed.
Documentation: ``ansible-doc -t filter gpucluster.tiers.<name>`` (YAML beside this file).

The engine's modules are imported when a filter runs, not when this file loads: ansible-core
loads every filter file of the collection to find one filter, in every forked worker (one per
host and task), so a task reading one filter would otherwise import the whole engine per host and
task (about 70 ms each). Each filter therefore imports what it calls with an ordinary
``from ... import`` inside the function: static (readers, ruff and ansible-test see it), and lazy
(the first call imports, later calls find the module loaded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.filter_calls import kwargs_filter, run

if TYPE_CHECKING:  # the filters import the engine when called (a filter file loads fast)
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import Floors


def gpu_clocks(model: str, policy: str = "max_performance", **kwargs: Any) -> dict[str, Any]:
    """Clock locks and power limit for a GPU model and policy."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import clocks
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog

    return run(
        "gpu_clocks", lambda m, p, **kw: clocks.gpu_clocks(catalog.gpu_model(m), p, **kw), model, policy, **kwargs
    )


def gpu_model(model: str) -> dict[str, Any]:
    """The catalog entry of a GPU model, with sources."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog

    return run("gpu_model", lambda m: catalog.gpu_model_as_dict(catalog.gpu_model(m)), model)


def tier_profile(name: str) -> dict[str, Any]:
    """A reference tier profile (tier1..tier4)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import tiers

    return run("tier_profile", lambda n: tiers.tier_as_dict(tiers.tier_profile(n)), name)


def roce_traffic_class(dscp: int) -> int:
    """NCCL_IB_TC for a RoCE DSCP value (ToS = DSCP*4 + ECT)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import nccl

    return run("roce_traffic_class", nccl.roce_traffic_class, dscp)


def fabric_tco(source: Mapping[str, Any], text: bool = False) -> Any:
    """InfiniBand vs RoCEv2 fabric TCO: a plan's ``fabric_tco``, or computed from fabric_tco's arguments."""
    if not isinstance(source, Mapping):
        raise AnsibleFilterError("gpucluster.tiers.fabric_tco: input must be the plan or a mapping of arguments")
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import tco

    return run("fabric_tco", tco.fabric_tco_for, source, text=bool(text))


def _validation_floors(tier: str, **kwargs: Any) -> Floors:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import tiers
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import floors

    return floors.validation_floors(tier=tiers.tier_profile(tier), **kwargs)


# The engine functions of the filters that take a mapping of arguments (kwargs_filter), imported on first use.


def _load_nccl_conf() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_conf

    return nccl_conf


def _load_lustre_layouts() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre import lustre_layouts

    return lustre_layouts


def _load_lustre_client_tunables() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre import lustre_client_tunables

    return lustre_client_tunables


def _load_power_budget() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.power import power_budget

    return power_budget


def _load_dlc_thresholds() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.cooling import dlc_thresholds

    return dlc_thresholds


def _load_storage_sizing() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import storage_sizing

    return storage_sizing


def _load_parallelism() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.parallelism import parallelism

    return parallelism


def _load_address_plan() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.addresses import address_plan

    return address_plan


def _load_expected_cabling() -> Callable[..., Any]:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import expected_cabling

    return expected_cabling


class FilterModule:
    """gpucluster.tiers filters that answer one question each."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "gpu_model": gpu_model,
            "gpu_clocks": gpu_clocks,
            "tier_profile": tier_profile,
            "roce_traffic_class": roce_traffic_class,
            "nccl_conf": kwargs_filter("nccl_conf", _load_nccl_conf),
            "lustre_layouts": kwargs_filter("lustre_layouts", _load_lustre_layouts),
            "lustre_client_tunables": kwargs_filter("lustre_client_tunables", _load_lustre_client_tunables),
            "power_budget": kwargs_filter("power_budget", _load_power_budget),
            "dlc_thresholds": kwargs_filter("dlc_thresholds", _load_dlc_thresholds),
            "storage_sizing": kwargs_filter("storage_sizing", _load_storage_sizing),
            "parallelism": kwargs_filter("parallelism", _load_parallelism),
            "address_plan": kwargs_filter("address_plan", _load_address_plan),
            "expected_cabling": kwargs_filter("expected_cabling", _load_expected_cabling),
            "validation_floors": kwargs_filter("validation_floors", lambda: _validation_floors),
            "fabric_tco": fabric_tco,
        }
