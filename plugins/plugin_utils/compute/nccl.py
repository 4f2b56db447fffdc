"""NCCL: /etc/nccl.conf keys per fabric and, for sites that opt in, the single-node topology XML.

Sources: docs/sources.md §2 (NCCL 2.30 docs [N1] and source [N2]) and 7 (RoCE).
- No NCCL_TOPO_FILE by default: on bare metal NCCL's own detection from sysfs sees the real PCIe
  switches. A topology file replaces that PCI hierarchy (NCCL src/graph/topo.cc ncclTopoGetSystem loads
  NCCL_TOPO_FILE before detection), so it is only written when the inventory asks for it
  (``gpucluster_node.nccl_topology: file``: VMs with a hidden or flattened PCI tree, as Azure ND ships).
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from xml.sax.saxutils import quoteattr

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    IntraNodeTransport,
    NcclSection,
    NcclTopology,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import FABRIC_TYPES, RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import NCCL_TOPO_FILE

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.interconnect import IntraNode
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import FabricSection
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

RAIL_TOPOLOGIES = ("rail_optimized", "fat_tree")
LARGE_FABRIC_NODES = 256  # docs/sources.md §2.2: raise NCCL_IB_TIMEOUT to 22 on very large fabrics
PCI_BUS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
# docs/sources.md §2.4; NCCL src/graph/topo.cc kvDictPciClass (0x060400 bridge = PCI switch, 0x03 GPU, 0x02 NIC)
PCI_CLASS = {"bridge": "0x060400", "gpu": "0x030200", "infiniband": "0x020700", "ethernet": "0x020000"}
# link_speed strings NCCL knows (src/graph/topo.cc kvDictPciGen, as Linux >= 5.7 writes max_link_speed): any other
# string falls back to 60 (8 GT/s x 100 Mbps per lane), so "32.0 GT/s" without " PCIe" would read as Gen3.
# Azure's H100 file (azhpc-images topology/ndv5-topo.xml) uses "32.0 GT/s PCIe" x16 for GPU, NIC and switch.
PCIE_LINK_SPEED = {3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}


def roce_traffic_class(dscp: object, ecn: bool = True, field: str = "gpucluster_fabric.roce.dscp") -> int:
    """ToS byte for a DSCP: DSCP x 4 + ECT(0) (docs/sources.md §7.2: 106 = 26 x 4 + 2)."""
    value = int(check_range(dscp, field, 0, 63, integer=True))
    return value * 4 + (2 if ecn else 0)


def nccl_conf(
    *,
    fabric_type: str,
    topology: str,
    compute_hcas: list[str],
    socket_ifname: str,
    nodes: int,
    roce: Mapping[str, object] | None = None,
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
        # docs/sources.md §2.1: threads x sockets per thread <= 64; 4 x 4 is a common 100G setting
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
            conf["NCCL_CROSS_NIC"] = "0"  # keep each ring on its rail (docs/sources.md §2.1)
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


#: The order of /etc/nccl.conf's keys (the order nccl_conf sets them); a key not named here follows, by name.
CONF_ORDER: tuple[str, ...] = (
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_CROSS_NIC",
    "NCCL_IB_TC",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_SL",
    "NCCL_IB_TIMEOUT",
    "NCCL_TOPO_FILE",
    "NCCL_DEBUG",
)


def nccl_conf_text(conf: dict[str, str]) -> str:
    """/etc/nccl.conf from the plan's ``nccl.conf`` (KEY -> VALUE), keys in :data:`CONF_ORDER` whatever
    the mapping's order (a plan read back from plan.json, keys sorted, renders the same bytes)."""
    rank = {key: i for i, key in enumerate(CONF_ORDER)}
    lines = [
        "# Managed by gpucluster.tiers: NCCL defaults for every job on this node.",
        "# A job's own environment wins over this file (NCCL never overrides a set variable).",
    ]
    lines += [f"{k}={conf[k]}" for k in sorted(conf, key=lambda k: (rank.get(k, len(rank)), k))]
    return "\n".join(lines) + "\n"


@dataclass
class _Device:
    """One GPU or NIC of the topology file, under its PCIe switch."""

    bus: str
    pci_class: str
    switch: str
    numa: int | None
    net: str | None  # the RDMA device name NCCL looks the NIC up by (<nic><net name=..>)
    field: str


def _bus(value: object, field: str) -> str:
    bus = str(value or "").lower()
    if not PCI_BUS.match(bus):
        raise PlanError(field, value, "a PCI address DDDD:BB:DD.F (lspci -D)")
    return bus


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str, float)):
        raise PlanError(field, value, "an integer")
    return int(value)


