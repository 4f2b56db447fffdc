"""Slurm's view and a job's environment against the plan: each node's Gres and features as slurmctld
knows them (``scontrol -o show node`` on the head) against the plan's slurm.conf node lines, and the
NCCL_* variables a job sees on each compute node against /etc/nccl.conf. Linear in the compute nodes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import (
    Finding,
    Unchecked,
    not_read,
    roles_of,
    site_fix,
    slurm_planned,
)


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


def slurm_findings(plan: Mapping[str, Any], slurm: Mapping[str, Any] | None, unchecked: Unchecked) -> list[Finding]:
    """Slurm's view (``scontrol -o show node`` on the head) against the plan's slurm.conf node lines
    (``slurm.nodes``: a host list, its Gres and Features each)."""
    reader = str((plan.get("cluster") or {}).get("head"))  # the host that reads Slurm's view
    if not slurm_planned(plan) or slurm is None or not_read(slurm, reader, "slurm", unchecked):
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
                        site_fix(node) + " (slurm.conf, gres.conf; restarts slurmd under a drain)",
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
                        site_fix(node) + " (slurm.conf)",
                        "jobs that ask for the planned features skip this node",
                    )
                )
    return out


def job_env_findings(
    plan: Mapping[str, Any], head: str | None, job_env: Mapping[str, Any] | None, unchecked: Unchecked
) -> list[Finding]:
    """The NCCL_* variables a job sees on each compute node against the plan's /etc/nccl.conf.

    NCCL reads /etc/nccl.conf itself, and a variable set in the job's environment wins over it
    (docs/sources.md [N1]); so a job-visible NCCL_* that differs from the plan's value, or that the plan
    does not set at all (NCCL's default, e.g. the intra-node ones the plan leaves unset), is drift. Its
    fix is removing the variable where the job environment gets it (site.yml does not manage
    /etc/environment, /etc/profile.d or a TaskProlog). Linear in the compute nodes."""
    if not slurm_planned(plan) or not_read(job_env, str(head), "nccl_env", unchecked):
        return []
    conf = dict((plan.get("nccl") or {}).get("conf") or {})
    left_unset = set(((plan.get("nccl") or {}).get("intra_node") or {}).get("unset") or [])
    seen = (job_env or {}).get("nodes") or {}
    out: list[Finding] = []
    for node in sorted(h for h in (plan.get("hosts") or {}) if "compute" in roles_of(plan, h)):
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


__all__ = ["job_env_findings", "slurm_findings"]
