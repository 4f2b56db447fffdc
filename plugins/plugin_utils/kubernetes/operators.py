"""The NVIDIA operators' objects (docs/kubernetes.md): the GPU Operator's ``ClusterPolicy`` (with MIG Manager
and the mig-parted ConfigMap where the site partitions GPUs) and the Network Operator's ``NicClusterPolicy``
(the RDMA shared device plugin over the compute HCAs)."""

from __future__ import annotations

import json

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig import mig_parted_config
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.common import (
    GPU_TOLERATION,
    RDMA_RESOURCE_NAME,
    meta,
    toleration,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import JsonObject, JsonValue, NodeShape
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import PlanView

#: MIG (compute/mig.py): the ConfigMap with the mig-parted configs, in the GPU Operator's namespace
#: (docs/sources.md [G8])
MIG_CONFIG_MAP = "gpucluster-mig-parted-config"
GPU_OPERATOR_NAMESPACE = "gpu-operator"
RDMA_PLUGIN = {"image": "k8s-rdma-shared-dev-plugin", "repository": "ghcr.io/mellanox", "version": "v1.5.2"}


def _cluster_policy(mig: bool) -> JsonObject:
    spec: JsonObject = {
        "operator": {"defaultRuntime": "containerd"},
        "daemonsets": {"tolerations": [toleration(GPU_TOLERATION)]},
        "driver": {"enabled": False},
        "toolkit": {"enabled": True},
        "devicePlugin": {"enabled": True},
        "dcgm": {"enabled": False},  # the exporter embeds its own hostengine
        "dcgmExporter": {"enabled": True},
        "gfd": {"enabled": True},
        "nodeStatusExporter": {"enabled": False},
        "mig": {"strategy": "none"},
    }
    if mig:  # mixed: a node may have GPUs with and without MIG; MIG Manager applies the node's layout ([G8])
        spec["mig"] = {"strategy": "mixed"}
        spec["migManager"] = {"enabled": True, "config": {"name": MIG_CONFIG_MAP, "default": "all-disabled"}}
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": meta("cluster-policy"), "spec": spec}


def _nic_policy(netdevs: list[str], shape: NodeShape) -> JsonObject:
    config = {
        "configList": [
            {
                "resourceName": RDMA_RESOURCE_NAME,
                "rdmaHcaMax": shape.rdma,
                # exactly the compute HCAs (one per rail); the storage NICs stay with the host's Lustre client
                "selectors": {"ifNames": netdevs},
            }
        ]
    }
    plugin: JsonObject = dict(RDMA_PLUGIN)
    plugin["config"] = json.dumps(config, sort_keys=True)
    return {
        "apiVersion": "mellanox.com/v1alpha1",
        "kind": "NicClusterPolicy",
        "metadata": meta("nic-cluster-policy"),
        "spec": {"tolerations": [toleration(GPU_TOLERATION)], "rdmaSharedDevicePlugin": plugin},
    }


def operator_policies(plan: PlanView, shape: NodeShape) -> list[JsonObject]:
    """GPU Operator ClusterPolicy and Network Operator NicClusterPolicy.

    Driver: the site's (driver.enabled false): the node image brings it with the GPUDirect RDMA
    module (nvidia-peermem), as the Network Operator's host DOCA/OFED driver, so a driver container
    never reloads the module under running pods. Clocks and power limit: left to the node, at boot,
    before the kubelet starts pods: plan["gpu"]["clocks"]["apply_args"] (nvidia-smi), what the Slurm
    path's gpucluster-gpu-clocks.service runs; the ClusterPolicy has no clock-lock or power-limit
    setting. DCGM exporter: on, run by the operator (the Kubernetes path installs no host exporter),
    its standalone hostengine off (the exporter embeds one). MIG strategy none: training takes
    whole GPUs; mixed, with MIG Manager and the plan's mig-parted configs, when gpucluster_gpu_policy.mig
    partitions GPUs (compute/mig.py).
    (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html#pre-installed-nvidia-gpu-drivers)
    """
    mig = plan["gpu"].get("mig")
    out = [_cluster_policy(bool(mig))]
    if mig:
        data: JsonValue = {"config.yaml": mig_parted_config(mig["parted"])}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(MIG_CONFIG_MAP, GPU_OPERATOR_NAMESPACE),
                # a ConfigMap's data is text by the API: the compute role's file, by the same function
                "data": data,
            }
        )
    netdevs = [str(r["netdev"]) for r in plan["fabric_host"]["rails"]]
    if netdevs:
        out.append(_nic_policy(netdevs, shape))
    return out