def _switch(item: Mapping[str, object], field: str, what: str) -> str:
    if not item.get("pcie_switch"):
        raise PlanError(
            f"{field}.pcie_switch",
            item.get("pcie_switch"),
            f"the PCI address of the PCIe switch (upstream bridge) {what} sits under, required when "
            "gpucluster_node.nccl_topology is file",
        )
    return _bus(item["pcie_switch"], f"{field}.pcie_switch")


def _devices(
    gpus: Sequence[Mapping[str, object]], nics: Sequence[Mapping[str, object]], fabric_type: str, field: str
) -> list[_Device]:
    """Every GPU and compute NIC with its switch; checks the pairing and the switch tree.

    Storage NICs are left out: NCCL_IB_HCA never lists them, so NCCL never looks them up.
    """
    if not gpus:
        raise PlanError(f"{field}.gpus", gpus, "one entry per GPU (pci_bus, numa_node, nic, pcie_switch) for a file")
    nic_class = PCI_CLASS["ethernet" if fabric_type == "roce" else "infiniband"]
    devices: list[_Device] = []
    nic_switch: dict[str, tuple[str, str]] = {}
    for j, nic in enumerate(nics):
        if nic.get("purpose") != "compute":
            continue
        f = f"{field}.nics[{j}]"
        if not nic.get("pci_bus"):
            raise PlanError(f"{f}.pci_bus", nic.get("pci_bus"), "the NIC's PCI address, required for a topology file")
        bus, switch = _bus(nic["pci_bus"], f"{f}.pci_bus"), _switch(nic, f, "the NIC")
        numa = nic.get("numa_node")
        devices.append(
            _Device(bus, nic_class, switch, None if numa is None else _int(numa, f"{f}.numa_node"), str(nic["name"]), f)
        )
        nic_switch[str(nic["name"])] = (switch, f)
    for i, gpu in enumerate(gpus):
        f = f"{field}.gpus[{i}]"
        bus, switch = _bus(gpu.get("pci_bus"), f"{f}.pci_bus"), _switch(gpu, f, "the GPU")
        paired = gpu.get("nic")
        if paired:
            if not isinstance(paired, str) or paired not in nic_switch:
                raise PlanError(f"{f}.nic", paired, "a compute NIC of gpucluster_node.nics")
            if nic_switch[paired][0] != switch:
                raise PlanError(
                    f"{f}.pcie_switch",
                    gpu.get("pcie_switch"),
                    f"the switch of its NIC {paired} ({nic_switch[paired][1]}.pcie_switch = {nic_switch[paired][0]}): "
                    "a GPU and its NIC on different switches is a PHB/SYS path, no GPUDirect RDMA at NCCL's default "
                    "NCCL_NET_GDR_LEVEL (PXB); fix the pairing or the switch",
                )
        devices.append(_Device(bus, PCI_CLASS["gpu"], switch, _int(gpu.get("numa_node"), f"{f}.numa_node"), None, f))
    # A switch hangs off one CPU root complex, so one NUMA node (the GPUs' first: numa_node is required there);
    # a NIC without numa_node takes its switch's.
    switch_numa: dict[str, int] = {}
    for d in sorted(devices, key=lambda x: x.net is not None):
        if d.numa is not None and switch_numa.setdefault(d.switch, d.numa) != d.numa:
            raise PlanError(
                f"{d.field}.numa_node", d.numa, f"NUMA node {switch_numa[d.switch]}, as the others on switch {d.switch}"
            )
    # NCCL fills a <cpu>'s arch/vendor/affinity while it places a GPU under it (xml.cc ncclTopoGetXmlFromSys ->
    # ncclTopoGetXmlFromCpu); a NIC under a <cpu> without GPU would fail ncclTopoAddCpu (no "arch").
    gpu_numas = sorted({d.numa for d in devices if d.net is None and d.numa is not None})
    seen: set[str] = set()
    for d in devices:
        d.numa = switch_numa.get(d.switch) if d.numa is None else d.numa
        if d.numa not in gpu_numas:
            raise PlanError(f"{d.field}.numa_node", d.numa, f"a NUMA node with GPUs under it ({gpu_numas})")
        if d.bus in seen or d.bus in switch_numa:
            raise PlanError(f"{d.field}.pci_bus", d.bus, "an address used once, by no other device or switch")
        seen.add(d.bus)
    return devices


