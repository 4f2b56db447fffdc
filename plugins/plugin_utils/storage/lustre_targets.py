"""Lustre servers: which target lives on which device of which host, and how it is made and mounted.

The first host of ``lustre_mds`` is the MGS with MDT0000 on ``mdt_device`` (a combined MGS/MDT);
further MDS hosts get MDT0001.. and point at the MGS. Each ``lustre_oss`` host gets
``osts_per_oss`` OSTs on ``ost_devices``, indexes numbered across the OSS hosts in name order
(oss01: 0..3, oss02: 4..7), so adding an OSS never renumbers an existing OST.

mkfs.lustre options from the Lustre manual and lustre-release ``lustre/doc/mkfs.lustre.8``:
``--fsname``, ``--mgs``, ``--mdt``, ``--ost``, ``--index``, ``--mgsnode=NID`` (NID = the MGS's
address on the LNet network, ``10.30.2.10@o2ib0``). Target names are ``fsname-MDT0000`` /
``fsname-OST000a`` (hex index); ldiskfs labels read ``fsname:OST000a`` until the target first
registers with the MGS, ``fsname-OST000a`` after, which the block_device_guard accepts both.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require

MOUNT_ROOT = "/mnt"
MOUNT_OPTIONS = "defaults,_netdev"


def target_name(fsname: str, kind: str, index: int) -> str:
    return f"{fsname}-{kind.upper()}{index:04x}"


def _device(value: Any, field: str) -> str:
    require(isinstance(value, str) and value.startswith("/dev/"), field, value, "a block device (/dev/...)")
    return value


def _target(fsname: str, kind: str, index: int, device: str, mkfs_flags: list[str]) -> dict[str, Any]:
    name = target_name(fsname, kind, index)
    mount_point = f"{MOUNT_ROOT}/{name}"
    return {
        "name": name,
        "kind": kind,
        "index": index,
        "device": device,
        "mount_point": mount_point,
        "mount_options": MOUNT_OPTIONS,
        "mkfs_argv": ["mkfs.lustre", f"--fsname={fsname}", *mkfs_flags, f"--index={index}", device],
        "fstab": f"{device} {mount_point} lustre {MOUNT_OPTIONS} 0 0",
    }


def lustre_targets(
    *,
    fsname: str,
    mds: list[str],
    oss: list[str],
    mgs_nid: str,
    mdt_device: Any,
    ost_devices: Any,
    osts_per_oss: int,
    field: str = "gpucluster_storage.lustre",
) -> dict[str, list[dict[str, Any]]]:
    """Per server host, its targets: name, kind, index, device, mount point, mkfs.lustre argv, fstab line."""
    mdt = _device(mdt_device, f"{field}.mdt_device")
    require(
        isinstance(ost_devices, list) and len(ost_devices) == osts_per_oss,
        f"{field}.ost_devices",
        ost_devices,
        f"one device per OST on each OSS: {osts_per_oss} devices ({field}.osts_per_oss)",
    )
    osts = [_device(d, f"{field}.ost_devices[{i}]") for i, d in enumerate(ost_devices)]
    require(len(set(osts)) == len(osts), f"{field}.ost_devices", ost_devices, "each device listed once")
    shared = sorted(set(mds) & set(oss))
    require(not shared, "groups.lustre_oss", shared, "OSS hosts that are not also MDS hosts")
    out: dict[str, list[dict[str, Any]]] = {}
    for i, host in enumerate(mds):
        flags = ["--mgs", "--mdt"] if i == 0 else ["--mdt", f"--mgsnode={mgs_nid}"]
        out[host] = [_target(fsname, "mdt", i, mdt, flags)]
    for h, host in enumerate(oss):
        out[host] = [
            _target(fsname, "ost", h * osts_per_oss + k, dev, ["--ost", f"--mgsnode={mgs_nid}"])
            for k, dev in enumerate(osts)
        ]
    return out


def mgs_nid(address: str, net: str) -> str:
    """The MGS's LNet NID: its address on the LNet network, at that network (``10.30.2.10@o2ib0``)."""
    return f"{address}@{net}"
