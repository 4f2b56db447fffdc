"""The typed shapes of the plan section this package computes (plan/model.py assembles them into ``Plan``).

``plan["kubernetes"]`` is :class:`KubernetesSection`. The manifests themselves are Kubernetes objects: free
JSON (:data:`JsonValue`), as the API defines them, never read back by the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue

#: Plain JSON data: a Kubernetes object and everything in it.
JsonObject = dict[str, JsonValue]


@dataclass(frozen=True)
class NodeShape:
    """What one compute node offers to pods (the quota unit): ``cpus`` and ``memory_mib`` are its
    Node Allocatable (capacity less the kubelet's and the system's reservation and the eviction
    threshold), ``capacity_cpus`` and ``capacity_memory_mib`` what it has."""

    gpus: int
    cpus: int
    memory_mib: int
    rdma: int
    capacity_cpus: int = 0
    capacity_memory_mib: int = 0


class NodeEntry(TypedDict):
    """A node's labels and taints (``plan["kubernetes"]["nodes"]`` and ``["cpu_pool"]``, per host)."""

    labels: dict[str, str]
    taints: list[dict[str, str]]


class NodeShapeView(TypedDict):
    """:class:`NodeShape` as plan data (``plan["kubernetes"]["node_shape"]``)."""

    gpus: int
    cpus: int
    memory_mib: int
    rdma: int
    capacity_cpus: int
    capacity_memory_mib: int


class Allocatable(TypedDict):
    cpu: int
    memory: str


class KubeletReservation(TypedDict):
    """The KubeletConfiguration fields of a GPU node (``plan["kubernetes"]["kubelet"]``), and the Node
    Allocatable they leave."""

    kubeReserved: dict[str, str]
    systemReserved: dict[str, str]
    evictionHard: dict[str, str]
    allocatable: Allocatable


class ContainerdSettings(TypedDict):
    dropin: str
    limit_memlock: str
    source: str


class TeamFolder(TypedDict):
    path: str
    owner: str
    group: str
    mode: str


class NodeSettings(TypedDict):
    """What the compute role sets on a GPU node for the teams' pods (``plan["kubernetes"]["node"]``)."""

    containerd: ContainerdSettings
    team_folders: list[TeamFolder]
    team_folder_mounts: dict[str, list[str]]


class PodSize(TypedDict):
    cpu: int
    memory_mib: int


class HeadSize(TypedDict):
    cpu: int
    memory_mib: int
    node_pool: str


class RaySizes(TypedDict):
    """What a Ray worker and the Ray head request (``plan["kubernetes"]["ray"]``)."""

    worker: PodSize
    head: HeadSize
    daemonsets: PodSize


class Manifest(TypedDict):
    """One object to write: ``<dir>/<name>.yaml``; ``template`` objects are for the teams to submit."""

    path: str
    object: JsonObject
    template: bool


class Kustomization(TypedDict):
    apiVersion: str
    kind: str
    resources: list[str]


class KubernetesSection(TypedDict):
    """``plan["kubernetes"]`` (kubernetes/manifests.py ``kubernetes_plan``)."""

    nodes: dict[str, NodeEntry]
    node_shape: NodeShapeView
    cpu_pool: dict[str, NodeEntry]
    kubelet: KubeletReservation
    node: NodeSettings
    ray: RaySizes
    topology_levels: list[str]
    rdma_resource: str
    manifests: list[Manifest]
    kustomization: Kustomization
