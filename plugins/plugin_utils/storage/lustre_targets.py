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

Data protection (storage/raid.py): each target sits on an md array built from its planned devices
(RAID-6 OSTs, RAID-1/10 MDT) at ``/dev/md/<target name>``, or on a declared hardware RAID volume, or,
only with ``allow_unprotected: true``, on one raw device. An md target's mkfs.lustre gets the
array's ldiskfs alignment, ``--mkfsoptions=-E stride=..,stripe_width=..`` (Lustre manual,
"Configuring Storage on a Lustre File System", https://doc.lustre.org/lustre_manual.xhtml#configuringstorage).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import raid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.fs_model import LustreTarget
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import LevelPlan

MOUNT_ROOT = "/mnt"
MOUNT_OPTIONS = "defaults,_netdev"


def target_name(fsname: str, kind: str, index: int) -> str:
    return f"{fsname}-{kind.upper()}{index:04x}"


def _device(value: object, field: str) -> str:
    if not (isinstance(value, str) and value.startswith("/dev/")):
        raise PlanError(field, value, "a block device (/dev/...)")
    return value


def _target(
    fsname: str,
    kind: str,
    index: int,
    host: str,
    members: list[str],
    protection: LevelPlan,
    mkfs_flags: list[str],
) -> LustreTarget:
    name = target_name(fsname, kind, index)
    mount_point = f"{MOUNT_ROOT}/{name}"
    array = None
    if protection["kind"] == "md":
        array = raid.md_array(
            host=host, target=name, members=members, level=str(protection["level"]), reason=protection["reason"]
        )
    device = array["path"] if array else members[0]
    options = [f"--mkfsoptions={array['mkfs_options']}"] if array and array["mkfs_options"] else []
    return {
        "name": name,
        "kind": kind,
        "index": index,
        "device": device,
        "members": list(members),
        "array": array,
        "protection": {
            "kind": protection["kind"],
            "level": protection["level"],
            "survives": protection["survives"],
            "reason": protection["reason"],
        },
        "mount_point": mount_point,
        "mount_options": MOUNT_OPTIONS,
        "mkfs_argv": ["mkfs.lustre", f"--fsname={fsname}", *mkfs_flags, f"--index={index}", *options, device],
        "fstab": f"{device} {mount_point} lustre {MOUNT_OPTIONS} 0 0",
    }


def _devices(value: object, field: str) -> list[str]:
    if not (isinstance(value, list) and value):
        raise PlanError(field, value, "a list of block devices (/dev/...)")
    out = [_device(d, f"{field}[{i}]") for i, d in enumerate(value)]
    require(len(set(out)) == len(out), field, value, "each device listed once")
    return out


def _mdt_devices(mdt_device: object, mdt_devices: object, field: str) -> list[str]:
    if mdt_devices is not None:
        if mdt_device is not None:
            raise PlanError(
                f"{field}.mdt_device", mdt_device, f"unset when {field}.mdt_devices lists the MDT's devices"
            )
        return _devices(mdt_devices, f"{field}.mdt_devices")
    return [_device(mdt_device, f"{field}.mdt_device")]


def lustre_targets(
    *,
    fsname: str,
    mds: list[str],
    oss: list[str],
    mgs_nid: str,
    mdt_device: object,
    ost_devices: object,
    osts_per_oss: int,
    mdt_devices: object = None,
    protection: object = None,
    allow_unprotected: object = False,
    field: str = "gpucluster_storage.lustre",
    warnings: list[str] | None = None,
) -> dict[str, list[LustreTarget]]:
    """Per server host, its targets: name, kind, index, device (its md array, or the device), members, array
    (raid.md_array, or None), protection, mount point, mkfs.lustre argv, fstab line.

    ``ost_devices``: each OSS's devices, split in order into ``osts_per_oss`` equal groups (one array per
    OST; one device per OST is a raw, unprotected OST). ``mdt_devices`` (or the single ``mdt_device``):
    the MDS's. ``warnings`` (a list) gets the plan warnings of an allowed unprotected layout."""
    mdt_group = _mdt_devices(mdt_device, mdt_devices, field)
    require(
        isinstance(ost_devices, list) and len(ost_devices) >= osts_per_oss,
        f"{field}.ost_devices",
        ost_devices,
        f"the devices of each OSS, at least one per OST ({osts_per_oss}, {field}.osts_per_oss): "
        f"{osts_per_oss} x the members of one OST array",
    )
    osts = _devices(ost_devices, f"{field}.ost_devices")
    spec = raid.protection_spec(protection, f"{field}.protection", ("md", "hardware", "zfs"))
    prot = raid.lustre_protection(
        spec=spec,
        ost_devices=osts,
        mdt_devices=mdt_group,
        osts_per_oss=osts_per_oss,
        allow_unprotected=allow_unprotected,
        field=field,
    )
    if warnings is not None:
        warnings.extend(prot["warnings"])
    shared = sorted(set(mds) & set(oss))
    require(not shared, "groups.lustre_oss", shared, "OSS hosts that are not also MDS hosts")
    out: dict[str, list[LustreTarget]] = {}
    for i, host in enumerate(mds):
        flags = ["--mgs", "--mdt"] if i == 0 else ["--mdt", f"--mgsnode={mgs_nid}"]
        out[host] = [_target(fsname, "mdt", i, host, mdt_group, prot["mdt"], flags)]
    for h, host in enumerate(oss):
        out[host] = [
            _target(fsname, "ost", h * osts_per_oss + k, host, group, prot["ost"], ["--ost", f"--mgsnode={mgs_nid}"])
            for k, group in enumerate(prot["ost_groups"])
        ]
    return out


def planned_devices(targets: Mapping[str, list[LustreTarget]]) -> dict[str, list[str]]:
    """Per host, every device its targets write to: the members and the array (format permission)."""
    return {
        host: [d for t in ts for d in [*t["members"], *([t["device"]] if t["array"] else [])]]
        for host, ts in targets.items()
    }


def mdadm_conf_lines(targets: list[LustreTarget]) -> list[str]:
    """mdadm.conf ARRAY lines of a host's md targets (mdadm.conf(5): the name identifies the array)."""
    return [array["conf_line"] for t in targets if (array := t.get("array"))]


def mgs_nid(address: str, net: str) -> str:
    """The MGS's LNet NID: its address on the LNet network, at that network (``10.30.2.10@o2ib0``)."""
    return f"{address}@{net}"