def nccl_topology(
    *,
    gpus: Sequence[Mapping[str, object]],
    nics: Sequence[Mapping[str, object]],
    fabric_type: str = "infiniband",
    pcie_gen: int = 5,
    link_width: int = 16,
    field: str = "gpucluster_node",
) -> NcclTopology:
    """The node's PCI tree for NCCL_TOPO_FILE, as data: CPUs (NUMA nodes) > PCIe switches > GPUs and NICs.
    :func:`topology_xml_text` (filter gpucluster.tiers.nccl_topology_xml) writes it as the file
    <cpu numaid> > <pci switch> > <pci GPU> and <pci NIC><nic><net>.

    Only for sites that opt in (``gpucluster_node.nccl_topology: file``, e.g. virtual machines whose PCI tree is
    hidden). NCCL reads this file before detection and keeps its placement: a GPU or NIC found here by bus id
    (``<pci busid>``) or by name (``<net name>``) is not re-placed from sysfs (NCCL src/graph/xml.cc
    ncclTopoGetPciNode, ncclTopoGetXmlFromSys only walks sysfs for a node without parent, ncclTopoFillNet returns
    the <net> it finds by name). So every GPU and NIC must sit under its real switch, or the GPU-NIC path reads
    PHB (through the CPU) instead of PIX, and GPUDirect RDMA goes off at the default NCCL_NET_GDR_LEVEL (PXB;
    src/graph/paths.cc ncclTopoCheckGdr). Format as NCCL's own dumps and Azure's topo files (docs/sources.md §2.4;
    Azure/azhpc-images topology/ndv4-topo.xml, ndv5-topo.xml): class 0x060400 bridge, 0x030200 GPU, 0x020700 IB
    or 0x020000 Ethernet NIC, link_speed/link_width per <pci>. NCCL fills the rest (CPU affinity and model, GPU
    <gpu> and NVLinks from NVML, NIC speed/port/guid) at run time. No XML comments, as NCCL's dumps (xml.cc
    ncclTopoDumpXmlRec) and Azure's files have none.
    """
    check_choice(fabric_type, "gpucluster_fabric.type", RDMA_FABRICS)
    speed = PCIE_LINK_SPEED.get(int(check_range(pcie_gen, f"{field}.pcie_gen", 3, 6, integer=True)))
    width = str(check_range(link_width, f"{field}.pcie_link_width", 1, 32, integer=True))
    tree: dict[int, dict[str, list[_Device]]] = {}
    for d in _devices(gpus, nics, fabric_type, field):
        tree.setdefault(int(d.numa or 0), {}).setdefault(d.switch, []).append(d)
    return {
        "link_speed": speed,
        "link_width": width,
        "cpus": [
            {
                "numaid": str(numa),
                "switches": [
                    {
                        "busid": switch,
                        "class": PCI_CLASS["bridge"],
                        "devices": [
                            {"busid": d.bus, "class": d.pci_class, "net": d.net}
                            for d in sorted(tree[numa][switch], key=lambda x: x.bus)
                        ],
                    }
                    for switch in sorted(tree[numa])
                ],
            }
            for numa in sorted(tree)
        ],
    }


def topology_xml_text(topology: NcclTopology) -> str:
    """The NCCL_TOPO_FILE text of a :func:`nccl_topology` tree (the plan's ``nccl.topology_tree``): NCCL's
    dump format, every attribute quoted (saxutils.quoteattr), link speed and width on every <pci>."""
    link = f"link_speed={quoteattr(str(topology['link_speed']))} link_width={quoteattr(str(topology['link_width']))}"
    lines = ['<system version="1">']
    for cpu in topology["cpus"]:
        lines.append(f"  <cpu numaid={quoteattr(str(cpu['numaid']))}>")
        for switch in cpu["switches"]:
            lines.append(f"    <pci busid={quoteattr(switch['busid'])} class={quoteattr(switch['class'])} {link}>")
            for d in switch["devices"]:
                head = f"      <pci busid={quoteattr(d['busid'])} class={quoteattr(d['class'])} {link}"
                if d["net"] is None:
                    lines.append(head + "/>")
                else:
                    lines += [head + ">", "        <nic>", f"          <net name={quoteattr(d['net'])}/>"]
                    lines += ["        </nic>", "      </pci>"]
            lines.append("    </pci>")
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


#: NCCL variables the plan never writes for the GPUs inside a node: docs/sources.md §2.1 lists them among the
#: "Debugging" variables that "should not be used in production nor retained in scripts" [N1]
INTRA_NODE_UNSET = ("NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE")


