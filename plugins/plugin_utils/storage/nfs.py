"""NFS shared storage (tier2): server exports and the clients' mount units, from the inventory.

One server (group ``nfs_server``) exports each ``gpucluster_storage.nfs.exports`` path to the
network the clients reach it on: the storage network when the address plan has one (in the lab
too: lab/create.yml attaches every storage and compute container to it at its planned storage
address), the management network otherwise. The server address is the server's storage address,
which its storage interface unit carries (plan/system.py check_addresses refuses a plan where it
does not).
- kernel nfsd: /etc/exports lines ``PATH CIDR(rw,sync,no_subtree_check,root_squash)`` (exports(5));
  ``sync`` because an acknowledged checkpoint must be on disk, not in the server's cache.
- nfs-ganesha: one EXPORT block per path, Export_Id from 1 (0 is the NFSv4 pseudo root),
  ``Pseudo`` = ``Path`` so clients mount the same path from either server
  (nfs-ganesha src/doc/man/ganesha-export-config.rst, ganesha-core-config.rst).
- clients: a systemd mount unit per export, NFS 4.2 over TCP, hard mounts (a server restart
  stalls I/O instead of corrupting a checkpoint), ``nconnect=8`` (several TCP connections per
  mount, Linux >= 5.3) for single-client bandwidth; or, with ``proto: rdma`` on an InfiniBand or
  RoCE fabric, NFS over RDMA (``proto=rdma,port=20049``, nfs(5); the server's nfsd listens on the
  RDMA port 20049, nfs.conf(5) ``[nfsd] rdma=y``).

The links (``nfs_links``): one server serves every client, so what the clients can read or write
at once is at most what the server's planned storage interfaces carry (each card at min(its ports'
line rates, its PCIe slot): ``gpucluster_storage.server_nics``, storage/sizing.py storage_ceiling) and
at most the clients' own links on the NFS network; a storage floor above that is refused
(validation/floors.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.fs_model import (
    Nfs,
    NfsExport,
    NfsLinks,
    NfsMount,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import Ceiling, Directory

IMPLS = ("kernel", "ganesha")
ACCESS = ("rw", "ro")
SQUASH = ("root_squash", "no_root_squash", "all_squash")
GANESHA_SQUASH = {"root_squash": "Root_Squash", "no_root_squash": "No_Root_Squash", "all_squash": "All_Squash"}
CLIENT_OPTIONS = "rw,hard,proto=tcp,vers=4.2,nconnect=8"
PROTOS = ("tcp", "rdma")
#: NFS over RDMA: the IANA port of nfsrdma (nfs(5): "port=20049" with proto=rdma; docs/sources.md [NF1])
RDMA_PORT = 20049
RDMA_CLIENT_OPTIONS = f"rw,hard,proto=rdma,port={RDMA_PORT},vers=4.2"
#: Shared directories (checkpoints, datasets) are world-writable with the sticky bit, like /tmp;
#: a home tree is root's and holds per-user directories.
DIR_MODES = {"home": "0755"}
SHARED_DIR_MODE = "1777"


#: What a client's shared file system mount comes before (ordering only, systemd.unit(5) Before=):
#: slurmd (jobs read and write the shared paths), the checkpoint drain (its remote path), and on the
#: Kubernetes path containerd and kubelet (the teams' PersistentVolumes are folders of the mount).
#: Ordering against a unit that is not installed has no effect, so one list serves both schedulers.
CLIENT_MOUNT_BEFORE = ("slurmd.service", "gpucluster-ckpt-drain.service", "containerd.service", "kubelet.service")


def systemd_mount_unit_name(path: str) -> str:
    """``systemd-escape --path --suffix=mount PATH`` (systemd.unit(5) path escaping)."""
    trimmed = "/".join(p for p in path.split("/") if p)
    if not trimmed:
        return "-.mount"
    out = []
    for i, ch in enumerate(trimmed):
        if ch == "/":
            out.append("-")
        elif ch.isascii() and (ch.isalnum() or ch in ":_" or (ch == "." and i > 0)):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    return "".join(out) + ".mount"


def _abs(value: object, field: str) -> str:
    if not (isinstance(value, str) and value.startswith("/") and ".." not in value.split("/") and " " not in value):
        raise PlanError(field, value, "an absolute path without spaces or '..'")
    return value.rstrip("/") or "/"


def _under(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` ('' for root itself), or None when it lies elsewhere."""
    if path == root:
        return ""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def shared_directories(paths: Mapping[str, str], root: str, server_root: str) -> list[Directory]:
    """The planned directories (checkpoints, datasets, home) under ``root``, as paths under ``server_root``."""
    out: list[Directory] = []
    for role, path in sorted(paths.items(), key=lambda kv: kv[1]):
        rel = _under(str(path), root)
        if rel:
            out.append({"path": f"{server_root.rstrip('/')}/{rel}", "mode": DIR_MODES.get(role, SHARED_DIR_MODE)})
    return out


