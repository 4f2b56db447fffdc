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
  mount, Linux >= 5.3) for single-client bandwidth.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_choice, require

IMPLS = ("kernel", "ganesha")
ACCESS = ("rw", "ro")
SQUASH = ("root_squash", "no_root_squash", "all_squash")
GANESHA_SQUASH = {"root_squash": "Root_Squash", "no_root_squash": "No_Root_Squash", "all_squash": "All_Squash"}
CLIENT_OPTIONS = "rw,hard,proto=tcp,vers=4.2,nconnect=8"
#: Shared directories (checkpoints, datasets) are world-writable with the sticky bit, like /tmp;
#: a home tree is root's and holds per-user directories.
DIR_MODES = {"home": "0755"}
SHARED_DIR_MODE = "1777"


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


def _abs(value: Any, field: str) -> str:
    require(
        isinstance(value, str) and value.startswith("/") and ".." not in value.split("/") and " " not in value,
        field,
        value,
        "an absolute path without spaces or '..'",
    )
    return value.rstrip("/") or "/"


def _under(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` ('' for root itself), or None when it lies elsewhere."""
    if path == root:
        return ""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def shared_directories(paths: dict[str, str], root: str, server_root: str) -> list[dict[str, str]]:
    """The planned directories (checkpoints, datasets, home) under ``root``, as paths under ``server_root``."""
    out = []
    for role, path in sorted(paths.items(), key=lambda kv: kv[1]):
        rel = _under(str(path), root)
        if rel:
            out.append({"path": f"{server_root.rstrip('/')}/{rel}", "mode": DIR_MODES.get(role, SHARED_DIR_MODE)})
    return out


def nfs_plan(
    *,
    nfs: dict[str, Any],
    servers: list[str],
    lab: dict[str, Any],
    addresses: dict[str, Any],
    paths: dict[str, str],
    field: str = "gpucluster_storage.nfs",
) -> dict[str, Any]:
    """Server, exports (kernel /etc/exports text and ganesha blocks' data) and client mount units."""
    require(bool(servers), "groups.nfs_server", servers, "one host in group nfs_server when storage is nfs")
    require(len(servers) == 1, "groups.nfs_server", servers, "exactly one host in group nfs_server")
    server = servers[0]
    impl = check_choice(lab.get("nfs_server_impl") or nfs.get("server_impl", "kernel"), f"{field}.server_impl", IMPLS)
    pools = addresses["pools"]
    default_net = "storage" if "storage" in pools else "management"  # the lab too: it has the network
    network = lab.get("nfs_network") or nfs.get("network") or default_net
    check_choice(network, f"{field}.network", [n for n in ("storage", "management") if n in pools])
    server_address = addresses["hosts"][server].get(network)
    require(bool(server_address), f"{field}.network", network, f"a network on which {server} has an address")
    cidr = pools[network]["cidr"]
    items = nfs.get("exports") or []
    require(isinstance(items, list) and bool(items), f"{field}.exports", items, "a list of {path, mount_point}")
    exports: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    directories: list[dict[str, str]] = []
    seen_paths: set[str] = set()
    seen_mounts: set[str] = set()
    for i, item in enumerate(items):
        f = f"{field}.exports[{i}]"
        require(isinstance(item, dict), f, item, "a mapping {path, mount_point, access, squash, clients}")
        path = _abs(item.get("path"), f"{f}.path")
        mount_point = _abs(item.get("mount_point"), f"{f}.mount_point")
        require(path not in seen_paths, f"{f}.path", path, "a path not exported twice")
        require(mount_point not in seen_mounts, f"{f}.mount_point", mount_point, "a mount point not used twice")
        seen_paths.add(path)
        seen_mounts.add(mount_point)
        access = check_choice(item.get("access", "rw"), f"{f}.access", ACCESS)
        squash = check_choice(item.get("squash", "root_squash"), f"{f}.squash", SQUASH)
        clients = str(item.get("clients", cidr))
        require(
            bool(re.match(r"^[0-9A-Za-z.:/*_-]+$", clients)), f"{f}.clients", clients, "a CIDR, host name or wildcard"
        )
        options = f"{access},sync,no_subtree_check,{squash}"
        exports.append(
            {
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
        )
        directories += shared_directories(paths, mount_point, path)
        what = f"{server_address}:{path}"
        unit = systemd_mount_unit_name(mount_point)
        mounts.append(
            {
                "what": what,
                "where": mount_point,
                "type": "nfs",
                "options": CLIENT_OPTIONS if access == "rw" else CLIENT_OPTIONS.replace("rw,", "ro,", 1),
                "unit_name": unit,
                "unit_path": f"/etc/systemd/system/{unit}",
            }
        )
        mounts[-1]["unit_text"] = _mount_unit(mounts[-1], server)
    for root in (e["mount_point"] for e in exports):
        for other in (e["mount_point"] for e in exports):
            if root != other and _under(other, root) is not None:
                raise PlanError(f"{field}.exports", [root, other], "mount points that are not nested in each other")
    return {
        "server": server,
        "server_impl": impl,
        "service": "nfs-ganesha" if impl == "ganesha" else "nfs-server",
        "network": network,
        "server_address": server_address,
        "clients": cidr,
        "exports": exports,
        "exports_text": "".join(e["exports_line"] + "\n" for e in exports),
        "server_directories": directories,
        "client_mounts": mounts,
    }


def _mount_unit(mount: dict[str, Any], server: str) -> str:
    return (
        "# Planned by gpucluster.tiers: NFS client mount of the cluster's shared storage.\n"
        "[Unit]\n"
        f"Description=Shared storage {mount['where']} from {server}\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
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
