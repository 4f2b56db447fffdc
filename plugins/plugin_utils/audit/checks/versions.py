"""Version skew across the compute group: driver, VBIOS, Fabric Manager and HCA firmware against the
group's majority, Fabric Manager against the driver, the driver against the planned branch. Linear in
hosts (the majorities are counters)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import Finding, roles_of

#: The fix of a version off the group's majority, per kind.
FIXES: dict[str, str] = {
    "driver": "install the compute group's driver {want} on {host} (drain first)",
    "vbios": "flash the GPUs of {host} to VBIOS {want} (vendor firmware update, drained)",
    "fabric_manager": "install Fabric Manager {want} on {host} (it must match the driver)",
    "hca_firmware": "update the HCA firmware of {host} to {want} (mlxfwreset/mstflint, drained)",
}


def _majority(values: Mapping[str, str]) -> str:
    """The most common value (ties: the smallest as text, so the answer does not depend on order)."""
    counts = Counter(values.values())
    top = max(counts.values())
    return sorted((v for v, c in counts.items() if c == top), key=str)[0]


def versions_seen(hosts: Mapping[str, Any], compute: list[str]) -> dict[str, dict[str, str]]:
    """{kind: {host: versions}} of the compute nodes whose probes were read (several values: joined by ",")."""
    seen: dict[str, dict[str, str]] = {kind: {} for kind in FIXES}
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
    return seen


def _skew_findings(seen: Mapping[str, Mapping[str, str]]) -> list[Finding]:
    """Each node whose version of a kind is not the group's majority."""
    out: list[Finding] = []
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
                        FIXES[key].format(want=want, host=h),
                        "NCCL across nodes on different drivers is untested; a job spanning them may hang or slow down"
                        if key == "driver"
                        else None,
                    )
                )
    return out


def _driver_match_findings(
    plan: Mapping[str, Any], compute: list[str], seen: Mapping[str, Mapping[str, str]]
) -> list[Finding]:
    """Fabric Manager must be the driver's exact version (docs/sources.md [F2]; else CUDA error 802, [F3]);
    the driver must be on the planned branch when the plan sets one."""
    branch = (((plan.get("gpu") or {}).get("bringup") or {}).get("software") or {}).get("driver_branch")
    out: list[Finding] = []
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


def version_findings(plan: Mapping[str, Any], hosts: Mapping[str, Any]) -> list[Finding]:
    """Version skew across the compute group: driver, VBIOS, Fabric Manager, HCA firmware (linear in hosts)."""
    compute = [h for h in hosts if "compute" in roles_of(plan, h)]
    seen = versions_seen(hosts, compute)
    return _skew_findings(seen) + _driver_match_findings(plan, compute, seen)


__all__ = ["version_findings", "versions_seen"]