def nfs_links(
    nfs: Mapping[str, object],
    *,
    fabric_type: str,
    lab: bool,
    ceiling: Ceiling | None = None,
    field: str = "gpucluster_storage.nfs",
) -> NfsLinks:
    """Protocol and the links that carry NFS: ``ceiling`` (storage/sizing.py storage_ceiling: the server's planned
    storage interfaces, each card capped by its PCIe slot, and the clients' links), GB/s (GB = 1e9 B)."""
    require(
        "server_nics" not in nfs,
        f"{field}.server_nics",
        nfs.get("server_nics"),
        "nothing: the server's ports are described per planned interface in gpucluster_storage.server_nics "
        "({interface: {rate_gbps, pci_bus, pcie_gen, pcie_lanes}}), for every storage type; a count of NICs "
        "could name ports the plan never addresses",
    )
    rdma_ok = fabric_type in RDMA_FABRICS and not lab
    proto = check_choice(nfs.get("proto", "tcp"), f"{field}.proto", PROTOS)
    require(
        proto == "tcp" or rdma_ok,
        f"{field}.proto",
        proto,
        "tcp: NFS over RDMA needs an InfiniBand or RoCE fabric"
        + (" (the lab's containers have no RDMA NICs)" if lab else f", and this site's fabric is {fabric_type}"),
    )
    out: NfsLinks = {
        "proto": proto,
        "port": RDMA_PORT if proto == "rdma" else 2049,
        "rdma_offered": rdma_ok,
        "rdma_note": (
            f"NFS over RDMA is available on this {fabric_type} fabric: set {field}.proto: rdma "
            f"(clients mount proto=rdma,port={RDMA_PORT}; the server's nfsd listens on {RDMA_PORT})"
            if rdma_ok and proto == "tcp"
            else ""
        ),
    }
    if ceiling:
        out["ceilings"] = {"read_gbps": ceiling, "write_gbps": ceiling}
    return out


def nfs_plan(
    *,
    nfs: Mapping[str, object],
    servers: list[str],
    lab: Mapping[str, object],
    addresses: Mapping[str, Any],
    paths: Mapping[str, str],
    field: str = "gpucluster_storage.nfs",
    links: NfsLinks | None = None,
) -> Nfs:
    """Server, exports (the kernel /etc/exports lines and ganesha blocks' data) and client mounts (their
    units are rendered by mount_unit_text);
    ``links`` (nfs_links) sets the protocol of the mounts and rides along in the plan."""
    client_options = RDMA_CLIENT_OPTIONS if links and links["proto"] == "rdma" else CLIENT_OPTIONS
    require(bool(servers), "groups.nfs_server", servers, "one host in group nfs_server when storage is nfs")
    require(len(servers) == 1, "groups.nfs_server", servers, "exactly one host in group nfs_server")
    server = servers[0]
    impl = check_choice(lab.get("nfs_server_impl") or nfs.get("server_impl", "kernel"), f"{field}.server_impl", IMPLS)
    pools = addresses["pools"]
    default_net = "storage" if "storage" in pools else "management"  # the lab too: it has the network
    network = check_choice(
        lab.get("nfs_network") or nfs.get("network") or default_net,
        f"{field}.network",
        [n for n in ("storage", "management") if n in pools],
    )
    server_address = addresses["hosts"][server].get(network)
    require(bool(server_address), f"{field}.network", network, f"a network on which {server} has an address")
    cidr = pools[network]["cidr"]
    items = nfs.get("exports") or []
    if not (isinstance(items, list) and items):
        raise PlanError(f"{field}.exports", items, "a list of {path, mount_point}")
    exports: list[NfsExport] = []
    mounts: list[NfsMount] = []
    directories: list[Directory] = []
    seen_paths: set[str] = set()
    seen_mounts: set[str] = set()
    for i, item in enumerate(items):
        export = _export(item, i, f"{field}.exports[{i}]", str(cidr), seen_paths, seen_mounts)
        exports.append(export)
        directories += shared_directories(paths, export["mount_point"], export["path"])
        mounts.append(_client_mount(f"{server_address}:{export['path']}", export, client_options))
    for root in (e["mount_point"] for e in exports):
        for other in (e["mount_point"] for e in exports):
            if root != other and _under(other, root) is not None:
                raise PlanError(f"{field}.exports", [root, other], "mount points that are not nested in each other")
    out: Nfs = {
        "server": server,
        "server_impl": impl,
        "service": "nfs-ganesha" if impl == "ganesha" else "nfs-server",
        "network": network,
        "server_address": server_address,
        "clients": cidr,
        "exports": exports,
        "server_directories": directories,
        "client_mounts": mounts,
    }
    if links:
        out["links"] = links
    return out