def intra_node_transport(kind: str, gpu_key: str) -> IntraNodeTransport:
    """How NCCL moves data between the GPUs of one node (``kind`` from compute/interconnect.py), what the
    plan leaves to NCCL, and what to check on the host.

    NCCL's P2P transport is CUDA peer access "using NVLink or PCI"; without NCCL_P2P_LEVEL NCCL picks the
    largest GPU distance for P2P from the topology, and SHM (host memory) carries the rest (docs/sources.md
    [N1]). NVLS (NVLink SHARP) needs NVSwitch; NCCL_NVLS_ENABLE's default 2 enables it where supported
    (docs/sources.md §2.1). Over PCIe, ACS on the PCIe bridges sends peer traffic up to the root complex
    (slower, or a hang): NCCL's troubleshooting guide checks ``lspci -vvv | grep ACSCtl`` for SrcValid+
    (docs/sources.md [N4]).
    """
    check_choice(kind, "intra-node link", ("nvswitch", "nvlink_bridge", "pcie"))
    left = ", ".join(INTRA_NODE_UNSET)
    if kind == "nvswitch":
        return {
            "transport": "P2P over NVLink (NVSwitch)",
            "nvls": "where the NVSwitch supports it (NCCL_NVLS_ENABLE default 2)",
            "unset": list(INTRA_NODE_UNSET),
            "checks": [],
            "reason": f"{gpu_key}: every GPU pair is on NVLink; NCCL's defaults use it ({left} left unset)",
        }
    acs = "lspci -vvv | grep ACSCtl: no SrcValid+ on the PCIe bridges between GPUs (NCCL troubleshooting, ACS)"
    if kind == "nvlink_bridge":
        return {
            "transport": "P2P over NVLink within a bridged pair, P2P over PCIe or SHM between pairs",
            "nvls": "no: no NVSwitch",
            "unset": list(INTRA_NODE_UNSET),
            "checks": [acs],
            "reason": f"{gpu_key}: NVLink bridges pair the GPUs; NCCL picks P2P or SHM per pair ({left} left unset)",
        }
    return {
        "transport": "P2P over PCIe where the topology allows it, SHM through host memory otherwise",
        "nvls": "no: no NVLink",
        "unset": list(INTRA_NODE_UNSET),
        "checks": [acs],
        "reason": (
            f"{gpu_key} has no NVLink: NCCL uses CUDA peer access over PCIe (P2P) up to the GPU distance it picks "
            f"from the topology, and host shared memory beyond it; {left} are debugging variables and left unset"
        ),
    }


def nccl_plan(site: Site, fab: FabricSection, link: IntraNode) -> NcclSection:
    """/etc/nccl.conf, and NCCL_TOPO_FILE only when the site opts in (gpucluster_node.nccl_topology: file).

    On bare metal NCCL's detection from sysfs sees the real PCIe switches; a file replaces that PCI tree
    (above), so the reference tiers write none. Inside a node NCCL needs no file: ``intra_node`` says what
    it uses there (``link``: how the node's GPUs reach each other), and what the plan leaves to it.
    """
    intra = intra_node_transport(link.kind, site.node.gpu_model)
    ftype = fab["type"]
    choice = site.node.nccl_topology
    if ftype == "none":
        return {
            "enabled": False,
            "conf": {},
            "topology": choice,
            "topology_reason": "no multi-node fabric: no /etc/nccl.conf and no NCCL_TOPO_FILE",
            "topology_tree": None,
            "topo_file": None,
            "intra_node": intra,
        }
    topo_file = NCCL_TOPO_FILE if choice == "file" else None
    mgmt_if = site.management_interface
    conf = nccl_conf(
        fabric_type=ftype,
        topology=fab["topology"],
        compute_hcas=[n.name for n in site.node.compute_nics],
        socket_ifname=mgmt_if,
        nodes=len(site.compute_hosts),
        roce=fab["roce"],
        ib_service_level=fab["infiniband"]["service_level"] if fab["infiniband"] else None,
        topo_file=topo_file,
    )
    if fab["roce"]:
        # the ToS the hosts' RoCE setup uses (fabric_host.roce_settings): one value, never two
        conf["NCCL_IB_TC"] = str(fab["roce"]["traffic_class"])
    tree = None
    if topo_file:
        require(
            ftype in RDMA_FABRICS,
            "gpucluster_node.nccl_topology",
            choice,
            "detect when gpucluster_fabric.type is tcp (the file places RDMA NICs)",
        )
        tree = nccl_topology(
            gpus=[vars(g) for g in site.node.gpus],
            nics=[vars(n) for n in site.node.nics],  # all of them: error fields index gpucluster_node.nics
            fabric_type=ftype,
            pcie_gen=site.node.pcie_gen,
        )
    reason = (
        f"{topo_file} from the inventory's PCIe switches (gpucluster_node.nccl_topology: file)"
        if topo_file
        else "NCCL detects the PCI tree from sysfs (gpucluster_node.nccl_topology: detect); no NCCL_TOPO_FILE"
    )
    return {
        "enabled": True,
        "conf": conf,
        "topology": choice,
        "topology_reason": reason,
        "topology_tree": tree,  # the file's PCI tree (filter nccl_topology_xml renders it)
        "topo_file": topo_file,  # None: no file (the compute role removes a stale one)
        "intra_node": intra,
    }
