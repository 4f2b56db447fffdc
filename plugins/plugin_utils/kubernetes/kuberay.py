"""KubeRay's objects (docs/kubernetes.md): a ``RayCluster`` and a ``RayJob`` whose workers take whole GPU nodes
(less the kubelet's and the system's reservation and the node's DaemonSets), with the plan's NCCL environment,
the shared file system and the RDMA devices, and whose head runs on the CPU pool (its own node selector and
flavor: it never takes a GPU node's last CPUs, so a whole-cluster job fits). Both are templates for the teams to
submit, never applied."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes import tenancy
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.common import (
    CONTROL_PLANE_TOLERATION,
    DEFAULT_NAMESPACE,
    DEFAULT_PRIORITY,
    GPU_RESOURCE,
    GPU_TOLERATION,
    POOL_LABEL,
    PREFIX,
    RAY_HEAD_CPU,
    RAY_HEAD_MEMORY,
    RAY_HEAD_MEMORY_MIB,
    RDMA_RESOURCE,
    dns,
    meta,
    tenants,
    text,
    toleration,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.labels import cpu_pool
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import (
    JsonObject,
    JsonValue,
    NodeShape,
    RaySizes,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.namespaces import volume_paths
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView

#: what a whole-node worker leaves to the node's DaemonSets (GPU/Network Operator agents, DCGM
#: exporter, node-exporter, CNI): a project choice, not a hardware number
DAEMONSET_CPU = 4
DAEMONSET_MEMORY_MIB = 16 * 1024
#: images: pinned here, overridden per site with kustomize's ``images:`` in the overlay. Ray 2.52 is the first
#: release with token authentication of the dashboard, the job API and the GCS (RAY_AUTH_MODE=token), which
#: KubeRay's ``authOptions`` turns on (https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/kuberay-auth.html)
RAY_VERSION = "2.52.0"
RAY_IMAGE = f"rayproject/ray:{RAY_VERSION}-py310-gpu"
#: the pod network's interface in every pod: the container runtime's CNI call names it eth0 (CRI's default);
#: NCCL's socket bootstrap uses it (the workers are not on the host network: Pod Security baseline forbids it)
POD_INTERFACE = "eth0"
#: the RayJob template's entrypoint: the cluster's resources as Ray sees them (GPUs = the plan's)
ENTRYPOINT = "python -c 'import ray; ray.init(); print(ray.cluster_resources())'"


def nccl_env(plan: PlanView) -> list[dict[str, str]]:
    """The plan's /etc/nccl.conf as container env (same keys, same values: HCAs, GID index and TC on RoCE,
    socket interface)."""
    return [{"name": k, "value": str(v)} for k, v in sorted(plan["nccl"]["conf"].items())]


def worker_env(plan: PlanView) -> list[dict[str, str]]:
    """A Ray worker's env: nccl.conf's, but the socket interface is the pod's (the worker is on the pod
    network); the HCAs (and on RoCE the GID index and traffic class) are the node's, as the RDMA devices are."""
    env = nccl_env(plan)
    if "NCCL_SOCKET_IFNAME" in plan["nccl"]["conf"]:
        env = [e if e["name"] != "NCCL_SOCKET_IFNAME" else {**e, "value": f"={POD_INTERFACE}"} for e in env]
    return env


def _storage_mounts(plan: PlanView) -> tuple[list[JsonValue], list[JsonValue]]:
    """The job pods' volumes: each path of :func:`namespaces.volume_paths` through the team's claim of the same
    name (a PersistentVolume of the team's folder on the node: no hostPath in the pod, which Pod Security
    baseline refuses), mounted at the node's path; /dev/shm in memory."""
    volumes: list[JsonValue] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: list[JsonValue] = [{"name": "dshm", "mountPath": "/dev/shm"}]  # NCCL's shared-memory transport
    for vol, path in sorted(volume_paths(plan).items()):
        volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": vol}})
        mounts.append({"name": vol, "mountPath": path})
    return volumes, mounts


def ray_sizes(plan: PlanView, shape: NodeShape) -> RaySizes:
    """What a Ray worker and the Ray head request, and where the head runs: a worker takes a GPU node's
    allocatable less its DaemonSets; the head runs on the CPU pool, or, without one, beside a worker
    (which then leaves it room)."""
    on_pool = bool(cpu_pool(plan))
    head_cpu, head_mem = (0, 0) if on_pool else (RAY_HEAD_CPU, RAY_HEAD_MEMORY_MIB)
    return {
        "worker": {
            "cpu": shape.cpus - DAEMONSET_CPU - head_cpu,
            "memory_mib": shape.memory_mib - DAEMONSET_MEMORY_MIB - head_mem,
        },
        "head": {"cpu": RAY_HEAD_CPU, "memory_mib": RAY_HEAD_MEMORY_MIB, "node_pool": "cpu" if on_pool else "gpu"},
        "daemonsets": {"cpu": DAEMONSET_CPU, "memory_mib": DAEMONSET_MEMORY_MIB},
    }


def _gpu_selector(plan: PlanView) -> JsonObject:
    cl = plan["cluster"]
    return {f"{PREFIX}/gpu-model": cl["gpu_model"], f"{PREFIX}/cluster": cl["name"], POOL_LABEL: "gpu"}


