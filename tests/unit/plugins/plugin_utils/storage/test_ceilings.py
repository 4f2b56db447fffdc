"""Storage floors within what the storage carries (issue 38): the ceiling of every storage type is the sum over
its data servers of min(their planned storage interfaces' line rates, the PCIe slots of their cards)
(storage/sizing.py server_links, storage_ceiling), the local drives' links for local NVMe; a floor above it is a
PlanError naming the field, the value and the ceiling (validation/floors.py storage_floor_within)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cluster_plan, load_inventory
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import PCIE_X16_GBS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import (
    SERVER_NICS_FIELD,
    local_ceiling,
    pcie_gbs,
    server_links,
    storage_ceiling,
)

#: Every reference and example inventory (inventories/tier*, inventories/examples/*)
SITES = sorted(
    str(p.relative_to(ROOT / "inventories"))
    for p in [*(ROOT / "inventories").glob("tier*"), *(ROOT / "inventories" / "examples").glob("*")]
    if (p / "hosts.yml").exists()
)


def test_the_sites_cover_every_storage_type() -> None:
    types = {load_inventory(s)[0]["gpucluster_storage"]["type"] for s in SITES}
    assert types == {"local_nvme", "nfs", "lustre", "beegfs", "nvmeof"}
    assert {"tier1", "tier2", "tier3", "tier4", "tier4-k8s"} <= set(SITES) and len(SITES) >= 10


@pytest.mark.parametrize("site", SITES)
def test_every_reference_and_example_floor_is_within_its_ceiling(site: str) -> None:
    plan = cluster_plan(*load_inventory(site))
    val, ceilings = plan["validation"], plan["storage"]["ceilings"]
    for rw in ("read", "write"):
        ceiling = ceilings[f"{rw}_gbps"]
        assert val[f"storage_{rw}_gbps"] <= ceiling["gbs"], (site, rw)
        assert val["ceilings"][f"storage_{rw}_gbps"] == ceiling  # the floors were checked against it
        assert not ceiling["link"].count("default")  # every planned port described (server_nics)


def test_tier4_two_oss_with_one_dual_port_card_each_is_refused_with_the_numbers() -> None:
    """The issue's case: 2 OSS whose two 400G ports are one PCIe Gen5 x16 card each carry 2 x 63 = 126 GB/s,
    below tier4's 160 GB/s read floor: refused, naming the field, its value, the floor and the ceiling."""
    site, groups = load_inventory("tier4")
    storage = site["gpucluster_storage"]
    storage["server_interfaces"] = ["ibp65s0f0", "ibp65s0f1"]
    storage["server_nics"] = {
        "ibp65s0f0": {"rate_gbps": 400, "pci_bus": "0000:41:00.0", "pcie_gen": 5, "pcie_lanes": 16},
        "ibp65s0f1": {"rate_gbps": 400, "pci_bus": "0000:41:00.1", "pcie_gen": 5, "pcie_lanes": 16},
    }
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == SERVER_NICS_FIELD
    text = str(err.value)
    assert "tier4 storage read floor, 160 GB/s" in text and "126 GB/s" in text
    assert "2 OSS (groups.lustre_oss) x 63 GB/s" in text and "PCIe Gen5 x16 = 63 GB/s" in text
    assert "ibp65s0f1" in text  # the value: the ports as described


def test_tier2_nfs_counts_only_the_planned_interface() -> None:
    """A second port described but not planned (no storage address) carries nothing: 50 GB/s, not 100."""
    site, groups = load_inventory("tier2")
    site["gpucluster_storage"]["server_nics"]["ibp65s0f1"] = {
        "rate_gbps": 400,
        "pci_bus": "0000:41:00.1",
        "pcie_gen": 5,
    }
    plan = cluster_plan(site, groups)
    assert plan["storage"]["ceilings"]["read_gbps"]["gbs"] == 50
    assert plan["validation"]["storage_read_gbps"] == 40


