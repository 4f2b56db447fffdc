"""Format permission per host and device: ``allow_format_devices`` entries ``<host>:/dev/...``.

A device path alone does not name one disk in a cluster: in tier3/tier4 the MDT device of the MDS
has the same path as OST 0 of every OSS, so a bare ``/dev/nvme1n1`` that allows the MDT's format
would also let every OSS wipe its first OST. Each entry therefore names the host that may erase
the device, and the plan hands each host only its own devices (the block_device_guard module on
that host never sees another host's permission).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

FORM = "<host>:/dev/..."


def _example(planned: Mapping[str, Sequence[str]]) -> str:
    for host, devices in planned.items():
        if devices:
            return f"{host}:{devices[0]}"
    return "mds01:/dev/nvme1n1"


def host_devices(
    entries: object,
    field: str,
    planned: Mapping[str, Sequence[str]],
    inventory_hosts: Sequence[str] = (),
    what: str = "device",
) -> dict[str, list[str]]:
    """``{host: [device, ...]}`` for every host in ``planned`` from ``<host>:/dev/...`` entries.

    ``planned`` maps each host that writes to devices of this section to its planned devices;
    ``inventory_hosts`` (every host of the inventory) only sharpens the message for a host that
    exists but has nothing of ``what`` planned. Raises PlanError naming ``field[i]``, the entry and
    the allowed form for a bare path, an unknown host or a device not planned on that host.
    """
    example = _example(planned)
    form = (
        f"a list of '{FORM}' entries (e.g. '{example}'): a host of the inventory, ':' and a device planned on that host"
    )
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise PlanError(field, entries, form)
    out: dict[str, list[str]] = {host: [] for host in planned}
    for i, entry in enumerate(entries):
        where = f"{field}[{i}]"
        host, sep, device = entry.partition(":") if isinstance(entry, str) else ("", "", "")
        if not (sep and host and device.startswith("/dev/")):
            raise PlanError(
                where,
                entry,
                f"'{FORM}' (e.g. '{example}'): the host that may erase the device, ':' and the device; "
                f"a bare path is refused, it would allow that path on every host",
            )
        if host not in planned:
            having = ", ".join(planned) or "none"
            status = (
                f"{host} is in the inventory but has no {what} planned"
                if host in inventory_hosts
                else f"{host} is not a host of the inventory"
            )
            raise PlanError(where, entry, f"'{FORM}' with a host that has a {what} planned ({having}); {status}")
        devices = list(planned[host])
        if device not in devices:
            raise PlanError(
                where, entry, f"a device planned on {host} ({', '.join(devices) or 'none'}), as '{host}:<device>'"
            )
        if device not in out[host]:
            out[host].append(device)
    return out


__all__ = ["FORM", "host_devices"]
