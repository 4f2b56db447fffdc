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
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import server_links, storage_ceiling
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


def _nfs_ceiling(servers: int, ports: int, rate: float, clients: int, client_gbps: float | None) -> dict[str, Any]:
    """The NFS server's ceiling with ``ports`` ports of ``rate`` Gb/s, each on a Gen5 x16 card of its own."""
    nics = {f"ib{i}": {"rate_gbps": rate, "pci_bus": f"0000:{0x41 + i:02x}:00.0", "pcie_gen": 5} for i in range(ports)}
    links = server_links(nics, list(nics))
    return storage_ceiling(storage_type="nfs", servers=[f"nfs{i}" for i in range(servers)], links=links,
                           clients=clients, client_link_gbps=client_gbps)  # fmt: skip


def test_storage_floor_above_the_nfs_server_links_is_refused_with_the_numbers() -> None:
    """tier2's 40 GB/s read from one NFS server with one 100G port (12.5 GB/s): a PlanError naming the servers'
    ports, the floor and the ceiling; never lowered in silence."""
    ceiling = _nfs_ceiling(1, 1, 100, 2, 800)
    links = nfs_links({}, fabric_type="infiniband", lab=False, ceiling=ceiling)
    with pytest.raises(PlanError, match=r"gpucluster_storage\.server_nics") as err:
        _floors("h100_sxm", tier=TIERS["tier2"], storage_ceilings=links["ceilings"])
    text = str(err.value)
    assert "tier2 storage read floor, 40 GB/s" in text and "12.5 GB/s" in text and "groups.nfs_server" in text
    big = nfs_links({}, fabric_type="infiniband", lab=False, ceiling=_nfs_ceiling(1, 1, 400, 2, 800))
    f = _floors("h100_sxm", tier=TIERS["tier2"], storage_ceilings=big["ceilings"])
    assert (f["storage_read_gbps"], f["storage_write_gbps"]) == (40, 20) and "storage_read_gbps" not in f["how"]


def test_nfs_clients_links_bound_the_ceiling_too() -> None:
    ceiling = _nfs_ceiling(1, 4, 400, 2, 100)
    links = nfs_links({}, fabric_type="none", lab=False, ceiling=ceiling)
    assert links["ceilings"]["read_gbps"]["gbs"] == 25 and "2 clients" in links["ceilings"]["read_gbps"]["link"]
    assert links["ceilings"]["read_gbps"]["field"] == "gpucluster_node.nics"
    assert not links["rdma_offered"] and links["proto"] == "tcp"


def test_nfs_over_rdma_is_offered_only_where_the_fabric_carries_rdma() -> None:
    ib = nfs_links({}, fabric_type="infiniband", lab=False)
    assert ib["rdma_offered"] and "proto: rdma" in ib["rdma_note"]
    rdma = nfs_links({"proto": "rdma"}, fabric_type="roce", lab=False)
    assert (rdma["proto"], rdma["port"]) == ("rdma", 20049)
    with pytest.raises(PlanError, match=r"gpucluster_storage\.nfs\.proto"):
        nfs_links({"proto": "rdma"}, fabric_type="none", lab=False)
    with pytest.raises(PlanError, match=r"gpucluster_storage\.nfs\.proto"):
        nfs_links({"proto": "rdma"}, fabric_type="infiniband", lab=True)
    # the old count of NICs could name ports the plan never addresses (tier2 counted two, planned one)
    with pytest.raises(PlanError, match=r"gpucluster_storage\.nfs\.server_nics.*gpucluster_storage\.server_nics"):
        nfs_links({"server_nics": {"count": 2, "rate_gbps": 400}}, fabric_type="none", lab=False)


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
    ceiling = _nfs_ceiling(1, server[0], server[1], nodes, 200)
    args = {
        "tier": TIERS[tier],
        "gpus_per_node": gpn,
        "compute_nics_per_node": nics,
        "link_rate_gbps": rate,
        "nodes": nodes,
        "intra_node": intra_node(gpu_model(model), gpn, pcie).as_dict(),
        "storage_ceilings": {"read_gbps": ceiling, "write_gbps": ceiling},
    }
    if TIERS[tier].storage_read_gbps[0] > ceiling["gbs"]:  # a storage floor is refused, never lowered
        with pytest.raises(PlanError, match=r"storage read floor"):
            _floors(model, **args)
        return
    _within(_floors(model, **args))


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
    site["gpucluster_fabric"].pop("infiniband")  # an InfiniBand section on RoCE is refused (inventory/rules.py)
    val = cluster_plan(site, groups)["validation"]
    assert val["allreduce_inter_node_busbw_gbs"] <= 63
    _within(val)


def test_tier2_nfs_floor_is_within_its_server_links() -> None:
    """Acceptance (issues 26, 38): tier2's 40 GB/s read floor against the server's ONE planned 400G port
    (50 GB/s; its PCIe Gen5 x16 slot carries 63), not two NICs the plan never addresses."""

    site, groups = load_inventory("tier2")
    plan = cluster_plan(site, groups)
    val = plan["validation"]
    assert val["storage_read_gbps"] == 40
    assert val["ceilings"]["storage_read_gbps"]["gbs"] == 50
    _within(val)
    assert plan["storage"]["nfs"]["links"]["rdma_offered"]
