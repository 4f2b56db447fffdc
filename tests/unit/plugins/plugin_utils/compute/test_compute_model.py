"""compute/model.py: each section's TypedDict names exactly the keys its builder writes (checked on real plans,
nested shapes included), and plan.gpu.model carries every field of the catalog entry."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.gpu import model_section
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS

SECTIONS = {
    "gpu": model.GpuSection,
    "power": model.PowerSection,
    "cooling": model.CoolingSection,
    "parallelism": model.ParallelismSection,
    "ups": model.UpsSection,
    "health": model.HealthSection,
    "dcgm": model.DcgmSection,
    "healing": model.HealingSection,
    "containers": model.ContainersSection,
    "nccl": model.NcclSection,
}
#: the reference tiers and the examples that reach the sometimes-present shapes (MIG, air cooling, OCI)
INVENTORIES = ("tier1", "tier4", "tier4-k8s", "examples/tier2-mig", "examples/tier1-rtxpro6000")


def _shape(tp: Any) -> tuple[str, Any] | None:
    """("dict", T) for a TypedDict T, ("map", T) for dict[str, T], ("list", T) for list[T], through ``X | None``
    and ``NotRequired[X]``; None for a shape without a TypedDict."""
    if typing.is_typeddict(tp):
        return "dict", tp
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, list):
        inner = args[-1] if typing.is_typeddict(args[-1]) else None
        return ("map" if origin is dict else "list", inner) if inner is not None else None
    for arg in args:
        found = _shape(arg)
        if found is not None:
            return found
    return None


def _check(value: Any, td: Any, where: str) -> None:
    hints = typing.get_type_hints(td, include_extras=True)
    # NotRequired read from the hints: under postponed annotations a TypedDict's __required_keys__ lists every key
    required = {k for k, h in hints.items() if typing.get_origin(h) is not typing.NotRequired}
    keys = set(value)
    assert required <= keys, (where, sorted(required - keys))
    assert keys <= set(hints), (where, sorted(keys - set(hints)))
    for key in keys:
        shape, item = _shape(hints[key]), value[key]
        if shape is None or item is None:
            continue
        kind, inner = shape
        if kind == "dict":
            _check(item, inner, f"{where}.{key}")
        for name, entry in item.items() if kind == "map" else enumerate(item) if kind == "list" else ():
            _check(entry, inner, f"{where}.{key}[{name}]")


@pytest.fixture(scope="module", params=INVENTORIES)
def plan(request: pytest.FixtureRequest) -> dict[str, Any]:
    return cluster_plan(*load_inventory(request.param))


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_section_keys_match_its_type(plan: dict[str, Any], section: str) -> None:
    _check(plan[section], SECTIONS[section], section)


def test_gpu_model_section_is_the_whole_catalog_entry() -> None:
    for gpu in GPUS.values():
        section = model_section(gpu)
        assert section == dataclasses.asdict(gpu)
        assert list(section) == [f.name for f in dataclasses.fields(gpu)]  # the catalog's order, as asdict's
