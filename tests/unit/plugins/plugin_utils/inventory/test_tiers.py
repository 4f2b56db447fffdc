"""Tier profiles and acceptance floors (tiers.md; dossier 3.2, 3.3)."""

from __future__ import annotations

import pytest

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import (
    TIERS,
    tier_profile,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.floors import busbw_factor, validation_floors


def test_storage_floors_of_the_reference_design() -> None:
    """tiers.md: tier1 14-28 GB/s read; tier2 40; tier3 80-160; tier4 160-500."""
    assert [TIERS[t].storage_read_gbps for t in TIERS] == [(14, 28), (40, 40), (80, 160), (160, 500)]
    assert [TIERS[t].storage_write_gbps[0] for t in TIERS] == [7, 20, 40, 80]
    assert [TIERS[t].gpus for t in TIERS] == [8, 16, 32, 64]


def test_unknown_tier() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_cluster\.tier.*tier5"):
        tier_profile("tier5")


def test_busbw_factors() -> None:
    """dossier 3.2: all_reduce 2(n-1)/n -> 1.75 for 8 ranks, 1.875 for 16."""
    assert busbw_factor("all_reduce", 8) == 1.75
    assert busbw_factor("all_reduce", 16) == 1.875
    assert busbw_factor("all_gather", 8) == 0.875


def test_h100_floors() -> None:
    """dossier 3.3: 460 GB/s in an 8x H100 node [A1]; 375 Gb/s per NDR NIC [A1]; ~400 GB/s network peak [I2][I3]."""
    f = validation_floors(
        tier=TIERS["tier3"], gpu_model="h100_sxm", fabric_type="infiniband", compute_nics_per_node=8,
        link_rate_gbps=400, nodes=4,
    )  # fmt: skip
    assert f["allreduce_intra_node_busbw_gbs"] == 460
    assert f["nic_write_bw_gbps"] == 375
    assert f["allreduce_inter_node_busbw_gbs"] == 340  # 85 % of 8 x 400 Gb/s / 8
    assert (f["storage_read_gbps"], f["storage_write_gbps"]) == (80, 40)
    assert f["gate_message_bytes"] == 8 * 2**30


def test_single_node_and_unsourced_floors_say_why() -> None:
    f = validation_floors(
        tier=TIERS["tier1"], gpu_model="rtx_pro_6000", fabric_type="none", compute_nics_per_node=0,
        link_rate_gbps=None, nodes=1,
    )  # fmt: skip
    assert f["allreduce_intra_node_busbw_gbs"] is None
    assert set(f["reasons"]) == {
        "allreduce_intra_node_busbw_gbs",
        "allreduce_inter_node_busbw_gbs",
        "nic_write_bw_gbps",
    }


def test_the_tier_section_has_the_keys_its_type_names() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import TierSection
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TIERS, tier_as_dict

    for profile in TIERS.values():
        section = tier_as_dict(profile)
        assert list(section) == list(TierSection.__annotations__)
        assert section["storage_read_gbps"] == list(profile.storage_read_gbps)
