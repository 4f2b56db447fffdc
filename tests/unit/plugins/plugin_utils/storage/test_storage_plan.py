"""The plan's storage side: local RAID (tier1), NFS exports and mounts (tier2), Lustre targets
(tier3/4), the storage role's files, and the documented override of the storage sizing stop."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import nfs as nfs_mount
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre_targets import (
    lustre_targets,
    mdadm_conf_lines,
    target_name,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nfs import systemd_mount_unit_name
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import local_raid_plan


def _plan(tier: str, **changes: Any) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    for key, value in changes.items():
        site[key] = value
    return cluster_plan(site, groups)


def _storage(tier: str, **section: Any) -> dict[str, Any]:
    site, _ = load_inventory(tier)
    return {**copy.deepcopy(site["gpucluster_storage"]), **section}


def _storage_files(plan: dict[str, Any]) -> dict[str, list[str]]:
    return {h: [f["dest"] for f in files if f["role"] == "storage"] for h, files in files_by_host(plan).items()}


# -- tier1: local NVMe RAID0 ------------------------------------------------------------------


def test_tier1_local_raid_commands_come_from_the_plan() -> None:
    local = _plan("tier1")["storage"]["local_nvme"]
    devices = ["/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1", "/dev/nvme5n1"]
    assert local["mdadm_create_argv"] == [
        "mdadm", "--create", "/dev/md0", "--run", "--metadata=1.2", "--level=0", "--raid-devices=4", *devices,
    ]  # fmt: skip
    assert local["mkfs_argv"] == ["mkfs.ext4", "/dev/md0"] and local["target"] == "/dev/md0"
    assert local["allow_format"] is False and local["allow_format_devices"] == {"dgx01": []}
    assert local["flag"] == "gpucluster_storage.local_nvme"
    assert local["directories"] == [
        {"path": "/raid/checkpoints", "mode": "1777"},
        {"path": "/raid/datasets", "mode": "1777"},
    ]  # /home is not on the scratch array


def test_single_device_needs_no_array() -> None:
    local = local_raid_plan({"devices": ["/dev/nvme1n1"], "filesystem": "xfs", "mount_point": "/scratch"}, {})
    assert local["mdadm_create_argv"] is None and local["target"] == "/dev/nvme1n1"
    assert local["mkfs_argv"] == ["mkfs.xfs", "/dev/nvme1n1"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"allow_format_devices": ["dgx01:/dev/nvme9n1"]}, "allow_format_devices"),
        ({"allow_format_devices": ["/dev/nvme2n1"]}, "allow_format_devices"),
        ({"allow_format": "yes"}, "allow_format"),
        ({"raid_device": None}, "raid_device"),
        ({"filesystem": "btrfs"}, "filesystem"),
        ({"devices": ["nvme2n1"]}, "devices"),
        ({"mount_point": "raid"}, "mount_point"),
    ],
)
def test_bad_local_nvme_names_the_field(change: dict[str, Any], field: str) -> None:
    site, groups = load_inventory("tier1")
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["local_nvme"].update(change)
    with pytest.raises(PlanError, match=rf"gpucluster_storage\.local_nvme\.{field}"):
        cluster_plan(site, groups)


def test_allow_list_may_name_planned_devices_and_the_array() -> None:
    site, groups = load_inventory("tier1")
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["local_nvme"].update(
        allow_format=True, allow_format_devices=["dgx01:/dev/nvme3n1", "dgx01:/dev/md0"]
    )
    local = cluster_plan(site, groups)["storage"]["local_nvme"]
    assert local["allow_format"] is True and local["allow_format_devices"] == {"dgx01": ["/dev/nvme3n1", "/dev/md0"]}


# -- tier2: NFS -------------------------------------------------------------------------------


def test_tier2_exports_and_client_mounts() -> None:
    nfs = _plan("tier2")["storage"]["nfs"]
    assert nfs["server"] == "nfs01" and nfs["server_impl"] == "kernel" and nfs["service"] == "nfs-server"
    assert nfs["network"] == "storage" and nfs["server_address"] == "10.20.2.10" and nfs["clients"] == "10.20.2.0/24"
    assert [e["exports_line"] for e in nfs["exports"]] == [
        "/export/shared 10.20.2.0/24(rw,sync,no_subtree_check,root_squash)"
    ]
    assert nfs["server_directories"] == [
        {"path": "/export/shared/checkpoints", "mode": "1777"},
        {"path": "/export/shared/datasets", "mode": "1777"},
        {"path": "/export/shared/home", "mode": "0755"},
    ]
    (mount,) = nfs["client_mounts"]
    assert mount["unit_name"] == "shared.mount" and mount["unit_path"] == "/etc/systemd/system/shared.mount"
    assert "unit_text" not in mount  # the plan is data: the unit is rendered on the way to the clients
    unit = nfs_mount.mount_unit_text(mount, nfs["server"])
    assert "Description=Shared storage /shared from nfs01\n" in unit
    assert "What=10.20.2.10:/export/shared\nWhere=/shared\nType=nfs\n" in unit
    assert "Options=rw,hard,proto=tcp,vers=4.2,nconnect=8\n" in unit
    assert unit.endswith("[Install]\nWantedBy=remote-fs.target\n")


def test_lab_uses_ganesha_on_the_planned_storage_network() -> None:
    plan = _plan("tier2", gpucluster_lab={"enabled": True, "nfs_server_impl": "ganesha"})
    nfs = plan["storage"]["nfs"]
    assert nfs["server_impl"] == "ganesha" and nfs["service"] == "nfs-ganesha"
    assert nfs["network"] == "storage" and nfs["server_address"] == "10.20.2.10"  # as on real hosts
    assert nfs["exports"][0]["export_id"] == 1 and nfs["exports"][0]["pseudo"] == "/export/shared"
    assert nfs["exports"][0]["ganesha_squash"] == "Root_Squash" and nfs["exports"][0]["access_type"] == "RW"
    assert _storage_files(plan)["nfs01"] == ["/etc/ganesha/ganesha.conf"]
    assert _storage_files(_plan("tier2"))["nfs01"] == ["/etc/exports"]


@pytest.mark.parametrize(
    ("nfs", "field"),
    [
        ({"exports": [{"path": "export/shared", "mount_point": "/shared"}]}, r"nfs\.exports\[0\]\.path"),
        ({"exports": [{"path": "/e", "mount_point": "/shared", "access": "rwx"}]}, r"nfs\.exports\[0\]\.access"),
        ({"exports": []}, r"nfs\.exports"),
        (
            {"exports": [{"path": "/a", "mount_point": "/shared"}, {"path": "/b", "mount_point": "/shared/x"}]},
            r"nfs\.exports",
        ),
        ({"server_impl": "knfsd", "exports": [{"path": "/a", "mount_point": "/shared"}]}, r"nfs\.server_impl"),
    ],
)
def test_bad_nfs_names_the_field(nfs: dict[str, Any], field: str) -> None:
    with pytest.raises(PlanError, match=rf"gpucluster_storage\.{field}"):
        _plan("tier2", gpucluster_storage=_storage("tier2", nfs=nfs))


def test_systemd_mount_unit_names_follow_systemd_escape() -> None:
    """systemd-escape --path --suffix=mount: / -> '-', other bytes \\xNN, a leading dot escaped."""
    assert systemd_mount_unit_name("/shared") == "shared.mount"
    assert systemd_mount_unit_name("/lustre/aifs/") == "lustre-aifs.mount"
    assert systemd_mount_unit_name("/mnt/data-01") == "mnt-data\\x2d01.mount"
    assert systemd_mount_unit_name("/.snap/x y") == "\\x2esnap-x\\x20y.mount"
    assert systemd_mount_unit_name("/") == "-.mount"


# -- tier3/4: Lustre servers --------------------------------------------------------------------


def test_tier3_targets_per_host() -> None:
    lu = _plan("tier3")["storage"]["lustre"]
    assert lu["mgs_nid"] == "10.30.2.10@o2ib0"
    assert (
        lu["client_mount"]
        | {
            "what": "10.30.2.10@o2ib0:/aifs",
            "where": "/lustre/aifs",
            "type": "lustre",
            "options": "defaults,_netdev,flock",
            "unit_name": "lustre-aifs.mount",  # systemd-escape --path --suffix=mount /lustre/aifs
            "unit_path": "/etc/systemd/system/lustre-aifs.mount",
        }
        == lu["client_mount"]
    )
    targets = lu["targets"]
    assert sorted(targets) == ["mds01", "oss01", "oss02"]
    (mdt,) = targets["mds01"]
    assert mdt["name"] == "aifs-MDT0000" and mdt["mount_point"] == "/mnt/aifs-MDT0000"
    # the MGS/MDT on an md RAID-1 mirror of mdt_devices (storage/raid.py): no chunk, no ldiskfs stride
    assert mdt["mkfs_argv"] == ["mkfs.lustre", "--fsname=aifs", "--mgs", "--mdt", "--index=0", "/dev/md/aifs-MDT0000"]
    assert mdt["members"] == ["/dev/nvme1n1", "/dev/nvme2n1"] and mdt["array"]["level"] == "raid1"
    assert [t["index"] for t in targets["oss01"]] == [0, 1, 2, 3]
    assert [t["index"] for t in targets["oss02"]] == [4, 5, 6, 7]
    ost = targets["oss02"][1]
    # OST 5 = oss02's second RAID-6 of 4 (its devices 5..8); 512 KiB chunks x 2 data disks = the 1 MiB RPC
    assert ost["members"] == ["/dev/nvme5n1", "/dev/nvme6n1", "/dev/nvme7n1", "/dev/nvme8n1"]
    assert ost["mkfs_argv"] == [
        "mkfs.lustre", "--fsname=aifs", "--ost", "--mgsnode=10.30.2.10@o2ib0", "--index=5",
        "--mkfsoptions=-E stride=128,stripe_width=256", "/dev/md/aifs-OST0005",
    ]  # fmt: skip
    assert ost["array"]["create_argv"] == [
        "mdadm", "--create", "/dev/md/aifs-OST0005", "--run", "--metadata=1.2", "--level=6", "--raid-devices=4",
        "--name=oss02:aifs-OST0005", "--chunk=512K", *ost["members"],
    ]  # fmt: skip
    assert ost["fstab"] == "/dev/md/aifs-OST0005 /mnt/aifs-OST0005 lustre defaults,_netdev 0 0"
    assert mdadm_conf_lines(targets["oss02"])[1] == "ARRAY /dev/md/aifs-OST0005 metadata=1.2 name=oss02:aifs-OST0005"
    assert lu["server_lnet"]["modprobe"].startswith('options lnet networks="o2ib0(')


def test_tier4_ost_names_are_hex() -> None:
    targets = _plan("tier4")["storage"]["lustre"]["targets"]
    assert [t["name"] for t in targets["oss02"]][-2:] == ["aifs-OST000e", "aifs-OST000f"]
    assert target_name("aifs", "ost", 255) == "aifs-OST00ff"


def test_second_mds_points_at_the_mgs() -> None:
    out = lustre_targets(
        fsname="fs", mds=["mds01", "mds02"], oss=["oss01"], mgs_nid="10.0.0.1@tcp", mdt_device="/dev/sdb",
        ost_devices=["/dev/sdc"], osts_per_oss=1, allow_unprotected=True,
    )  # fmt: skip
    assert out["mds02"][0]["mkfs_argv"] == [
        "mkfs.lustre", "--fsname=fs", "--mdt", "--mgsnode=10.0.0.1@tcp", "--index=1", "/dev/sdb",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ost_devices": ["/dev/nvme1n1", "/dev/nvme2n1"]}, "ost_devices"),
        ({"mdt_device": "nvme1n1"}, "mdt_device"),
        ({"allow_format_devices": ["oss01:/dev/sdz"]}, "allow_format_devices"),
        ({"server_interfaces": "ib0"}, "server_interfaces"),
    ],
)
def test_bad_lustre_server_input_names_the_field(change: dict[str, Any], field: str) -> None:
    lustre = {**_storage("tier3")["lustre"], **change}
    with pytest.raises(PlanError, match=rf"gpucluster_storage\.lustre\.{field}"):
        _plan("tier3", gpucluster_storage=_storage("tier3", lustre=lustre))


def test_lustre_servers_use_their_own_interfaces_one_nid_each() -> None:
    # each port on its own Gen5 x16 card: 2 OSS x 2 x 50 GB/s, within tier3's 80 GB/s floor (test_ceilings.py)
    nics = {
        n: {"rate_gbps": 400, "pci_bus": f"0000:{b}:00.0", "pcie_gen": 5} for n, b in (("ib0", "41"), ("ib1", "c1"))
    }
    plan = _plan("tier3", gpucluster_storage=_storage("tier3", server_interfaces=["ib0", "ib1"], server_nics=nics))
    lu = plan["storage"]["lustre"]
    assert lu["server_lnet"]["modprobe"] == 'options lnet networks="o2ib0(ib0,ib1)"'
    assert lu["lnet"]["modprobe"] == 'options lnet networks="o2ib0(ibp41s0f0,ibp170s0f0)"'  # the DGX's own
    assert lu["server_nids"]["mds01"] == [
        {"interface": "ib0", "address": "10.30.2.10", "nid": "10.30.2.10@o2ib0"},
        {"interface": "ib1", "address": "10.30.2.11", "nid": "10.30.2.11@o2ib0"},
    ]
    assert lu["mgs_nid"] == "10.30.2.10@o2ib0"
    units = {u["netdev"]: u["address"] for u in plan["hosts"]["oss02"]["network_units"]}
    assert units == {"eno1": "10.30.0.13/24", "ib0": "10.30.2.14/24", "ib1": "10.30.2.15/24"}
    nids = [n["nid"] for host in lu["server_nids"].values() for n in host]
    assert len(nids) == len(set(nids)) == 6


def test_lnet_interface_without_an_address_names_the_field() -> None:
    lustre = {**_storage("tier3")["lustre"], "server_interfaces": ["ib0", "ib1"]}  # not the servers' interfaces
    with pytest.raises(PlanError, match=r"gpucluster_storage\.lustre\.server_interfaces.*'ib0', 'ib1'"):
        _plan("tier3", gpucluster_storage=_storage("tier3", lustre=lustre))


def test_storage_role_files_per_host() -> None:
    files = _storage_files(_plan("tier3"))
    rendered = ["/etc/modprobe.d/lustre.conf", "/etc/lnet.conf", "/etc/gpucluster/lustre/mkfs.list"]
    rendered += ["/etc/gpucluster/lustre/fstab", "/etc/mdadm/mdadm.conf.d/gpucluster-lustre.conf"]
    assert files["mds01"] == [*rendered, "/etc/gpucluster/lustre/set_param.list"]
    assert files["oss01"] == rendered
    assert files["compute01"] == [] and files["head01"] == []
    assert all(not f for f in _storage_files(_plan("tier1")).values())  # local RAID renders no file


# -- the storage sizing stop and its documented override (docs/inventory.md) ----------------------


def _below_need() -> dict[str, Any]:
    site, _ = load_inventory("tier3")
    return {**copy.deepcopy(site["gpucluster_workload"]), "model_params_b": 2000}


def test_storage_below_need_stops_the_plan_unless_the_inventory_overrides() -> None:
    stop = _plan("tier3", gpucluster_workload=_below_need())["storage"]["check"]
    assert "gpucluster_workload.allow_storage_below_need: true" in stop[0]
    # 28 TB checkpoints also pin 7 TB of host memory per node, more than half its RAM, and drain too
    # slowly for the async staging (storage/checkpoint.py)
    assert len(stop) == 3 and "of host memory per node" in stop[1] and "the checkpoint drain needs" in stop[2]
    allowed = {**_below_need(), "allow_storage_below_need": True}
    assert _plan("tier3", gpucluster_workload=allowed)["storage"]["check"] == []


def test_the_plan_play_stops_and_the_override_lets_it_through(tmp_path: Path) -> None:
    """playbooks/tasks/plan.yml (the first play of site.yml and make plan) asserts storage.check."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "tier3", inv)
    workload = inv / "group_vars" / "all" / "workload.yml"
    data = yaml.safe_load(workload.read_text())
    data["gpucluster_workload"]["model_params_b"] = 2000
    workload.write_text(yaml.safe_dump(data))
    play = tmp_path / "plan_only.yml"
    tasks = ROOT / "playbooks" / "tasks" / "plan.yml"
    play.write_text(
        "- name: Plan only\n  hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        f"    - name: Compute the plan\n      ansible.builtin.import_tasks: {tasks}\n"
    )
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}

    def run() -> subprocess.CompletedProcess[str]:
        args = [playbook, "-i", str(inv), str(play)]
        return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    stopped = run()
    assert stopped.returncode != 0 and "allow_storage_below_need: true" in stopped.stdout
    assert "Stop when the storage cannot keep checkpoint overlap under target" in stopped.stdout
    data["gpucluster_workload"]["allow_storage_below_need"] = True
    workload.write_text(yaml.safe_dump(data))
    passed = run()
    assert passed.returncode == 0, passed.stdout[-3000:]
