"""plan.storage: the storage type's section (Lustre, NFS, NVMe-oF, BeeGFS or local NVMe), the checkpoint
sizing against the tier's floors, the ceilings the floors are checked against, the data protection and the
asynchronous checkpoints' drain (storage/sizing.py, checkpoint.py and one module per storage type)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import PCIE_X16_GBS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import beegfs, checkpoint, nfs, nvmeof, raid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.interfaces import (
    server_interfaces,
    site_storage_ceiling,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.lustre_plan import lustre_plan, lustre_protection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import (
    Ceiling,
    CheckpointDrain,
    Sizing,
    StorageSection,
    TypedStorage,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import (
    local_ceiling,
    local_raid_plan,
    storage_check,
    storage_sizing,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.tiers import TierProfile


def storage_plan(site: Site, tier: TierProfile, nodes: int, addresses: Mapping[str, Any]) -> StorageSection:
    """plan.storage for ``nodes`` compute nodes with the addresses of plan/addresses.py (a section of the plan
    package: read as it is typed there)."""
    st, wl = site.storage_model, site.workload_model
    sizing = storage_sizing(
        model_params_b=wl.model_params_b,
        bytes_per_param=wl.checkpoint_bytes_per_param,
        interval_min=wl.checkpoint_interval_min,
        overlap_target=wl.checkpoint_overlap_target,
        write_floor_gbps=tier.storage_write_gbps[0],
        rated_write_gbps=st.rated_write_gbps,
        gpus=nodes * site.node.gpus_per_node,
        gpu_hour_cost_usd=wl.gpu_hour_cost_usd,
        io_wait_fraction=wl.io_wait_fraction,
    )
    paths = dict(st.paths)
    check = storage_check(sizing, tier.storage_write_gbps[0], bool(wl.allow_storage_below_need))
    # what the data servers' planned storage interfaces carry (local NVMe: its drives, below): the floors' ceiling
    ceiling: Ceiling | None = None if st.type == "local_nvme" else site_storage_ceiling(site, nodes, addresses)
    typed = _typed_storage(site, addresses, paths, ceiling)
    if "local_nvme" in typed:
        ceiling = local_ceiling(len(typed["local_nvme"]["devices"]), site.node.pcie_gen)
    drain = _checkpoint_drain(site, sizing, nodes, paths)
    out: StorageSection = {
        "type": st.type,
        "paths": paths,
        "local_scratch": st.local_scratch,
        "sizing": sizing,
        "check": check,
        "floors": {"read_gbps": list(tier.storage_read_gbps), "write_gbps": list(tier.storage_write_gbps)},
        **typed,
        "ceilings": {"read_gbps": ceiling, "write_gbps": ceiling},
        "checkpoint_drain": drain,
    }
    if not wl.allow_storage_below_need:  # the override lets a drain that does not fit through too
        out["check"] += drain["check"]
    return out


def _typed_storage(
    site: Site, addresses: Mapping[str, Any], paths: dict[str, str], ceiling: Ceiling | None
) -> TypedStorage:
    """The storage type's own section and, for the shared types but NVMe-oF, its ``protection``."""
    st = site.storage_model
    if st.type == "lustre":
        lplan = lustre_plan(site, addresses)
        return {"lustre": lplan, "protection": lustre_protection(lplan)}
    if st.type == "nfs":
        nfs_cfg = st.nfs
        links = nfs.nfs_links(nfs_cfg, fabric_type=site.fabric_model.type, lab=site.in_lab, ceiling=ceiling)
        return {
            "nfs": nfs.nfs_plan(
                nfs=nfs_cfg,
                servers=site.hosts_in("nfs_server"),
                lab=site.lab,
                addresses=addresses,
                paths=paths,
                links=links,
            ),
            "protection": raid.declared_summary("nfs", nfs_cfg, "NFS export"),
        }
    if st.type == "nvmeof":  # tier2 alternative: per-node remote namespaces (storage/nvmeof.py)
        return {
            "nvmeof": nvmeof.nvmeof_plan(
                nvmeof=st.nvmeof,
                targets=site.hosts_in("nvmeof_target"),
                clients=site.compute_hosts,
                addresses=addresses,
                lab=site.lab,
                paths=paths,
                domain=site.domain,
                cores=site.node.cores * site.node.threads_per_core,
                inventory_hosts=[h.name for h in site.hosts],
            )
        }
    if st.type == "beegfs":  # tier3 alternative to Lustre (storage/beegfs.py)
        storage_ifaces = [n.netdev for n in site.node.nics_for("storage")]
        return {
            "beegfs": beegfs.beegfs_plan(
                beegfs=st.beegfs,
                mgmtd=site.hosts_in("beegfs_mgmtd"),
                meta=site.hosts_in("beegfs_meta"),
                storage=site.hosts_in("beegfs_storage"),
                addresses=addresses,
                lab=site.lab,
                paths={k: v for k, v in paths.items() if k in ("checkpoints", "datasets", "home")},
                client_interfaces=storage_ifaces or [n.netdev for n in site.node.compute_nics[:1]],
                server_interfaces=server_interfaces(site),
                rdma=site.fabric_model.type in RDMA_FABRICS,
            ),
            "protection": raid.declared_summary("beegfs", st.beegfs, "BeeGFS targets"),
        }
    return {
        "local_nvme": local_raid_plan(
            st.local_nvme, paths, hosts=site.hosts_in("storage"), inventory_hosts=[h.name for h in site.hosts]
        )
    }


def _checkpoint_drain(site: Site, sizing: Sizing, nodes: int, paths: Mapping[str, str]) -> CheckpointDrain:
    """Async checkpoints: local staging and the drain to the shared path (storage/checkpoint.py). The node: its
    GPUs' host link (PCIe x16 of pcie_gen), its RAM, its storage link (storage NICs, else the first compute NIC
    that carries LNet/NFS traffic), for the stalls and the pinned buffers."""
    st = site.storage_model
    link_nics = site.node.nics_for("storage") or site.node.compute_nics[:1]
    link_rates = [n.rate_gbps for n in link_nics]
    return checkpoint.checkpoint_drain(
        site.workload_model.checkpoint_async,
        storage_type=st.type,
        local_scratch=st.local_scratch,
        sizing=sizing,
        nodes=nodes,
        remote_path=paths.get("checkpoints"),
        shared_roots=st.mount_points,
        lab=site.in_lab,
        gpus_per_node=site.node.gpus_per_node,
        host_link_gbps=PCIE_X16_GBS[site.node.pcie_gen],
        host_link=f"PCIe Gen{site.node.pcie_gen} x16, docs/sources.md [S18]",
        node_ram_bytes=site.node.memory_gib * 2**30,
        client_link_gbps=sum(r for r in link_rates if r) / 8 if link_rates and all(link_rates) else None,
    )
