"""As planned vs as built: what the audit reads on each host and what each difference means.

Pure (no I/O). ``playbooks/audit.yml`` asks :func:`host_request` what to read on a host (the
``audit_facts`` module's arguments, from the host's own view of the plan), renders the planned
files on the controller for their sha256, and hands everything to :func:`audit`, which
classifies each difference:

- ``drift``: the host differs from the plan and site.yml (or a planned unit's restart) fixes it:
  an edited or missing planned file, a stopped service, a GPU power limit or persistence mode
  changed by hand, a Slurm node whose Gres or features are not the plan's, a planned directory
  whose Lustre layout or BeeGFS stripe pattern is not the plan's; and an NCCL_* variable a job
  sees that overrides /etc/nccl.conf (the fix is removing it where it is set, not site.yml);
- ``hardware``: the plan cannot fix it: a GPU missing, an NVLink short, an HCA port down or slow,
  a cable on the wrong leaf or port (fabric_check's comparison), an HCA whose GUID changed;
- ``version_skew``: driver, VBIOS, Fabric Manager or HCA firmware that differs from the compute
  group's majority, or Fabric Manager not on the driver's version.

Each finding carries its severity (``info`` < ``warning`` < ``critical``), the fix and, where the
plan knows it, the cost. A probe whose tool is absent (the lab's containers have no nvidia-smi or
ibstat) is recorded as ``unchecked``, never as a finding, and never faked.

Cost of the audit: :func:`host_request` and the per-host comparison are O(1) in the cluster size
(a host's own files, units, GPUs and ports); :func:`audit` is linear in hosts (the version
majorities are counters, the Slurm view a dict) — docs/performance.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist, lustre_yaml
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig import mig_enabled
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_choice, require

CLASSES: tuple[str, ...] = ("drift", "hardware", "version_skew")
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")
#: audit_fail_on: the lowest severity that makes the audit fail; ``never`` only reports.
FAIL_ON: tuple[str, ...] = (*SEVERITIES, "never")
#: The reason an audit drain carries. Not the health check's ``gpucluster:`` prefix: a clean health
#: check resumes its own drains, and a hardware finding needs a person, not the next health check.
DRAIN_PREFIX = "gpucluster-audit:"

#: Units each host role runs (the roles' tasks: common/main.yml, munge.yml, head/main.yml,
#: slurm/main.yml, slurm/accounting.yml). Lab-only differences: none of these.
SERVICES_ALL: tuple[str, ...] = ("chrony", "prometheus-node-exporter", "gpucluster-nftables")
SERVICES_HEAD: tuple[str, ...] = ("prometheus", "prometheus-alertmanager")
#: Units whose stop stops jobs or the cluster: critical; any other planned unit stopped: warning.
CRITICAL_UNITS: frozenset[str] = frozenset({"munge", "slurmd", "slurmctld", "gpucluster-nftables"})


@dataclass(frozen=True)
class Finding:
    """One difference between a host and its plan."""

    host: str
    cls: str  # one of CLASSES
    check: str  # file, service, firewall, gpu_count, gpu_power, persistence, mig, nvlink, hca, cable, guid, slurm, ...
    subject: str  # what differs: a path, a unit, "GPU 3", "mlx5_2 port 1"
    planned: Any
    found: Any
    severity: str  # one of SEVERITIES
    fix: str
    cost: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _roles(view: Mapping[str, Any], host: str) -> set[str]:
    return set(((view.get("hosts") or {}).get(host) or {}).get("roles") or [])


def _slurm(view: Mapping[str, Any]) -> bool:
    return (view.get("cluster") or {}).get("scheduler", "slurm") == "slurm"


def expected_services(view: Mapping[str, Any], host: str) -> list[str]:
    """The systemd units the roles start on ``host`` (from its roles and the plan)."""
    roles = _roles(view, host)
    units = list(SERVICES_ALL)
    if "head" in roles:
        units += SERVICES_HEAD
    if _slurm(view):
        units.append("munge")  # Slurm's authentication, on every host of a Slurm cluster (common role)
        if roles & {"head", "slurm_backup"}:
            units.append("slurmctld")
        if "head" in roles and (view.get("slurm") or {}).get("accounting"):
            units.append("slurmdbd")
        if "compute" in roles:
            units.append("slurmd")
    gpu = view.get("gpu") or {}
    fm = (gpu.get("bringup") or {}).get("fabric_manager") or {}
    if "compute" in roles and fm.get("required") and not (view.get("cluster") or {}).get("lab"):
        units.append(fm.get("service", "nvidia-fabricmanager.service").removesuffix(".service"))
    return units


def _infiniband_host(view: Mapping[str, Any], host: str) -> bool:
    return host in ((view.get("fabric_host") or {}).get("infiniband_hosts") or [])


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
    roles = _roles(view, host)
    compute = "compute" in roles
    fm = ((view.get("gpu") or {}).get("bringup") or {}).get("fabric_manager") or {}
    cluster = view.get("cluster") or {}
    head = cluster.get("head")
    layouts = planned_layouts(view) if host == layout_client and compute else None
    return {
        "files": [f["dest"] for f in (view.get("files") or {}).get(host) or []],
        "services": expected_services(view, host),
        "gpu": compute,
        "hca": compute and _infiniband_host(view, host),
        "fabric_manager": compute and bool(fm.get("required")),
        "nft_table": (view.get("firewall") or {}).get("table") or "",
        "slurm_nodes": _slurm(view) and host == head,
        "job_env_nodes": (cluster.get("compute_hostlist") or "") if _slurm(view) and host == head else "",
        "layouts": {"kind": layouts["kind"], "mount": layouts["mount"], "dirs": sorted(layouts["dirs"])}
        if layouts
        else None,
    }


def _site_fix(host: str) -> str:
    return f"run site.yml --limit {host}"


def _not_read(probe: Mapping[str, Any] | None, host: str, check: str, unchecked: list[dict[str, str]]) -> bool:
    """True when a probe's state is not ``ok``; an asked probe that could not run (absent, error) is then
    recorded in ``unchecked`` with its reason, a probe never asked (none, ``skipped``) is not."""
    probe = probe or {}
    state = probe.get("state")
    if state == "ok":
        return False
    if state not in (None, "skipped"):
        unchecked.append({"host": host, "check": check, "reason": probe.get("reason") or state})
    return True


def _host_findings(
    plan: Mapping[str, Any],
    host: str,
    facts: Mapping[str, Any],
    planned_files: Mapping[str, str],
    unchecked: list[dict[str, str]],
) -> list[Finding]:
    """A host's drift and hardware findings: O(its files, units, GPUs and ports)."""
    out: list[Finding] = []
    roles = _roles(plan, host)

    for dest, want in sorted(planned_files.items()):
        got = (facts.get("files") or {}).get(dest, "not read")
        if got == want:
            continue
        out.append(Finding(host, "drift", "file", dest, want, got, "warning", _site_fix(host)))

    for unit, state in sorted((facts.get("services") or {}).items()):
        active, enabled = state.get("active"), state.get("enabled")
        severity = "critical" if unit in CRITICAL_UNITS else "warning"
        if active != "active":
            cost = "no jobs run on this node" if unit in ("slurmd", "munge") else None
            out.append(
                Finding(
                    host,
                    "drift",
                    "service",
                    unit,
                    "active",
                    active,
                    severity,
                    f"{_site_fix(host)} (starts {unit})",
                    cost,
                )
            )
        elif enabled not in ("enabled", "static", "enabled-runtime", "alias", "indirect", "generated"):
            out.append(
                Finding(
                    host, "drift", "service", unit, "enabled", enabled, "warning", f"{_site_fix(host)} (enables {unit})"
                )
            )

    fw = facts.get("firewall") or {}
    if not _not_read(fw, host, "firewall", unchecked) and not fw.get("table_loaded"):
        table = (plan.get("firewall") or {}).get("table")
        out.append(
            Finding(
                host,
                "drift",
                "firewall",
                f"nftables table inet {table}",
                "loaded",
                "not loaded",
                "critical",
                f"{_site_fix(host)} (starts gpucluster-nftables)",
                "the node's planned ports are open to every network",
            )
        )

    if "compute" in roles:
        _not_read(facts.get("fabric_manager"), host, "fabric_manager", unchecked)
        out += _gpu_findings(plan, host, facts.get("gpu") or {}, unchecked)
        if _infiniband_host(plan, host):
            out += _hca_findings(plan, host, facts.get("hca") or {}, unchecked)
    return out


