"""MPI under Slurm: PMIx as the launch interface and the UCX / Open MPI defaults per fabric.

Slurm starts the ranks itself (``srun``) and wires them up through PMIx: ``MpiDefault=pmix``
(docs/sources.md [SL5]; Debian's slurm-wlm-basic-plugins ships mpi_pmix and mpi_pmix_v4, and its
Open MPI 4.1 is built against the same libpmix2, so ``srun --mpi=pmix`` needs no mpirun).

The transport defaults reach the ranks through two node-local files the compute role writes,
read by the library in the process on the node where it runs (a job's own environment wins over
both, so a user can still override any value for one job):

- ``/etc/ucx/ucx.conf``: UCX reads ``{sysconfdir}/ucx/ucx.conf``; an environment variable has
  precedence over the file (docs/sources.md [MP1]). Debian's libucx0 1.13 is built with
  sysconfdir /etc (its libucs names /etc/ucx).
- ``/etc/openmpi/openmpi-mca-params.conf``: Open MPI's system-wide MCA parameter file
  (docs/sources.md [MP3]). Debian ships it with ``pml = ^ucx`` (UCX off for desktops without
  RDMA devices, [MP3]); on an RDMA fabric the plan turns the UCX PML on.

Per fabric (``plan.fabric.type``):

- infiniband / roce: ``UCX_NET_DEVICES=<hca>:1,...`` from the plan's compute HCAs in rail order:
  only the fabric's rails, never the storage or management NICs ([MP1]: the list restricts UCX to
  only those devices; ``mlx5_2:1`` is device and port). ``UCX_TLS`` is not set: UCX picks RC at
  small scale and DC (or UD without DC) at large scale by itself, and a restricted list can break
  UD bootstrap and GPU-memory detection ([MP1]). InfiniBand: ``UCX_IB_SL`` when the site sets a
  service level (adaptive routing is enabled per SL, [MP1]). RoCE: ``UCX_IB_TRAFFIC_CLASS`` is the
  plan's RoCE ToS (the value NCCL_IB_TC and the NICs' DSCP/PFC setup use: one value), and
  ``UCX_IB_GID_INDEX`` only when the site pins ``gpucluster_fabric.roce.gid_index`` (UCX's default
  is ``auto``, [MP2]). Open MPI: ``pml = ucx`` and ``osc = ucx`` ([MP4]: InfiniBand and RoCE are
  supported through the UCX PML).
- tcp: ``UCX_NET_DEVICES=<netdev>,...`` (the compute NICs' Ethernet devices for UCX's TCP
  transport, [MP1]) and Open MPI keeps Debian's ob1 PML with ``btl_tcp_if_include`` naming the
  same devices ([MP5]), so MPI traffic stays off the management network.
- none (one node, no fabric): no files; MPI inside a node uses shared memory, Debian's defaults.

The lab (plan.cluster.lab: containers with no HCA) is a lab override like those of slurm.py: UCX
runs over TCP (``UCX_TLS=tcp,sm,self``) on any interface (podman does not keep the order of a
container's networks: eth0 may be the storage network, so the lab names none), and Open MPI's UCX
PML is told to accept a TCP-only UCX (``pml_ucx_tls = any``, ``pml_ucx_devices = any``: Open MPI
4.1 only selects it for ``mlx*`` devices otherwise, [MP3] [MP6]). Product code never names an HCA
the host does not have: the lab's values replace the fabric's, they are not added to them.

No PMIX_MCA_* values: none is needed by the plan's setups and none is sourced for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import FABRIC_TYPES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import Mpi

#: slurm.conf MpiDefault (docs/sources.md [SL5]).
MPI_DEFAULT = "pmix"
UCX_CONF = "/etc/ucx/ucx.conf"
OPENMPI_MCA_PARAMS = "/etc/openmpi/openmpi-mca-params.conf"
#: The port of an HCA UCX uses: ``<device>:<port>`` ([MP1]); the plan's HCAs are single-port ConnectX.
HCA_PORT = 1
#: Debian's shipped openmpi-mca-params.conf (openmpi-common 4.1.4-3, docs/sources.md [MP3]) minus the PML
#: and OSC lines the plan decides: kept as Debian has them (no openib/uct/ofi BTL, no ofi MTL).
DEBIAN_OMPI_DEFAULTS = {
    "btl_base_warn_component_unused": "0",
    "mtl": "^ofi",
    "btl": "^uct,openib,ofi",
}
#: Debian's PML and OSC lines ([MP3]): UCX off.
DEBIAN_OMPI_PML = {"pml": "^ucx", "osc": "^ucx,pt2pt"}
#: The lab's UCX transports: TCP between containers, shared memory and loopback inside one ([MP1] aliases).
LAB_UCX_TLS = "tcp,sm,self"


@dataclass(frozen=True)
class MpiSettings:
    """What the plan says about MPI: Slurm's default PMI, and the two node-local files (empty: no file)."""

    mpi_default: str
    fabric: str
    transport: str  # rdma | tcp | shm: how ranks on different nodes talk
    ucx: dict[str, str] = field(default_factory=dict)
    openmpi: dict[str, str] = field(default_factory=dict)
    lab: bool = False
    reason: str = ""

    def as_dict(self) -> Mpi:
        return {
            "mpi_default": self.mpi_default,
            "fabric": self.fabric,
            "transport": self.transport,
            "ucx": dict(self.ucx),
            "ucx_conf": UCX_CONF,
            "openmpi": dict(self.openmpi),
            "openmpi_mca_params": OPENMPI_MCA_PARAMS,
            "files": bool(self.ucx or self.openmpi),
            "lab": self.lab,
            "reason": self.reason,
        }


