"""Data protection of the storage servers: md RAID arrays for Lustre targets, or a declared volume.

One NVMe failure must lose no data (issue 38): a Lustre OST on one raw device loses every file
striped over it when that device fails. Each storage section (``gpucluster_storage.lustre``,
``.nfs``, ``.beegfs``) therefore either plans protection or says, explicitly, that it has none:

- Lustre, ``protection.kind: md`` (the default): the storage role builds one Linux md array per
  target from the planned devices. ``ost_devices`` lists each OSS's devices; they are split in
  order into ``osts_per_oss`` equal groups, one array per OST. ``mdt_devices`` lists the MDS's.
  Levels follow the Lustre manual, "Configuring Storage on a Lustre File System"
  (https://doc.lustre.org/lustre_manual.xhtml#configuringstorage, "Selecting Storage for the MDT
  and OSTs"): RAID-6 for OSTs (survives any two failures; RAID-6 needs at least 4 members), RAID-1
  or RAID-10 for the MDT (small random metadata I/O: mirrors, no parity read-modify-write).
  An OST group of 2 or 3 devices is too small for RAID-6: it gets md RAID-10 (two copies of each
  chunk; with 2 members that is a mirror), what a storage engineer builds from so few drives, and
  the plan says why. A group of one device is no array: unprotected.
- ``protection.kind: hardware`` (Lustre, NFS, BeeGFS) or ``zfs`` (NFS, BeeGFS): the devices or
  export folders sit on a volume the site built; the plan uses it as is and records the declared
  ``level``. Lustre on ZFS OSDs (``mkfs.lustre --backfstype=zfs``) is not planned here: refused.
- ``allow_unprotected: true`` lets a layout without redundancy plan; it shows as a warning in
  report.md. Without it such a layout is a PlanError naming that field.

Chunk size and ldiskfs alignment (same manual chapter, "Computing file system parameters for
mkfs"): ``-E stride=<chunk / 4096 B>,stripe_width=<stride x data disks>`` in ``--mkfsoptions``,
and the full stripe (chunk x data disks) should be the 1 MiB Lustre bulk RPC: the chunk is the
largest power of two with chunk x data disks <= 1 MiB (mdadm(8) --chunk: a power of two, a
multiple of 4 KiB), at least 64 KiB; a data-disk count that is not a power of two cannot fill
1 MiB exactly and the plan says so. Usable capacity: RAID-6 (n-2) x device, RAID-10 n/2 x
device, RAID-1 one device (md(4)).

Pure: no I/O. The block_device_guard module (module_utils/block_guard.py) decides on the host
whether an array may be created; an existing array with the planned members is never re-created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import (
    DeclaredProtection,
    LevelPlan,
    LustreProtection,
    MdArray,
    Protection,
    ProtectionPart,
    ProtectionSpec,
)

KINDS = ("md", "hardware", "zfs")
#: levels a declared volume may have, per kind; "raid0"/"none": no redundancy (allow_unprotected)
DECLARED_LEVELS = {
    "md": ("raid1", "raid5", "raid6", "raid10", "raid0", "none"),
    "hardware": ("raid1", "raid5", "raid6", "raid10", "raid50", "raid60", "raid0", "none"),
    "zfs": ("mirror", "raidz1", "raidz2", "raidz3", "stripe", "none"),
}
#: device failures each level survives without data loss (RAID-10 and mirror: at least one)
SURVIVES = {
    "raid0": 0,
    "none": 0,
    "stripe": 0,
    "raid1": 1,
    "mirror": 1,
    "raid5": 1,
    "raidz1": 1,
    "raid10": 1,
    "raid50": 1,
    "raid6": 2,
    "raidz2": 2,
    "raid60": 2,
    "raidz3": 3,
}
OST_LEVELS = ("raid6", "raid10")
MDT_LEVELS = ("raid1", "raid10")
#: RAID-6: two parity chunks per stripe; fewer than 4 members leave fewer than 2 data disks (md(4))
RAID6_MIN = 4
#: the Lustre bulk RPC (1 MiB): the full stripe an OST write should cover (Lustre manual, configuringstorage)
RPC_KIB = 1024
MIN_CHUNK_KIB = 64
#: ldiskfs block size (mkfs.lustre's default for targets): stride is counted in these
BLOCK_KIB = 4
MD_METADATA = "1.2"
#: md superblock 1.x keeps the array name in 32 bytes (mdadm(8) --name; md_p.h set_name[32])
MD_NAME_MAX = 32


def _bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise PlanError(field, value, "true or false")
    return value


def protection_spec(raw: object, field: str, kinds: Sequence[str] = KINDS) -> ProtectionSpec:
    """``<section>.protection`` checked: ``{kind, level, mdt_level}`` (kind md by default, no level)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise PlanError(field, raw, "a mapping {kind, level, mdt_level}")
    unknown = sorted(set(raw) - {"kind", "level", "mdt_level"})
    require(not unknown, field, raw, "a mapping with kind, level and mdt_level only")
    kind = check_choice(raw.get("kind", kinds[0]), f"{field}.kind", tuple(kinds))
    levels = DECLARED_LEVELS[kind]
    level, mdt_level = raw.get("level"), raw.get("mdt_level")
    return {
        "kind": kind,
        "level": None if level is None else check_choice(level, f"{field}.level", levels),
        "mdt_level": None if mdt_level is None else check_choice(mdt_level, f"{field}.mdt_level", levels),
    }