def _gpu_findings(
    plan: Mapping[str, Any], host: str, gpu: Mapping[str, Any], unchecked: list[dict[str, str]]
) -> list[Finding]:
    out: list[Finding] = []
    if _not_read(gpu or {"state": "not read"}, host, "gpu", unchecked):
        return out
    cluster = plan.get("cluster") or {}
    gplan = plan.get("gpu") or {}
    clocks = gplan.get("clocks") or {}
    bringup = gplan.get("bringup") or {}
    gpus = list(gpu.get("gpus") or [])
    want_count = int(cluster.get("gpus_per_node") or 0)
    if len(gpus) < want_count:
        out.append(
            Finding(
                host,
                "hardware",
                "gpu_count",
                "GPUs",
                want_count,
                len(gpus),
                "critical",
                f"drain {host}, reseat or replace the missing GPU (nvidia-smi lists {len(gpus)})",
                f"{host} offers {len(gpus)} of {want_count} GPUs; Slurm still schedules {want_count} on it",
            )
        )
    power = clocks.get("power_limit_w")
    applies = " ".join(clocks.get("apply_args") or [])
    clocks_fix = f"systemctl restart gpucluster-gpu-clocks on {host} (re-applies {applies})"
    rack = plan.get("power") or {}
    for g in gpus:
        subject = f"GPU {g.get('index')}"
        got = g.get("power_limit_w")
        if power is not None and got is not None and abs(float(got) - float(power)) > 0.5:
            delta = float(got) - float(power)
            out.append(
                Finding(
                    host,
                    "drift",
                    "gpu_power",
                    subject,
                    power,
                    got,
                    "warning",
                    clocks_fix,
                    f"{delta:+g} W at full load against the plan's rack power "
                    f"({rack.get('rack_kw')} kW of {rack.get('rack_budget_kw')} kW)",
                )
            )
        want_pm, got_pm = clocks.get("persistence"), g.get("persistence")
        if want_pm is not None and got_pm is not None and bool(got_pm) != bool(want_pm):
            out.append(Finding(host, "drift", "persistence", subject, want_pm, got_pm, "warning", clocks_fix))
        want_mig = mig_enabled(gplan.get("mig"), host, int(g.get("index") or 0))  # per GPU: a layout may mix
        if g.get("mig") is not None and bool(g["mig"]) != want_mig:
            out.append(
                Finding(
                    host,
                    "drift",
                    "mig",
                    subject,
                    want_mig,
                    g["mig"],
                    "critical",
                    f"drain {host}, then systemctl restart gpucluster-mig on it (or run site.yml --limit {host})",
                    "jobs see MIG slices instead of whole GPUs"
                    if g["mig"]
                    else "jobs see whole GPUs instead of the planned MIG slices",
                )
            )
    links = bringup.get("nvlink_links")
    nv_probe = {"state": gpu.get("nvlink_state", "ok"), "reason": gpu.get("nvlink_reason")}
    if bringup.get("nvswitch") and links and not _not_read(nv_probe, host, "nvlink", unchecked):
        for nv in _nvlink_rows(gpu.get("nvlink") or [], want_count):
            if int(nv.get("active", 0)) < int(links):
                subject = f"GPU {nv.get('index')}"
                fix = (
                    f"drain {host}; reseat or replace the GPU board ({subject}: {nv.get('active')} of {links} NVLinks)"
                )
                if nv.get("listed") is False:
                    fix = (
                        f"drain {host}; nvidia-smi nvlink -s lists no NVLink of {subject}: check "
                        f"nvidia-fabricmanager and the NVSwitch board (nvidia-smi -q: Fabric State), then reseat or "
                        "replace the GPU board"
                    )
                out.append(
                    Finding(
                        host,
                        "hardware",
                        "nvlink",
                        subject,
                        links,
                        nv.get("active"),
                        "critical",
                        fix,
                        f"{subject} at {int(nv.get('active', 0))}/{links} of its NVLink bandwidth; "
                        "NCCL's intra-node rings run at the slowest GPU's",
                    )
                )
    return out


