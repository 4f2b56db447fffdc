"""plan.storage.lustre of a Lustre site: its servers and their LNet NIDs, targets, layouts, client tunables
and mount (storage/lustre.py, lustre_targets.py), with the checks of the rules a Lustre site must meet, and
plan.storage.protection from its targets (storage/raid.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre, lustre_targets, raid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.format_permission import host_devices
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.fs_model import Lustre, ServerNid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.interfaces import server_interfaces
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import Protection, ProtectionPart
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import protected_capacity

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

FIELD = "gpucluster_storage.lustre"


def _server_nids(
    servers: list[str], server_ifaces: list[str], addresses: Mapping[str, Any], net: str
) -> dict[str, list[ServerNid]]:
    """Per server: one NID per LNet interface, each the address of its own interface (system.check_addresses);
    an LNet NIC without an address (no NID) is an error naming it."""
    server_nids: dict[str, list[ServerNid]] = {}
    for host in servers:
        entry = addresses["hosts"][host]
        per_nic = entry.get("storage_interfaces") or {}
        server_nids[host] = [
            {"interface": i, "address": a, "nid": lustre_targets.mgs_nid(a, net)}
            for i in server_ifaces
            if (a := per_nic.get(i) or (entry["management"] if "storage" not in entry else None))
        ]
        if len(server_nids[host]) < len(server_ifaces):  # an LNet NIC without an address: no NID
            missing = [i for i in server_ifaces if i not in {n["interface"] for n in server_nids[host]}]
            raise PlanError(
                f"{FIELD}.server_interfaces",
                missing,
                f"interfaces that {host} has in gpucluster_storage.server_interfaces (they get its storage addresses)",
            )
    return server_nids


def lustre_plan(site: Site, addresses: Mapping[str, Any]) -> Lustre:
    """plan.storage.lustre: the MDS (the MGS too) and the OSSs, their NIDs and targets, and the clients'
    layouts, tunables, LNet and mount."""
    lu = site.lustre_model
    p = FIELD
    oss = site.hosts_in("lustre_oss")
    mds = site.hosts_in("lustre_mds")
    require(bool(mds), "groups.lustre_mds", mds, "one host in group lustre_mds when storage is lustre")
    require(bool(oss), "groups.lustre_oss", oss, "at least one host in group lustre_oss when storage is lustre")
    per_oss = int(check_range(lu.osts_per_oss, f"{p}.osts_per_oss", 1, 256, integer=True))
    ost_count = per_oss * len(oss)
    fsname = str(lu.fsname)
    require(
        fsname.isalnum() and 1 <= len(fsname) <= 8, f"{p}.fsname", fsname, "1 to 8 letters or digits (Lustre fsname)"
    )
    paths = {k: v for k, v in site.storage_model.paths.items() if k in ("checkpoints", "datasets", "home")}
    tunables = lustre.lustre_client_tunables(client_ram_gib=site.node.memory_gib)
    storage_ifaces = [n.netdev for n in site.node.nics_for("storage")]
    lnet_ifaces = storage_ifaces or [n.netdev for n in site.node.compute_nics[:1]]
    net = lu.lnet_net
    # the servers' LNet NICs: their own (lustre.server_interfaces, else gpucluster_storage.server_interfaces),
    # never the clients' names; each NID is the address of its own interface (system.check_addresses)
    server_ifaces = lu.server_interfaces or server_interfaces(site)
    require(
        isinstance(server_ifaces, list) and bool(server_ifaces) and all(isinstance(i, str) for i in server_ifaces),
        "gpucluster_storage.server_interfaces",
        server_ifaces,
        "a list of the Lustre servers' own storage interface names (their LNet NICs)",
    )
    server_nids = _server_nids([*mds, *oss], server_ifaces, addresses, net)
    mgs_nid = server_nids[mds[0]][0]["nid"]
    allow = lu.allow_format
    require(isinstance(allow, bool), f"{p}.allow_format", allow, "true or false")
    mount_point = lu.mount_point or f"/lustre/{fsname}"  # load_site sets it; the schema refuses a null
    protection_warnings: list[str] = []
    targets = lustre_targets.lustre_targets(
        fsname=fsname,
        mds=mds,
        oss=oss,
        mgs_nid=mgs_nid,
        mdt_device=lu.mdt_device,
        ost_devices=lu.ost_devices,
        osts_per_oss=per_oss,
        mdt_devices=lu.mdt_devices,
        protection=lu.protection,
        allow_unprotected=lu.allow_unprotected,
        field=p,
        warnings=protection_warnings,
    )
    # per host: the MDT's path is often OST 0's path on the OSSs (format_permission.py); an array's
    # members and the array itself (/dev/md/<target>) may be listed
    allowed = host_devices(
        lu.allow_format_devices,
        f"{p}.allow_format_devices",
        lustre_targets.planned_devices(targets),
        [h.name for h in site.hosts],
        what=f"Lustre target ({p}.mdt_devices on lustre_mds, {p}.ost_devices on lustre_oss, or their md arrays)",
    )
    return {
        "fsname": fsname,
        "mount_point": mount_point,
        "mgs": mds[0],
        "mds": mds,
        "oss": oss,
        "ost_count": ost_count,
        "osts_per_oss": per_oss,
        "layouts": lustre.lustre_layouts(ost_count=ost_count, paths=paths, overrides=lu.layouts),
        "client_tunables": tunables,
        "set_param_commands": lustre.lctl_set_param_commands(tunables, fsname),
        "lnet": lustre.lnet_config(interfaces=lnet_ifaces, net=net),
        "server_lnet": lustre.lnet_config(interfaces=list(server_ifaces), net=net, field=p),
        "mgs_nid": mgs_nid,
        "server_nids": server_nids,  # per server: one NID per LNet interface, each its own address
        # the mount and its units (storage/lustre.py client_mount: unit name, order, client tunables)
        "client_mount": lustre.client_mount(mgs_nid=mgs_nid, fsname=fsname, mount_point=mount_point, tunables=tunables),
        "targets": targets,
        "protection_warnings": protection_warnings,
        "allow_format": allow,
        "allow_format_devices": allowed,
    }


def lustre_protection(lplan: Lustre) -> Protection:
    """plan.storage.protection of a Lustre site: the MDT's and the OSTs' levels (storage/raid.py)."""
    parts: dict[str, ProtectionPart] = {}
    counts: dict[str, int] = {}
    for kind in ("mdt", "ost"):
        mine = [t for ts in lplan["targets"].values() for t in ts if t["kind"] == kind]
        first, prot = mine[0], mine[0]["protection"]
        part: ProtectionPart = {
            "kind": prot["kind"],
            "level": prot["level"],
            "survives": prot["survives"],
            "reason": prot["reason"],
            "members": len(first["members"]),
        }
        if array := first["array"]:
            part["chunk_kib"] = array["chunk_kib"]
            part["usable_devices"] = array["usable_devices"]
            part["mkfs_options"] = array["mkfs_options"]
        parts[kind], counts[kind] = part, len(mine)
    out = raid.summary("lustre", parts, lplan["protection_warnings"])
    out["capacity"] = protected_capacity(parts, counts)
    return out
