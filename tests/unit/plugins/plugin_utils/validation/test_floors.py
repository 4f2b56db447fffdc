"""Every acceptance floor lies within the links that carry it (validation/floors.py; DESIGN.md bring-up rules)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import cluster_plan, load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import intra_node
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS, gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TIERS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nfs import nfs_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.floors import (
    INTRA_NODE_FLOOR_FIELD,
    link_ceilings,
    validation_floors,
)

FLOOR_KEYS = (
    "allreduce_intra_node_busbw_gbs",
    "allreduce_inter_node_busbw_gbs",
    "nic_write_bw_gbps",
    "storage_read_gbps",
    "storage_write_gbps",
)


def _floors(model: str, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "tier": TIERS["tier3"],
        "gpu_model": model,
        "fabric_type": "roce",
        "compute_nics_per_node": 8,
        "link_rate_gbps": 400,
        "nodes": 4,
        "intra_node": intra_node(gpu_model(model), 8, 5).as_dict(),
        "gpus_per_node": 8,
    }
    args.update(kw)
    return validation_floors(**args)


def _within(f: dict[str, Any]) -> None:
    for key in FLOOR_KEYS:
        if f[key] is not None and key in f["ceilings"]:
            assert f[key] <= f["ceilings"][key]["gbs"], key


def test_pcie_gpu_inter_node_floor_is_within_its_pcie_link() -> None:
    """An RTX PRO 6000 (no NVLink) moves every byte over its own PCIe Gen5 x16, 63 GB/s per direction
    (docs/sources.md [S18]): not 85 % of eight 400G NICs (340 GB/s) but 85 % of 63."""
    f = _floors("rtx_pro_6000")
    assert f["ceilings"]["allreduce_inter_node_busbw_gbs"]["gbs"] == 63
    assert "PCIe Gen5 x16" in f["ceilings"]["allreduce_inter_node_busbw_gbs"]["link"]
    assert f["allreduce_inter_node_busbw_gbs"] == pytest.approx(0.85 * 63, abs=0.05)
    assert "63" in f["how"]["allreduce_inter_node_busbw_gbs"]
    _within(f)


def test_nvswitch_inter_node_floor_stays_the_nics() -> None:
    """H100 SXM: the 8 NDR NICs (400 GB/s, docs/sources.md [I3]) bound it, not NVLink; 340 as before."""
    f = _floors("h100_sxm", fabric_type="infiniband")
    assert f["allreduce_inter_node_busbw_gbs"] == 340
    assert f["allreduce_intra_node_busbw_gbs"] == 460  # Azure [A1], below NVLS's 450 x 1.75
    assert f["ceilings"]["allreduce_intra_node_busbw_gbs"]["gbs"] == pytest.approx(787.5)
    _within(f)


def test_a_site_floor_above_the_link_is_an_error_naming_the_field() -> None:
    with pytest.raises(PlanError, match=INTRA_NODE_FLOOR_FIELD.replace(".", r"\.")) as err:
        _floors("rtx_pro_6000", intra_floor_gbs=80)
    assert "63" in str(err.value) and "80" in str(err.value)
    assert _floors("rtx_pro_6000", intra_floor_gbs=50)["allreduce_intra_node_busbw_gbs"] == 50


def test_nic_behind_a_narrow_pcie_slot_is_capped() -> None:
    """An 800G NIC on PCIe Gen4 x16 (31.5 GB/s = 252 Gb/s) cannot write at 800 Gb/s."""
    f = _floors("h100_pcie", link_rate_gbps=800, intra_node=intra_node(gpu_model("h100_pcie"), 8, 4).as_dict())
    assert f["ceilings"]["nic_write_bw_gbps"]["gbs"] == 252
    assert f["nic_write_bw_gbps"] == pytest.approx(0.9 * 252, abs=0.05)
    _within(f)


def test_storage_floor_above_the_nfs_server_links_is_lowered_and_said() -> None:
    """tier2's 40 GB/s read from one NFS server with one 100G port (12.5 GB/s): lowered to 85 % of 12.5."""
    links = nfs_links({}, fabric_type="infiniband", lab=False, clients=2, client_link_gbps=800)
    f = _floors("h100_sxm", tier=TIERS["tier2"], storage_ceilings=links["ceilings"])
    assert f["storage_read_gbps"] == pytest.approx(0.85 * 12.5, abs=0.05)
    assert "lowered from 40" in f["how"]["storage_read_gbps"]
    assert "server_nics" in f["how"]["storage_read_gbps"]
    big = nfs_links({"server_nics": {"count": 2, "rate_gbps": 400}}, fabric_type="infiniband", lab=False,
                    clients=2, client_link_gbps=800)  # fmt: skip
    f = _floors("h100_sxm", tier=TIERS["tier2"], storage_ceilings=big["ceilings"])
    assert (f["storage_read_gbps"], f["storage_write_gbps"]) == (40, 20) and "storage_read_gbps" not in f["how"]