def _nvlink_rows(listed: list[Mapping[str, Any]], want_count: int) -> list[Mapping[str, Any]]:
    """The NVLink rows of every planned GPU: one that ``nvidia-smi nvlink -s`` does not list counts as 0
    active links. The tool prints nothing for a GPU whose links are all down (seen on a real H100 without
    its NVSwitch board, tests/data/nvidia-smi/h100-sxm-580/), so comparing only the listed GPUs would
    pass an HGX node whose whole NVLink fabric is down; the health check counts the same way
    ("nvlink 0/8 gpus listed")."""
    rows = {int(nv.get("index", -1)): nv for nv in listed}
    missing = [{"index": i, "links": 0, "active": 0, "listed": False} for i in range(want_count) if i not in rows]
    return sorted([*rows.values(), *missing], key=lambda nv: int(nv.get("index", -1)))


def _hca_findings(
    plan: Mapping[str, Any], host: str, hca: Mapping[str, Any], unchecked: list[dict[str, str]]
) -> list[Finding]:
    out: list[Finding] = []
    if _not_read(hca or {"state": "not read"}, host, "hca", unchecked):
        return out
    fabric = plan.get("fabric") or {}
    rails = list((plan.get("fabric_host") or {}).get("rails") or [])
    want_rate = float(fabric.get("link_rate_gbps") or 0)
    ports = {(p.get("ca"), int(p.get("port", 1))): p for p in hca.get("ports") or []}
    floor = (plan.get("validation") or {}).get("allreduce_inter_node_busbw_gbs")
    n = len(rails)

    def rail_cost(lost: int) -> str:
        share = f"{n - lost}/{n}" if n else "less"
        text = f"jobs on {host} keep {share} of the planned rails' bandwidth"
        if floor and n:
            text += f": inter-node all-reduce near {floor * (n - lost) / n:g} GB/s, not the floor {floor:g} GB/s"
        return text

    for rail in rails:
        key = (rail.get("hca"), 1)
        subject = f"{rail.get('hca')} port 1 (rail {rail.get('rail')})"
        port = ports.get(key)
        if port is None:
            out.append(
                Finding(
                    host,
                    "hardware",
                    "hca",
                    subject,
                    "present",
                    "absent",
                    "critical",
                    f"drain {host}; check or replace {rail.get('hca')} (ibstat does not list it)",
                    rail_cost(1),
                )
            )
            continue
        state = str(port.get("state", ""))
        if state.lower() != "active":
            out.append(
                Finding(
                    host,
                    "hardware",
                    "hca",
                    subject,
                    "Active",
                    state,
                    "critical",
                    f"check the cable of {host} {rail.get('hca')} and its leaf port "
                    f"(physical state {port.get('physical_state')})",
                    rail_cost(1),
                )
            )
        elif want_rate and port.get("rate_gbps") is not None and float(port["rate_gbps"]) < want_rate - 1e-9:
            out.append(
                Finding(
                    host,
                    "hardware",
                    "link_rate",
                    subject,
                    want_rate,
                    port["rate_gbps"],
                    "warning",
                    f"replace the cable or transceiver of {host} {rail.get('hca')} "
                    f"(trained at {port['rate_gbps']:g} Gb/s)",
                    f"rail {rail.get('rail')} of {host} at {float(port['rate_gbps']) / want_rate:.0%} "
                    "of its planned rate",
                )
            )
    return out