def _names(values: list[str], field_name: str, what: str) -> list[str]:
    """Unique, non-empty device names (their characters are the inventory schema's check)."""
    if not values or len(set(values)) != len(values) or not all(values):
        raise PlanError(field_name, values, f"unique, non-empty {what}")
    return values


def ucx_net_devices(hcas: list[str]) -> str:
    """``mlx5_0:1,mlx5_1:1``: each compute HCA at its port ([MP1])."""
    return ",".join(f"{h}:{HCA_PORT}" for h in _names(hcas, "gpucluster_node.nics", "compute NIC names"))


def _rdma(
    fabric_type: str, hcas: list[str], roce: Mapping[str, object] | None, ib_service_level: int | None
) -> tuple[dict[str, str], dict[str, str]]:
    ucx = {"UCX_NET_DEVICES": ucx_net_devices(hcas)}
    if fabric_type == "roce":
        roce = roce or {}
        if "traffic_class" not in roce:
            raise PlanError("gpucluster_fabric.roce", roce, "the checked RoCE settings (fabric_host.roce_settings)")
        # the ToS byte (DSCP x 4 + ECN) of the plan's RoCE setup, as NCCL_IB_TC (docs/sources.md §7.2, [MP1])
        ucx["UCX_IB_TRAFFIC_CLASS"] = str(
            check_range(roce["traffic_class"], "gpucluster_fabric.roce.traffic_class", 0, 255, integer=True)
        )
        if roce.get("gid_index") is not None:
            gid = check_range(roce["gid_index"], "gpucluster_fabric.roce.gid_index", 0, 255, integer=True)
            ucx["UCX_IB_GID_INDEX"] = str(gid)
    elif ib_service_level is not None:
        sl = check_range(ib_service_level, "gpucluster_fabric.infiniband.service_level", 0, 15, integer=True)
        ucx["UCX_IB_SL"] = str(sl)
    return ucx, {**DEBIAN_OMPI_DEFAULTS, "pml": "ucx", "osc": "ucx"}


