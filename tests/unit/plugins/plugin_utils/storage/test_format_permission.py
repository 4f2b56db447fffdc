"""Format permission per host and device (issue 16, item 4): ``<host>:/dev/...`` entries.

In tier3/tier4 the MDT device of mds01 has the same path as OST 0 of every OSS; allowing the
MDT's format must not let an OSS erase its first OST. The plan hands each host only its own
devices, and the guard on each host decides from that list alone.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.module_utils.block_guard import GuardError, guard
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.format_permission import FORM, host_devices

LU = "gpucluster_storage.lustre"
LOCAL = "gpucluster_storage.local_nvme"
EXT4 = [{"type": "ext4", "offset": "0x438", "label": "olddata", "usage": "filesystem"}]


def _lustre_plan(tier: str, **lustre: Any) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["lustre"].update(lustre)
    return cluster_plan(site, groups)["storage"]["lustre"]


def _local_plan(**local: Any) -> dict[str, Any]:
    site, groups = load_inventory("tier1")
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["local_nvme"].update(local)
    return cluster_plan(site, groups)["storage"]["local_nvme"]


def _error(tier: str, entries: list[Any], section: str = "lustre") -> PlanError:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site["gpucluster_storage"][section].update(allow_format=True, allow_format_devices=entries)
    with pytest.raises(PlanError) as info:
        cluster_plan(site, groups)
    return info.value


@pytest.mark.parametrize("tier", ["tier3", "tier4"])
def test_mdt_permission_does_not_reach_the_oss_with_the_same_path(tier: str) -> None:
    plain = _lustre_plan(tier)
    mds, oss = plain["mds"][0], plain["oss"]
    mdt = plain["targets"][mds][0]["members"][0]
    assert all(plain["targets"][h][0]["members"][0] == mdt for h in oss)  # the trap: OST 0 has the MDT's path

    lu = _lustre_plan(tier, allow_format=True, allow_format_devices=[f"{mds}:{mdt}"])
    assert lu["allow_format_devices"][mds] == [mdt]
    assert all(lu["allow_format_devices"][h] == [] for h in oss)
    assert set(lu["allow_format_devices"]) == set(lu["targets"])  # every server host, no other host


def test_guard_on_each_host_decides_from_its_own_list_only() -> None:
    """The role passes allow_format_devices[inventory_hostname] (intersected with the target) to the guard."""
    lu = _lustre_plan("tier3", allow_format=True, allow_format_devices=["mds01:/dev/nvme1n1"])

    def run(host: str, device: str) -> dict[str, Any]:
        own = [d for d in lu["allow_format_devices"].get(host, []) if d == device]
        return guard(
            devices=[device], raid_device=None, raid_level="raid0", filesystem="lustre", label=None,
            allow_format=lu["allow_format"], allow_format_devices=own, flag=LU,
            present={device: True}, probes={device: EXT4}, array=None, mdstat={},
        )  # fmt: skip

    assert run("mds01", "/dev/nvme1n1")["wipe"] == ["/dev/nvme1n1"]
    for oss in ("oss01", "oss02"):
        with pytest.raises(GuardError, match=r"refusing to format /dev/nvme1n1: it carries ext4"):
            run(oss, "/dev/nvme1n1")


def test_oss_device_allowed_on_one_oss_only() -> None:
    lu = _lustre_plan("tier3", allow_format=True, allow_format_devices=["oss02:/dev/nvme3n1", "oss02:/dev/nvme4n1"])
    assert lu["allow_format_devices"] == {
        "mds01": [],
        "oss01": [],
        "oss02": ["/dev/nvme3n1", "/dev/nvme4n1"],
    }


def test_bare_path_is_refused_naming_field_value_and_form() -> None:
    err = _error("tier3", ["oss01:/dev/nvme2n1", "/dev/nvme1n1"])
    assert err.field == f"{LU}.allow_format_devices[1]" and err.value == "/dev/nvme1n1"
    text = str(err)
    assert FORM in text and "mds01:/dev/nvme1n1" in text and "every host" in text


def test_host_outside_the_inventory_is_refused() -> None:
    err = _error("tier3", ["mds09:/dev/nvme1n1"])
    assert err.field == f"{LU}.allow_format_devices[0]" and err.value == "mds09:/dev/nvme1n1"
    assert "mds09 is not a host of the inventory" in str(err) and "mds01, oss01, oss02" in str(err)


def test_host_without_that_role_is_refused() -> None:
    err = _error("tier3", ["compute01:/dev/nvme1n1"])
    assert "compute01 is in the inventory but has no Lustre target" in str(err)
    assert "mds01, oss01, oss02" in str(err)


def test_device_not_planned_on_that_host_is_refused() -> None:
    err = _error("tier3", ["mds01:/dev/nvme3n1"])  # an OST path, but mds01 holds only the MDT's mirror
    assert err.field == f"{LU}.allow_format_devices[0]" and err.value == "mds01:/dev/nvme3n1"
    assert "a device planned on mds01 (/dev/nvme1n1, /dev/nvme2n1, /dev/md/aifs-MDT0000)" in str(err)


def test_array_and_members_may_be_allowed_on_their_host() -> None:
    """An md target's members and its array (/dev/md/<target>) are the host's planned devices."""
    entries = ["oss01:/dev/md/aifs-OST0000", "oss01:/dev/nvme1n1"]
    lu = _lustre_plan("tier3", allow_format=True, allow_format_devices=entries)
    assert lu["allow_format_devices"]["oss01"] == ["/dev/md/aifs-OST0000", "/dev/nvme1n1"]
    assert lu["allow_format_devices"]["oss02"] == []


def test_local_nvme_entries_are_per_host_too() -> None:
    local = _local_plan(allow_format=True, allow_format_devices=["dgx01:/dev/md0"])
    assert local["allow_format_devices"] == {"dgx01": ["/dev/md0"]}
    err = _error("tier1", ["/dev/md0"], section="local_nvme")
    assert err.field == f"{LOCAL}.allow_format_devices[0]" and FORM in str(err)
    err = _error("tier1", ["dgx01:/dev/nvme9n1"], section="local_nvme")
    assert "a device planned on dgx01" in str(err) and "/dev/md0" in str(err)


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        (["/dev/nvme1n1"], "a bare path is refused"),
        (["mds01"], FORM),
        (["mds01:nvme1n1"], FORM),
        ([":/dev/nvme1n1"], FORM),
        ([7], FORM),
        ("mds01:/dev/nvme1n1", "a list of"),
    ],
)
def test_engine_check_without_the_schema(entries: Any, fragment: str) -> None:
    """The engine refuses bad entries itself too (a caller that skips the schema, the unit tests)."""
    with pytest.raises(PlanError, match=fragment.replace(".", r"\.")):
        host_devices(entries, f"{LU}.allow_format_devices", {"mds01": ["/dev/nvme1n1"]})


def test_repeated_entries_are_listed_once_and_none_is_empty() -> None:
    planned = {"mds01": ["/dev/nvme1n1"], "oss01": ["/dev/nvme1n1"]}
    out = host_devices(["mds01:/dev/nvme1n1", "mds01:/dev/nvme1n1"], "f", planned)
    assert out == {"mds01": ["/dev/nvme1n1"], "oss01": []}
    assert host_devices(None, "f", planned) == {"mds01": [], "oss01": []}