def _worker_pod(plan: PlanView, shape: NodeShape, levels: list[str], sizes: RaySizes) -> JsonObject:
    """The worker pod template: a whole GPU node (all its GPUs, one RDMA share), the plan's NCCL env."""
    volumes, mounts = _storage_mounts(plan)
    limits: JsonObject = {
        GPU_RESOURCE: shape.gpus,
        RDMA_RESOURCE: 1,
        "cpu": sizes["worker"]["cpu"],
        "memory": f"{sizes['worker']['memory_mib']}Mi",
    }
    pod_security, container_security = tenancy.restricted_security_context()
    env: list[JsonValue] = [dict(e) for e in worker_env(plan)]
    return {
        "metadata": {
            # Kueue TAS: keep the gang in one block / leaf group if it fits (podset-preferred-topology)
            "annotations": {"kueue.x-k8s.io/podset-preferred-topology": levels[0]},
            "labels": {f"{PREFIX}/role": "ray-worker"},
        },
        "spec": {
            # the pod network, not the host's (Pod Security baseline): NCCL bootstraps over the pod's eth0 and
            # moves data over the RDMA devices the shared device plugin gives the pod (plan["nccl"]'s HCAs)
            "securityContext": dict(pod_security),
            "nodeSelector": _gpu_selector(plan),
            "tolerations": [toleration(GPU_TOLERATION)],
            "volumes": volumes,
            "containers": [
                {
                    "name": "ray-worker",
                    "image": RAY_IMAGE,
                    "env": env,
                    "resources": {"limits": dict(limits), "requests": dict(limits)},
                    # restricted: no capability (RDMA's pinned memory: the runtime's RLIMIT_MEMLOCK, not IPC_LOCK)
                    "securityContext": dict(container_security),
                    "volumeMounts": mounts,
                }
            ],
        },
    }


def _head_pod(plan: PlanView, sizes: RaySizes) -> JsonObject:
    """The head pod template: no GPU, on the CPU pool if there is one."""
    on_pool = sizes["head"]["node_pool"] == "cpu"
    pod_security, container_security = tenancy.restricted_security_context()
    return {
        "metadata": {"labels": {f"{PREFIX}/role": "ray-head"}},
        "spec": {
            # the CPU node pool: the head never takes a GPU node's CPUs, so every GPU node holds a whole worker;
            # without a pool (the head is a compute node) it shares a GPU node, and the workers leave it room
            "nodeSelector": {POOL_LABEL: "cpu", f"{PREFIX}/cluster": plan["cluster"]["name"]}
            if on_pool
            else _gpu_selector(plan),
            "tolerations": [toleration(CONTROL_PLANE_TOLERATION if on_pool else GPU_TOLERATION)],
            "securityContext": dict(pod_security),
            "containers": [
                {
                    "name": "ray-head",
                    "image": RAY_IMAGE,
                    "securityContext": dict(container_security),
                    "ports": [
                        {"containerPort": 6379, "name": "gcs"},
                        {"containerPort": 8265, "name": "dashboard"},
                        {"containerPort": 10001, "name": "client"},
                    ],
                    "resources": {
                        "limits": {"cpu": RAY_HEAD_CPU, "memory": RAY_HEAD_MEMORY},
                        "requests": {"cpu": RAY_HEAD_CPU, "memory": RAY_HEAD_MEMORY},
                    },
                }
            ],
        },
    }


def ray_cluster_spec(plan: PlanView, shape: NodeShape, levels: list[str]) -> JsonObject:
    """A RayCluster spec whose workers take whole nodes (all GPUs, the RDMA devices) with the plan's NCCL env."""
    nodes = int(plan["cluster"]["compute_nodes"])
    sizes = ray_sizes(plan, shape)
    return {
        "rayVersion": RAY_VERSION,
        # token authentication of the dashboard, the job API and the GCS: KubeRay makes a Secret per cluster and
        # gives its Ray containers and the RayJob's submitter the token (Ray >= 2.52, KubeRay >= 1.5.1)
        "authOptions": {"mode": "token"},
        # dashboard-host: every address of the head pod's own network namespace (not the node's: the head is
        # not on the host network). KubeRay's head probes call the dashboard on localhost and the operator and
        # submitter call it on the pod's address (its Service), so it cannot be bound to one of them; who may
        # connect is the namespace's NetworkPolicies (the namespace's pods, the KubeRay operator) and the token.
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
            "template": _head_pod(plan, sizes),
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu-nodes",
                "replicas": nodes,
                "minReplicas": nodes,
                "maxReplicas": nodes,
                "rayStartParams": {"num-gpus": str(shape.gpus)},
                "template": _worker_pod(plan, shape, levels, sizes),
            }
        ],
    }


def ray_objects(plan: PlanView, shape: NodeShape, levels: list[str]) -> list[JsonObject]:
    """A RayJob (batch training, admitted by Kueue as one gang) and a RayCluster (interactive), both templates."""
    teams = tenants(plan)
    ns = text(teams[0]["name"]) if teams else DEFAULT_NAMESPACE
    queue = text(teams[0]["name"]) if teams else dns(plan["cluster"]["name"])
    labels = {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": DEFAULT_PRIORITY}
    name = dns(plan["cluster"]["name"])
    spec = ray_cluster_spec(plan, shape, levels)
    return [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": meta(f"{name}-train", ns, labels),
            "spec": {
                # the site's training entrypoint goes here; this one prints the GPUs Ray sees (a smoke test)
                "entrypoint": ENTRYPOINT,
                "shutdownAfterJobFinishes": True,
                "ttlSecondsAfterFinished": 600,
                "rayClusterSpec": spec,
            },
        },
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": meta(f"{name}-interactive", ns, labels),
            "spec": spec,
        },
    ]
