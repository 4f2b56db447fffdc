"""Which Slurm topology plugin places jobs: topology/tree (the fabric's switches) or topology/block (NVLink domains).

- **One NVLink domain per node** (HGX/DGX boards: catalog ``nvlink_domain_gpus`` 8, the node's GPUs; PCIe
  cards: none): the NVLink fabric ends at the node, so the only topology between nodes is the fabric's,
  and the plan keeps ``TopologyPlugin=topology/tree`` with topology.conf's switches (fabric/cabling.py),
  or no topology plugin without a switched fabric.
- **An NVLink domain across nodes** (GB200 NVL72: 72 GPUs, 18 compute trays of 4, dossier 1.1 [S18],
  docs/sources.md [F22]): jobs must be packed into one domain, which is what Slurm's ``topology/block``
  does (``BlockName=<name> Nodes=<hostlist>``, one block per NVLink domain;
  https://slurm.schedmd.com/topology.html#block, docs/sources.md [SL2]). topology/block first appears in
  Slurm 23.11 (CHANGELOG/slurm-23.11.md, dossier 8.2). The target OS, Debian 12 (bookworm), ships
  slurm-wlm 22.05.8 (``apt-cache policy slurmctld``: 22.05.8-4+deb12u3), which has topology/tree only: a
  slurm.conf naming topology/block would stop slurmctld. So the plan refuses such a site there, naming
  the model, the domain and the Slurm version it needs, instead of writing a tree that lets jobs
  straddle NVLink domains without a word.

The block layout: the compute hosts in inventory order, ``domain / gpus_per_node`` per block; the
compute count must fill whole domains. No I/O.
"""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import TopologyBlock, TopologyPlan

#: the first Slurm release with topology/block (dossier 8.2, docs/sources.md [SL2])
BLOCK_MIN_SLURM = (23, 11)
#: Slurm of the target OS: Debian 12's slurm-wlm (apt-cache policy slurmctld: 22.05.8-4+deb12u3)
TARGET_SLURM = "22.05.8"
TARGET_OS = "Debian 12 (bookworm)"
BLOCK_DOC = "https://slurm.schedmd.com/topology.html#block"
TREE = "topology/tree"
BLOCK = "topology/block"


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def nvlink_blocks(model: GpuModel, gpus_per_node: int, compute_hosts: list[str]) -> list[TopologyBlock]:
    """One block per multi-node NVLink domain ([] where the domain is one node or there is none)."""
    domain = model.nvlink_domain_gpus
    if not domain or domain <= gpus_per_node:
        return []
    require(
        domain % gpus_per_node == 0,
        "gpucluster_node.gpus_per_node",
        gpus_per_node,
        f"a divisor of the {domain}-GPU NVLink domain of {model.key} (GB200 NVL72: 4 per compute tray)",
    )
    per = domain // gpus_per_node
    require(
        len(compute_hosts) % per == 0,
        "compute hosts (the inventory's compute group)",
        len(compute_hosts),
        f"a multiple of {per}: whole NVLink domains of {domain} GPUs ({per} nodes of {gpus_per_node})",
    )
    return [
        {"name": f"nvl{i // per + 1:02d}", "nodes": hostlist.compress(compute_hosts[i : i + per])}
        for i in range(0, len(compute_hosts), per)
    ]


def topology_plan(
    model: GpuModel,
    gpus_per_node: int,
    compute_hosts: list[str],
    tree_switches: list[object],
    slurm_version: str = TARGET_SLURM,
) -> TopologyPlan:
    """The topology plugin and its blocks: ``plugin`` ("" for none), ``blocks`` (topology/block only), ``reason``.

    PlanError where the NVLink domain spans nodes and ``slurm_version`` predates topology/block."""
    domain = model.nvlink_domain_gpus
    if domain and domain > gpus_per_node:
        if _version(slurm_version) < BLOCK_MIN_SLURM:
            raise PlanError(
                "gpucluster_node.gpu_model",
                model.key,
                f"a model whose NVLink domain fits in one node on {TARGET_OS}: {model.key}'s domain of "
                f"{domain} GPUs spans {domain // gpus_per_node} nodes and "
                f"needs Slurm's topology/block ({BLOCK_DOC}), which Slurm "
                f"{'.'.join(map(str, BLOCK_MIN_SLURM))} introduced; {TARGET_OS} ships slurm-wlm {slurm_version} "
                "(topology/tree only, which would let jobs straddle NVLink domains)",
            )
        return {
            "plugin": BLOCK,
            "blocks": nvlink_blocks(model, gpus_per_node, compute_hosts),
            "reason": f"{model.key}: one block per {domain}-GPU NVLink domain",
        }
    if tree_switches:
        return {"plugin": TREE, "blocks": [], "reason": "the fabric's switches (NVLink ends at the node)"}
    return {"plugin": "", "blocks": [], "reason": "no switched fabric"}


def block_conf_text(blocks: list[TopologyBlock]) -> str:
    """topology.conf for topology/block: ``BlockName=<name> Nodes=<hostlist>`` per block ("" for none)."""
    return "".join(f"BlockName={b['name']} Nodes={b['nodes']}\n" for b in blocks)


__all__ = ["BLOCK", "BLOCK_MIN_SLURM", "TARGET_SLURM", "TREE", "block_conf_text", "nvlink_blocks", "topology_plan"]
