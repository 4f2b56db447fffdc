#!/usr/bin/python
"""Read block devices before mkfs/mdadm and say what the storage role may do; refuse to touch data."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: block_device_guard
short_description: Check block devices before creating an array or a file system on them
version_added: 0.1.0
description:
  - Reads every planned device with C(blkid -p -o export) and C(wipefs --no-act --json), the
    planned array with C(mdadm --detail --export) and the running arrays in C(/proc/mdstat),
    then decides what the storage role may do. It never writes to a device.
  - A device that carries any signature (file system, RAID member, partition table, ...) is
    refused unless O(allow_format) is true AND the device is listed in O(allow_format_devices);
    the failure names the device, what it carries and both inventory keys (under O(flag)).
  - A re-run never reformats. An existing array with the planned members and level, or a file
    system of the planned type (and O(label), for Lustre targets) is accepted as it is.
  - An existing array whose members differ from O(devices) is an error, not a rebuild.
  - When none of the devices exists (a container lab) the result says so (RV(present) false) and
    nothing is refused; when only some exist, it fails.
  - A device counts as blank only when the module opened it read-only and read its first block,
    C(blkid) found nothing (its exit 2 also means "could not open", so it is trusted only after
    that read) and C(wipefs) listed nothing. A device that cannot be read, a failing C(wipefs), or
    no C(wipefs) on the host while C(blkid) finds nothing, fail the task and nothing is formatted.
options:
  devices:
    description: Devices the plan writes to (array members, or the one device of a file system).
    type: list
    elements: str
    required: true
  raid_device:
    description: The md array built from O(devices) (required for more than one device).
    type: str
  raid_level:
    description: Level of that array, as C(mdadm --detail) names it.
    type: str
    default: raid0
  filesystem:
    description: File system the plan puts on the array or device (C(ext4), C(xfs), C(lustre)).
    type: str
    required: true
  label:
    description: File system label that identifies an existing target (Lustre C(fsname-OST0001)).
    type: str
  allow_format:
    description: The inventory's permission to erase devices that carry signatures.
    type: bool
    default: false
  allow_format_devices:
    description:
      - The devices that permission covers on this host (each must be one of O(devices) or O(raid_device)).
      - The inventory writes C(<host>:/dev/...) entries; the plan gives each host only its own devices
        (C(gpucluster_host_plan.storage.local_nvme.allow_format_devices[inventory_hostname])), so this list
        holds bare paths.
    type: list
    elements: str
    default: []
  flag:
    description: Inventory path of the settings, used in messages (e.g. C(gpucluster_storage.local_nvme)).
    type: str
    default: gpucluster_storage.local_nvme
  mdstat:
    description: The kernel's array list.
    type: path
    default: /proc/mdstat
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the local NVMe devices before anything is formatted
  gpucluster.tiers.block_device_guard:
    devices: "{{ gpucluster_host_plan.storage.local_nvme.devices }}"
    raid_device: "{{ gpucluster_host_plan.storage.local_nvme.raid_device }}"
    filesystem: "{{ gpucluster_host_plan.storage.local_nvme.filesystem }}"
    allow_format: "{{ gpucluster_host_plan.storage.local_nvme.allow_format }}"
    allow_format_devices: >-
      {{ gpucluster_host_plan.storage.local_nvme.allow_format_devices[inventory_hostname] | default([]) }}
  register: storage_guard
"""

RETURN = r"""
present:
  description: Whether the devices exist on this host (false in a container lab).
  returned: always
  type: bool
target:
  description: Device that carries the file system (the array, or the single device).
  returned: always
  type: str
create_array:
  description: Whether the array must be created.
  returned: always
  type: bool
mkfs:
  description: Whether a file system must be made on RV(target).
  returned: always
  type: bool
wipe:
  description: Devices whose signatures the inventory allows to erase (C(wipefs --all)) before that.
  returned: always
  type: list
  elements: str
state:
  description: absent, ready (nothing to do), mkfs, or create (array and file system).
  returned: always
  type: str
reasons:
  description: What was found, in words.
  returned: always
  type: list
  elements: str
signatures:
  description: Signatures found per device.
  returned: always
  type: dict
array:
  description: The existing array at O(raid_device) (level, devices, uuid), or null.
  returned: always
  type: dict
"""

import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils.block_guard import (  # noqa: E402
    GuardError,
    guard,
    parse_mdadm_detail_export,
    parse_mdstat,
    probe_signatures,
)

#: bytes read from the start of a device to prove it can be read (one 4 KiB block)
READ_PROBE = 4096


