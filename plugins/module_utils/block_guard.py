"""Data safety before mkfs/mdadm: what may be written to which block device, and what must not.

Pure: the ``block_device_guard`` module reads the devices (``blkid -p -o export``, ``wipefs
--no-act --json``, ``mdadm --detail --export``, ``/proc/mdstat``) and hands the text to these
functions; they decide. Rules:

- a device that carries any signature (file system, RAID member, partition table, LVM, ...) is
  never written unless the inventory sets ``<flag>.allow_format: true`` AND lists that device in
  ``<flag>.allow_format_devices``; the error names the device, what it carries and both keys;
- a re-run never reformats: an existing array with the planned members, or a file system of the
  planned type (and label, for Lustre targets) on the target, is accepted as it is;
- a changed device list on an existing array is an error, not a rebuild;
- a planned device that is a member of any active array is an error, whatever the flags say;
- a device is blank only when it was opened and read, ``blkid -p`` found nothing AND ``wipefs``
  listed nothing (``probe_signatures``). blkid exits 2 both for "nothing found" and for "cannot
  open the device" (util-linux blkid(8), EXIT STATUS: "2 if the specified token was not found, or
  no (specified) devices could be identified"; misc-utils/blkid.c returns BLKID_EXIT_NOTFOUND when
  the probe cannot open the device), so its silence counts only after the module has read the
  device itself; a device that cannot be read, a failing wipefs or a missing wipefs (with nothing
  from blkid) stop the module: such a device is never formatted.

Format permission comes per host: the inventory lists ``<host>:/dev/...`` and the plan hands each
host only its own devices (plugin_utils/storage/format_permission.py); here the list is that
host's list, bare paths.

Output formats: ``blkid -o export`` prints KEY=value lines (util-linux blkid(8)); ``wipefs --json``
prints {"signatures": [{device, offset, type, uuid, label}]} (util-linux wipefs(8));
``mdadm --detail --export`` prints MD_LEVEL, MD_DEVICES, MD_METADATA, MD_UUID and per member
MD_DEVICE_<name>_ROLE / MD_DEVICE_<name>_DEV (mdadm Detail.c); /proc/mdstat lines read
``md0 : active raid0 nvme3n1[1] nvme2n1[0]`` (kernel drivers/md/md.c, md_seq_show).
"""

from __future__ import annotations

import json
import re
from typing import Any


class GuardError(ValueError):
    """The plan would write to a device it must not touch (or cannot be checked)."""


