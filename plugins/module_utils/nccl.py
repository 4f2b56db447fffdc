"""NCCL: /etc/nccl.conf keys per fabric and the single-node topology XML.

Sources: dossier section 2 (NCCL 2.30 docs [N1] and source [N2]) and 7 (RoCE).
- NCCL_IB_HCA uses exact names (``=mlx5_0:1,...``): without ``=`` a name is a prefix, so
  mlx5_1 would also match mlx5_10..19. Storage and management NICs are never listed.
- /etc/nccl.conf never overrides the process environment (values are setenv(.., 0)).
- Debug-only variables (NCCL_ALGO, NCCL_PROTO, ...) are never written (docs: "should not
  be used in production").
- NCCL_IB_GID_INDEX is only written when the site pins it: NCCL >= 2.21 selects the
  RoCEv2/IPv4 GID itself (tiers.md correction: "3 always" is wrong).
"""

from __future__ import annotations

import re
from typing import Any
from xml.sax.saxutils import quoteattr

from ansible_collections.gpucluster.tiers.plugins.module_utils.errors import PlanError, check_choice, check_range

FABRIC_TYPES = ("none", "infiniband", "roce", "tcp")
RAIL_TOPOLOGIES = ("rail_optimized", "fat_tree")
LARGE_FABRIC_NODES = 256  # dossier 2.2: raise NCCL_IB_TIMEOUT to 22 on very large fabrics
PCI_BUS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
PCI_CLASS = {"gpu": "0x030200", "infiniband": "0x020700", "ethernet": "0x020000"}  # dossier 2.4


def roce_traffic_class(dscp: int, ecn: bool = True, field: str = "gpucluster_fabric.roce.dscp") -> int:
    """ToS byte for a DSCP: DSCP x 4 + ECT(0) (dossier 7.2: 106 = 26 x 4 + 2)."""
    value = check_range(dscp, field, 0, 63, integer=True)
    return value * 4 + (2 if ecn else 0)


def nccl_conf(
    *,
    fabric_type: str,
    topology: str,
    compute_hcas: list[str],
    socket_ifname: str,
    nodes: int,
    roce: dict[str, Any] | None = None,
    ib_service_level: int | None = None,
    topo_file: str | None = None,
    field: str = "gpucluster_fabric",
) -> dict[str, str]:
    """KEY -> VALUE for /etc/nccl.conf ({} for a single node on NVLink only)."""
    check_choice(fabric_type, f"{field}.type", FABRIC_TYPES)
    if fabric_type == "none":
        return {}
    if not socket_ifname:
        raise PlanError("gpucluster_network.management.interface", socket_ifname, "an interface name")
    conf: dict[str, str] = {}
    if fabric_type == "tcp":
        conf["NCCL_IB_DISABLE"] = "1"
        conf["NCCL_SOCKET_IFNAME"] = f"={socket_ifname}"
        # dossier 2.1: threads x sockets per thread <= 64; 4 x 4 is a common 100G setting
        conf["NCCL_SOCKET_NTHREADS"] = "4"
        conf["NCCL_NSOCKS_PERTHREAD"] = "4"
    else:
        if not compute_hcas or len(set(compute_hcas)) != len(compute_hcas) or not all(compute_hcas):
            raise PlanError("gpucluster_node.nics", compute_hcas, "unique, non-empty compute NIC names")
        if len(compute_hcas) > 32:
            raise PlanError("gpucluster_node.nics", len(compute_hcas), "at most 32 HCAs (NCCL_IB_HCA limit)")
        conf["NCCL_IB_HCA"] = "=" + ",".join(f"{h}:1" for h in compute_hcas)
        conf["NCCL_SOCKET_IFNAME"] = f"={socket_ifname}"
        if topology in RAIL_TOPOLOGIES:
            conf["NCCL_CROSS_NIC"] = "0"  # keep each ring on its rail (dossier 2.1)
        if fabric_type == "roce":
            roce = roce or {}
            conf["NCCL_IB_TC"] = str(roce_traffic_class(roce.get("dscp", 26), field=f"{field}.roce.dscp"))
            if roce.get("gid_index") is not None:
                gid = check_range(roce["gid_index"], f"{field}.roce.gid_index", 0, 255, integer=True)
                conf["NCCL_IB_GID_INDEX"] = str(gid)
        elif ib_service_level is not None:
            sl = check_range(ib_service_level, f"{field}.infiniband.service_level", 0, 15, integer=True)
            conf["NCCL_IB_SL"] = str(sl)
        if nodes >= LARGE_FABRIC_NODES:
            conf["NCCL_IB_TIMEOUT"] = "22"
    if topo_file:
        conf["NCCL_TOPO_FILE"] = topo_file
    conf["NCCL_DEBUG"] = "WARN"
    return conf


def nccl_conf_text(conf: dict[str, str]) -> str:
    lines = [
        "# Managed by gpucluster.tiers: NCCL defaults for every job on this node.",
        "# A job's own environment wins over this file (NCCL never overrides a set variable).",
    ]
    lines += [f"{k}={v}" for k, v in conf.items()]
    return "\n".join(lines) + "\n"


def nccl_topology_xml(
    *,
    gpus: list[dict[str, Any]],
    nics: list[dict[str, Any]],
    fabric_type: str = "infiniband",
    link_speed: str = "32.0 GT/s",
    link_width: int = 16,
) -> str:
    """Single-node topology for NCCL_TOPO_FILE (dossier 2.4): one <cpu> per NUMA node."""
    nic_names = {n["name"] for n in nics}
    numa: dict[int, list[tuple[str, str, str]]] = {}
    for i, gpu in enumerate(gpus):
        bus = str(gpu["pci_bus"]).lower()
        if not PCI_BUS.match(bus):
            raise PlanError(f"gpucluster_node.gpus[{i}].pci_bus", gpu["pci_bus"], "a PCI address DDDD:BB:DD.F")
        if gpu.get("nic") and gpu["nic"] not in nic_names:
            raise PlanError(f"gpucluster_node.gpus[{i}].nic", gpu["nic"], "a NIC with a PCI address in nics")
        numa.setdefault(int(gpu["numa_node"]), []).append((bus, PCI_CLASS["gpu"], f"GPU {gpu['index']}"))
    nic_class = PCI_CLASS["ethernet" if fabric_type == "roce" else "infiniband"]
    for i, nic in enumerate(nics):
        if not nic.get("pci_bus") or nic.get("purpose") == "management":
            continue
        bus = str(nic["pci_bus"]).lower()
        if not PCI_BUS.match(bus):
            raise PlanError(f"gpucluster_node.nics[{i}].pci_bus", nic["pci_bus"], "a PCI address DDDD:BB:DD.F")
        numa.setdefault(int(nic.get("numa_node") or 0), []).append((bus, nic_class, f"{nic['name']} {nic['purpose']}"))
    lines = ['<system version="1">']
    for node in sorted(numa):
        lines.append(f'  <cpu numaid="{node}">')
        for bus, cls, what in sorted(numa[node]):
            lines.append(f"    <!-- {what} -->")
            lines.append(
                f"    <pci busid={quoteattr(bus)} class={quoteattr(cls)} "
                f"link_speed={quoteattr(link_speed)} link_width={quoteattr(str(link_width))}/>"
            )
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"
