"""plan.fabric: the site's fabric (type, topology, link rate, rails), its subnet manager and RoCE settings
(fabric/fabric_host.py), its expected cabling and Slurm's topology (fabric/cabling.py), with the checks of
the rules that tie the fabric to the compute nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import fabric_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import site_cabling, slurm_topology
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import FabricSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site


def fabric_plan(site: Site) -> FabricSection:
    """The fabric: its type and topology, link rate, rails, subnet manager, RoCE settings and expected cabling."""
    f = site.fabric_model
    p = "gpucluster_fabric"
    ftype, topology = f.type, f.topology
    require(
        ftype != "none" or topology == "none", f"{p}.topology", topology, "none when gpucluster_fabric.type is none"
    )
    require(
        ftype == "none" or len(site.compute_hosts) > 1 or topology != "none",
        f"{p}.topology",
        topology,
        "a switched topology for a fabric",
    )
    nics = site.node.compute_nics
    if ftype != "none":
        require(bool(nics), "gpucluster_node.nics", [], "at least one NIC with purpose compute when there is a fabric")
    rate = f.link_rate_gbps
    cabling = site_cabling(
        site.fabric_model.tree,  # the switches and spines as written: fabric/cabling.py checks them
        fabric_type=ftype,
        topology=topology if ftype in RDMA_FABRICS else "none",
        compute_hosts=site.compute_hosts,
        rail_hcas=[n.name for n in nics],
        link_rate_gbps=rate,
        link_width=nics[0].width if nics else "4x",
        links=False,  # the design: fabric.links generates the cables where a reader needs them
    )
    ib = None
    if ftype == "infiniband":
        ib = fabric_host.infiniband_settings(
            f.infiniband,
            subnet_manager=site.subnet_manager,
            topology=topology,
            subnets=len(ibfabric.subnets(cabling)),
            field=p,
        )
        if ib["subnet_manager"] == "head":  # the SM's ports are cabled like any host's (fabric_host.sm_cabling)
            cabling = fabric_host.sm_cabling(cabling, host=site.head, hcas=ib["sm_hcas"], field=p)
    return {
        "type": ftype,
        "topology": topology,
        "link_rate_gbps": rate,
        "rails": len(nics),
        "subnet_manager": ib["subnet_manager"] if ib else None,
        "infiniband": ib,
        "roce": fabric_host.roce_settings(f.roce, field=f"{p}.roce") if ftype == "roce" else None,
        "cabling": cabling,
        "slurm_topology": slurm_topology(cabling),
    }