def cabling_findings(report: Mapping[str, Any] | None) -> list[Finding]:
    """Hardware findings from fabric_check's comparison (module_utils/ibfabric.py ``compare``)."""
    if not report:
        return []
    out: list[Finding] = []

    def end(e: Mapping[str, Any]) -> str:
        return f"{e.get('leaf')}:{e.get('port')}" if e.get("leaf") else "not discovered"

    for e in report.get("wrong_leaf", []) + report.get("wrong_port", []):
        subject = f"{e['hca']} (rail {e['rail']})"
        out.append(
            Finding(
                e["host"],
                "hardware",
                "cable",
                subject,
                end(e["expected"]),
                end(e["actual"]),
                "critical",
                f"move the cable at {end(e['actual'])} to {end(e['expected'])}",
                f"rail {e['rail']} of {e['host']} is off its planned leaf: NCCL's rail-local traffic crosses "
                "spines or does not flow"
                if e.get("actual_leaf_rail") not in (None, e["rail"])
                else None,
            )
        )
    for e in report.get("missing_hcas", []):
        out.append(
            Finding(
                e["host"],
                "hardware",
                "cable",
                f"{e['hca']} (rail {e['rail']})",
                end(e["expected"]),
                "not discovered",
                "critical",
                f"check the cable at {end(e['expected'])}; a replaced HCA needs its node description "
                f"'{e['host']} {e['hca']}' (rdma-ndd)",
                f"rail {e['rail']} of {e['host']} carries no traffic",
            )
        )
    for e in report.get("extra_hcas", []):
        out.append(
            Finding(
                "fabric",
                "hardware",
                "cable",
                str(e["node"]),
                "not in the plan",
                end(e["actual"]),
                "warning",
                f"name the HCA on {end(e['actual'])} '<host> <hca>' (rdma-ndd) or unplug it",
            )
        )
    for e in report.get("missing_uplinks", []):
        a, b = f"{e['a']}:{e['a_port']}", f"{e['b']}:{e['b_port']}"
        out.append(
            Finding(
                "fabric",
                "hardware",
                "cable",
                f"uplink {a} - {b}",
                "cabled",
                "not discovered",
                "critical",
                f"cable {a} to {b}",
                "less bisection bandwidth between the leaves",
            )
        )
    for e in report.get("slow_links", []):
        a, b = f"{e['a']}:{e['a_port']}", f"{e['b']}:{e['b_port']}"
        out.append(
            Finding(
                "fabric",
                "hardware",
                "link_rate",
                f"link {a} - {b}",
                e["expected_rate_gbps"],
                e["rate_gbps"],
                "warning",
                f"replace the cable or transceiver between {a} and {b}",
            )
        )
    return out