def chunk_kib(data_disks: int) -> int:
    """The md chunk: the largest power of two with chunk x data disks <= the 1 MiB RPC, at least 64 KiB."""
    chunk = MIN_CHUNK_KIB
    while chunk * 2 * data_disks <= RPC_KIB:
        chunk *= 2
    return chunk


def data_disks(level: str, members: int) -> int:
    """Members that hold distinct data in a stripe: RAID-6 n-2, RAID-10 (two copies) n/2, RAID-1 one."""
    if level == "raid6":
        return members - 2
    if level == "raid10":
        return max(members // 2, 1)
    return 1


def usable_devices(level: str, members: int) -> float:
    """Usable capacity in devices' worth (md(4)): RAID-6 n-2, RAID-10 n/2, RAID-1 1, none n."""
    if level == "raid6":
        return float(members - 2)
    if level == "raid10":
        return members / 2
    if level == "raid1":
        return 1.0
    return float(members)


def _ost_level(members: int, asked: str | None, field: str) -> tuple[str, str]:
    if asked is not None:
        level = check_choice(asked, f"{field}.level", OST_LEVELS)
        require(
            level != "raid6" or members >= RAID6_MIN,
            f"{field}.level",
            asked,
            f"raid10 for OST arrays of {members} devices: RAID-6 needs at least {RAID6_MIN} members "
            f"(ost_devices / osts_per_oss = {members})",
        )
        return level, f"{level}: {field}.level"
    if members >= RAID6_MIN:
        return "raid6", f"RAID-6 for OSTs (Lustre manual, configuringstorage): any 2 of {members} devices may fail"
    return "raid10", (
        f"RAID-10 ({members} devices, 2 copies): RAID-6 needs at least {RAID6_MIN} members and an OST gets "
        f"{members} (ost_devices / osts_per_oss); one device may fail"
    )


def _mdt_level(members: int, asked: str | None, field: str) -> tuple[str, str]:
    if asked is not None:
        level = check_choice(asked, f"{field}.mdt_level", MDT_LEVELS)
        return level, f"{level}: {field}.mdt_level"
    if members >= 4:
        return "raid10", f"RAID-10 for the MDT (Lustre manual, configuringstorage): {members} devices, 2 copies"
    return "raid1", f"RAID-1 mirror for the MDT (Lustre manual, configuringstorage): {members} copies"


def md_array(*, host: str, target: str, members: list[str], level: str, reason: str) -> MdArray:
    """One md array of a target: its path, name, members, chunk, mdadm --create argv and mdadm.conf line."""
    path = f"/dev/md/{target}"
    # the name as the superblock keeps it: "host:target" (mdadm stores a name with ':' as given), or the target
    # alone when that does not fit its 32 bytes; mdadm.conf's name= must match it exactly (mdadm.conf(5))
    md_name = f"{host}:{target}" if len(host) + 1 + len(target) <= MD_NAME_MAX else target
    n = len(members)
    disks = data_disks(level, n)
    argv = ["mdadm", "--create", path, "--run", f"--metadata={MD_METADATA}", f"--level={level.removeprefix('raid')}"]
    argv += [f"--raid-devices={n}", f"--name={md_name}"]
    chunk = None
    mkfs_options = None
    if level in ("raid6", "raid10"):
        chunk = chunk_kib(disks)
        argv.append(f"--chunk={chunk}K")
        stride = chunk // BLOCK_KIB
        mkfs_options = f"-E stride={stride},stripe_width={stride * disks}"
    argv += members
    return {
        "path": path,
        "name": md_name,
        "level": level,
        "members": list(members),
        "data_disks": disks,
        "chunk_kib": chunk,
        "full_stripe_kib": chunk * disks if chunk else None,
        "full_stripe_is_rpc": chunk is not None and chunk * disks == RPC_KIB,
        "usable_devices": usable_devices(level, n),
        "survives": SURVIVES[level] if level != "raid1" else n - 1,
        "reason": reason,
        "mkfs_options": mkfs_options,
        "create_argv": argv,
        "conf_line": f"ARRAY {path} metadata={MD_METADATA} name={md_name}",
    }


def _groups(devices: list[str], count: int, field: str, count_field: str) -> list[list[str]]:
    require(
        len(devices) % count == 0,
        field,
        devices,
        f"a multiple of {count_field} ({count}) devices: each OST gets the same number of array members "
        f"({len(devices)} devices do not split into {count} equal groups)",
    )
    size = len(devices) // count
    return [devices[i * size : (i + 1) * size] for i in range(count)]


def lustre_protection(
    *,
    spec: ProtectionSpec,
    ost_devices: list[str],
    mdt_devices: list[str],
    osts_per_oss: int,
    allow_unprotected: object,
    field: str,
) -> LustreProtection:
    """How each OST and MDT is made from the devices: ``{ost_groups, mdt_group, ost, mdt, warnings}``.

    ``ost``/``mdt``: ``{kind, level, members, survives, reason}`` (md: the array is built per target by
    :func:`md_array`). Raises PlanError for an unprotected layout without ``allow_unprotected``."""
    kind = spec["kind"]
    require(
        kind != "zfs",
        f"{field}.protection.kind",
        kind,
        "md or hardware: Lustre on ZFS OSDs (mkfs.lustre --backfstype=zfs) is not planned by this collection",
    )
    groups = _groups(ost_devices, osts_per_oss, f"{field}.ost_devices", f"{field}.osts_per_oss")
    if kind == "hardware":
        ost, mdt = _hardware_levels(spec, len(groups[0]), ost_devices, mdt_devices, osts_per_oss, field)
    else:
        ost, mdt = _md_levels(spec, len(groups[0]), mdt_devices, field)
    warnings = _unprotected(ost, mdt, ost_devices, osts_per_oss, allow_unprotected, field)
    return {"ost_groups": groups, "mdt_group": list(mdt_devices), "ost": ost, "mdt": mdt, "warnings": warnings}


def _hardware_levels(
    spec: ProtectionSpec, per_ost: int, ost_devices: list[str], mdt_devices: list[str], osts_per_oss: int, field: str
) -> tuple[LevelPlan, LevelPlan]:
    """The OSTs' and the MDT's declared hardware RAID volumes: one volume per target."""
    require(
        per_ost == 1,
        f"{field}.ost_devices",
        ost_devices,
        f"one hardware RAID volume per OST ({osts_per_oss} devices, {field}.osts_per_oss) with "
        f"{field}.protection.kind hardware",
    )
    require(
        len(mdt_devices) == 1,
        f"{field}.mdt_devices",
        mdt_devices,
        f"one hardware RAID volume for the MDT with {field}.protection.kind hardware",
    )
    ost_level = spec["level"]
    if ost_level is None:
        raise PlanError(
            f"{field}.protection.level",
            None,
            "the hardware volumes' RAID level (raid1, raid5, raid6, raid10, raid50, raid60)",
        )
    mdt_level = spec["mdt_level"] or ost_level
    ost: LevelPlan = {
        "kind": "hardware",
        "level": ost_level,
        "members": 1,
        "survives": SURVIVES[ost_level],
        "reason": f"hardware RAID volume, declared {ost_level} ({field}.protection.level)",
    }
    mdt: LevelPlan = {
        "kind": "hardware",
        "level": mdt_level,
        "members": 1,
        "survives": SURVIVES[mdt_level],
        "reason": f"hardware RAID volume, declared {mdt_level} ({field}.protection)",
    }
    return ost, mdt


def _md_levels(spec: ProtectionSpec, per_ost: int, mdt_devices: list[str], field: str) -> tuple[LevelPlan, LevelPlan]:
    """The OSTs' and the MDT's md arrays (or raw devices): their levels from the members each gets."""
    ost: LevelPlan
    mdt: LevelPlan
    if per_ost >= 2:
        level, why = _ost_level(per_ost, spec["level"], f"{field}.protection")
        ost = {"kind": "md", "level": level, "members": per_ost, "reason": why, "survives": SURVIVES[level]}
    else:
        ost = {"kind": "raw", "level": None, "members": 1, "survives": 0, "reason": "one raw device per OST"}
    if len(mdt_devices) >= 2:
        level, why = _mdt_level(len(mdt_devices), spec["mdt_level"], f"{field}.protection")
        survives = len(mdt_devices) - 1 if level == "raid1" else SURVIVES[level]
        mdt = {"kind": "md", "level": level, "members": len(mdt_devices), "reason": why, "survives": survives}
    else:
        mdt = {"kind": "raw", "level": None, "members": 1, "survives": 0, "reason": "one raw device for the MDT"}
    return ost, mdt


def _unprotected(
    ost: LevelPlan, mdt: LevelPlan, ost_devices: list[str], osts_per_oss: int, allow_unprotected: object, field: str
) -> list[str]:
    """The plan warnings of a layout where one device failure loses data; a PlanError unless allowed."""
    unprotected_field = f"{field}.allow_unprotected"
    warnings: list[str] = []
    bare = []
    if ost["survives"] == 0:
        bare.append(
            f"each OST is {'one raw device' if ost['kind'] == 'raw' else 'a ' + str(ost['level']) + ' volume'} "
            f"({len(ost_devices)} {field}.ost_devices for {osts_per_oss} {field}.osts_per_oss): one NVMe failure "
            f"loses every file striped over that OST"
        )
    if mdt["survives"] == 0:
        bare.append(
            f"the MDT is {'one raw device' if mdt['kind'] == 'raw' else 'a ' + str(mdt['level']) + ' volume'} "
            f"({field}.mdt_devices): one NVMe failure loses the whole file system's metadata"
        )
    if bare:
        how = (
            f"list 2 or more devices per OST in {field}.ost_devices (RAID-6 from {RAID6_MIN}) and 2 in "
            f"{field}.mdt_devices, or declare hardware RAID ({field}.protection), or set {unprotected_field}: true"
        )
        if not _bool(allow_unprotected, unprotected_field):
            raise PlanError(
                unprotected_field,
                allow_unprotected,
                f"true to plan an unprotected layout: {'; '.join(bare)}; else {how}",
            )
        warnings += [f"Unprotected Lustre storage ({unprotected_field}): {b}." for b in bare]
    return warnings


def declared_protection(
    section: Mapping[str, object], field: str, what: str, *, kinds: Sequence[str] = ("hardware", "zfs", "md")
) -> DeclaredProtection:
    """NFS exports and BeeGFS targets: the volume under their folders, as the inventory declares it.

    ``<field>.protection: {kind, level}`` (the site built the volume; the role creates folders on it)
    or ``<field>.allow_unprotected: true``; neither is a PlanError naming both fields."""
    allow = _bool(section.get("allow_unprotected", False), f"{field}.allow_unprotected")
    raw = section.get("protection")
    if raw is None:
        if not allow:
            raise PlanError(
                f"{field}.protection",
                None,
                f"the volume under the {what}: {{kind: hardware|zfs|md, level: ...}} (e.g. {{kind: md, level: "
                f"raid6}}), or {field}.allow_unprotected: true where one NVMe failure may lose its data",
            )
        return {
            "kind": None,
            "level": None,
            "survives": 0,
            "reason": f"no protection declared ({field}.allow_unprotected)",
            "warnings": [f"Unprotected {what} ({field}.allow_unprotected): one NVMe failure may lose its data."],
        }
    spec = protection_spec(raw, f"{field}.protection", kinds)
    if spec["level"] is None:
        raise PlanError(
            f"{field}.protection.level", None, f"the volume's level: one of {', '.join(DECLARED_LEVELS[spec['kind']])}"
        )
    survives = SURVIVES[spec["level"]]
    warnings = []
    if survives == 0:
        if not allow:
            raise PlanError(
                f"{field}.allow_unprotected",
                allow,
                f"true to plan the {what} on a {spec['level']} volume (no redundancy: one NVMe failure loses its "
                f"data), else a redundant {field}.protection.level",
            )
        warnings.append(f"Unprotected {what} ({field}.allow_unprotected): a {spec['level']} volume.")
    return {
        "kind": spec["kind"],
        "level": spec["level"],
        "survives": survives,
        "reason": f"declared {spec['kind']} {spec['level']} ({field}.protection), built by the site",
        "warnings": warnings,
    }


def summary(storage_type: str, items: Mapping[str, ProtectionPart], warnings: list[str]) -> Protection:
    """plan.storage.protection: per part (ost, mdt, export, ...) its level and the failures it survives."""
    survives = min((int(i["survives"]) for i in items.values()), default=0)
    return {
        "type": storage_type,
        "parts": {k: v.copy() for k, v in items.items()},
        "survives_failures": survives,
        "one_failure_loses_data": survives < 1,
        "warnings": list(warnings),
    }


def declared_summary(kind: str, section: Mapping[str, object], what: str) -> Protection:
    """plan.storage.protection of an NFS or BeeGFS site: the volume the inventory declares."""
    part = declared_protection(section, f"gpucluster_storage.{kind}", what)
    volume: ProtectionPart = {
        "kind": part["kind"],
        "level": part["level"],
        "survives": part["survives"],
        "reason": part["reason"],
    }
    return summary(kind, {kind: volume}, part["warnings"])


PROTECTION_INTRO = (
    "Whether one NVMe failure loses data: each part's RAID level, the failures it survives and why "
    '(storage/raid.py, docs/storage.md "Data protection").'
)


def protection_rows(protection: Protection) -> list[list[str]]:
    """report.md's "Data protection" rows: per part its level, members, survivable failures, capacity."""
    rows = []
    capacity = protection.get("capacity") or {}
    for name, part in protection["parts"].items():
        level = part.get("level") or "none (raw device)"
        what = f"{part.get('kind') or 'undeclared'} {level}"
        if part.get("members"):
            what += f", {part['members']} device(s)"
        if part.get("chunk_kib"):
            what += f", {part['chunk_kib']} KiB chunks ({part.get('mkfs_options')})"
        rows.append([f"{name}", what, part.get("reason") or ""])
        rows.append([f"{name} survives", f"{part['survives']} device failure(s)", "per array or volume"])
        if name in capacity:
            cap = capacity[name]
            rows.append(
                [f"{name} usable", f"{cap['usable_devices']:g} of {cap['raw_devices']} devices", cap["formula"]]
            )
    verdict = "loses data" if protection["one_failure_loses_data"] else "loses no data"
    rows.append(["one NVMe failure", verdict, f"the weakest part survives {protection['survives_failures']}"])
    return rows


__all__ = [
    "KINDS",
    "PROTECTION_INTRO",
    "declared_protection",
    "declared_summary",
    "lustre_protection",
    "md_array",
    "protection_rows",
    "protection_spec",
    "summary",
    "usable_devices",
]
