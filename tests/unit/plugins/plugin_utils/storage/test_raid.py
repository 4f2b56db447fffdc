"""Data protection of the storage servers (issue 38, item 5): md RAID for Lustre targets, declared
volumes for NFS and BeeGFS, and ``allow_unprotected`` as the only way to plan without redundancy."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import ROOT, cluster_plan, load_inventory, read_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_summary
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import raid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre_targets import lustre_targets
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import protected_capacity

LU = "gpucluster_storage.lustre"


def _devs(n: int, start: int = 1) -> list[str]:
    return [f"/dev/nvme{i}n1" for i in range(start, start + n)]


def _targets(**kw: Any) -> dict[str, list[dict[str, Any]]]:
    args: dict[str, Any] = {
        "fsname": "fs",
        "mds": ["mds01"],
        "oss": ["oss01", "oss02"],
        "mgs_nid": "10.0.0.1@o2ib0",
        "mdt_device": None,
        "mdt_devices": _devs(2),
        "ost_devices": _devs(8),
        "osts_per_oss": 2,
    }
    args.update(kw)
    return lustre_targets(**args)


def _site(inventory: str, **lustre: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory(inventory)
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["lustre"].update(lustre)
    return site, groups


# -- levels and members ----------------------------------------------------------------------------


def test_osts_of_four_or_more_are_raid6_with_the_rpc_sized_stripe() -> None:
    out = _targets(ost_devices=_devs(12), osts_per_oss=2)  # 6 per OST: 4 data disks
    ost = out["oss02"][1]
    assert ost["index"] == 3 and ost["members"] == _devs(6, 7)
    arr = ost["array"]
    assert (arr["level"], arr["data_disks"], arr["chunk_kib"], arr["usable_devices"]) == ("raid6", 4, 256, 4.0)
    assert arr["full_stripe_kib"] == 1024 and arr["full_stripe_is_rpc"]
    assert arr["mkfs_options"] == "-E stride=64,stripe_width=256"  # 256 KiB / 4 KiB; x 4 data disks
    assert ost["protection"]["survives"] == 2


def test_data_disks_not_a_power_of_two_cannot_fill_the_rpc() -> None:
    arr = _targets(ost_devices=_devs(5), osts_per_oss=1)["oss01"][0]["array"]  # 3 data disks
    assert arr["chunk_kib"] == 256 and arr["full_stripe_kib"] == 768 and not arr["full_stripe_is_rpc"]


@pytest.mark.parametrize("members", [2, 3])
def test_too_few_for_raid6_gets_raid10_and_says_why(members: int) -> None:
    ost = _targets(ost_devices=_devs(members), osts_per_oss=1)["oss01"][0]
    assert ost["array"]["level"] == "raid10" and ost["array"]["create_argv"][5] == "--level=10"
    assert f"RAID-6 needs at least 4 members and an OST gets {members}" in ost["protection"]["reason"]
    assert ost["protection"]["survives"] == 1


def test_raid6_asked_for_three_devices_is_refused_with_the_numbers() -> None:
    with pytest.raises(PlanError) as info:
        _targets(ost_devices=_devs(6), osts_per_oss=2, protection={"level": "raid6"})
    assert info.value.field == f"{LU}.protection.level"
    assert "RAID-6 needs at least 4 members" in str(info.value) and "= 3" in str(info.value)


def test_devices_that_do_not_split_evenly_are_refused() -> None:
    with pytest.raises(PlanError, match=r"ost_devices.*5 devices do not split into 2 equal groups"):
        _targets(ost_devices=_devs(5), osts_per_oss=2)


def test_mdt_is_a_mirror_or_raid10() -> None:
    assert _targets()["mds01"][0]["array"]["level"] == "raid1"
    mdt = _targets(mdt_devices=_devs(4))["mds01"][0]
    assert mdt["array"]["level"] == "raid10" and mdt["array"]["mkfs_options"] == "-E stride=128,stripe_width=256"
    with pytest.raises(PlanError, match=r"mdt_device'.*unset when"):
        _targets(mdt_device="/dev/sdb")


def test_array_names_fit_the_superblock() -> None:
    long_host = "a-very-long-storage-server-name01"
    arr = _targets(oss=[long_host])[long_host][0]["array"]
    assert arr["name"] == "fs-OST0000" and arr["conf_line"] == "ARRAY /dev/md/fs-OST0000 metadata=1.2 name=fs-OST0000"
    assert _targets()["oss01"][0]["array"]["name"] == "oss01:fs-OST0000"


# -- unprotected layouts ---------------------------------------------------------------------------


def test_raw_devices_without_allow_unprotected_name_the_field() -> None:
    with pytest.raises(PlanError) as info:
        _targets(ost_devices=_devs(2), osts_per_oss=2, mdt_devices=None, mdt_device="/dev/nvme1n1")
    err = info.value
    assert err.field == f"{LU}.allow_unprotected" and err.value is False
    assert "each OST is one raw device (2" in str(err) and "the MDT is one raw device" in str(err)


def test_allowed_unprotected_layout_plans_with_a_warning_in_report() -> None:
    site, groups = _site("tier3", ost_devices=_devs(4), allow_unprotected=True)  # 1 raw device per OST
    plan = cluster_plan(site, groups)
    prot = plan["storage"]["protection"]
    assert prot["one_failure_loses_data"] and prot["parts"]["ost"]["kind"] == "raw"
    assert plan["storage"]["lustre"]["targets"]["oss01"][0]["array"] is None
    assert plan["storage"]["lustre"]["targets"]["oss01"][0]["device"] == "/dev/nvme1n1"
    warned = [w for w in report_summary(plan)["warnings"] if "Unprotected Lustre storage" in w]
    assert len(warned) == 1 and f"{LU}.allow_unprotected" in warned[0]


def test_old_one_device_per_ost_inventory_is_refused_naming_allow_unprotected() -> None:
    site, groups = _site("tier3", ost_devices=_devs(4), mdt_device="/dev/nvme1n1")
    del site["gpucluster_storage"]["lustre"]["mdt_devices"]  # the layout before issue 38
    with pytest.raises(PlanError) as info:
        cluster_plan(site, groups)
    assert info.value.field == f"{LU}.allow_unprotected"


# -- declared volumes ------------------------------------------------------------------------------


def test_declared_hardware_raid_is_used_as_is() -> None:
    out = _targets(
        ost_devices=_devs(2), osts_per_oss=2, mdt_devices=None, mdt_device="/dev/sdb",
        protection={"kind": "hardware", "level": "raid6", "mdt_level": "raid10"},
    )  # fmt: skip
    ost, mdt = out["oss01"][1], out["mds01"][0]
    assert ost["array"] is None and ost["device"] == "/dev/nvme2n1" and ost["mkfs_argv"][-1] == "/dev/nvme2n1"
    assert (ost["protection"]["level"], ost["protection"]["survives"]) == ("raid6", 2)
    assert (mdt["protection"]["level"], mdt["protection"]["survives"]) == ("raid10", 1)


def test_hardware_raid0_is_unprotected_and_zfs_is_refused_for_lustre() -> None:
    hw0 = {"kind": "hardware", "level": "raid0"}
    with pytest.raises(PlanError) as info:
        _targets(ost_devices=_devs(2), osts_per_oss=2, mdt_devices=None, mdt_device="/dev/sdb", protection=hw0)
    assert info.value.field == f"{LU}.allow_unprotected"
    with pytest.raises(PlanError, match=r"protection\.kind.*backfstype=zfs"):
        _targets(protection={"kind": "zfs", "level": "raidz2"})
    with pytest.raises(PlanError, match=r"protection\.level"):
        _targets(ost_devices=_devs(2), osts_per_oss=2, mdt_devices=["/dev/sdb"], protection={"kind": "hardware"})


@pytest.mark.parametrize(("inventory", "kind"), [("tier2", "nfs"), ("examples/tier3-beegfs", "beegfs")])
def test_nfs_and_beegfs_need_a_declared_volume_or_allow_unprotected(inventory: str, kind: str) -> None:
    site, groups = load_inventory(inventory)
    site = copy.deepcopy(site)
    section = site["gpucluster_storage"][kind]
    assert cluster_plan(site, groups)["storage"]["protection"]["parts"][kind]["level"] == "raid6"
    section.pop("protection")
    with pytest.raises(PlanError) as info:
        cluster_plan(site, groups)
    assert info.value.field == f"gpucluster_storage.{kind}.protection" and "allow_unprotected" in str(info.value)
    section["allow_unprotected"] = True
    plan = cluster_plan(site, groups)
    assert plan["storage"]["protection"]["one_failure_loses_data"]
    assert any(f"gpucluster_storage.{kind}.allow_unprotected" in w for w in report_summary(plan)["warnings"])
    section["protection"] = {"kind": "zfs", "level": "raidz9"}
    with pytest.raises(PlanError, match=r"protection\.level.*raidz2"):
        cluster_plan(site, groups)


# -- capacity and the reference tiers --------------------------------------------------------------


def test_usable_capacity_accounts_for_parity() -> None:
    assert [raid.usable_devices("raid6", n) for n in (4, 6, 10)] == [2.0, 4.0, 8.0]
    assert (raid.usable_devices("raid10", 4), raid.usable_devices("raid1", 2)) == (2.0, 1.0)
    cap = protected_capacity({"ost": {"members": 6, "usable_devices": 4.0, "level": "raid6"}}, {"ost": 8})
    assert cap["ost"] == {
        "arrays": 8,
        "raw_devices": 48,
        "usable_devices": 32.0,
        "usable_fraction": 0.6667,
        "formula": "8 x raid6 of 6: 4 devices' worth each",
    }


@pytest.mark.parametrize(
    "inventory",
    ["tier2", "tier3", "tier4", "tier4-k8s", "examples/tier2-mig", "examples/tier3-beegfs", "examples/tier4-b200"],
)
def test_one_nvme_failure_loses_no_data_in_the_reference_inventories(inventory: str) -> None:
    site, groups = read_inventory(ROOT / "inventories" / inventory)
    plan = cluster_plan(site, groups)
    prot = plan["storage"]["protection"]
    assert not prot["one_failure_loses_data"] and prot["survives_failures"] >= 1 and prot["warnings"] == []
    if plan["storage"]["type"] == "lustre":
        assert prot["parts"]["ost"]["level"] == "raid6" and prot["parts"]["mdt"]["level"] == "raid1"
        assert prot["capacity"]["ost"]["usable_fraction"] == 0.5
    rows = {r[0]: r[1] for r in raid.protection_rows(prot)}
    assert rows["one NVMe failure"] == "loses no data"
