"""NVMe over Fabrics (a tier2 alternative to NFS): per-node remote namespaces, target and initiator side.

tier2 (docs/tiers.md: "NFS or NVMe-oF, 40 GB/s read, 20 write"; "async checkpoint to NVMe-oF") uses
NVMe-oF as fabric-attached flash: NVMe-oF exports block devices, not a shared file system (two
nodes writing one namespace need a cluster file system on top). The plan therefore gives each
compute node namespaces of its own (remote scratch): one subsystem per (target, compute node), its
namespaces, and that node's host NQN alone in ``allowed_hosts``. The node builds its scratch file
system on them like local NVMe (storage.local_raid_plan: guard, RAID0 when more than one, mkfs,
mount); checkpoints written there drain to shared storage.

- Target: the JSON ``nvmetcli restore`` reads (docs/sources.md [V1]: ``hosts`` [{nqn}],
  ``subsystems`` [{nqn, attr {allow_any_host}, namespaces [{nsid, enable, device {path, uuid}}],
  allowed_hosts}], ``ports`` [{portid, addr {trtype, adrfam, traddr, trsvcid, treq}, subsystems,
  referrals}]); NSIDs and port ids 1..8192 (nvmet MAX_NSID, MAX_PORTID [V1]).
- Initiator: Debian's nvme-cli mechanism (nvme-cli 2.3 in bookworm [V2]): ``/etc/nvme/discovery.conf``
  with one ``--transport --traddr --trsvcid ...`` line per target and ``nvmf-autoconnect.service``
  (``nvme connect-all``); the discovery log lists only the subsystems that allow the host's NQN
  (``/etc/nvme/hostnqn``, ``/etc/nvme/hostid``).
- NQNs: ``nqn.2014-08.org.nvmexpress:uuid:<uuid>`` (NVMe base specification [V3]), the UUID a
  name-based UUID (RFC 4122 v5) of the host or subsystem name: stable across runs, no state.
  A site may set ``nqn_prefix`` (``nqn.YYYY-MM.reverse.domain``) for readable names.
- A namespace's UUID is planned too: the kernel reports it as the ``wwid`` ``uuid.<uuid>`` and udev
  links ``/dev/disk/by-id/nvme-uuid.<uuid>`` [V4], a path that does not depend on probe order.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.format_permission import host_devices
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.fs_model import (
    Nvmeof,
    NvmeofClient,
    NvmeofTarget,
    NvmetConfig,
    NvmetNamespace,
    NvmetPort,
    NvmetSubsystem,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import LocalNvme
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import local_raid_plan

TRANSPORTS = ("rdma", "tcp")
#: The NVMe-oF port IANA assigned (NVMe-oF, NVMe/TCP specifications [V3]; nvmetcli, nvme-cli examples [V1][V2]).
DEFAULT_TRSVCID = 4420
#: nvmet's limits on namespace and port ids (nvmet/nvme.py Namespace.MAX_NSID, Port.MAX_PORTID [V1]).
MAX_NSID = 8192
#: Kernel and nvme-cli default: 600 s of reconnect attempts before the controller is dropped
#: (NVMF_DEF_CTRL_LOSS_TMO, drivers/nvme/host/fabrics.h and libnvme fabrics.h [V2]); -1: reconnect forever.
DEFAULT_CTRL_LOSS_TMO = 600
#: NVMe Qualified Names are at most 223 bytes (NVMF_NQN_SIZE; NVMe base specification [V3]).
NQN_MAX = 223
UUID_NQN = "nqn.2014-08.org.nvmexpress:uuid"
_PREFIX = re.compile(r"^nqn\.[0-9]{4}-[0-9]{2}\.[a-z0-9][a-z0-9.-]*[a-z0-9]\Z")
#: Where the target's JSON and the initiator's files go (nvmetcli's default save file is
#: /etc/nvmet/config.json [V1]; nvme-cli reads /etc/nvme [V2]).
TARGET_CONFIG = "/etc/nvmet/config.json"
DISCOVERY_CONF = "/etc/nvme/discovery.conf"
#: Namespace UUIDs, subsystem and host NQNs: RFC 4122 name-based UUIDs in this namespace.
_NS = uuid.uuid5(uuid.NAMESPACE_DNS, "nvmeof.gpucluster.tiers")


@dataclass(frozen=True)
class Slot:
    """One exported device: a target host's device, the compute node it serves, its namespace id."""

    target: str
    device: str
    client: str
    nsid: int


def stable_uuid(name: str) -> str:
    """A UUID that only depends on ``name`` (RFC 4122 version 5)."""
    return str(uuid.uuid5(_NS, name))