def guid_findings(hosts: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[Finding]:
    """HCA ports whose GUID changed since the baseline (the last audit's ``guids``): a replaced HCA."""
    out: list[Finding] = []
    if not baseline:
        return out
    for host, before in sorted(baseline.items()):
        now = guids_of({host: hosts.get(host) or {}}).get(host) or {}
        for port, old in sorted((before or {}).items()):
            new = now.get(port)
            if new and old and new != old:
                out.append(
                    Finding(
                        host,
                        "hardware",
                        "guid",
                        port,
                        old,
                        new,
                        "info",
                        "a replaced HCA: update anything keyed on its GUID (opensm partitions, UFM, switch ACLs); "
                        "check its node description and firmware",
                    )
                )
    return out


def guids_of(hosts: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """{host: {"mlx5_0/1": port GUID}} of the hosts whose ibstat was read."""
    out: dict[str, dict[str, str]] = {}
    for host, facts in hosts.items():
        hca = (facts or {}).get("hca") or {}
        if hca.get("state") == "ok":
            out[host] = {f"{p['ca']}/{p['port']}": p["port_guid"] for p in hca.get("ports") or [] if p.get("port_guid")}
    return out


def _majority(values: Mapping[str, Any]) -> Any:
    """The most common value (ties: the smallest as text, so the answer does not depend on order)."""
    counts = Counter(values.values())
    top = max(counts.values())
    return sorted((v for v, c in counts.items() if c == top), key=str)[0]


def version_findings(plan: Mapping[str, Any], hosts: Mapping[str, Any]) -> list[Finding]:
    """Version skew across the compute group: driver, VBIOS, Fabric Manager, HCA firmware (linear in hosts)."""
    compute = [h for h in hosts if "compute" in _roles(plan, h)]
    seen: dict[str, dict[str, Any]] = {"driver": {}, "vbios": {}, "fabric_manager": {}, "hca_firmware": {}}
    for h in compute:
        facts = hosts.get(h) or {}
        gpu = facts.get("gpu") or {}
        if gpu.get("state") == "ok" and gpu.get("gpus"):
            for key, field in (("driver", "driver_version"), ("vbios", "vbios_version")):
                vals = sorted({str(g.get(field)) for g in gpu["gpus"] if g.get(field)})
                if vals:
                    seen[key][h] = ",".join(vals)
        fm = facts.get("fabric_manager") or {}
        if fm.get("state") == "ok" and fm.get("version"):
            seen["fabric_manager"][h] = fm["version"]
        hca = facts.get("hca") or {}
        if hca.get("state") == "ok":
            fws = sorted({str(p.get("firmware")) for p in hca.get("ports") or [] if p.get("firmware")})
            if fws:
                seen["hca_firmware"][h] = ",".join(fws)
    out: list[Finding] = []
    fixes = {
        "driver": "install the compute group's driver {want} on {host} (drain first)",
        "vbios": "flash the GPUs of {host} to VBIOS {want} (vendor firmware update, drained)",
        "fabric_manager": "install Fabric Manager {want} on {host} (it must match the driver)",
        "hca_firmware": "update the HCA firmware of {host} to {want} (mlxfwreset/mstflint, drained)",
    }
    for key, values in seen.items():
        if len(set(values.values())) <= 1:
            continue
        want = _majority(values)
        for h, got in sorted(values.items()):
            if got != want:
                out.append(
                    Finding(
                        h,
                        "version_skew",
                        key,
                        key.replace("_", " "),
                        want,
                        got,
                        "critical" if key == "driver" else "warning",
                        fixes[key].format(want=want, host=h),
                        "NCCL across nodes on different drivers is untested; a job spanning them may hang or slow down"
                        if key == "driver"
                        else None,
                    )
                )
    # Fabric Manager must be the driver's exact version (docs/sources.md [F2]); else CUDA error 802 ([F3])
    branch = (((plan.get("gpu") or {}).get("bringup") or {}).get("software") or {}).get("driver_branch")
    for h in compute:
        drv, fmv = seen["driver"].get(h), seen["fabric_manager"].get(h)
        if drv and fmv and fmv not in drv.split(","):
            out.append(
                Finding(
                    h,
                    "version_skew",
                    "fabric_manager",
                    "Fabric Manager vs driver",
                    drv,
                    fmv,
                    "critical",
                    f"install Fabric Manager {drv} on {h}",
                    "Fabric Manager off the driver's version does not start: CUDA fails with error 802",
                )
            )
        if branch and drv and not all(v.startswith(f"{branch}.") for v in drv.split(",")):
            out.append(
                Finding(
                    h,
                    "version_skew",
                    "driver",
                    "driver branch",
                    branch,
                    drv,
                    "critical",
                    f"install the planned driver branch {branch} on {h}",
                )
            )
    return out


def _gres_set(text: str | None) -> set[str]:
    """``gpu:h100:8(S:0-1),shard:4`` -> {"gpu:h100:8", "shard:4"}."""
    if not text:
        return set()
    out = set()
    for item in text.split(","):
        item = item.split("(", 1)[0].strip()
        if item:
            out.add(item)
    return out


def slurm_findings(
    plan: Mapping[str, Any], slurm: Mapping[str, Any] | None, unchecked: list[dict[str, str]]
) -> list[Finding]:
    """Slurm's view (``scontrol -o show node`` on the head) against the plan's slurm.conf node lines
    (``slurm.nodes``: a host list, its Gres and Features each)."""
    if not _slurm(plan) or _not_read(slurm, str((plan.get("cluster") or {}).get("head")), "slurm", unchecked):
        return []
    nodes = slurm.get("nodes") or {}
    out: list[Finding] = []
    head = (plan.get("cluster") or {}).get("head")
    for line in (plan.get("slurm") or {}).get("nodes") or []:
        want_gres = _gres_set(line.get("gres"))
        want_features = set(filter(None, line.get("features") or []))
        for node in hostlist.expand(line["nodes"]):
            got = nodes.get(node)
            if got is None:
                out.append(
                    Finding(
                        node,
                        "drift",
                        "slurm",
                        "node",
                        "known to slurmctld",
                        "unknown",
                        "critical",
                        f"run site.yml --limit {node},{head}",
                        "no jobs run on this node",
                    )
                )
                continue
            gres = _gres_set(got.get("gres"))
            if gres != want_gres:
                out.append(
                    Finding(
                        node,
                        "drift",
                        "slurm",
                        "Gres",
                        ",".join(sorted(want_gres)),
                        ",".join(sorted(gres)) or None,
                        "critical",
                        _site_fix(node) + " (slurm.conf, gres.conf; restarts slurmd under a drain)",
                        "jobs asking for the node's GPUs are refused or get the wrong count",
                    )
                )
            features = set(filter(None, (got.get("features") or "").split(",")))
            if features != want_features:
                out.append(
                    Finding(
                        node,
                        "drift",
                        "slurm",
                        "features",
                        ",".join(sorted(want_features)),
                        ",".join(sorted(features)),
                        "warning",
                        _site_fix(node) + " (slurm.conf)",
                        "jobs that ask for the planned features skip this node",
                    )
                )
    return out


def job_env_findings(
    plan: Mapping[str, Any], head: str | None, job_env: Mapping[str, Any] | None, unchecked: list[dict[str, str]]
) -> list[Finding]:
    """The NCCL_* variables a job sees on each compute node against the plan's /etc/nccl.conf.

    NCCL reads /etc/nccl.conf itself, and a variable set in the job's environment wins over it
    (docs/sources.md [N1]); so a job-visible NCCL_* that differs from the plan's value, or that the plan
    does not set at all (NCCL's default, e.g. the intra-node ones the plan leaves unset), is drift. Its
    fix is removing the variable where the job environment gets it (site.yml does not manage
    /etc/environment, /etc/profile.d or a TaskProlog). Linear in the compute nodes."""
    if not _slurm(plan) or _not_read(job_env, str(head), "nccl_env", unchecked):
        return []
    conf = dict((plan.get("nccl") or {}).get("conf") or {})
    left_unset = set(((plan.get("nccl") or {}).get("intra_node") or {}).get("unset") or [])
    seen = (job_env or {}).get("nodes") or {}
    out: list[Finding] = []
    for node in sorted(h for h in (plan.get("hosts") or {}) if "compute" in _roles(plan, h)):
        env = seen.get(node)
        if env is None:
            unchecked.append({"host": node, "check": "nccl_env", "reason": "the audit's srun printed nothing for it"})
            continue
        for name, value in sorted(env.items()):
            want = conf.get(name)
            if want is not None and str(want) == value:
                continue
            if want is not None:
                planned: str = str(want)
                cost = f"jobs on {node} run NCCL with {name}={value}, not /etc/nccl.conf's {want}"
            else:
                planned = "unset (NCCL's default)"
                cost = f"jobs on {node} run NCCL with {name}={value}" + (
                    "; the plan leaves it to NCCL on this GPU board" if name in left_unset else ""
                )
            out.append(
                Finding(
                    node,
                    "drift",
                    "nccl_env",
                    name,
                    planned,
                    value,
                    "warning",
                    f"remove {name} from the job environment on {node} (/etc/environment, /etc/profile.d, "
                    "Slurm's TaskProlog, a module file): /etc/nccl.conf holds the plan's NCCL settings",
                    cost,
                )
            )
    return out


def _layout_diff(kind: str, got: Any, want: Any) -> list[str]:
    if kind == "lustre":
        return lustre_yaml.differences(got, want)
    got = got or {}
    keys = ("chunksize", "numtargets")
    return [f"{key} {got.get(key)}, the plan has {want[key]}" for key in keys if got.get(key) != want[key]]


def layout_findings(
    plan: Mapping[str, Any], client: str | None, layouts: Mapping[str, Any] | None, unchecked: list[dict[str, str]]
) -> list[Finding]:
    """The planned directories' Lustre layouts or BeeGFS stripe patterns, read on one client.

    A layout off the plan affects only the files created after it changed (both file systems keep a
    file's layout), so it is a warning. Lustre: the storage role's lustre_layout task sets it again
    (site.yml); BeeGFS: the compute role applies the patterns only when the plan's change (it records
    the last applied), so the fix is the plan's beegfs-ctl command."""
    planned = planned_layouts(plan)
    if planned is None or client is None or _not_read(layouts, client, "layout", unchecked):
        return []
    kind = planned["kind"]
    out: list[Finding] = []
    for path, item in sorted(planned["dirs"].items()):
        got = ((layouts or {}).get("dirs") or {}).get(path) or {"state": "error", "reason": "not read"}
        if got.get("state") == "missing":
            out.append(
                Finding(
                    client,
                    "drift",
                    "layout",
                    path,
                    "a directory",
                    "missing",
                    "warning",
                    _site_fix(client) + (" (creates it with its layout)" if kind == "lustre" else ""),
                    f"the planned {item['role']} directory does not exist",
                )
            )
            continue
        if _not_read(got, client, f"layout {path}", unchecked):
            continue
        why = _layout_diff(kind, got.get("layout"), item["want"])
        if not why:
            continue
        fix = (
            f"{_site_fix(client)} (lustre_layout sets: {item['command']})"
            if kind == "lustre"
            else f"on {client}: {item['command']}"
        )
        out.append(
            Finding(
                client,
                "drift",
                "layout",
                path,
                item["command"],
                "; ".join(why),
                "warning",
                fix,
                f"new files in the {item['role']} directory get another striping than planned "
                "(existing files keep theirs)",
            )
        )
    return out


def drain_list(
    findings: Iterable[Finding], slurm: Mapping[str, Any] | None, compute: Iterable[str]
) -> list[dict[str, str]]:
    """Compute nodes to drain for their ``hardware`` findings, with the reason to set.

    Never a node already drained by someone else (an operator, the health check): only a node not
    drained, or drained by an earlier audit (its reason is refreshed)."""
    nodes = (slurm or {}).get("nodes") or {}
    compute_set = set(compute)
    by_host: dict[str, list[Finding]] = {}
    for f in findings:
        if f.cls == "hardware" and f.host in compute_set:
            by_host.setdefault(f.host, []).append(f)
    out = []
    for host, items in sorted(by_host.items()):
        node = nodes.get(host)
        if node is None:
            continue
        state, reason = str(node.get("state") or "").upper(), str(node.get("reason") or "")
        if "DRAIN" in state and not reason.startswith(DRAIN_PREFIX):
            continue
        what = ", ".join(f"{f.check} {f.subject}" for f in items[:3]) + (
            f" +{len(items) - 3}" if len(items) > 3 else ""
        )
        out.append({"node": host, "reason": f"{DRAIN_PREFIX} hardware: {what}"})
    return out


def audit(
    plan: Mapping[str, Any],
    collected: Mapping[str, Any],
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Classify every difference between the collected facts and the plan.

    ``collected``: ``hosts`` ({host: audit_facts' ``audit``}), ``planned_files`` ({host: {dest: sha256}}),
    optional ``fabric`` (fabric_check's report), ``unreachable`` (hosts not read) and ``baseline``
    (the last audit's ``guids``). ``settings``: ``fail_on`` (audit_fail_on) and ``drain_hardware``.
    """
    settings = dict(settings or {})
    fail_on = check_choice(settings.get("fail_on", "warning"), "audit_fail_on", FAIL_ON)
    drain = settings.get("drain_hardware", False)
    require(isinstance(drain, bool), "audit_drain_hardware", drain, "true or false")
    hosts = dict(collected.get("hosts") or {})
    planned = dict(collected.get("planned_files") or {})
    unknown = sorted(set(hosts) - set(plan.get("hosts") or {}))
    require(not unknown, "audit hosts", unknown, "hosts of the plan")
    unchecked: list[dict[str, str]] = []
    findings: list[Finding] = []
    slurm = job_env = layouts = None
    head = layout_client = None
    for host in sorted(hosts):
        facts = hosts[host] or {}
        if (facts.get("slurm") or {}).get("state") not in (None, "skipped"):
            slurm = facts["slurm"]
        if (facts.get("job_env") or {}).get("state") not in (None, "skipped"):
            job_env, head = facts["job_env"], host
        if (facts.get("layouts") or {}).get("state") not in (None, "skipped"):
            layouts, layout_client = facts["layouts"], host
        findings += _host_findings(plan, host, facts, planned.get(host) or {}, unchecked)
    findings += version_findings(plan, hosts)
    findings += slurm_findings(plan, slurm, unchecked)
    findings += job_env_findings(plan, head, job_env, unchecked)
    findings += layout_findings(plan, layout_client, layouts, unchecked)
    findings += cabling_findings(collected.get("fabric"))
    findings += guid_findings(hosts, collected.get("baseline"))
    findings.sort(key=lambda f: (f.host, CLASSES.index(f.cls), -SEVERITIES.index(f.severity), f.check, f.subject))
    unreachable = sorted(collected.get("unreachable") or [])
    counts = {c: sum(1 for f in findings if f.cls == c) for c in CLASSES}
    by_severity = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    threshold = None if fail_on == "never" else SEVERITIES.index(fail_on)
    failing = [] if threshold is None else [f for f in findings if SEVERITIES.index(f.severity) >= threshold]
    compute = [h for h in hosts if "compute" in _roles(plan, h)]
    return {
        "schema": 1,
        "cluster": (plan.get("cluster") or {}).get("name"),
        "hosts_audited": len(hosts),
        "findings": [f.as_dict() for f in findings],
        "counts": counts,
        "by_severity": by_severity,
        "unchecked": sorted(unchecked, key=lambda u: (u["host"], u["check"])),
        "unreachable": unreachable,
        "fail_on": fail_on,
        "failed": bool(failing) or (bool(unreachable) and fail_on != "never"),
        "drain": drain_list(findings, slurm, compute) if drain else [],
        "guids": guids_of(hosts),
    }


def report_markdown(result: Mapping[str, Any]) -> str:
    """The readable report: one line per finding, grouped by host and class, with the fix."""
    lines = [f"# Audit of {result.get('cluster')}: as planned vs as built", ""]
    findings = result.get("findings") or []
    counts = result.get("counts") or {}
    lines.append(
        f"{result.get('hosts_audited', 0)} host{'' if result.get('hosts_audited') == 1 else 's'} audited; "
        f"{len(findings)} finding"
        f"{'' if len(findings) == 1 else 's'} ({', '.join(f'{k} {v}' for k, v in counts.items())}); "
        f"fails on {result.get('fail_on')} and above: **{'FAILED' if result.get('failed') else 'passed'}**."
    )
    lines.append("")
    if result.get("unreachable"):
        lines += ["## Not reached", "", *[f"- {h}: not audited (unreachable)" for h in result["unreachable"]], ""]
    if not findings:
        lines += ["No host differs from the plan.", ""]
    host = None
    cls = None
    for f in findings:
        if f["host"] != host:
            host, cls = f["host"], None
            lines += [f"## {host}", ""]
        if f["cls"] != cls:
            cls = f["cls"]
            lines += [f"### {cls.replace('_', ' ')}", ""]
        cost = f"; cost: {f['cost']}" if f.get("cost") else ""
        lines.append(
            f"- **{f['severity']}** {f['check']} `{f['subject']}`: planned `{f['planned']}`, found `{f['found']}`"
            f" — fix: {f['fix']}{cost}"
        )
    if findings:
        lines.append("")
    if result.get("drain"):
        lines += ["## Drained", "", *[f"- {d['node']}: {d['reason']}" for d in result["drain"]], ""]
    unchecked = result.get("unchecked") or []
    if unchecked:
        lines += ["## Not checked (tool absent or not readable)", ""]
        by: dict[tuple[str, str], list[str]] = {}
        for u in unchecked:
            by.setdefault((u["check"], u["reason"]), []).append(u["host"])
        for (check, reason), hs in sorted(by.items()):
            lines.append(f"- {check} on {hostlist.compress(hs)}: {reason}")
        lines.append("")
    return "\n".join(lines)


__all__ = [
    "CLASSES",
    "DRAIN_PREFIX",
    "FAIL_ON",
    "SEVERITIES",
    "Finding",
    "audit",
    "cabling_findings",
    "drain_list",
    "expected_services",
    "guid_findings",
    "host_request",
    "job_env_findings",
    "layout_findings",
    "planned_layouts",
    "report_markdown",
    "slurm_findings",
    "version_findings",
]
