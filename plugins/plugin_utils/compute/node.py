"""What a GPU node offers its scheduler, Slurm or Kubernetes: its CPUs, its memory, and the memory left
after what the node keeps for its OS (slurm.conf's RealMemory=, the kubelet's capacity less
system-reserved). Both schedulers read the node from here, neither from the other's plan section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Node

#: Memory kept for the OS, slurmd and page cache: 5 % of RAM, at least 4 GiB (MemSpecLimit practice, 8.3).
OS_RESERVE_FRACTION = 0.05
OS_RESERVE_MIN_MIB = 4096


def memory_after_os_mib(memory_mib: int) -> int:
    """A node's memory less its OS reserve (max(4 GiB, 5 %)), MiB."""
    return memory_mib - max(OS_RESERVE_MIN_MIB, int(memory_mib * OS_RESERVE_FRACTION))


@dataclass(frozen=True)
class NodeResources:
    """``cpus``: every hardware thread (no CoreSpecCount is planned); ``memory_mib``: gpucluster_node.memory_gib;
    ``after_os_mib``: what the schedulers may hand to jobs."""

    cpus: int
    memory_mib: int
    after_os_mib: int


def node_resources(node: Node) -> NodeResources:
    """The resources of the site's GPU node (one gpucluster_node for every compute host)."""
    memory_mib = int(node.memory_gib * 1024)
    return NodeResources(
        cpus=node.cores * node.threads_per_core,
        memory_mib=memory_mib,
        after_os_mib=memory_after_os_mib(memory_mib),
    )