def test_a_beegfs_site_on_one_slow_server_is_refused() -> None:
    site, groups = load_inventory("examples/tier3-beegfs")
    groups = copy.deepcopy(groups)
    groups["beegfs_storage"] = groups["beegfs_storage"][:1]  # one server: 63 GB/s < 80 read
    with pytest.raises(PlanError, match=r"tier3 storage read floor, 80 GB/s.*1 BeeGFS storage server"):
        cluster_plan(site, groups)


def test_an_nvmeof_target_behind_a_gen4_x8_slot_is_refused() -> None:
    site, groups = load_inventory("examples/tier2-nvmeof")
    for nic in site["gpucluster_storage"]["server_nics"].values():
        nic.update(pcie_gen=4, pcie_lanes=8)  # 15.75 GB/s for both ports
    with pytest.raises(PlanError, match=r"tier2 storage read floor, 40 GB/s.*15\.75 GB/s.*PCIe Gen4 x8"):
        cluster_plan(site, groups)


def test_local_nvme_ceiling_is_the_drives_links() -> None:
    site, groups = load_inventory("tier1")
    site["gpucluster_storage"]["local_nvme"]["devices"] = ["/dev/nvme2n1"]
    site["gpucluster_storage"]["local_nvme"].pop("raid_device")
    site["gpucluster_node"]["pcie_gen"] = 4  # one Gen4 x4 drive: 7.875 GB/s < tier1's 14 read
    with pytest.raises(PlanError, match=r"gpucluster_storage\.local_nvme\.devices.*14 GB/s.*7\.875 GB/s"):
        cluster_plan(site, groups)
    assert local_ceiling(4, 4)["gbs"] == 31.5  # tiers.md tier1: 4x Gen4 drives


def test_undescribed_ports_are_a_marked_default() -> None:
    links = server_links(None, ["ib0"])
    assert links["default"] and links["gbs"] == 12.5
    ceiling = storage_ceiling(storage_type="lustre", servers=["oss1"], links=links, clients=1, client_link_gbps=None)
    assert "default: describe the real ports" in ceiling["link"]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"rate_gbps": 0, "pci_bus": "0000:41:00.0", "pcie_gen": 5}, "ib0.rate_gbps"),
        ({"rate_gbps": 400, "pci_bus": "41:00.0", "pcie_gen": 5}, "ib0.pci_bus"),
        ({"rate_gbps": 400, "pci_bus": "0000:41:00.0", "pcie_gen": 7}, "ib0.pcie_gen"),
        ({"rate_gbps": 400, "pci_bus": "0000:41:00.0", "pcie_gen": 5, "pcie_lanes": 12}, "ib0.pcie_lanes"),
        ("400G", "ib0"),
    ],
)
def test_a_bad_port_names_its_field(entry: Any, field: str) -> None:
    with pytest.raises(PlanError) as err:
        server_links({"ib0": entry}, ["ib0"])
    assert err.value.field == f"{SERVER_NICS_FIELD}.{field}"


def test_ports_of_one_card_must_agree_on_its_slot() -> None:
    nics = {
        "a": {"rate_gbps": 400, "pci_bus": "0000:41:00.0", "pcie_gen": 5},
        "b": {"rate_gbps": 400, "pci_bus": "0000:41:00.1", "pcie_gen": 4},
    }
    with pytest.raises(PlanError, match=r"server_nics\.b\.pcie_gen.*one card, one slot"):
        server_links(nics, ["a", "b"])


def test_the_schema_knows_server_nics() -> None:
    text = Path(ROOT / "plugins/plugin_utils/inventory/schema_v1.json").read_text()
    assert '"server_nics"' in text and "pcie_lanes" in text


_PORT = st.tuples(st.sampled_from([25, 100, 200, 400, 800]), st.integers(0, 3), st.sampled_from([3, 4, 5, 6]))


