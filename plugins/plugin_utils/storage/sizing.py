"""Checkpoint storage sizing (GB = 1e9 bytes, as storage vendors and nccl-tests count).

checkpoint bytes = parameters x bytes per parameter (docs/sources.md §9.4: 2 for bf16 weights,
~12-14 with fp32 master weights and Adam state; BLOOM-176B's 2.3 TB is ~13 B/param).
A synchronous checkpoint must finish within ``overlap_target`` of the interval, so
required write GB/s = checkpoint GB / (overlap_target x interval seconds) (tiers.md:
checkpoint overlap under 10 % of training time).
Idle cost per day = GPUs x 24 h x $/GPU-hour x I/O-wait fraction (tiers.md correction:
64 x 24 x $4 x 0.2 = $1,229, not $3,942).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import PCIE_X16_GBS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.format_permission import host_devices
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import (
    CapacityRow,
    CardSlot,
    Ceiling,
    JsonValue,
    LocalNvme,
    ProtectionPart,
    ServerCard,
    ServerLinks,
    ServerPort,
    Sizing,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.nfs import shared_directories

OVERRIDE_FLAG = "gpucluster_workload.allow_storage_below_need"


def storage_sizing(
    *,
    model_params_b: float | None,
    bytes_per_param: float,
    interval_min: float,
    overlap_target: float,
    write_floor_gbps: float,
    rated_write_gbps: float | None,
    gpus: int,
    gpu_hour_cost_usd: float,
    io_wait_fraction: float,
    field: str = "gpucluster_workload",
) -> Sizing:
    params = check_range(model_params_b, f"{field}.model_params_b", 0.001, 100000, unit=" (billions)")
    bpp = check_range(bytes_per_param, f"{field}.checkpoint_bytes_per_param", 0.25, 32)
    interval = check_range(interval_min, f"{field}.checkpoint_interval_min", 1, 10080, unit=" min")
    # more than half the interval spent checkpointing is not a training plan
    overlap = check_range(overlap_target, f"{field}.checkpoint_overlap_target", 0.001, 0.5)
    cost = check_range(gpu_hour_cost_usd, f"{field}.gpu_hour_cost_usd", 0, 1000)
    wait = check_range(io_wait_fraction, f"{field}.io_wait_fraction", 0, 1)
    gpus = int(check_range(gpus, "gpus", 1, None, integer=True))
    ckpt_bytes = params * 1e9 * bpp
    interval_s = interval * 60
    required = ckpt_bytes / 1e9 / (overlap * interval_s)
    per_day = 86400 / interval_s
    rate = rated_write_gbps if rated_write_gbps else write_floor_gbps
    write_time = ckpt_bytes / 1e9 / rate
    return {
        "checkpoint_bytes": int(ckpt_bytes),
        "checkpoint_tb": round(ckpt_bytes / 1e12, 3),
        "required_write_gbps": float(f"{required:.6g}"),
        "checkpoints_per_day": round(per_day, 2),
        "daily_write_tb": round(ckpt_bytes * per_day / 1e12, 2),
        "write_floor_gbps": write_floor_gbps,
        "rated_write_gbps": rated_write_gbps,
        "write_time_s": round(write_time, 1),
        "overlap_at_rate": round(write_time / interval_s, 4),
        "fits_floor": required <= write_floor_gbps,
        "fits_rated": None if rated_write_gbps is None else required <= rated_write_gbps,
        "full_day_cost_usd": round(gpus * 24 * cost, 2),
        "idle_cost_per_day_usd": round(gpus * 24 * cost * wait, 2),
        # the inputs, so the report can show every formula with its values (report.py)
        "inputs": {
            "model_params_b": params,
            "bytes_per_param": bpp,
            "interval_min": interval,
            "overlap_target": overlap,
            "gpus": gpus,
            "gpu_hour_cost_usd": cost,
            "io_wait_fraction": wait,
        },
    }


def storage_check(sizing: Sizing, floor_gbps: float, override: bool) -> list[str]:
    """Why the plan must stop (empty when the storage keeps up, or the site overrode it)."""
    rate = sizing["rated_write_gbps"] or floor_gbps
    if sizing["required_write_gbps"] <= rate or override:
        return []
    return [
        f"checkpoints of {sizing['checkpoint_tb']} TB need {sizing['required_write_gbps']} GB/s of write "
        f"to stay within the overlap target, but the storage delivers {rate} GB/s "
        f"(tier floor {floor_gbps} GB/s). Use faster storage, a longer interval or async checkpoints, "
        f"or set {OVERRIDE_FLAG}: true to plan anyway."
    ]


#: Local NVMe (tier1): file systems the storage role makes, and how it mounts them. noatime: a
#: checkpoint or dataset read must not turn into a metadata write.
LOCAL_FILESYSTEMS = ("ext4", "xfs")
LOCAL_MOUNT_OPTIONS = "defaults,noatime"


def local_raid_plan(
    local: Mapping[str, object],
    paths: Mapping[str, str],
    field: str = "gpucluster_storage.local_nvme",
    *,
    hosts: Sequence[str] = (),
    inventory_hosts: Sequence[str] = (),
) -> LocalNvme:
    """Devices, RAID0 array, file system and mount of local NVMe scratch; the commands the role runs.

    Nothing here decides whether a device may be erased: the block_device_guard module does, on the
    host, from ``allow_format`` and that host's ``allow_format_devices``. The inventory lists
    ``<host>:/dev/...`` entries (format_permission.py), each a device of ``devices`` or the array on
    one of ``hosts`` (the storage hosts, which build the scratch array); the plan gives
    ``{host: [device, ...]}``.
    """
    raw_devices = local.get("devices")
    if not (isinstance(raw_devices, list) and raw_devices and all(_is_device(d) for d in raw_devices)):
        raise PlanError(f"{field}.devices", raw_devices, "a list of block devices (/dev/...)")
    devices = [str(d) for d in raw_devices]
    require(len(set(devices)) == len(devices), f"{field}.devices", raw_devices, "each device listed once")
    raid = local.get("raid_device")
    if len(devices) > 1:
        if not (isinstance(raid, str) and raid.startswith("/dev/md")):
            raise PlanError(f"{field}.raid_device", raid, "/dev/mdN")
    elif raid is not None:
        raise PlanError(f"{field}.raid_device", raid, "no array for a single device (leave raid_device out)")
    fs = check_choice(local.get("filesystem", "ext4"), f"{field}.filesystem", LOCAL_FILESYSTEMS)
    mount_point = local.get("mount_point")
    if not (isinstance(mount_point, str) and mount_point.startswith("/") and mount_point != "/"):
        raise PlanError(f"{field}.mount_point", mount_point, "an absolute path other than /")
    allow = local.get("allow_format", False)
    if not isinstance(allow, bool):
        raise PlanError(f"{field}.allow_format", allow, "true or false")
    planned = [*devices, *([raid] if raid else [])]
    allowed = host_devices(
        local.get("allow_format_devices"),
        f"{field}.allow_format_devices",
        {host: planned for host in hosts},
        inventory_hosts,
        what=f"device of {field}.devices or its raid_device",
    )
    target = raid or devices[0]
    create: list[str] | None = None
    if raid:
        create = ["mdadm", "--create", raid, "--run", "--metadata=1.2", "--level=0", f"--raid-devices={len(devices)}"]
        create += devices
    return {
        "devices": list(devices),
        "raid_device": raid,
        "raid_level": "raid0" if raid else None,
        "filesystem": fs,
        "target": target,
        "mount_point": mount_point,
        "mount_options": LOCAL_MOUNT_OPTIONS,
        "allow_format": allow,
        "allow_format_devices": allowed,
        "flag": field,
        "mdadm_create_argv": create,
        "mkfs_argv": [f"mkfs.{fs}", target],
        "directories": shared_directories(paths, mount_point, mount_point),
    }


def _is_device(value: object) -> bool:
    return isinstance(value, str) and value.startswith("/dev/")


# --- What the storage servers' links carry: the ceiling of the storage floors (validation/floors.py) ---

#: The inventory field that describes the storage servers' planned storage interfaces: line rate and the
#: PCIe card each sits on (every storage server has the same interfaces, gpucluster_storage.server_interfaces).
SERVER_NICS_FIELD = "gpucluster_storage.server_nics"
#: A planned interface the inventory does not describe: one 100 Gb/s port on a card of its own, PCIe Gen5 x16
#: (a policy default, as NFS's one 100 Gb/s port was: 12.5 GB/s; the report marks it "default").
DEFAULT_PORT_RATE_GBPS, DEFAULT_PORT_PCIE_GEN, DEFAULT_PORT_PCIE_LANES = 100.0, 5, 16
#: PCIe link widths a card can train at (PCI-SIG; x16 is the widest slot, docs/sources.md [S18] table)
PCIE_LANES = (1, 2, 4, 8, 16)
#: An NVMe drive's link: four PCIe lanes (U.2/E1.S/M.2 NVMe; tiers.md tier1 "4x Gen4" drives give 14-28 GB/s,
#: 4 x Gen4 x4 = 31.5 GB/s of links). Its generation is bounded by the node's (gpucluster_node.pcie_gen).
NVME_DRIVE_LANES = 4
#: The hosts that carry a storage type's data (the floors' bytes): their group and what they are called.
DATA_SERVERS = {
    "lustre": ("lustre_oss", "OSS", "OSS"),
    "beegfs": ("beegfs_storage", "BeeGFS storage server", "BeeGFS storage servers"),
    "nfs": ("nfs_server", "NFS server", "NFS servers"),
    "nvmeof": ("nvmeof_target", "NVMe-oF target", "NVMe-oF targets"),
}
_PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\Z")


def pcie_gbs(gen: int, lanes: int) -> float:
    """A PCIe link's bandwidth per direction, GB/s: the x16 figure (compute/interconnect.py, docs/sources.md
    [S18]) scaled by the lanes."""
    return PCIE_X16_GBS[gen] * lanes / 16


def server_links(server_nics: object, interfaces: Sequence[str], field: str = SERVER_NICS_FIELD) -> ServerLinks:
    """What ONE data server's planned storage interfaces carry, GB/s per direction (GB = 1e9 B).

    ``interfaces``: the interfaces the plan gives the server on the storage network (only those count: a port the
    plan does not address carries no storage traffic). ``server_nics``: ``{interface: {rate_gbps, pci_bus,
    pcie_gen, pcie_lanes}}``; ports whose ``pci_bus`` differ only in the function (``0000:41:00.0`` and ``.1``)
    are one card and share its slot. Per card: min(its ports' line rates, its PCIe slot); the server: the sum."""
    raw = {} if server_nics is None else server_nics
    if not isinstance(raw, dict):
        raise PlanError(field, raw, "a mapping {interface: {rate_gbps, pci_bus, pcie_gen, pcie_lanes}}")
    ports = [_port(name, raw.get(name), f"{field}.{name}") for name in interfaces]
    out_cards = _cards(ports, field)
    return {
        "ports": ports,
        "cards": out_cards,
        "line_gbs": round(sum(p["rate_gbps"] for p in ports) / 8, 3),
        "pcie_gbs": round(sum(c["pcie_gbs"] for c in out_cards), 3),
        "gbs": round(sum(c["gbs"] for c in out_cards), 3),
        "default": any(p["default"] for p in ports),
        "not_planned": sorted(set(raw) - set(interfaces)),
    }


def _port(name: str, entry: object, f: str) -> ServerPort:
    """One planned interface of gpucluster_storage.server_nics (``f``: its field), or the default port."""
    if entry is None:
        return {
            "interface": name,
            "rate_gbps": DEFAULT_PORT_RATE_GBPS,
            "pcie_gen": DEFAULT_PORT_PCIE_GEN,
            "pcie_lanes": DEFAULT_PORT_PCIE_LANES,
            "card": f"{name} (own card)",
            "default": True,
        }
    if not isinstance(entry, dict):
        raise PlanError(f, entry, "a mapping {rate_gbps, pci_bus, pcie_gen, pcie_lanes}")
    rate = check_range(entry.get("rate_gbps"), f"{f}.rate_gbps", 1, 3200, unit=" Gb/s")
    bus = entry.get("pci_bus")
    if not (isinstance(bus, str) and _PCI.match(bus)):
        raise PlanError(
            f"{f}.pci_bus",
            bus,
            "the port's PCI address DDDD:BB:DD.F (lspci -D); ports of one card differ in F only",
        )
    gen = int(check_range(entry.get("pcie_gen"), f"{f}.pcie_gen", 3, 6, integer=True))
    lanes = entry.get("pcie_lanes", 16)
    if not (isinstance(lanes, int) and lanes in PCIE_LANES and not isinstance(lanes, bool)):
        raise PlanError(f"{f}.pcie_lanes", lanes, "1, 2, 4, 8 or 16")
    return {
        "interface": name,
        "rate_gbps": rate,
        "pcie_gen": gen,
        "pcie_lanes": lanes,
        "card": bus[:-2].lower(),
        "default": False,
    }


def _cards(ports: list[ServerPort], field: str) -> list[ServerCard]:
    """The cards the ports sit on (ports of one card share its slot): per card min(its ports' line rates, its
    PCIe slot), GB/s."""
    cards: dict[str, CardSlot] = {}
    for port in ports:
        card = cards.setdefault(
            port["card"],
            {"card": port["card"], "pcie_gen": port["pcie_gen"], "pcie_lanes": port["pcie_lanes"], "ports": []},
        )
        if (card["pcie_gen"], card["pcie_lanes"]) != (port["pcie_gen"], port["pcie_lanes"]):
            raise PlanError(
                f"{field}.{port['interface']}.pcie_gen",
                f"Gen{port['pcie_gen']} x{port['pcie_lanes']}",
                f"Gen{card['pcie_gen']} x{card['pcie_lanes']}, as the other ports of card {card['card']}: "
                "one card, one slot",
            )
        card["ports"].append(port["interface"])
    out_cards: list[ServerCard] = []
    for card in cards.values():
        line = sum(p["rate_gbps"] for p in ports if p["card"] == card["card"]) / 8
        slot = pcie_gbs(card["pcie_gen"], card["pcie_lanes"])
        rates = [p["rate_gbps"] for p in ports if p["card"] == card["card"]]
        out_cards.append(
            {
                "card": card["card"],
                "pcie_gen": card["pcie_gen"],
                "pcie_lanes": card["pcie_lanes"],
                "ports": card["ports"],
                "line_gbs": round(line, 3),
                "pcie_gbs": round(slot, 3),
                "gbs": round(min(line, slot), 3),
                "text": f"{' + '.join(f'{r:g}' for r in rates)} Gb/s = {line:g} GB/s on PCIe Gen{card['pcie_gen']} "
                f"x{card['pcie_lanes']} = {slot:g} GB/s ({card['card']})"
                + (": the slot caps it" if slot < line else ""),
            }
        )
    return out_cards


def storage_ceiling(
    *,
    storage_type: str,
    servers: Sequence[str],
    links: ServerLinks,
    clients: int,
    client_link_gbps: float | None,
    interfaces_field: str = "gpucluster_storage.server_interfaces",
) -> Ceiling:
    """The aggregate ceiling of a networked storage type, GB/s: the sum over its data servers (DATA_SERVERS) of
    what each one's planned storage interfaces carry (``links``, server_links), and at most what the clients'
    own links on the storage network take at once (``client_link_gbps``: one client's, Gb/s; None: unknown).
    Whatever the protocol (TCP, RDMA, NVMe-oF): none carries more than the line rate or the PCIe slot."""
    group, one, many = DATA_SERVERS[storage_type]
    n = len(servers)
    total = round(n * links["gbs"], 3)
    cards = "; ".join(c["text"] for c in links["cards"]) or "no planned storage interface"
    server_text = (
        f"{n} {one if n == 1 else many} (groups.{group}) x {links['gbs']:g} GB/s = {total:g} GB/s; each: "
        f"{cards} ({SERVER_NICS_FIELD}{', default: describe the real ports' if links['default'] else ''})"
    )
    value: dict[str, JsonValue] = {p["interface"]: f"{p['rate_gbps']:g} Gb/s on {p['card']}" for p in links["ports"]}
    ceiling: Ceiling = {
        "gbs": total,
        "link": server_text,
        "field": SERVER_NICS_FIELD,
        "value": value or None,
        "fix": f"add servers to groups.{group}, or ports on cards of their own ({interfaces_field} and "
        f"{SERVER_NICS_FIELD})",
        "servers": n,
        "server_group": group,
        "cards": links["cards"],
        "not_planned": links["not_planned"],
        "per_server_gbs": links["gbs"],
        "pcie_gbs": round(n * links["pcie_gbs"], 3),
        "line_gbs": round(n * links["line_gbs"], 3),
    }
    if client_link_gbps:
        client_gbs = round(clients * client_link_gbps / 8, 3)
        if client_gbs < total:
            ceiling = {
                **ceiling,
                "gbs": client_gbs,
                "link": f"{clients} clients x {client_link_gbps:g} Gb/s on the storage network = {client_gbs:g} GB/s "
                f"(below {server_text})",
                "field": "gpucluster_node.nics",
                "value": f"{client_link_gbps:g} Gb/s of storage links per node",
                "fix": "faster or more storage NICs on the compute nodes (gpucluster_node.nics, purpose: storage)",
            }
    return ceiling


def local_ceiling(devices: int, pcie_gen: int, field: str = "gpucluster_storage.local_nvme.devices") -> Ceiling:
    """Local NVMe (each node its own): the drives' links, ``devices`` x PCIe x4 at the node's generation (an upper
    bound: a drive of an older generation trains lower)."""
    per = pcie_gbs(pcie_gen, NVME_DRIVE_LANES)
    total = round(devices * per, 3)
    return {
        "gbs": total,
        "link": f"{devices} NVMe drives x PCIe Gen{pcie_gen} x{NVME_DRIVE_LANES} ({per:g} GB/s each) = {total:g} GB/s "
        f"per node ({field}; gpucluster_node.pcie_gen; docs/sources.md [S18])",
        "field": field,
        "value": devices,
        "fix": "more drives in the array, or a lower floor",
        "servers": 1,
        "per_server_gbs": total,
        "pcie_gbs": total,
        "line_gbs": total,
    }


def protected_capacity(parts: Mapping[str, ProtectionPart], counts: Mapping[str, int]) -> dict[str, CapacityRow]:
    """Raw and usable capacity of the protected storage, in devices' worth (issue 38, storage/raid.py).

    ``parts``: plan.storage.protection's parts (``{ost: {members, usable_devices, level}, ...}``);
    ``counts``: how many of each part the site has (``{ost: 16, mdt: 1}``). Usable per array:
    RAID-6 (n-2) x device, RAID-10 n/2, RAID-1 one device, a raw device itself (md(4)); a declared
    volume (hardware, zfs) counts as the one device it is. Multiply by the device size for bytes.
    """
    out: dict[str, CapacityRow] = {}
    for name, part in parts.items():
        members = int(part.get("members") or 1)
        usable = float(part.get("usable_devices") or members)
        n = int(counts.get(name, 1))
        out[name] = {
            "arrays": n,
            "raw_devices": n * members,
            "usable_devices": round(n * usable, 3),
            "usable_fraction": round(usable / members, 4),
            "formula": f"{n} x {part.get('level') or 'raw'} of {members}: {usable:g} devices' worth each",
        }
    return out