def _read_error(device: str) -> str | None:
    """Why ``device`` cannot be opened read-only and its first block read (None: it can)."""
    try:
        fd = os.open(device, os.O_RDONLY)
    except OSError as exc:
        return f"open: {exc.strerror or exc}"
    try:
        os.read(fd, READ_PROBE)
    except OSError as exc:
        return f"read: {exc.strerror or exc}"
    finally:
        os.close(fd)
    return None


def _probe(module: AnsibleModule, device: str) -> list[dict[str, Any]]:
    """Signatures on ``device``; fails the module when the device is not proven blank or marked."""
    read_error = _read_error(device)
    blkid_rc, blkid_out, blkid_err = 0, "", ""
    wipefs_rc: int | None = None
    wipefs_out = wipefs_err = ""
    if read_error is None:
        blkid = module.get_bin_path("blkid", required=True)
        blkid_rc, blkid_out, blkid_err = module.run_command([blkid, "-p", "-o", "export", device])
        wipefs = module.get_bin_path("wipefs")
        if wipefs:
            wipefs_rc, wipefs_out, wipefs_err = module.run_command([wipefs, "--no-act", "--json", device])
    try:
        return probe_signatures(
            device,
            read_error=read_error,
            blkid_rc=blkid_rc,
            blkid_out=blkid_out,
            blkid_err=blkid_err,
            wipefs_rc=wipefs_rc,
            wipefs_out=wipefs_out,
            wipefs_err=wipefs_err,
        )
    except GuardError as exc:
        module.fail_json(msg=str(exc), device=device)
    raise AssertionError("unreachable")  # fail_json exits


def _array(module: AnsibleModule, raid_device: str, mdstat: dict[str, Any]) -> dict[str, Any] | None:
    real = os.path.realpath(raid_device)
    if not os.path.exists(real):
        return None
    mdadm = module.get_bin_path("mdadm")
    if mdadm:
        rc, out, _err = module.run_command([mdadm, "--detail", "--export", raid_device])
        if rc == 0:
            detail = parse_mdadm_detail_export(out)
            if detail is not None:
                return detail
    known = mdstat.get(os.path.basename(real))
    if known:
        return {"level": known["level"], "devices": sorted(known["devices"]), "uuid": None, "spares": []}
    return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "devices": {"type": "list", "elements": "str", "required": True},
            "raid_device": {"type": "str"},
            "raid_level": {"type": "str", "default": "raid0"},
            "filesystem": {"type": "str", "required": True},
            "label": {"type": "str"},
            "allow_format": {"type": "bool", "default": False},
            "allow_format_devices": {"type": "list", "elements": "str", "default": []},
            "flag": {"type": "str", "default": "gpucluster_storage.local_nvme"},
            "mdstat": {"type": "path", "default": "/proc/mdstat"},
        },
        supports_check_mode=True,
    )
    p = module.params
    devices, raid_device = list(p["devices"]), p["raid_device"] or None
    present = {d: os.path.exists(d) for d in devices}
    try:
        with open(p["mdstat"]) as handle:
            mdstat_text = handle.read()
    except OSError:
        mdstat_text = ""
    # mdadm and /proc/mdstat name members by their kernel path; the plan may use /dev/disk/by-id links
    real_to_planned = {os.path.realpath(d): d for d in devices}
    mdstat = parse_mdstat(mdstat_text)
    for md in mdstat.values():
        md["devices"] = [real_to_planned.get(os.path.realpath(d), d) for d in md["devices"]]
    probes: dict[str, list[dict[str, Any]]] = {}
    array = None
    if any(present.values()):
        probes = {d: _probe(module, d) for d in devices if present[d]}
        if raid_device:
            array = _array(module, raid_device, mdstat)
            if array is not None:
                array["devices"] = sorted(real_to_planned.get(os.path.realpath(d), d) for d in array["devices"])
                probes[raid_device] = _probe(module, raid_device)
    try:
        result = guard(
            devices=devices,
            raid_device=raid_device,
            raid_level=p["raid_level"],
            filesystem=p["filesystem"],
            label=p["label"],
            allow_format=p["allow_format"],
            allow_format_devices=list(p["allow_format_devices"]),
            flag=p["flag"],
            present=present,
            probes=probes,
            array=array,
            mdstat=mdstat,
        )
    except GuardError as exc:
        module.fail_json(msg=str(exc), signatures=probes, array=array)
    module.exit_json(changed=False, signatures=probes, array=array, **result)


if __name__ == "__main__":
    main()