def _nics(ports: list[tuple[int, int, int]]) -> dict[str, dict[str, Any]]:
    """Ports as (rate, card, gen); a card's gen is its first port's (one card, one slot)."""
    gens: dict[int, int] = {}
    return {
        f"p{i}": {"rate_gbps": r, "pci_bus": f"0000:{0x10 + c:02x}:00.{i % 8}", "pcie_gen": gens.setdefault(c, g)}
        for i, (r, c, g) in enumerate(ports)
    }


def _ceiling(nics: dict[str, Any], planned: list[str], servers: int) -> dict[str, Any]:
    return storage_ceiling(
        storage_type="lustre",
        servers=[f"oss{i}" for i in range(servers)],
        links=server_links(nics, planned),
        clients=64,
        client_link_gbps=None,
    )


@given(ports=st.lists(_PORT, min_size=1, max_size=6), servers=st.integers(1, 8), extra=_PORT)
def test_ceiling_is_monotone_in_servers_and_ports_and_never_above_the_pcie_bound(
    ports: list[tuple[int, int, int]], servers: int, extra: tuple[int, int, int]
) -> None:
    nics = _nics(ports)
    planned = sorted(nics)
    base = _ceiling(nics, planned, servers)
    # never above the line rate nor the PCIe slots of the cards the ports sit on
    cards = {v["pci_bus"][:-2]: v["pcie_gen"] for v in nics.values()}
    slots = sum(PCIE_X16_GBS[g] for g in cards.values())
    line = sum(v["rate_gbps"] for v in nics.values()) / 8
    assert base["gbs"] <= servers * slots + 1e-6 and base["gbs"] <= servers * line + 1e-6
    assert base["gbs"] == pytest.approx(servers * base["per_server_gbs"])
    # one more server: never less
    assert _ceiling(nics, planned, servers + 1)["gbs"] >= base["gbs"]
    # one more planned port (on an existing or a new card): never less, and still within the bound
    more = _nics([*ports, extra])
    grown = _ceiling(more, sorted(more), servers)
    assert grown["gbs"] >= base["gbs"] - 1e-6
    more_slots = sum(PCIE_X16_GBS[g] for g in {v["pci_bus"][:-2]: v["pcie_gen"] for v in more.values()}.values())
    assert grown["gbs"] <= servers * more_slots + 1e-6
    # a port described but not planned adds nothing
    assert _ceiling(more, planned, servers)["gbs"] == pytest.approx(base["gbs"])


def test_pcie_lanes_scale_the_x16_figure() -> None:
    assert pcie_gbs(5, 16) == 63 and pcie_gbs(5, 8) == 31.5 and pcie_gbs(4, 4) == 7.875


@pytest.mark.parametrize("site", ["tier3", "tier4", "examples/tier2-nvmeof"])
def test_report_shows_floor_and_ceiling_side_by_side_with_their_sources(site: str) -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

    plan = cluster_plan(*load_inventory(site))
    (section,) = [s for s in report_sections(plan) if s["title"] == "Storage floors and ceilings"]
    rows = {r[0]: r for r in section["rows"]}
    ceiling = plan["storage"]["ceilings"]["read_gbps"]
    floor = plan["validation"]["storage_read_gbps"]
    assert rows["read (GB/s)"][1] == f"floor {floor:g} / ceiling {ceiling['gbs']:g} GB/s"
    assert "gpucluster_cluster.tier" in rows["read (GB/s)"][2] and SERVER_NICS_FIELD in rows["read (GB/s)"][2]
    assert any(k.startswith("card 0000:41:00") for k in rows)


def test_a_rating_above_the_links_is_a_warning() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_summary

    site, groups = load_inventory("tier3")
    assert not [w for w in report_summary(cluster_plan(site, groups))["warnings"] if "rating above" in w]
    site["gpucluster_storage"]["rated_write_gbps"] = 130  # the two OSS carry 126 GB/s
    (warning,) = [w for w in report_summary(cluster_plan(site, groups))["warnings"] if "rating above" in w]
    assert "rated_write_gbps 130 GB/s" in warning and "126 GB/s" in warning
