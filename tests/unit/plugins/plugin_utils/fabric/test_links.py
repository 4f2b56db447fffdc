"""The plan carries the fabric's design; its cables and HCAs are generated (fabric.links). The generator
yields exactly the lists the plan carried before, in the same order: checked against the former expansion
(legacy_cabling.py, kept for this test alone) for the reference inventories, the bench's generated sizes
and random trees."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cluster_plan
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import cabling
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import read_inventory
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import load_site

sys.path.insert(0, str(Path(__file__).parent))
import legacy_cabling

sys.path.insert(0, str(ROOT / "tools" / "bench"))
import bench_plan

REFERENCE = sorted(
    str(p.relative_to(ROOT / "inventories"))
    for p in [*(ROOT / "inventories").glob("tier*"), *(ROOT / "inventories" / "examples").glob("*")]
    if p.is_dir()
)
DESIGN_ONLY = ("rail_hcas", "spine_scope", "sm_hcas", "sm_links")


def _legacy_of(raw: dict[str, Any], groups: dict[str, list[str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the former expansion, the design) of an inventory's fabric, from the same inputs as fabric/plan.py."""
    site = load_site(raw, groups)
    f = site.fabric_model
    nics = site.node.compute_nics
    args: dict[str, Any] = {
        "fabric_type": f.type,
        "topology": f.topology if f.type in RDMA_FABRICS else "none",
        "compute_hosts": site.compute_hosts,
        "rail_hcas": [n.name for n in nics],
        "link_rate_gbps": f.link_rate_gbps,
        "link_width": nics[0].width if nics else "4x",
    }
    design = dict(cabling.site_cabling(site.fabric_model.tree, links=False, **args))
    return legacy_cabling.site_cabling(site.fabric_model.tree, **args), design


def _assert_same(old: dict[str, Any], design: dict[str, Any]) -> None:
    assert "links" not in design and "hcas" not in design
    assert list(fabric_links.links(design)) == old["links"]
    assert list(fabric_links.hcas(design)) == old["hcas"]
    assert fabric_links.link_count(design) == len(old["links"])
    assert fabric_links.hca_count(design) == len(old["hcas"])
    # the host ends alone (health's ports), from the design and from the listed links alike
    ends = sorted((e["node"], e["hca"], e["port"]) for e in (x["a"] for x in old["links"] if x["kind"] == "host"))
    assert sorted(fabric_links.host_ports(design)) == ends
    assert sorted(fabric_links.host_ports({"links": old["links"]})) == ends
    rest = {k: v for k, v in old.items() if k not in ("links", "hcas")}
    assert {k: v for k, v in design.items() if k not in DESIGN_ONLY} == rest
    # the expanded form (the expected_cabling filter's answer) is the former answer with the design's keys
    expanded = cabling.expand(design)  # type: ignore[arg-type]
    assert {k: v for k, v in expanded.items() if k not in DESIGN_ONLY} == old
    assert list(expanded) == [*list(old)[:3], "rail_hcas", "spine_scope", *list(old)[3:]]


@pytest.mark.parametrize("inventory", REFERENCE)
def test_the_reference_inventories_generate_their_former_link_lists(inventory: str) -> None:
    raw, groups = read_inventory(ROOT / "inventories" / inventory)
    old, design = _legacy_of(raw, groups)
    _assert_same(old, design)
    plan = cluster_plan(raw, groups)
    cab = plan["fabric"]["cabling"]
    assert {k: v for k, v in cab.items() if k not in ("sm_hcas", "sm_links")} == design
    assert list(fabric_links.links(cab)) == old["links"]


@pytest.mark.parametrize("nodes", [64, 1024, 4096, 16384])
def test_the_bench_sizes_generate_their_former_link_lists(nodes: int) -> None:
    """bench_plan's generated clusters: two tiers up to 8,192 nodes, three tiers (32 pods) at 16,384."""
    raw, groups = bench_plan.generated_site(nodes)
    old, design = _legacy_of(raw, groups)
    assert design["sizing"]["tiers"] == (3 if nodes > 8192 else 2)
    _assert_same(old, design)


@settings(max_examples=60, deadline=None)
@given(
    topology=st.sampled_from(["single_switch", "rail_optimized", "fat_tree"]),
    nodes=st.integers(1, 600),
    rails=st.integers(1, 8),
    radix=st.sampled_from([8, 16, 32, 40, 64]),
    over=st.sampled_from([1, 1.5, 2, 3]),
    scope=st.sampled_from(["shared", "rail"]),
    minimum=st.integers(1, 3),
)
def test_every_design_generates_its_former_link_list(
    topology: str, nodes: int, rails: int, radix: int, over: float, scope: str, minimum: int
) -> None:
    args: dict[str, Any] = {
        "topology": topology,
        "compute_hosts": [f"gpu{i:03d}" for i in range(1, nodes + 1)],
        "rail_hcas": [f"mlx5_{r}" for r in range(rails)],
        "switch_radix": radix,
        "oversubscription": over,
        "spine_scope": scope,
        "min_spines": minimum,
    }
    try:
        old = legacy_cabling.expected_cabling(**args)
    except legacy_cabling.PlanError as err:
        with pytest.raises(type(err)) as new_err:
            cabling.expected_cabling(**args, links=False)
        assert str(new_err.value) == str(err)
        return
    _assert_same(old, dict(cabling.expected_cabling(**args, links=False)))
