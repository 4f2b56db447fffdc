"""Slurm settings from the plan: node definitions, GRES, partitions, plugins.

Sources: docs/sources.md §8 (gres.conf ``File=/dev/nvidia[0-7]`` with ``Cores=`` per
socket; topology/tree; cgroup plugins in production; HealthCheckProgram/Interval).
The lab (containers, no cgroup freezer, no real GPUs) overrides the plugins and skips
the hardware checks of slurmd; those overrides come from ``gpucluster_lab`` only.

``slurm.accounting`` (slurm/accounting.py): the scheduling policy from ``gpucluster_tenants`` and
``gpucluster_slurm`` - priority/multifactor with fair share (weights fairshare 10000, qos 5000,
age 1000), AccountingStorageEnforce=associations,limits,qos, QOS ``preemptible`` (at most 50 % of
the GPUs per user, requeued by the others), ``normal`` (default) and ``high`` (at most 25 % of
the GPUs), one account per team (RawShares = its share, GrpTRES gres/gpu = guaranteed + borrowed
GPUs when below the cluster) and node Features (GPU type, fabric, scalable unit, cooling). Sources:
https://slurm.schedmd.com/priority_multifactor.html, resource_limits.html, preempt.html,
slurm.conf(5) and sacctmgr(1) of Slurm 22.05.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import mig
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.node import memory_after_os_mib
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import accounting, ha, mpi, tenancy, topology
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import (
    GpuDefaults,
    Mpi,
    NodeFeatures,
    Partition,
    Plugins,
    SlurmNodeLine,
    SlurmSection,
    SlurmTopology,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

#: Production plugins (docs/sources.md §8.3: cgroup confinement of cores, memory and GPU devices).
PRODUCTION = {
    "proctrack_type": "proctrack/cgroup",
    "task_plugin": "task/cgroup,task/affinity",
    "jobacct_gather_type": "jobacct_gather/cgroup",
    "prolog_flags": "Contain",
}
#: slurm.conf NodeName Boards=: baseboards per node, one on a GPU server (slurm.conf(5) NodeName, Boards,
#: default 1; docs/sources.md [SL4], https://slurm.schedmd.com/slurm.conf.html#OPT_Boards).
BOARDS = 1
#: slurm.conf NodeName State=: UNKNOWN, slurmctld takes the node's state from slurmd's registration
#: (slurm.conf(5) NodeName, State; [SL4]).
NODE_STATE = "UNKNOWN"
HEALTH_CHECK_PROGRAM = "/usr/local/sbin/gpucluster-healthcheck"
#: `scontrol reboot` (the head's self-healing, plan healing.remediation; an operator): slurmd runs
#: RebootProgram on the node once it is idle (slurm.conf(5), RebootProgram). Debian 12's reboot is
#: systemd's (systemctl reboot): services stop in order, the machine restarts.
REBOOT_PROGRAM = "/usr/sbin/reboot"
#: A node that has not registered again ResumeTimeout after `scontrol reboot` is set DOWN (slurm.conf(5),
#: ResumeTimeout and RebootProgram; the default is 60 s, shorter than a GPU server's firmware POST): the
#: longest reboot timeout the healing plan allows (compute/healing.py REBOOT_TIMEOUT_RANGE_S; a unit test
#: keeps them equal), so the head's own reboot_timeout_s (at most this) decides first.
RESUME_TIMEOUT_S = 7200
HEALTH_CHECK_INTERVAL_S = 300  # OpenHPC/NHC recipe: every five minutes (docs/sources.md §8.4)


def _gpu_type(model: str) -> str:
    return model.split("_")[0]


def _gres_lines(site: Site, nodes_expr: str, with_cores: bool) -> list[str]:
    node = site.node
    gtype = _gpu_type(node.gpu_model)
    by_numa: dict[int, list[int]] = {}
    for g in node.gpus or []:
        by_numa.setdefault(g.numa_node, []).append(g.index)
    if not by_numa:
        by_numa = {0: list(range(node.gpus_per_node))}
    lines = []
    for numa, idx in sorted(by_numa.items()):
        files = hostlist.compress([f"/dev/nvidia{i}" for i in sorted(idx)])
        line = f"NodeName={nodes_expr} Name=gpu Type={gtype} File={files}"
        if with_cores:
            # One NUMA node per socket: the socket's physical cores (all cores of a socket together, 8.1).
            first = numa * node.cores_per_socket
            line += f" Cores={first}-{first + node.cores_per_socket - 1}"
        lines.append(line)
    return lines


def _gres_conf(site: Site, plan: Mapping[str, Any], with_cores: bool) -> list[str]:
    """gres.conf: the MIG nodes' lines included from the file each writes from its driver (compute/mig.py);
    explicit File= lines for the rest."""
    layout = plan["gpu"].get("mig")
    plain = mig.without_mig(site.compute_hosts, layout)
    return mig.gres_conf_lines(layout) + (_gres_lines(site, hostlist.compress(plain), with_cores) if plain else [])


def gres_gpu_count(gres: str) -> int:
    """The GPUs (whole or MIG devices) a slurm.conf ``Gres=`` value gives a node: the sum of its
    ``gpu:<type>:<n>`` counts."""
    return sum(int(part.rsplit(":", 1)[1]) for part in gres.split(",") if part.startswith("gpu:"))


def gpu_defaults(cpus: int, threads_per_core: int, real_memory_mib: int, gpu_counts: list[int]) -> GpuDefaults:
    """slurm.conf ``DefCpuPerGPU`` and ``DefMemPerGPU``: what a job that asks for GPUs but no CPUs or
    memory gets per GPU, the node's schedulable share per GPU, so that a 1-GPU job without ``--mem``
    no longer takes the whole node (``CR_Core_Memory`` with no default gives it all of RealMemory).

    ``cpus`` the node line's ``CPUs=`` (no CoreSpecCount is planned: every CPU is schedulable);
    ``real_memory_mib`` its ``RealMemory=``, already less what the node keeps for the OS (5 %, at least
    4 GiB: compute/node.py); ``gpu_counts`` the GPUs (or MIG devices) of each node line. The node line with
    the most GPUs sets both (0 for both where no node has a GPU), so every node can hold one such job per
    GPU: DefCpuPerGPU x GPUs <= CPUs, DefMemPerGPU x GPUs <= RealMemory. CPUs go by whole cores
    (``CR_Core``: a core's threads are allocated together, so a count that is not a multiple of
    ThreadsPerCore would round up).
    slurm.conf(5) of Slurm 22.05 (Debian 12's slurm-client, /usr/share/man/man5/slurm.conf.5.gz;
    https://slurm.schedmd.com/archive/slurm-22.05.8/slurm.conf.html#OPT_DefCpuPerGPU): DefCpuPerGPU is
    used only when the job gives neither --cpus-per-task nor --cpus-per-gpu; DefMemPerCPU,
    DefMemPerGPU and DefMemPerNode are mutually exclusive (slurm.conf.j2 sets only DefMemPerGPU).
    """
    gpus = max(gpu_counts, default=0)
    cores = cpus // threads_per_core
    if gpus == 0:  # no GPU on any node line: no per-GPU default (0 leaves both lines out of slurm.conf)
        return {"def_cpu_per_gpu": 0, "def_mem_per_gpu": 0}
    require(
        cores >= gpus,
        "gpucluster_node.cores_per_socket",
        cores,
        f"at least one core per GPU in all (cpu_sockets x cores_per_socket >= {gpus} GPUs or MIG devices "
        "on a node), so DefCpuPerGPU is at least 1",
    )
    require(
        real_memory_mib >= gpus,
        "gpucluster_node.memory_gib",
        real_memory_mib,
        f"at least 1 MiB of RealMemory per GPU ({gpus} on a node)",
    )
    return {"def_cpu_per_gpu": cores // gpus * threads_per_core, "def_mem_per_gpu": real_memory_mib // gpus}


def _hook(plan: Mapping[str, Any], mode: str) -> str:
    """The health check's program for slurm.conf ``Epilog=``/``Prolog=``, or "" when that mode is off."""
    entry = plan["health"]["modes"][mode]
    return entry["program"] if entry["enabled"] else ""


def _node_lines(
    site: Site, groups: list[NodeFeatures], plan: Mapping[str, Any], real_memory: int
) -> list[SlurmNodeLine]:
    """One NodeName line per set of nodes with the same Features (accounting.py: GPU type, fabric,
    scalable unit, cooling), so users can pick nodes with --constraint; no Weight= because every
    compute node has the same hardware (one gpucluster_node), and Weight only orders unequal nodes
    (slurm.conf(5), NodeName ... Weight: "lowest weight which satisfies their requirements").
    MIG nodes (compute/mig.py, plan.gpu.mig) get a line of their own: Gres=gpu:<profile>:<n> per
    MIG profile (data: the template writes each as a line; the audit, the Kubernetes path and tools/bench
    read it)."""
    node = site.node
    gtype = _gpu_type(node.gpu_model)
    lines: list[SlurmNodeLine] = [
        {
            "nodes": nodes,
            "cpus": node.cores * node.threads_per_core,
            "boards": BOARDS,
            "sockets_per_board": node.cpu_sockets,
            "cores_per_socket": node.cores_per_socket,
            "threads_per_core": node.threads_per_core,
            "real_memory": real_memory,
            "gres": gres,
            "features": list(group["features"]),
            "state": NODE_STATE,
        }
        for group in groups
        for nodes, gres in mig.node_gres(group["nodes"], plan["gpu"].get("mig"), gtype, node.gpus_per_node)
    ]
    return lines


def _plugins(lab: Mapping[str, Any]) -> Plugins:
    """The production plugins, or the lab's overrides (``gpucluster_lab``)."""
    return {
        "proctrack_type": lab.get("slurm_proctrack", PRODUCTION["proctrack_type"]),
        "task_plugin": lab.get("slurm_task_plugin", PRODUCTION["task_plugin"]),
        "jobacct_gather_type": lab.get("slurm_jobacct_gather", PRODUCTION["jobacct_gather_type"]),
        "prolog_flags": lab.get("slurm_prolog_flags", PRODUCTION["prolog_flags"]),
    }


def _partitions(nodes_expr: str, compute_nodes: int) -> list[Partition]:
    """``gpu`` (the default) and, with more than one node, a 30-minute ``debug`` partition."""
    partitions: list[Partition] = [
        {"name": "gpu", "nodes": nodes_expr, "default": True, "max_time": "INFINITE"},
    ]
    if compute_nodes > 1:
        partitions.append({"name": "debug", "nodes": nodes_expr, "default": False, "max_time": "00:30:00"})
    return partitions


def slurm_plan(site: Site, plan: Mapping[str, Any]) -> SlurmSection:
    """slurm.conf/gres.conf/topology.conf content as data for the templates."""
    acct = accounting.accounting_plan(site.slurm, plan)
    lab = site.lab_overrides
    node = site.node
    nodes_expr = plan["cluster"]["compute_hostlist"]
    real_memory = memory_after_os_mib(int(node.memory_gib * 1024))  # less the OS reserve (compute/node.py)
    gtype = _gpu_type(node.gpu_model)
    plugins = _plugins(lab)
    # PrivateData, block_null_hash, pam_slurm_adopt (tenancy.py): adoption adds PrologFlags=Contain, in the
    # lab too (the extern step works with the lab's proctrack/linuxproc; only its cgroup is missing there)
    tenants = tenancy.tenancy_plan(site.slurm, str(plugins["prolog_flags"]))
    plugins["prolog_flags"] = tenants["prolog_flags"]
    # a job's default CPUs and memory per GPU (DefCpuPerGPU, DefMemPerGPU): the node line with the most GPUs
    per_gpu = gpu_defaults(
        node.cores * node.threads_per_core,
        node.threads_per_core,
        real_memory,
        [
            gres_gpu_count(gres)
            for _nodes, gres in mig.node_gres(nodes_expr, plan["gpu"].get("mig"), gtype, node.gpus_per_node)
        ],
    )
    return {
        "cluster_name": site.name.lower(),
        "controller": site.head,
        "controller_address": plan["hosts"][site.head]["addresses"]["management"],
        # every slurmctld host, primary (the head) first, StateSaveLocation and its shared mount (ha.py)
        "ha": ha.ha_plan(
            site.slurm,
            primary=site.head,
            backups=site.slurm_backups,
            addresses={"hosts": {n: h["addresses"] for n, h in plan["hosts"].items()}},
            lab=lab,
        ),
        "nodes": _node_lines(site, acct["node_features"], plan, real_memory),
        "accounting": acct,
        "accounting_tres": mig.accounting_tres(plan["gpu"].get("mig"), gtype),
        "real_memory_mib": real_memory,
        **per_gpu,
        "gres": f"gpu:{gtype}:{node.gpus_per_node}",
        "gres_conf_lines": _gres_conf(site, plan, with_cores=not lab.get("slurm_gres_no_cores", False)),
        # the MIG nodes: what gpucluster-mig-gres checks their driver's MIG devices against (compute/mig.py)
        "gres_mig": mig.gres_mig(plan["gpu"].get("mig"), gtype),
        "partitions": _partitions(nodes_expr, plan["cluster"]["compute_nodes"]),
        "plugins": plugins,
        "tenancy": {
            "private_data": tenants["private_data"],
            "dbd_private_data": tenants["dbd_private_data"],
            "communication_parameters": tenants["communication_parameters"],
            "pam_adopt": tenants["pam_adopt"],
        },
        "slurmd_parameters": str(lab.get("slurmd_parameters", "")),
        "select_type": "select/cons_tres",
        # topology/tree from the fabric's switches, or topology/block per multi-node NVLink domain (NVL72),
        # refused on Debian 12's Slurm 22.05 (slurm/topology.py)
        **_topology(site, plan),
        "health_check_program": HEALTH_CHECK_PROGRAM,
        "reboot": {"program": REBOOT_PROGRAM, "resume_timeout_s": RESUME_TIMEOUT_S},
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        # the same check after (Epilog) and before (Prolog) each job, when the inventory has them on
        # (compute/health.py, gpucluster_slurm.health; docs/sources.md [SL9]); "" leaves the line out
        "epilog": _hook(plan, "epilog"),
        "prolog": _hook(plan, "prolog"),
        "lab": bool(lab),
        "mpi": _mpi(site, plan, lab),
    }


def _topology(site: Site, plan: Mapping[str, Any]) -> SlurmTopology:
    """slurm.conf's TopologyPlugin and topology/block's blocks (slurm/topology.py)."""
    topo = topology.topology_plan(
        GPUS[plan["gpu"]["model"]["key"]],
        site.node.gpus_per_node,
        list(site.compute_hosts),
        plan["fabric"]["slurm_topology"],
    )
    return {"topology_plugin": topo["plugin"], "topology_blocks": topo["blocks"]}


def _mpi(site: Site, plan: Mapping[str, Any], lab: Mapping[str, object]) -> Mpi:
    """MpiDefault and the UCX / Open MPI files (slurm/mpi.py). Lab override: containers have no HCA,
    so UCX runs over TCP instead of the fabric's rails."""
    fab = plan["fabric"]
    nics = site.node.compute_nics
    return mpi.mpi_settings(
        fabric_type=fab["type"],
        compute_hcas=[n.name for n in nics],
        compute_netdevs=[n.netdev for n in nics],
        roce=fab["roce"],
        ib_service_level=(fab["infiniband"] or {}).get("service_level"),
        lab=bool(lab),
    ).as_dict()