def by_id(target: str, device: str) -> str:
    """The initiator's stable path of the namespace that exports ``device`` of ``target`` [V4]."""
    return "/dev/disk/by-id/nvme-uuid." + stable_uuid(f"namespace/{target}/{device}")


def host_nqn(host: str, domain: str, prefix: str | None) -> str:
    """A compute node's host NQN: ``<prefix>:host:<fqdn>`` or the UUID form of the NVMe specification."""
    fqdn = f"{host}.{domain}" if domain else host
    return f"{prefix}:host:{fqdn}" if prefix else f"{UUID_NQN}:{stable_uuid('host/' + fqdn)}"


def subsystem_nqn(target: str, client: str, domain: str, prefix: str | None) -> str:
    """The NQN of the subsystem on ``target`` that serves ``client``."""
    name = f"{target}.{client}"
    return f"{prefix}:{name}" if prefix else f"{UUID_NQN}:{stable_uuid(f'subsystem/{name}.{domain}')}"


def assign_slots(targets: Sequence[str], devices: Sequence[str], clients: Sequence[str], field: str) -> list[Slot]:
    """Each compute node gets ``len(targets) x len(devices) // len(clients)`` devices, spread over the targets.

    Slots are taken target-major by device (target A dev 1, target B dev 1, target A dev 2, ...), so a
    node's namespaces sit on different targets when there are several (their bandwidth adds up).
    Devices left over (fewer nodes than a multiple) stay unexported.
    """
    slots = [(t, d) for d in devices for t in targets]
    require(
        len(slots) >= len(clients),
        f"{field}.devices",
        list(devices),
        f"at least one device per compute node: {len(targets)} target(s) x {len(devices)} device(s) for "
        f"{len(clients)} compute nodes",
    )
    per_client = len(slots) // len(clients)
    next_nsid: dict[tuple[str, str], int] = {}
    out = []
    for i, client in enumerate(clients):
        for target, device in slots[i * per_client : (i + 1) * per_client]:
            key = (target, client)
            next_nsid[key] = next_nsid.get(key, 0) + 1
            out.append(Slot(target, device, client, next_nsid[key]))
    return out


class Nqns(TypedDict):
    """The NQNs of a site: each compute node's host NQN, each (target, client) subsystem's NQN."""

    hosts: dict[str, str]
    subsystems: dict[tuple[str, str], str]


@dataclass(frozen=True)
class Options:
    """``gpucluster_storage.nvmeof``'s connection options, checked."""

    transport: str
    trsvcid: int
    nr_io_queues: int
    ctrl_loss_tmo: int
    prefix: str | None


def target_config(
    target: str, address: str, transport: str, trsvcid: int, slots: Sequence[Slot], nqns: Nqns
) -> NvmetConfig:
    """The nvmetcli JSON of one target: its hosts, one subsystem per compute node it serves, one port."""
    mine = [s for s in slots if s.target == target]
    clients = sorted({s.client for s in mine}, key=[s.client for s in mine].index)
    subsystems: list[NvmetSubsystem] = []
    for client in clients:
        namespaces: list[NvmetNamespace] = [
            {
                "nsid": s.nsid,
                "enable": 1,
                "device": {"path": s.device, "uuid": stable_uuid(f"namespace/{target}/{s.device}")},
            }
            for s in mine
            if s.client == client
        ]
        subsystems.append(
            {
                "nqn": nqns["subsystems"][(target, client)],
                "attr": {"allow_any_host": "0"},
                "namespaces": namespaces,
                "allowed_hosts": [nqns["hosts"][client]],
            }
        )
    port: NvmetPort = {
        "portid": 1,
        "addr": {
            "trtype": transport,
            "adrfam": "ipv4",
            "traddr": address,
            "trsvcid": str(trsvcid),
            "treq": "not specified",
        },
        "subsystems": [s["nqn"] for s in subsystems],
        "referrals": [],
    }
    return {"hosts": [{"nqn": nqns["hosts"][c]} for c in clients], "subsystems": subsystems, "ports": [port]}


def target_config_json(config: NvmetConfig) -> str:
    """/etc/nvmet/config.json of a target from the plan's ``storage.nvmeof.targets.<host>.config`` (nvmetcli's
    JSON, keys sorted): rendered on the way to the target (filter gpucluster.tiers.nvmet_config_json)."""
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def discovery_line(transport: str, address: str, trsvcid: int, nr_io_queues: int, ctrl_loss_tmo: int) -> str:
    """One ``/etc/nvme/discovery.conf`` line: the options of ``nvme connect-all`` for one target [V2]."""
    return (
        f"--transport={transport} --traddr={address} --trsvcid={trsvcid} "
        f"--nr-io-queues={nr_io_queues} --ctrl-loss-tmo={ctrl_loss_tmo}"
    )


