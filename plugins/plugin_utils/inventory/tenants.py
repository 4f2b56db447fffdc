"""The teams that share the cluster (inventory ``gpucluster_tenants``) and the scheduler it runs.

One list serves both scheduling paths: on Slurm each team is an account whose fair-share
weight is its share (``RawShares``, slurm/accounting), on Kubernetes a Kueue LocalQueue whose
nominal quota is its share of the GPUs (kubernetes/). The schema (schema_v1.json) has typed
every field already; this module adds the rules across fields and turns shares into GPUs.

Shares become GPUs by the largest-remainder method (Hamilton's): each team gets the whole GPUs of
its exact share, and the GPUs the floors leave over (of the shares' total) go one each to the teams
with the largest fractions, ties in inventory order. Shares summing to 100 % give exactly the
cluster's GPUs (50/30/20 % of 48 GPUs: 24/14/10, where flooring each gives 24/14/9 and one GPU
nobody is guaranteed); a team never gets more than one GPU above its exact share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import (
    JsonValue,
    TenantRow,
    TenantsSection,
)

FIELD = "gpucluster_tenants"
#: Namespaces a team may not be named after on the Kubernetes path (a team gets ``edit`` in the namespace of
#: its name, so a team named like an operator's namespace would edit the operator): Kubernetes' own
#: (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces),
#: the operators the site installs for this path with their documented namespaces (NVIDIA GPU Operator
#: ``gpu-operator``, Network Operator ``nvidia-network-operator``/``network-operator``, Kueue
#: ``kueue-system``, KubeRay ``ray-system``/``kuberay-*``, cert-manager, the monitoring stack) and the usual
#: CNI, ingress and storage add-ons. The plan adds the namespaces it renders objects into itself.
RESERVED_NAMESPACES = (
    "default",
    "gpu-operator",
    "network-operator",
    "kueue-system",
    "ray-system",
    "cert-manager",
    "monitoring",
    "prometheus",
    "grafana",
    "calico-system",
    "calico-apiserver",
    "tigera-operator",
    "cilium",
    "ingress-nginx",
    "metallb-system",
    "local-path-storage",
    "lustre-csi",
    "nfs-provisioner",
)
#: prefixes of whole families: Kubernetes' (kube-system, kube-public, kube-node-lease, kube-flannel, ...),
#: NVIDIA's operators (nvidia-gpu-operator, nvidia-network-operator, ...), KubeRay's, OpenShift's
RESERVED_PREFIXES = ("kube-", "nvidia-", "kuberay-", "openshift-", "cattle-", "istio-")
#: gpucluster_cluster.scheduler: the batch scheduler the plan configures (docs/kubernetes.md)
SCHEDULERS = ("slurm", "kubernetes")
DEFAULT_SCHEDULER = "slurm"


@dataclass(frozen=True)
class Tenant:
    """A team: its guaranteed share of the GPUs and what it may borrow, in GPUs of this cluster."""

    name: str
    gpu_share_percent: float
    gpus: int
    borrowing_limit_percent: float
    borrowing_limit_gpus: int
    fairshare: int  # Slurm RawShares: the share in percent, as the integer sacctmgr takes
    users: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Team:
    """A team as checked, before its share becomes GPUs."""

    name: str
    share: float
    limit: float
    users: list[str]


def scheduler(cluster: Mapping[str, object]) -> str:
    """``gpucluster_cluster.scheduler``: slurm (default) or kubernetes."""
    value = cluster.get("scheduler")
    return DEFAULT_SCHEDULER if value is None else check_choice(value, "gpucluster_cluster.scheduler", SCHEDULERS)


def largest_remainder(shares: list[float], total: int) -> list[int]:
    """Whole units for ``shares`` (percent) of ``total``: floors, then the units left (of the shares'
    exact total, floored) one each to the largest remainders, ties to the earlier share."""
    exact = [Fraction(str(share)) * total / 100 for share in shares]
    out = [math.floor(e) for e in exact]
    # a millionth of a unit of slack: shares written as decimals (33.33...%) that sum to 100 % give the total
    left = min(total, math.floor(sum(exact, Fraction(0)) + Fraction(1, 10**6))) - sum(out)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: max(0, left)]:
        out[i] += 1
    return out


def tenants(raw: JsonValue, gpus_total: int) -> list[Tenant]:
    """Check ``gpucluster_tenants`` and size each team's share in GPUs (largest remainder: shares summing
    to 100 % give exactly the cluster's GPUs).

    Shares are guarantees, so together they may not exceed the cluster (100%); a share too small
    to be one GPU is refused rather than silently becoming zero.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PlanError(FIELD, raw, "a list of teams: {name, gpu_share_percent, ...}")
    checked: list[_Team] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"{FIELD}[{i}]"
        if not isinstance(item, dict):  # the schema's items are mappings: a caller that skipped it
            raise PlanError(where, item, "a mapping: {name, gpu_share_percent, ...}")
        name = item["name"]
        if not isinstance(name, str):
            raise PlanError(f"{where}.name", name, "a team name")
        require(name not in seen, f"{where}.name", name, "a name no other team has")
        seen.add(name)
        share = check_range(item["gpu_share_percent"], f"{where}.gpu_share_percent", 0, 100, unit="%")
        require(share > 0, f"{where}.gpu_share_percent", share, "a number > 0% and <= 100%")
        limit = check_range(
            item.get("borrowing_limit_percent", 100), f"{where}.borrowing_limit_percent", 0, 100, unit="%"
        )
        given = item.get("users") or []
        users = [str(u) for u in given] if isinstance(given, list) else []
        require(len(set(users)) == len(users), f"{where}.users", users, "each user name once")
        checked.append(_Team(name, share, limit, users))
    total = sum(t.share for t in checked)
    require(
        total <= 100 + 1e-9,  # decimals that sum to 100 % in binary floating point may land a hair above
        FIELD,
        f"shares summing to {total:g}%",
        "gpu_share_percent values summing to at most 100% (each share is a guarantee of the cluster's GPUs)",
    )
    gpus = largest_remainder([t.share for t in checked], gpus_total)
    out: list[Tenant] = []
    for i, (t, n) in enumerate(zip(checked, gpus, strict=True)):
        require(
            n >= 1,
            f"{FIELD}[{i}].gpu_share_percent",
            t.share,
            f"a share of at least one GPU: >= {100 / gpus_total:g}% of this cluster's {gpus_total} GPUs",
        )
        out.append(
            Tenant(
                name=t.name,
                gpu_share_percent=t.share,
                gpus=n,
                borrowing_limit_percent=t.limit,
                borrowing_limit_gpus=math.floor(gpus_total * t.limit / 100),
                fairshare=max(1, round(t.share)),
                users=t.users,
            )
        )
    return out


