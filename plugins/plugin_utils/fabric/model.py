"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

The fabric's ``cabling`` is its design (:class:`Cabling`: switches, scalable units, rail HCAs, sizing), not its
cables: ``fabric.links.links`` and ``fabric.links.hcas`` generate those where a reader needs them."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.module_utils.fabric_links import Hca, Link
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue


class SmHca(Hca):
    """One of the subnet manager host's HCAs, one per subnet."""

    subnet: str


class Switch(TypedDict):
    """A switch of the design: ``kind`` switch, leaf, spine or core; ``pod`` for a three-tier spine."""

    name: str
    kind: str
    rail: int | None
    su: int | None
    ports: int
    pod: NotRequired[str]


class ScalableUnit(TypedDict):
    """An SU: its hosts and its rail leaves (rail r on ``leaves[r]``), and its pod in three tiers."""

    name: str
    hosts: list[str]
    leaves: list[str]
    pod: NotRequired[str]


class Sizing(TypedDict, total=False):
    """The numbers behind the fabric (docs/fabric.md "Sizing"); empty without a switched fabric."""

    tiers: int
    switch_radix: int
    oversubscription: float
    hosts_per_leaf: int
    scalable_units: int
    spine_groups: int
    spines_per_group: int
    pods: int
    sus_per_pod: int
    cores_per_group: int
    leaves: int
    spines: int
    cores: int
    host_links: int
    uplinks: int
    core_links: int


class Cabling(TypedDict):
    """The fabric's design: what the links and HCAs are generated from (fabric.links).

    ``hcas`` and ``links`` only in the expanded form (the ``expected_cabling`` filter's answer);
    ``sm_hcas`` and ``sm_links``: the head's subnet manager ports (fabric_host.sm_cabling)."""

    topology: str
    link_rate_gbps: float
    link_width: str
    rail_hcas: list[str]
    spine_scope: str
    scalable_units: list[ScalableUnit]
    switches: list[Switch]
    hcas: NotRequired[list[Hca]]
    links: NotRequired[list[Link]]
    sizing: Sizing
    sm_hcas: NotRequired[list[SmHca]]
    sm_links: NotRequired[list[Link]]


class TopologySwitch(TypedDict):
    """A switch of Slurm's topology.conf: its members are ``nodes`` or ``switches`` (hostlists)."""

    name: str
    kind: str
    nodes: NotRequired[str]
    switches: NotRequired[str]


class InfinibandSection(TypedDict):
    """The checked InfiniBand settings (fabric_host.infiniband_settings)."""

    subnet_manager: str
    service_level: int | None
    pkey: str
    sm_priority: int
    routing_engine: str
    sm_port_guids: list[str] | None
    sm_hcas: list[str]
    sm_where: str


class Dscp2Prio(TypedDict):
    dscp: int
    priority: int


class RoceSection(TypedDict):
    """The checked RoCEv2 lossless settings (fabric_host.roce_settings); a site's other keys (``gid_index``
    for NCCL) pass through beside them."""

    dscp: int
    ecn: bool
    traffic_class: int
    priority: int
    pfc: bool
    pfc_vector: str
    dscp2prio: list[Dscp2Prio]
    cnp_dscp: int
    cnp_priority: int
    mtu: int
    roce_mode: str
    gid_index: NotRequired[int]


class FabricSection(TypedDict):
    """plan.fabric (fabric/plan.py)."""

    type: str
    topology: str
    link_rate_gbps: float
    rails: int
    subnet_manager: str | None
    infiniband: InfinibandSection | None
    roce: RoceSection | None
    cabling: Cabling
    slurm_topology: list[TopologySwitch]


class FabricRail(TypedDict):
    rail: int
    hca: str
    netdev: str


class NodeDescription(TypedDict):
    hca: str
    desc: str


class SmPort(TypedDict):
    subnet: str
    hca: str
    desc: str
    switch: str
    switch_port: int


class OpensmSection(TypedDict):
    """The head's opensm (fabric_host.host_plan)."""

    host: str
    sm_priority: int
    routing_engine: str
    routing_note: str
    qos: bool
    partition_config_file: str
    partitions: list[str]
    ports: str
    subnets: list[str]
    sm_ports: list[SmPort]


class FabricHostSection(TypedDict):
    """plan.fabric_host: what the fabric role does where (fabric_host.host_plan)."""

    infiniband_hosts: list[str]
    roce_hosts: list[str]
    rails: list[FabricRail]
    node_descriptions: dict[str, list[NodeDescription]]
    opensm: OpensmSection | None
    check_ignore: list[str]


#: plan.fabric_tco (fabric/tco.py ``plan_fabric_tco``): a cost breakdown per fabric kind, free JSON.
FabricTcoSection = dict[str, JsonValue]