def _export(item: object, i: int, f: str, cidr: str, seen_paths: set[str], seen_mounts: set[str]) -> NfsExport:
    """gpucluster_storage.nfs.exports[i] checked (``f``: its field): a path and mount point not used before
    (``seen_paths``, ``seen_mounts``: added to), access, squash, the clients (the network's CIDR by default)."""
    if not isinstance(item, dict):
        raise PlanError(f, item, "a mapping {path, mount_point, access, squash, clients}")
    path = _abs(item.get("path"), f"{f}.path")
    mount_point = _abs(item.get("mount_point"), f"{f}.mount_point")
    require(path not in seen_paths, f"{f}.path", path, "a path not exported twice")
    require(mount_point not in seen_mounts, f"{f}.mount_point", mount_point, "a mount point not used twice")
    seen_paths.add(path)
    seen_mounts.add(mount_point)
    access = check_choice(item.get("access", "rw"), f"{f}.access", ACCESS)
    squash = check_choice(item.get("squash", "root_squash"), f"{f}.squash", SQUASH)
    clients = str(item.get("clients", cidr))
    require(bool(re.match(r"^[0-9A-Za-z.:/*_-]+\Z", clients)), f"{f}.clients", clients, "a CIDR, host name or wildcard")
    options = f"{access},sync,no_subtree_check,{squash}"
    return {
        "path": path,
        "mount_point": mount_point,
        "export_id": i + 1,
        "pseudo": path,
        "access": access,
        "access_type": access.upper(),
        "squash": squash,
        "ganesha_squash": GANESHA_SQUASH[squash],
        "clients": clients,
        "options": options,
        "exports_line": f"{path} {clients}({options})",
    }


def _client_mount(what: str, export: NfsExport, client_options: str) -> NfsMount:
    """A client's mount of ``export`` (``what``: server address:path), read-only where the export is."""
    unit = systemd_mount_unit_name(export["mount_point"])
    return {
        "what": what,
        "where": export["mount_point"],
        "type": "nfs",
        "options": client_options if export["access"] == "rw" else client_options.replace("rw,", "ro,", 1),
        "unit_name": unit,
        "unit_path": f"/etc/systemd/system/{unit}",
    }


def mount_unit_text(mount: NfsMount, server: str) -> str:
    """The systemd mount unit of one of the plan's ``storage.nfs.client_mounts`` (what, where, type,
    options) from NFS server ``server``: rendered on the way to the clients (filter
    gpucluster.tiers.nfs_mount_unit), not stored in the plan."""
    return (
        "# Planned by gpucluster.tiers: NFS client mount of the cluster's shared storage.\n"
        "[Unit]\n"
        f"Description=Shared storage {mount['where']} from {server}\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "# ordering only (systemd.unit(5) Before=, https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html):\n"
        "# slurmd, the checkpoint drain and the container runtimes start after the mount, never fail for it\n"
        f"Before={' '.join(CLIENT_MOUNT_BEFORE)}\n"
        "\n"
        "[Mount]\n"
        f"What={mount['what']}\n"
        f"Where={mount['where']}\n"
        f"Type={mount['type']}\n"
        f"Options={mount['options']}\n"
        "TimeoutSec=90\n"
        "\n"
        "[Install]\n"
        "WantedBy=remote-fs.target\n"
    )