def reserved_namespace(name: str, rendered: tuple[str, ...] = ()) -> bool:
    """Whether a team may not be named ``name`` on the Kubernetes path: a name of :data:`RESERVED_NAMESPACES`
    or ``rendered`` (the operator namespaces the plan writes objects into), or one starting with a
    :data:`RESERVED_PREFIXES` prefix."""
    return name in RESERVED_NAMESPACES or name in rendered or name.startswith(RESERVED_PREFIXES)


def check_namespaces(teams: Sequence[Mapping[str, object]], rendered: tuple[str, ...] = ()) -> None:
    """Refuse a team named like a namespace the cluster's system, its operators or the plan itself use
    (on Kubernetes a team gets ``edit`` in the namespace of its name; ``rendered``: the plan's own)."""
    reserved = sorted({*RESERVED_NAMESPACES, *rendered})
    for i, team in enumerate(teams):
        name = str(team["name"])
        require(
            not reserved_namespace(name, rendered),
            f"{FIELD}[{i}].name",
            name,
            "a team name that is not a namespace Kubernetes, its operators or this plan use (a team gets edit "
            f"in the namespace of its name): none of {', '.join(reserved)}, nor a name starting with "
            f"{', '.join(RESERVED_PREFIXES)}",
        )


def tenants_plan(raw: JsonValue, gpus_total: int) -> TenantsSection:
    """``plan["tenants"]``: the checked teams as plain data, in inventory order."""
    return [_row(t) for t in tenants(raw, gpus_total)]


def _row(t: Tenant) -> TenantRow:
    return {
        "name": t.name,
        "gpu_share_percent": t.gpu_share_percent,
        "gpus": t.gpus,
        "borrowing_limit_percent": t.borrowing_limit_percent,
        "borrowing_limit_gpus": t.borrowing_limit_gpus,
        "fairshare": t.fairshare,
        "users": list(t.users),
    }