def discovery_conf_text(nvmeof: Nvmeof) -> str:
    """``/etc/nvme/discovery.conf`` from the plan's ``storage.nvmeof``: a :func:`discovery_line` per target
    address (``discovery_addresses``) with the plan's transport, port, I/O queues and controller loss
    timeout [V2]. Rendered on the way to the compute nodes (filter gpucluster.tiers.nvme_discovery_conf),
    not stored in the plan."""
    keys = ("transport", "trsvcid", "nr_io_queues", "ctrl_loss_tmo", "discovery_addresses")
    missing = [k for k in keys if k not in nvmeof]
    require(not missing, "storage.nvmeof", sorted(nvmeof), "the plan's storage.nvmeof (" + ", ".join(keys) + ")")
    addresses = nvmeof["discovery_addresses"]
    require(
        isinstance(addresses, list) and all(isinstance(a, str) and a for a in addresses),
        "storage.nvmeof.discovery_addresses",
        addresses,
        "a list of the targets' addresses",
    )
    return "".join(
        discovery_line(nvmeof["transport"], address, nvmeof["trsvcid"], nvmeof["nr_io_queues"], nvmeof["ctrl_loss_tmo"])
        + "\n"
        for address in addresses
    )


def _options(nv: Mapping[str, object], field: str, cores: int) -> Options:
    prefix = nv.get("nqn_prefix")
    if not (prefix is None or (isinstance(prefix, str) and _PREFIX.match(prefix))):
        raise PlanError(
            f"{field}.nqn_prefix",
            prefix,
            "nqn.YYYY-MM.reverse.domain (e.g. nqn.2024-01.org.example), or leave it out for UUID NQNs",
        )
    return Options(
        transport=check_choice(nv.get("transport", "rdma"), f"{field}.transport", TRANSPORTS),
        trsvcid=int(check_range(nv.get("trsvcid", DEFAULT_TRSVCID), f"{field}.trsvcid", 1, 65535, integer=True)),
        # nvme-cli's own default is the CPU count [V2]: the plan writes it down
        nr_io_queues=int(check_range(nv.get("nr_io_queues", cores), f"{field}.nr_io_queues", 1, 1024, integer=True)),
        ctrl_loss_tmo=int(
            check_range(
                nv.get("ctrl_loss_tmo", DEFAULT_CTRL_LOSS_TMO),
                f"{field}.ctrl_loss_tmo",
                -1,
                86400,
                integer=True,
                unit=" s",
            )
        ),
        prefix=prefix,
    )


def nvmeof_plan(
    *,
    nvmeof: Mapping[str, object],
    targets: list[str],
    clients: list[str],
    addresses: Mapping[str, Any],
    lab: Mapping[str, object],
    paths: Mapping[str, str],
    domain: str,
    cores: int,
    inventory_hosts: Sequence[str] = (),
    field: str = "gpucluster_storage.nvmeof",
) -> Nvmeof:
    """Targets' nvmetcli JSON, the compute nodes' NQNs, discovery lines and remote scratch (``addresses``:
    plan/addresses.py's, typed by the plan package)."""
    require(bool(targets), "groups.nvmeof_target", targets, "at least one host in group nvmeof_target")
    require(not set(targets) & set(clients), "groups.nvmeof_target", targets, "target hosts that are not compute hosts")
    opts = _options(nvmeof, field, cores)
    raw_devices = nvmeof.get("devices")
    if not (
        isinstance(raw_devices, list)
        and raw_devices
        and all(isinstance(d, str) and d.startswith("/dev/") for d in raw_devices)
        and len(set(raw_devices)) == len(raw_devices)
    ):
        raise PlanError(f"{field}.devices", raw_devices, "a list of block devices (/dev/...) on each target, each once")
    devices = [str(d) for d in raw_devices]
    require(len(devices) <= MAX_NSID, f"{field}.devices", len(devices), f"at most {MAX_NSID} devices (nvmet NSIDs)")
    pools = addresses["pools"]
    default_net = "storage" if "storage" in pools else "management"  # the lab too: it has the network
    network = check_choice(
        nvmeof.get("network") or default_net, f"{field}.network", [n for n in ("storage", "management") if n in pools]
    )
    slots = assign_slots(targets, devices, clients, field)
    prefix = opts.prefix
    nqns: Nqns = {
        "hosts": {c: host_nqn(c, domain, prefix) for c in clients},
        "subsystems": {(s.target, s.client): subsystem_nqn(s.target, s.client, domain, prefix) for s in slots},
    }
    too_long = [n for n in [*nqns["hosts"].values(), *nqns["subsystems"].values()] if len(n.encode()) > NQN_MAX]
    require(not too_long, f"{field}.nqn_prefix", prefix, f"NQNs of at most {NQN_MAX} bytes ({too_long[:1]})")
    target_addr = {t: addresses["hosts"][t].get(network) for t in targets}
    for t, addr in target_addr.items():
        require(bool(addr), f"{field}.network", network, f"a network on which {t} has an address")
    configs = {t: target_config(t, str(target_addr[t]), opts.transport, opts.trsvcid, slots, nqns) for t in targets}
    scratch = _scratch(nvmeof, field, slots, clients, paths, inventory_hosts)
    return {
        "transport": opts.transport,
        "trsvcid": opts.trsvcid,
        "network": network,
        "targets": {t: _target(str(target_addr[t]), configs[t], slots, t, devices) for t in targets},
        "target_config_path": TARGET_CONFIG,
        # modules-load.d(5): the target core and its transport (drivers/nvme/target: nvmet, nvmet-rdma, nvmet-tcp)
        "target_modules": ["nvmet", f"nvmet-{opts.transport}"],
        "discovery_conf_path": DISCOVERY_CONF,
        # every compute node's discovery.conf: a line a target (discovery_conf_text, filter nvme_discovery_conf);
        # the targets' own entries are narrowed away in a compute node's slice of the plan
        "discovery_addresses": [str(target_addr[t]) for t in targets],
        "nr_io_queues": opts.nr_io_queues,
        "ctrl_loss_tmo": opts.ctrl_loss_tmo,
        "clients": {c: _client(c, nqns, prefix, slots, scratch[c]) for c in clients},
        "namespaces_per_client": len(slots) // len(clients),
        "unexported": len(targets) * len(devices) - len(slots),
    }


