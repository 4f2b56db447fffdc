"""The teams' namespaces and their storage on the Kubernetes path (docs/kubernetes.md, "Tenant isolation").

Per team (``plan["tenants"]``, else the one ``training`` namespace): the Namespace with its Pod Security
labels, the users' RoleBinding to ``edit``, the NetworkPolicies and the PersistentVolumes of the team's
folders (kubernetes/tenancy.py); the volume paths every job pod mounts; what the compute role sets on a GPU
node for them (``plan["kubernetes"]["node"]``)."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import tenancy
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.common import (
    DEFAULT_NAMESPACE,
    PREFIX,
    dns,
    meta,
    tenants,
    text,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import JsonObject, NodeSettings
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView


def team_namespaces(plan: PlanView) -> list[str]:
    """The namespaces the teams' jobs run in: one per team (``plan["tenants"]``), else ``training``."""
    return [text(t["name"]) for t in tenants(plan)] or [DEFAULT_NAMESPACE]


def _users(value: object) -> list[str]:
    return [str(u) for u in value] if isinstance(value, list) else []


def namespaces(plan: PlanView) -> list[JsonObject]:
    """Per team namespace (else the one ``training`` namespace): the Namespace with its Pod Security level,
    the users' RoleBinding to ``edit``, the NetworkPolicies and the team's storage (kubernetes/tenancy.py)."""
    users = {text(t["name"]): _users(t.get("users")) for t in tenants(plan)}
    paths = volume_paths(plan)
    out: list[JsonObject] = []
    for ns in team_namespaces(plan):
        team = {f"{PREFIX}/tenant": ns} if ns in users else {}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": meta(ns, labels={**team, **tenancy.namespace_labels()}),
            }
        )
        if users.get(ns):
            out.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": meta(f"{ns}-edit", ns),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                    "subjects": [
                        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u} for u in users[ns]
                    ],
                }
            )
        out += tenancy.network_policies(ns, {f"{PREFIX}/tenant": ns})
        out += tenancy.storage_objects(ns, paths, {f"{PREFIX}/tenant": ns})
    return out


def volume_paths(plan: PlanView) -> dict[str, str]:
    """Volume name -> the node's path: the shared file system paths the compute role mounts on every node,
    the local scratch, and every other mount a Slurm job container gets (plan.containers.mounts: the
    checkpoint staging folder, the site's extra mounts; docs/containers.md): one convention for both
    schedulers."""
    st = plan["storage"]
    paths = dict(st.get("paths") or {})
    scratch = st["local_scratch"]
    if scratch:
        paths["scratch"] = scratch
    containers = plan.get("containers")
    extra = [m["target"] for m in (containers["mounts"] if containers else []) if m["target"] not in paths.values()]
    for i, target in enumerate(extra):
        paths[f"container-mount-{i}"] = target
    return {dns(key): path for key, path in paths.items()}


def node_settings(plan: PlanView) -> NodeSettings:
    """plan["kubernetes"]["node"] (tenancy.node_settings): containerd's LimitMEMLOCK, the GPU nodes' memlock
    limit of limits.conf (plan.hosts.<compute>.limits: unlimited, the lab's gpucluster_lab.memlock_kb), and the
    team folders the PersistentVolumes point to (:func:`volume_paths` x :func:`team_namespaces`), the shared
    file system's ones under its mount point (none in the lab: its containers mount no shared file system)."""
    compute = [h for h, v in sorted(plan["hosts"].items()) if "compute" in (v.get("roles") or [])]
    limits = plan["hosts"][compute[0]].get("limits") or [] if compute else []
    memlock = next(
        (e["value"] for e in limits if e["item"] == "memlock" and e["domain"] == "*" and e["type"] == "hard"),
        "unlimited",
    )
    lab = bool(plan["cluster"].get("lab"))
    source = (
        f"gpucluster_lab.memlock_kb {memlock} (the lab container's hard limit, as limits.conf)"
        if memlock != "unlimited"
        else "unlimited, as limits.conf's memlock (plan/system.py): RDMA's registered memory is pinned"
    )
    st = plan["storage"]
    found = st.get(st["type"])
    kind = found if isinstance(found, dict) else {}
    roots = [kind.get("mount_point")] + [e.get("mount_point") for e in kind.get("exports") or [] if isinstance(e, dict)]
    shared = [] if lab else [r for r in roots if isinstance(r, str)]
    return tenancy.node_settings(memlock, source, volume_paths(plan), team_namespaces(plan), shared)
