"""A compute node's GPUs and HCAs against the plan: count, power limit, persistence, MIG mode, NVLinks
(nvidia-smi), and each planned rail's HCA port state and rate (ibstat). O(its GPUs and ports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import Finding, Unchecked, not_read
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig import mig_enabled


def gpu_findings(plan: Mapping[str, Any], host: str, gpu: Mapping[str, Any], unchecked: Unchecked) -> list[Finding]:
    """The GPUs nvidia-smi lists on ``host``: too few (hardware), a setting off the plan (drift), an
    NVLink short (hardware)."""
    if not_read(gpu or {"state": "not read"}, host, "gpu", unchecked):
        return []
    want_count = int((plan.get("cluster") or {}).get("gpus_per_node") or 0)
    gpus = list(gpu.get("gpus") or [])
    out = _gpu_count_findings(host, len(gpus), want_count)
    for g in gpus:
        out += _gpu_setting_findings(plan, host, g)
    return out + _nvlink_findings(plan, host, gpu, want_count, unchecked)


def _gpu_count_findings(host: str, count: int, want_count: int) -> list[Finding]:
    if count >= want_count:
        return []
    return [
        Finding(
            host,
            "hardware",
            "gpu_count",
            "GPUs",
            want_count,
            count,
            "critical",
            f"drain {host}, reseat or replace the missing GPU (nvidia-smi lists {count})",
            f"{host} offers {count} of {want_count} GPUs; Slurm still schedules {want_count} on it",
        )
    ]


def _gpu_setting_findings(plan: Mapping[str, Any], host: str, g: Mapping[str, Any]) -> list[Finding]:
    """One GPU's power limit and persistence mode (the clocks unit applies them) and its MIG mode."""
    gplan = plan.get("gpu") or {}
    clocks = gplan.get("clocks") or {}
    applies = " ".join(clocks.get("apply_args") or [])
    clocks_fix = f"systemctl restart gpucluster-gpu-clocks on {host} (re-applies {applies})"
    rack = plan.get("power") or {}
    subject = f"GPU {g.get('index')}"
    out: list[Finding] = []
    power, got = clocks.get("power_limit_w"), g.get("power_limit_w")
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
    return out


def _nvlink_findings(
    plan: Mapping[str, Any], host: str, gpu: Mapping[str, Any], want_count: int, unchecked: Unchecked
) -> list[Finding]:
    """Each planned GPU with fewer active NVLinks than planned, on NVSwitch boards."""
    bringup = (plan.get("gpu") or {}).get("bringup") or {}
    links = bringup.get("nvlink_links")
    nv_probe = {"state": gpu.get("nvlink_state", "ok"), "reason": gpu.get("nvlink_reason")}
    if not bringup.get("nvswitch") or not links or not_read(nv_probe, host, "nvlink", unchecked):
        return []
    out: list[Finding] = []
    for nv in _nvlink_rows(gpu.get("nvlink") or [], want_count):
        if int(nv.get("active", 0)) >= int(links):
            continue
        subject = f"GPU {nv.get('index')}"
        fix = f"drain {host}; reseat or replace the GPU board ({subject}: {nv.get('active')} of {links} NVLinks)"
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


def _rail_cost(plan: Mapping[str, Any], host: str, lost: int) -> str:
    """What ``lost`` rails of ``host`` cost: the share of rails left and the all-reduce figure it implies."""
    n = len((plan.get("fabric_host") or {}).get("rails") or [])
    floor = (plan.get("validation") or {}).get("allreduce_inter_node_busbw_gbs")
    share = f"{n - lost}/{n}" if n else "less"
    text = f"jobs on {host} keep {share} of the planned rails' bandwidth"
    if floor and n:
        text += f": inter-node all-reduce near {floor * (n - lost) / n:g} GB/s, not the floor {floor:g} GB/s"
    return text


def hca_findings(plan: Mapping[str, Any], host: str, hca: Mapping[str, Any], unchecked: Unchecked) -> list[Finding]:
    """Each planned rail's HCA port (port 1) that ibstat does not list, is not Active, or trained slower
    than the fabric's link rate."""
    if not_read(hca or {"state": "not read"}, host, "hca", unchecked):
        return []
    want_rate = float((plan.get("fabric") or {}).get("link_rate_gbps") or 0)
    ports = {(p.get("ca"), int(p.get("port", 1))): p for p in hca.get("ports") or []}
    out: list[Finding] = []
    for rail in (plan.get("fabric_host") or {}).get("rails") or []:
        found = _rail_port_finding(plan, host, rail, ports.get((rail.get("hca"), 1)), want_rate)
        if found is not None:
            out.append(found)
    return out


def _rail_port_finding(
    plan: Mapping[str, Any], host: str, rail: Mapping[str, Any], port: Mapping[str, Any] | None, want_rate: float
) -> Finding | None:
    subject = f"{rail.get('hca')} port 1 (rail {rail.get('rail')})"
    if port is None:
        return Finding(
            host,
            "hardware",
            "hca",
            subject,
            "present",
            "absent",
            "critical",
            f"drain {host}; check or replace {rail.get('hca')} (ibstat does not list it)",
            _rail_cost(plan, host, 1),
        )
    state = str(port.get("state", ""))
    if state.lower() != "active":
        return Finding(
            host,
            "hardware",
            "hca",
            subject,
            "Active",
            state,
            "critical",
            f"check the cable of {host} {rail.get('hca')} and its leaf port "
            f"(physical state {port.get('physical_state')})",
            _rail_cost(plan, host, 1),
        )
    if want_rate and port.get("rate_gbps") is not None and float(port["rate_gbps"]) < want_rate - 1e-9:
        return Finding(
            host,
            "hardware",
            "link_rate",
            subject,
            want_rate,
            port["rate_gbps"],
            "warning",
            f"replace the cable or transceiver of {host} {rail.get('hca')} (trained at {port['rate_gbps']:g} Gb/s)",
            f"rail {rail.get('rail')} of {host} at {float(port['rate_gbps']) / want_rate:.0%} of its planned rate",
        )
    return None


__all__ = ["gpu_findings", "hca_findings"]