def _target(address: str, config: NvmetConfig, slots: Sequence[Slot], target: str, devices: list[str]) -> NvmeofTarget:
    """plan.storage.nvmeof.targets.<target>: its address, nvmetcli JSON and exported devices (inventory order)."""
    return {
        "address": address,
        "config": config,
        "devices": sorted({s.device for s in slots if s.target == target}, key=devices.index),
    }


def _client(client: str, nqns: Nqns, prefix: str | None, slots: Sequence[Slot], scratch: LocalNvme) -> NvmeofClient:
    """plan.storage.nvmeof.clients.<node>: its host NQN and ID, its namespaces and the scratch made of them."""
    return {
        "host_nqn": nqns["hosts"][client],
        # nvme-cli pairs the UUID of a UUID host NQN with the host ID [V2]
        "host_id": nqns["hosts"][client].rsplit(":", 1)[1] if not prefix else stable_uuid("hostid/" + client),
        "namespaces": [
            {
                "target": s.target,
                "subsystem": nqns["subsystems"][(s.target, s.client)],
                "nsid": s.nsid,
                "device": s.device,
                "by_id": by_id(s.target, s.device),
            }
            for s in slots
            if s.client == client
        ],
        "scratch": scratch,
    }


def _scratch(
    nv: Mapping[str, object],
    field: str,
    slots: Sequence[Slot],
    clients: Sequence[str],
    paths: Mapping[str, str],
    inventory_hosts: Sequence[str],
) -> dict[str, LocalNvme]:
    """Per compute node: its namespaces as local scratch (storage.local_raid_plan: guard, RAID0, mkfs, mount).

    ``allow_format_devices`` entries name the compute node and the namespace's by-id path (plan.json
    lists them); they are checked once for all nodes, then each node's plan gets its own.
    """
    by_client = {c: [by_id(s.target, s.device) for s in slots if s.client == c] for c in clients}
    raid = nv.get("raid_device", "/dev/md/nvmeof")
    if not (isinstance(raid, str) and raid.startswith("/dev/md")):
        raise PlanError(f"{field}.raid_device", raid, "/dev/mdN or /dev/md/NAME")
    planned = {c: [*devs, *([raid] if len(devs) > 1 else [])] for c, devs in by_client.items()}
    allowed = host_devices(
        nv.get("allow_format_devices"),
        f"{field}.allow_format_devices",
        planned,
        inventory_hosts,
        what="NVMe-oF namespace (plan.json storage.nvmeof.clients.<host>.namespaces[].by_id) or its raid_device",
    )
    out: dict[str, LocalNvme] = {}
    for c, devs in by_client.items():
        section: dict[str, object] = {
            "devices": devs,
            "raid_device": raid if len(devs) > 1 else None,
            "filesystem": nv.get("filesystem", "xfs"),
            "mount_point": nv.get("mount_point", "/scratch"),
            "allow_format": nv.get("allow_format", False),
            "allow_format_devices": [f"{c}:{d}" for d in allowed[c]],
        }
        out[c] = local_raid_plan(section, paths, field, hosts=[c], inventory_hosts=inventory_hosts)
    return out
