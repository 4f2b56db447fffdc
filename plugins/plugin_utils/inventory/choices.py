"""The enumerations of the inventory and the host group names: each defined here, once.

Every module that checks one of these values or picks hosts by group imports it from here
(issue 31, "one definition for each thing"); tests/unit/plugins/plugin_utils/inventory/test_choices.py
fails when a copy appears elsewhere. A leaf module: it imports nothing of the collection, so any part
of the engine may import it without a cycle.
"""

from __future__ import annotations

# --- host groups (inventory groups, hosts.yml) -------------------------------------------------

HEAD = "head"
STORAGE = "storage"
COMPUTE = "compute"
#: backup Slurm controllers: slurmctld only, SlurmctldHost after the head's (slurm/ha.py)
SLURM_BACKUP = "slurm_backup"
NFS_SERVER = "nfs_server"
LUSTRE_MDS = "lustre_mds"
LUSTRE_OSS = "lustre_oss"
NVMEOF_TARGET = "nvmeof_target"
BEEGFS_MGMTD = "beegfs_mgmtd"
BEEGFS_META = "beegfs_meta"
BEEGFS_STORAGE = "beegfs_storage"

#: Groups whose hosts are storage hosts too (the storage play runs on them).
STORAGE_GROUPS = (
    NFS_SERVER,
    LUSTRE_MDS,
    LUSTRE_OSS,
    NVMEOF_TARGET,
    BEEGFS_MGMTD,
    BEEGFS_META,
    BEEGFS_STORAGE,
)
#: Inventory groups the collection knows, in the order hosts are planned (addresses etc.).
ROLE_GROUPS = (HEAD, STORAGE, *STORAGE_GROUPS, COMPUTE, SLURM_BACKUP)
#: Every slurmctld host: the head and the backup controllers (slurm/ha.py).
SLURM_CONTROLLERS = frozenset({HEAD, SLURM_BACKUP})
#: Every host of the Slurm cluster: controllers and compute nodes.
SLURM_HOSTS = frozenset({HEAD, COMPUTE, SLURM_BACKUP})
LUSTRE_SERVERS = frozenset({LUSTRE_MDS, LUSTRE_OSS})
BEEGFS_SERVERS = frozenset({BEEGFS_MGMTD, BEEGFS_META, BEEGFS_STORAGE})

# --- enumerations of inventory values -----------------------------------------------------------

#: gpucluster_fabric.type
FABRIC_TYPES = ("none", "infiniband", "roce", "tcp")
#: the fabric types that carry RDMA (GPUDirect, NFS over RDMA, the TCO comparison's two fabrics)
RDMA_FABRICS = ("infiniband", "roce")
#: gpucluster_fabric.topology
TOPOLOGIES = ("none", "single_switch", "rail_optimized", "fat_tree")
#: gpucluster_storage.type
STORAGE_TYPES = ("local_nvme", "nfs", "lustre", "nvmeof", "beegfs")
#: gpucluster_node.nics[].purpose
NIC_PURPOSES = ("compute", "storage", "management")
#: gpucluster_gpu_policy.clock_policy (compute/clocks.py)
CLOCK_POLICIES = ("max_performance", "fixed", "power_capped")
#: gpucluster_rollout.drain_policy (plan/rollout.py, slurm/rolling.py)
DRAIN_POLICIES = ("wait", "skip")
#: gpucluster_node.nccl_topology: detect (default; NCCL reads sysfs) or file (NCCL_TOPO_FILE, nccl.py)
NCCL_TOPOLOGIES = ("detect", "file")

__all__ = [
    "BEEGFS_META",
    "BEEGFS_MGMTD",
    "BEEGFS_SERVERS",
    "BEEGFS_STORAGE",
    "CLOCK_POLICIES",
    "COMPUTE",
    "DRAIN_POLICIES",
    "FABRIC_TYPES",
    "HEAD",
    "LUSTRE_MDS",
    "LUSTRE_OSS",
    "LUSTRE_SERVERS",
    "NCCL_TOPOLOGIES",
    "NFS_SERVER",
    "NIC_PURPOSES",
    "NVMEOF_TARGET",
    "RDMA_FABRICS",
    "ROLE_GROUPS",
    "SLURM_BACKUP",
    "SLURM_CONTROLLERS",
    "SLURM_HOSTS",
    "STORAGE",
    "STORAGE_GROUPS",
    "STORAGE_TYPES",
    "TOPOLOGIES",
]
