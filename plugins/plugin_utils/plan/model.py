"""The plan's type: one TypedDict, each section the typed shape its domain package defines.

A plan is plain JSON data (dicts, lists, strings, numbers) at run time: what ``cluster_plan`` returns, what
``make plan`` writes as plan.json and what the roles read. These types add no run-time cost; mypy checks every
reader (the report, the audit, kubernetes, the files manifest, the host views) against them.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    ContainersSection,
    CoolingSection,
    DcgmSection,
    GpuSection,
    HealingSection,
    HealthSection,
    NcclSection,
    ParallelismSection,
    PowerSection,
    UpsSection,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import (
    FabricHostSection,
    FabricSection,
    FabricTcoSection,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import TenantsSection, TierSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.kubernetes.model import KubernetesSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import MonitoringSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import (
    ClusterSection,
    EtcHostsSection,
    FilesSection,
    FirewallSection,
    HostsSection,
    NetworkSection,
    RolloutSection,
    ServicesSection,
    SupportSection,
    TimeSection,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import SlurmSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import StorageSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import ValidationSection


class Plan(TypedDict):
    """The whole plan, in the order ``cluster_plan`` builds it (plan/assembly.py)."""

    schema: int
    cluster: ClusterSection
    tier: TierSection
    hosts: HostsSection
    network: NetworkSection
    firewall: FirewallSection
    etc_hosts: EtcHostsSection
    time: TimeSection
    gpu: GpuSection
    power: PowerSection
    cooling: CoolingSection
    storage: StorageSection
    fabric: FabricSection
    nccl: NcclSection
    parallelism: ParallelismSection
    validation: ValidationSection
    ups: UpsSection
    tenants: TenantsSection
    health: HealthSection
    slurm: SlurmSection
    dcgm: DcgmSection
    rollout: RolloutSection
    healing: HealingSection
    monitoring: MonitoringSection
    fabric_host: FabricHostSection
    containers: ContainersSection
    files: FilesSection
    fabric_tco: FabricTcoSection
    services: ServicesSection
    support: SupportSection
    kubernetes: NotRequired[KubernetesSection]  # the Kubernetes path only (cluster.scheduler == "kubernetes")


class PlanView(TypedDict, total=False):
    """The sections of the plan a stage reads (plan/assembly.py ``_needs``): any of ``Plan``'s, by the same name
    and type; a stage reads only those it is handed (tests/unit keeps the two classes' fields equal)."""

    schema: int
    cluster: ClusterSection
    tier: TierSection
    hosts: HostsSection
    network: NetworkSection
    firewall: FirewallSection
    etc_hosts: EtcHostsSection
    time: TimeSection
    gpu: GpuSection
    power: PowerSection
    cooling: CoolingSection
    storage: StorageSection
    fabric: FabricSection
    nccl: NcclSection
    parallelism: ParallelismSection
    validation: ValidationSection
    ups: UpsSection
    tenants: TenantsSection
    health: HealthSection
    slurm: SlurmSection
    dcgm: DcgmSection
    rollout: RolloutSection
    healing: HealingSection
    monitoring: MonitoringSection
    fabric_host: FabricHostSection
    containers: ContainersSection
    files: FilesSection
    fabric_tco: FabricTcoSection
    services: ServicesSection
    support: SupportSection
    kubernetes: KubernetesSection