def mpi_settings(
    *,
    fabric_type: str,
    compute_hcas: list[str],
    compute_netdevs: list[str],
    roce: Mapping[str, object] | None = None,
    ib_service_level: int | None = None,
    lab: bool = False,
) -> MpiSettings:
    """MpiDefault and the UCX / Open MPI defaults for the fabric.

    ``compute_hcas``: RDMA device names of the compute NICs in rail order (infiniband, roce);
    ``compute_netdevs``: their Linux interfaces (tcp); ``roce``: the checked plan.fabric.roce;
    ``lab``: containers without HCA (plan.cluster.lab): UCX over TCP instead of the fabric's devices.
    """
    check_choice(fabric_type, "gpucluster_fabric.type", FABRIC_TYPES)
    if lab:
        if fabric_type == "none":
            return MpiSettings(MPI_DEFAULT, fabric_type, "shm", lab=True, reason="one node: shared memory only")
        return MpiSettings(
            MPI_DEFAULT,
            fabric_type,
            "tcp",
            ucx={"UCX_TLS": LAB_UCX_TLS},
            openmpi={
                **DEBIAN_OMPI_DEFAULTS,
                "pml": "ucx",
                "osc": "ucx",
                "pml_ucx_tls": "any",
                "pml_ucx_devices": "any",
            },
            lab=True,
            reason=f"lab: no HCA in a container, UCX over TCP instead of the {fabric_type} rails",
        )
    if fabric_type == "none":
        return MpiSettings(MPI_DEFAULT, fabric_type, "shm", reason="no multi-node fabric: shared memory in one node")
    if fabric_type == "tcp":
        devs = ",".join(_names(compute_netdevs, "gpucluster_node.nics", "compute NIC netdevs"))
        return MpiSettings(
            MPI_DEFAULT,
            fabric_type,
            "tcp",
            ucx={"UCX_NET_DEVICES": devs},
            openmpi={**DEBIAN_OMPI_DEFAULTS, **DEBIAN_OMPI_PML, "btl_tcp_if_include": devs},
            reason=f"TCP fabric: Open MPI's ob1/tcp and UCX's TCP on {devs}",
        )
    ucx, ompi = _rdma(fabric_type, compute_hcas, roce, ib_service_level)
    return MpiSettings(
        MPI_DEFAULT,
        fabric_type,
        "rdma",
        ucx=ucx,
        openmpi=ompi,
        reason=f"{fabric_type}: Open MPI's UCX PML on the compute HCAs {ucx['UCX_NET_DEVICES']}",
    )


#: Why each value is there (the report's "how" column), with its source in docs/sources.md.
WHY = {
    "UCX_NET_DEVICES": "only these devices: the compute rails (HCA:port) or interfaces [MP1]",
    "UCX_TLS": "lab: TCP between containers, shared memory and loopback inside one [MP1]",
    "UCX_IB_SL": "the fabric's InfiniBand service level (adaptive routing is per SL) [MP1]",
    "UCX_IB_TRAFFIC_CLASS": "the RoCE ToS the NICs and NCCL_IB_TC use (DSCP x 4 + ECN) [MP1]",
    "UCX_IB_GID_INDEX": "pinned by gpucluster_fabric.roce.gid_index (UCX default: auto) [MP2]",
    "pml": "ucx on RDMA fabrics [MP4]; Debian ships ^ucx [MP3]",
    "osc": "one-sided MPI on UCX with the PML [MP4]; Debian ships ^ucx,pt2pt [MP3]",
    "btl_tcp_if_include": "TCP BTL on the fabric's interfaces only [MP5]",
    "pml_ucx_tls": "lab: accept a TCP-only UCX (default: RDMA transports) [MP3] [MP6]",
    "pml_ucx_devices": "lab: accept a device other than mlx* [MP3] [MP6]",
}


#: The report's intro: which files, and why those (docs/settings.md "MPI").
INTRO = (
    "The compute role writes UCX's own /etc/ucx/ucx.conf and Open MPI's /etc/openmpi/openmpi-mca-params.conf "
    "(tier1, no fabric: neither). Each library reads its file on the node where a rank runs, so srun, sbatch and "
    "mpirun jobs get the node's devices whatever the submitting shell's environment, and a job's own UCX_* or "
    "OMPI_MCA_* variables still win [MP1] [MP3]. A container that brings its own UCX or HPC-X (NGC images) reads "
    "its own prefix, not /etc/ucx: pass the values as environment there (srun --export). No PMIX_MCA_* value is "
    "set: none is needed and none is sourced."
)


def mpi_rows(m: Mpi) -> list[list[str]]:
    """The report's rows: MpiDefault, the transport, then each file's values with why."""
    rows = [
        ["MpiDefault", m["mpi_default"], "slurm.conf: srun starts the ranks through PMIx [SL5]"],
        ["transport", m["transport"], m["reason"]],
    ]
    rows += [[k, v, f"{m['ucx_conf']}: {WHY.get(k, '')}"] for k, v in m["ucx"].items()]
    rows += [
        [k, v, f"{m['openmpi_mca_params']}: {WHY.get(k, 'kept as Debian ships it [MP3]')}"]
        for k, v in m["openmpi"].items()
    ]
    return rows
