"""What the audit asks each host: the ``audit_facts`` arguments, from the host's own view of the plan.

``playbooks/audit.yml`` asks :func:`host_request` what to read on a host: its planned files, the units
its roles start (the plan's ``services``, plan/services.py), which probes apply (GPUs, HCAs, Fabric
Manager, the firewall table, Slurm's view and the job environment on the head, the planned directories'
layouts on one client). O(1) in the cluster size: a host's own files and units, a hostlist for the srun.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import lustre_yaml
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import (
    infiniband_host,
    roles_of,
    slurm_planned,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.services import PlannedUnit


def planned_units(view: Mapping[str, Any], host: str) -> list[PlannedUnit]:
    """The units the roles start on ``host`` (the plan's ``services[host]``: unit, role, switch)."""
    services = view.get("services")
    if not isinstance(services, Mapping):
        raise PlanError("plan services", services, "a plan of this collection (make plan)")
    return list(services.get(host) or [])


def expected_services(view: Mapping[str, Any], host: str) -> list[str]:
    """The names of the systemd units the roles start on ``host``, in the plan's order."""
    return [str(unit["unit"]) for unit in planned_units(view, host)]


def planned_layouts(view: Mapping[str, Any]) -> dict[str, Any] | None:
    """The planned directories' layouts: ``{kind, mount, dirs: {path: {role, want, command}}}``; None
    when the plan sets none (no Lustre or BeeGFS). ``want``: the Lustre components (lustre_yaml's
    normalized form) or the BeeGFS pattern ({chunksize, numtargets})."""
    storage = view.get("storage") or {}
    kind = storage.get("type")
    if kind == "lustre":
        lustre = storage.get("lustre") or {}
        dirs = {
            layout["path"]: {
                "role": role,
                "want": lustre_yaml.normalize_wanted(layout["components"]),
                "command": f"lfs setstripe {layout['setstripe_args']} {layout['path']}",
            }
            for role, layout in sorted((lustre.get("layouts") or {}).items())
        }
        return {"kind": "lustre", "mount": lustre.get("mount_point"), "dirs": dirs} if dirs else None
    if kind == "beegfs":
        beegfs = storage.get("beegfs") or {}
        dirs = {
            pattern["path"]: {
                "role": role,
                "want": {"chunksize": pattern["chunksize"], "numtargets": pattern["numtargets"]},
                "command": pattern["command"],
            }
            for role, pattern in sorted((beegfs.get("patterns") or {}).items())
        }
        return {"kind": "beegfs", "mount": beegfs.get("mount_point"), "dirs": dirs} if dirs else None
    return None


def host_request(view: Mapping[str, Any], host: str, layout_client: str | None = None) -> dict[str, Any]:
    """The ``audit_facts`` arguments for ``host``, from its own view of the plan (host_plan).

    ``layout_client``: the one host that reads the planned directories' layouts (the playbook passes
    the first compute node, a client of the parallel file system); the head reads the job environment
    of every compute node with one srun (a hostlist: O(1) in the cluster size, not a node list)."""
    require(host in (view.get("hosts") or {}), "audit host", host, "a host of the plan")
    roles = roles_of(view, host)
    compute = "compute" in roles
    fm = ((view.get("gpu") or {}).get("bringup") or {}).get("fabric_manager") or {}
    cluster = view.get("cluster") or {}
    head = cluster.get("head")
    layouts = planned_layouts(view) if host == layout_client and compute else None
    return {
        "files": [f["dest"] for f in (view.get("files") or {}).get(host) or []],
        "services": expected_services(view, host),
        "gpu": compute,
        "hca": compute and infiniband_host(view, host),
        "fabric_manager": compute and bool(fm.get("required")),
        "nft_table": (view.get("firewall") or {}).get("table") or "",
        "slurm_nodes": slurm_planned(view) and host == head,
        "job_env_nodes": (cluster.get("compute_hostlist") or "") if slurm_planned(view) and host == head else "",
        "layouts": {"kind": layouts["kind"], "mount": layouts["mount"], "dirs": sorted(layouts["dirs"])}
        if layouts
        else None,
    }


__all__ = ["expected_services", "host_request", "planned_layouts", "planned_units"]
