"""plan.fabric: the site's fabric (type, topology, link rate, rails), its subnet manager and RoCE settings
(fabric/fabric_host.py), its expected cabling and Slurm's topology (fabric/cabling.py), with the checks of
the rules that tie the fabric to the compute nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import fabric_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.cabling import site_cabling, slurm_topology
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import Cabling, FabricSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site


def subnet_count(cabling: Cabling) -> int:
    """How many subnets (connected parts holding an HCA) the cabling forms: ``len(ibfabric.subnets(cabling))``.

    A design (no listed ``hcas``, ``links`` or ``sm_links``) gives it without generating its cables, by the
    rules of fabric_links.links: every HCA of rail r is cabled to its SU's rail leaf (a single switch: the one
    switch); without spines each leaf with hosts is a subnet; in a fat tree every leaf of a spine group reaches
    every spine of its pod and, in three tiers, every pod spine its core group, so a group is one subnet (one
    per rail plane, or the whole fabric). Anything else is walked link by link (ibfabric.subnets).
    """
    if "hcas" in cabling or "links" in cabling or "sm_links" in cabling:
        return len(ibfabric.subnets(cabling))
    rails = len(cabling["rail_hcas"])
    units = [su for su in cabling["scalable_units"] if su["hosts"]]
    if not rails or not units:
        return 0
    if cabling["topology"] == "single_switch":
        return 1
    if int(cabling["sizing"].get("tiers") or 1) < 2:
        return len({leaf for su in units for leaf in su["leaves"][:rails]})
    return rails if cabling["spine_scope"] == "rail" else 1


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
            subnets=subnet_count(cabling),
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