def parse_blkid_export(text: str) -> dict[str, str]:
    """KEY=value lines of ``blkid -p -o export DEV`` (empty output: no signature found)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key:
            out[key] = value
    return out


def parse_wipefs_json(text: str) -> list[dict[str, Any]]:
    """Signatures listed by ``wipefs --no-act --json DEV`` (no output or no list: none)."""
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except ValueError:
        raise GuardError(f"wipefs --json printed something that is not JSON: {text[:200]!r}") from None
    sigs = data.get("signatures") if isinstance(data, dict) else None
    return [dict(s) for s in sigs or [] if isinstance(s, dict)]


def signatures(blkid: dict[str, str], wipefs: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """One list of what a device carries: wipefs sees every signature, blkid adds its usage."""
    out: list[dict[str, Any]] = []
    for sig in wipefs or []:
        entry = {"type": str(sig.get("type") or "unknown"), "offset": sig.get("offset"), "label": sig.get("label")}
        if blkid.get("TYPE") == entry["type"]:
            entry["usage"] = blkid.get("USAGE")
        out.append(entry)
    found = {s["type"] for s in out}
    for key in ("TYPE", "PTTYPE"):
        kind = blkid.get(key)
        if kind and kind not in found:
            label = blkid.get("LABEL") if key == "TYPE" else None
            out.append({"type": kind, "offset": None, "label": label, "usage": blkid.get("USAGE")})
            found.add(kind)
    return out


def probe_signatures(
    device: str,
    *,
    read_error: str | None,
    blkid_rc: int,
    blkid_out: str,
    blkid_err: str = "",
    wipefs_rc: int | None,
    wipefs_out: str = "",
    wipefs_err: str = "",
) -> list[dict[str, Any]]:
    """What ``device`` carries, from the module's own read and the blkid and wipefs runs.

    ``read_error``: why opening and reading the device's first block failed (None: it was read);
    ``wipefs_rc`` None: wipefs is not installed. Raises GuardError whenever "blank" is not proven:
    an unreadable device, a blkid or wipefs failure, or blkid's "nothing found" with no wipefs.
    """
    if read_error is not None:
        raise GuardError(
            f"cannot read {device} ({read_error}): a device that cannot be read is never formatted (blkid's "
            f"exit 2 would look like 'no signature'). Check that {device} is the planned block device, exists "
            f"on this host and is readable by root, then re-run."
        )
    if blkid_rc == 0:
        found = parse_blkid_export(blkid_out)
    elif blkid_rc == 2:  # nothing found: trusted only because the device was just read
        found = {}
    elif blkid_rc == 8:  # ambivalent: several signatures (blkid(8) EXIT STATUS)
        found = {"TYPE": "ambivalent-signatures"}
    else:
        raise GuardError(f"cannot read {device} with blkid (rc {blkid_rc}): {blkid_err.strip()}; refusing to go on")
    if wipefs_rc is None:
        if not found:
            raise GuardError(
                f"blkid finds no signature on {device}, but wipefs (util-linux) is not installed to confirm "
                f"it: {device} is not proven blank and is not formatted; install util-linux and re-run."
            )
        return signatures(found, None)
    if wipefs_rc != 0:
        raise GuardError(
            f"cannot read {device} with wipefs (rc {wipefs_rc}): {wipefs_err.strip()}; {device} is not proven "
            f"blank and is not formatted"
        )
    return signatures(found, parse_wipefs_json(wipefs_out))


def parse_mdadm_detail_export(text: str) -> dict[str, Any] | None:
    """An array from ``mdadm --detail --export MD`` (None when the text describes none)."""
    kv = parse_blkid_export(text)
    if "MD_LEVEL" not in kv and "MD_DEVICES" not in kv:
        return None
    members: dict[str, dict[str, str]] = {}
    for key, value in kv.items():
        m = re.match(r"^MD_DEVICE_(.+)_(ROLE|DEV)\Z", key)
        if m:
            members.setdefault(m.group(1), {})[m.group(2)] = value
    devices = sorted(m["DEV"] for m in members.values() if "DEV" in m and m.get("ROLE", "") != "spare")
    spares = sorted(m["DEV"] for m in members.values() if "DEV" in m and m.get("ROLE") == "spare")
    return {
        "level": kv.get("MD_LEVEL"),
        "raid_devices": int(kv["MD_DEVICES"]) if kv.get("MD_DEVICES", "").isdigit() else None,
        "metadata": kv.get("MD_METADATA"),
        "uuid": kv.get("MD_UUID"),
        "devices": devices,
        "spares": spares,
    }


def parse_mdstat(text: str) -> dict[str, dict[str, Any]]:
    """Arrays in /proc/mdstat: {md0: {state, level, devices: [/dev/...]}}."""
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        m = re.match(r"^(md[\w/]*)\s*:\s*(.*)\Z", line)
        if not m:
            continue
        tokens = m.group(2).split()
        if not tokens:
            continue
        state = tokens.pop(0)
        while tokens and tokens[0].startswith("("):
            tokens.pop(0)  # (read-only), (auto-read-only)
        level = None
        if tokens and "[" not in tokens[0]:
            level = tokens.pop(0)
        devices = ["/dev/" + t.split("[", 1)[0] for t in tokens if "[" in t]
        out[m.group(1)] = {"state": state, "level": level, "devices": devices}
    return out


def _describe(sigs: list[dict[str, Any]]) -> str:
    parts = []
    for s in sigs:
        text = s["type"]
        if s.get("label"):
            text += f" (label {s['label']!r})"
        if s.get("offset"):
            text += f" at offset {s['offset']}"
        parts.append(text)
    return ", ".join(parts)


def _matches(sigs: list[dict[str, Any]], filesystem: str, label: str | None) -> bool:
    """The target already holds what the plan makes (a re-run must not reformat it)."""
    if not sigs:
        return False
    if label:
        # Lustre targets: label fsname:OST0001 before first registration, fsname-OST0001 after
        want = label.replace(":", "-")
        return any(str(s.get("label") or "").replace(":", "-") == want for s in sigs)
    return len(sigs) == 1 and sigs[0]["type"] == filesystem


def guard(
    *,
    devices: list[str],
    raid_device: str | None,
    raid_level: str,
    filesystem: str,
    label: str | None,
    allow_format: bool,
    allow_format_devices: list[str],
    flag: str,
    present: dict[str, bool],
    probes: dict[str, list[dict[str, Any]]],
    array: dict[str, Any] | None,
    mdstat: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """What the storage role may do. Raises GuardError (naming device and flags) when it must stop.

    ``present``: whether each device (and the raid device) exists; ``probes``: signatures per
    existing device; ``array``: ``mdadm --detail`` of ``raid_device`` (None: no such array);
    ``mdstat``: every array the kernel runs.
    Returns {present, target, create_array, mkfs, wipe, state, reasons}.
    """
    allow_key, list_key = f"{flag}.allow_format", f"{flag}.allow_format_devices"
    if not devices or len(set(devices)) != len(devices):
        raise GuardError(f"{flag}.devices must list each device once, got {devices}")
    if len(devices) > 1 and not raid_device:
        raise GuardError(f"{flag}.raid_device is required for {len(devices)} devices")
    unknown = sorted(set(allow_format_devices) - set(devices) - {raid_device})
    if unknown:
        raise GuardError(f"{list_key} lists {unknown}, which are not devices of {flag}; fix the typo")
    target = raid_device or devices[0]
    missing = [d for d in devices if not present.get(d)]
    if len(missing) == len(devices):
        return {
            "present": False,
            "target": target,
            "create_array": False,
            "mkfs": False,
            "wipe": [],
            "state": "absent",
            "reasons": [f"none of {devices} exists on this host: nothing to do here"],
        }
    if missing:
        raise GuardError(f"{missing} of {flag}.devices do not exist on this host (the others do); check the inventory")

    def allowed(dev: str) -> bool:
        return allow_format and dev in allow_format_devices

    def refuse(dev: str, sigs: list[dict[str, Any]]) -> str:
        if allow_format:
            return (
                f"refusing to format {dev}: it carries {_describe(sigs)}. {allow_key} is true but {dev} is not "
                f"listed in {list_key}; list it there to let the storage role erase it."
            )
        return (
            f"refusing to format {dev}: it carries {_describe(sigs)}. Set {allow_key}: true AND list {dev} in "
            f"{list_key} to let the storage role erase it."
        )

    reasons: list[str] = []
    if raid_device and array is not None:
        planned, actual = sorted(devices), sorted(array.get("devices") or [])
        if planned != actual or (array.get("level") and array["level"] != raid_level):
            raise GuardError(
                f"{raid_device} is an existing {array.get('level')} array of {actual}, but the plan asks for a "
                f"{raid_level} array of {planned} ({flag}.devices). A changed device list is not rebuilt: restore "
                f"{flag}.devices, or stop and remove the array by hand after saving its data."
            )
        reasons.append(f"{raid_device} is already a {raid_level} array of {planned}: not recreated")
        sigs = probes.get(raid_device, [])
        if _matches(sigs, filesystem, label):
            reasons.append(f"{raid_device} already holds {_describe(sigs)}: not reformatted")
            return _result(target, False, False, [], "ready", reasons)
        if not sigs:
            reasons.append(f"{raid_device} carries no signature: it gets a new {filesystem}")
            return _result(target, False, True, [], "mkfs", reasons)
        if not allowed(raid_device):
            raise GuardError(refuse(raid_device, sigs))
        reasons.append(f"{raid_device} carries {_describe(sigs)}; {allow_key} and {list_key} allow erasing it")
        return _result(target, False, True, [raid_device], "mkfs", reasons)

    for name, md in sorted(mdstat.items()):
        busy = sorted(set(md.get("devices") or []) & set(devices))
        if busy and md.get("state") == "active":
            raise GuardError(
                f"{busy} belong to the active array /dev/{name}, not to {raid_device or 'a new file system'} "
                f"({flag}); no flag lets the storage role take devices from a running array: stop it by hand."
            )
    wipe, refused = [], []
    if not raid_device:
        sigs = probes.get(target, [])
        if _matches(sigs, filesystem, label):
            reasons.append(f"{target} already holds {_describe(sigs)}: not reformatted")
            return _result(target, False, False, [], "ready", reasons)
    for dev in devices:
        sigs = probes.get(dev, [])
        if not sigs:
            continue
        if allowed(dev):
            wipe.append(dev)
            reasons.append(f"{dev} carries {_describe(sigs)}; {allow_key} and {list_key} allow erasing it")
        else:
            refused.append(refuse(dev, sigs))
    if refused:
        raise GuardError(" ".join(refused))
    if raid_device:
        reasons.append(f"{raid_device}: a new {raid_level} array of {sorted(devices)} with {filesystem}")
        return _result(target, True, True, wipe, "create", reasons)
    reasons.append(f"{target}: a new {filesystem}")
    return _result(target, False, True, wipe, "mkfs", reasons)


def _result(target: str, create: bool, mkfs: bool, wipe: list[str], state: str, reasons: list[str]) -> dict[str, Any]:
    return {
        "present": True,
        "target": target,
        "create_array": create,
        "mkfs": mkfs,
        "wipe": wipe,
        "state": state,
        "reasons": reasons,
    }