def test_nfs_clients_links_bound_the_ceiling_too() -> None:
    links = nfs_links({"server_nics": {"count": 4, "rate_gbps": 400}}, fabric_type="none", lab=False, clients=2,
                      client_link_gbps=100)  # fmt: skip
    assert links["ceilings"]["read_gbps"]["gbs"] == 25 and "2 clients" in links["ceilings"]["read_gbps"]["link"]
    assert not links["rdma_offered"] and links["proto"] == "tcp"


def test_nfs_over_rdma_is_offered_only_where_the_fabric_carries_rdma() -> None:
    ib = nfs_links({}, fabric_type="infiniband", lab=False, clients=2, client_link_gbps=None)
    assert ib["rdma_offered"] and "proto: rdma" in ib["rdma_note"]
    rdma = nfs_links({"proto": "rdma"}, fabric_type="roce", lab=False, clients=2, client_link_gbps=None)
    assert (rdma["proto"], rdma["port"]) == ("rdma", 20049)
    with pytest.raises(PlanError, match=r"gpucluster_storage\.nfs\.proto"):
        nfs_links({"proto": "rdma"}, fabric_type="none", lab=False, clients=2, client_link_gbps=None)
    with pytest.raises(PlanError, match=r"gpucluster_storage\.nfs\.proto"):
        nfs_links({"proto": "rdma"}, fabric_type="infiniband", lab=True, clients=2, client_link_gbps=None)
    with pytest.raises(PlanError, match=r"gpucluster_storage\.nfs\.server_nics\.rate_gbps"):
        nfs_links({"server_nics": {"count": 1, "rate_gbps": 0}}, fabric_type="none", lab=False, clients=1,
                  client_link_gbps=None)  # fmt: skip
    with pytest.raises(PlanError, match=r"gpucluster_storage\.nfs\.server_nics\.count"):
        nfs_links({"server_nics": {"count": 0}}, fabric_type="none", lab=False, clients=1, client_link_gbps=None)


@given(
    model=st.sampled_from(sorted(GPUS)),
    gpn=st.integers(1, 8),
    pcie=st.sampled_from([3, 4, 5, 6]),
    nics=st.integers(0, 8),
    rate=st.sampled_from([100, 200, 400, 800]),
    nodes=st.integers(1, 64),
    tier=st.sampled_from(sorted(TIERS)),
    server=st.tuples(st.integers(1, 8), st.sampled_from([25, 100, 200, 400])),
)
def test_every_computed_floor_is_within_its_ceiling(
    model: str, gpn: int, pcie: int, nics: int, rate: int, nodes: int, tier: str, server: tuple[int, int]
) -> None:
    links = nfs_links({"server_nics": {"count": server[0], "rate_gbps": server[1]}}, fabric_type="roce", lab=False,
                      clients=nodes, client_link_gbps=200)  # fmt: skip
    f = _floors(
        model,
        tier=TIERS[tier],
        gpus_per_node=gpn,
        compute_nics_per_node=nics,
        link_rate_gbps=rate,
        nodes=nodes,
        intra_node=intra_node(gpu_model(model), gpn, pcie).as_dict(),
        storage_ceilings=links["ceilings"],
    )
    _within(f)


def test_ceilings_without_fabric_or_single_gpu() -> None:
    one = link_ceilings(intra_node=intra_node(gpu_model("l40s"), 1, 5).as_dict(), gpus_per_node=1,
                        fabric_type="none", compute_nics_per_node=0, link_rate_gbps=None)  # fmt: skip
    assert one == {}


def test_rtx_pro_6000_roce_site_plans_floors_within_its_links(tier3: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Acceptance (issue 26): an 8x RTX PRO 6000 RoCE site's inter-node floor is within its PCIe ceiling."""
    site, groups = tier3
    site["gpucluster_node"] = {
        **site["gpucluster_node"],
        "gpu_model": "rtx_pro_6000",
        "gpu_limits": {"power_min_w": 300},
        "gpu_temp_limits": {"max_operating_c": 87},  # required: no sourced limits for this card (issue 43)
    }
    site["gpucluster_gpu_policy"] = {
        **site["gpucluster_gpu_policy"],
        "clock_policy": "power_capped",
        "power_cap_w": 600,
    }
    site["gpucluster_fabric"] = {**site["gpucluster_fabric"], "type": "roce"}
    val = cluster_plan(site, groups)["validation"]
    assert val["allreduce_inter_node_busbw_gbs"] <= 63
    _within(val)


def test_tier2_nfs_floor_is_within_its_server_links() -> None:
    """Acceptance (issue 26): tier2's 40 GB/s read floor against the server's 2 x 400G (100 GB/s)."""

    site, groups = load_inventory("tier2")
    plan = cluster_plan(site, groups)
    val = plan["validation"]
    assert val["storage_read_gbps"] == 40
    assert val["ceilings"]["storage_read_gbps"]["gbs"] == 100
    _within(val)
    assert plan["storage"]["nfs"]["links"]["rdma_offered"]
