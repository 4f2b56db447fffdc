"""fabric/plan.py subnet_count: the subnets of a design, counted without generating its cables, equal to what
ibfabric.subnets finds by walking every link."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import expand, expected_cabling
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.plan import subnet_count
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError


def _design(topology: str, nodes: int, rails: int, **kw: object) -> dict:
    return expected_cabling(  # type: ignore[return-value, arg-type]
        topology=topology,
        compute_hosts=[f"compute{i:03d}" for i in range(1, nodes + 1)],
        rail_hcas=[f"mlx5_{r}" for r in range(rails)],
        links=False,
        **kw,
    )


@pytest.mark.parametrize(
    ("topology", "nodes", "rails", "kw", "expected"),
    [
        ("none", 4, 2, {}, 0),
        ("single_switch", 0, 2, {}, 0),
        ("single_switch", 4, 2, {}, 1),
        ("rail_optimized", 0, 4, {}, 0),
        ("rail_optimized", 6, 4, {}, 4),
        ("rail_optimized", 6, 0, {}, 0),
        ("fat_tree", 40, 8, {"switch_radix": 64}, 1),
        ("fat_tree", 40, 8, {"switch_radix": 64, "spine_scope": "rail"}, 8),
        ("fat_tree", 60, 2, {"switch_radix": 8}, 1),  # three tiers: pods under core switches
        ("fat_tree", 100, 2, {"switch_radix": 8, "spine_scope": "rail"}, 2),
    ],
)
def test_subnet_count_of_the_designs(topology: str, nodes: int, rails: int, kw: dict, expected: int) -> None:
    design = _design(topology, nodes, rails, **kw)
    assert subnet_count(design) == len(ibfabric.subnets(design)) == expected  # type: ignore[arg-type]
    assert subnet_count(expand(design)) == expected  # type: ignore[arg-type]


def test_a_cabling_that_lists_its_links_is_walked() -> None:
    """Listed links are read as they are: two leaves of one design cabled apart make two subnets."""
    design = _design("fat_tree", 8, 2, switch_radix=64)
    cabling = expand(design)  # type: ignore[arg-type]
    cabling["links"] = [link for link in cabling["links"] if link["kind"] == "host"]
    assert subnet_count(cabling) == len(ibfabric.subnets(cabling)) == 2


@settings(max_examples=60, deadline=None)
@given(
    topology=st.sampled_from(["single_switch", "rail_optimized", "fat_tree"]),
    nodes=st.integers(0, 300),
    rails=st.integers(0, 4),
    radix=st.sampled_from([8, 12, 16, 64]),
    over=st.sampled_from([1, 2]),
    scope=st.sampled_from(["shared", "rail"]),
    spines=st.integers(0, 4),
)
def test_subnet_count_equals_the_walked_subnets(
    topology: str, nodes: int, rails: int, radix: int, over: float, scope: str, spines: int
) -> None:
    try:
        design = _design(
            topology, nodes, rails, switch_radix=radix, oversubscription=over, spine_scope=scope, min_spines=1,
            spines=spines,
        )  # fmt: skip
    except PlanError:
        return
    assert subnet_count(design) == len(ibfabric.subnets(design))  # type: ignore[arg-type]
