"""Read and check ``gpucluster_node``: the node's shape, NICs and GPUs (inventory/site.py :func:`load_site`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import NCCL_TOPOLOGIES, NIC_PURPOSES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.fields import (
    get,
    given,
    opt_flag,
    opt_integer,
    opt_list,
    opt_mapping,
    opt_number,
    opt_text,
    section,
    text,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site_model import Gpu, Nic, Node

PCI_BUS = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\Z")


def _pcie_switch(item: Mapping[str, JsonValue], field: str) -> str | None:
    """The optional ``pcie_switch`` of a GPU or NIC: a PCI address, stored lower-case as NCCL writes bus ids."""
    switch = item.get("pcie_switch")
    if switch is None:
        return None
    require(
        isinstance(switch, str) and bool(PCI_BUS.match(switch)),
        f"{field}.pcie_switch",
        switch,
        "the PCI address DDDD:BB:DD.F of the PCIe switch's upstream bridge (lspci -t / nvidia-smi topo -m)",
    )
    return switch.lower() if isinstance(switch, str) else None


def read_node(raw: Mapping[str, object]) -> Node:
    """``gpucluster_node``: the node's shape, its NICs and GPUs, checked (ranges, names, PCI addresses)."""
    p = "gpucluster_node"
    sec = section(raw, p)
    gpus_per_node = check_range(get(sec, p, "gpus_per_node"), f"{p}.gpus_per_node", 1, 16, integer=True)
    nics = _nics(sec, p, gpus_per_node)
    seen = {n.name for n in nics}
    rails = [n.rail for n in nics if n.purpose == "compute"]
    require(len(rails) == len(set(rails)), f"{p}.nics", rails, "one compute NIC per rail (rails must not repeat)")
    gpus: list[Gpu] = []
    for i, item in enumerate(given(opt_list(sec, p, "gpus"), [])):
        f = f"{p}.gpus[{i}]"
        if not isinstance(item, dict):
            raise PlanError(f, item, "a mapping with index, pci_bus, numa_node, nic")
        idx = check_range(get(item, f, "index"), f"{f}.index", 0, gpus_per_node - 1, integer=True)
        bus = text(item, f, "pci_bus")
        require(bool(PCI_BUS.match(bus)), f"{f}.pci_bus", bus, "a PCI address DDDD:BB:DD.F")
        numa = check_range(get(item, f, "numa_node"), f"{f}.numa_node", 0, 63, integer=True)
        nic = item.get("nic")
        if nic is not None and not (isinstance(nic, str) and nic in seen):
            raise PlanError(f"{f}.nic", nic, "the name of a NIC listed in gpucluster_node.nics")
        gpus.append(Gpu(idx, bus, numa, nic, _pcie_switch(item, f)))
    if gpus:
        require(
            sorted(g.index for g in gpus) == list(range(gpus_per_node)),
            f"{p}.gpus",
            [g.index for g in gpus],
            f"one entry per GPU, indexes 0..{gpus_per_node - 1}",
        )
    _check_unique_pci_bus(gpus, nics)
    limits = sec.get("gpu_temp_limits")
    return Node(
        gpu_model=text(sec, p, "gpu_model"),
        gpus_per_node=gpus_per_node,
        cpu_sockets=check_range(get(sec, p, "cpu_sockets"), f"{p}.cpu_sockets", 1, 8, integer=True),
        cores_per_socket=check_range(get(sec, p, "cores_per_socket"), f"{p}.cores_per_socket", 1, 512, integer=True),
        threads_per_core=check_range(
            given(sec.get("threads_per_core"), 1), f"{p}.threads_per_core", 1, 8, integer=True
        ),
        memory_gib=check_range(get(sec, p, "memory_gib"), f"{p}.memory_gib", 1, 65536),
        base_power_w=check_range(get(sec, p, "base_power_w"), f"{p}.base_power_w", 0, 50000),
        gpus=sorted(gpus, key=lambda g: g.index),
        nics=nics,
        psu_count=opt_integer(sec, p, "psu_count"),
        psu_rating_w=opt_number(sec, p, "psu_rating_w"),
        psu_redundancy=opt_text(sec, p, "psu_redundancy"),
        gpu_temp_limits=limits if isinstance(limits, dict) else None,
        nccl_topology=check_choice(given(sec.get("nccl_topology"), "detect"), f"{p}.nccl_topology", NCCL_TOPOLOGIES),
        # PCIe Gen5 x16: H100 SXM and ConnectX-7 (Azure's H100 topo file, azhpc-images topology/ndv5-topo.xml)
        pcie_gen=check_range(given(sec.get("pcie_gen"), 5), f"{p}.pcie_gen", 3, 6, integer=True),
        one_compute_nic_per_gpu=given(opt_flag(sec, p, "one_compute_nic_per_gpu"), True),
        gpu_software=opt_mapping(sec, p, "gpu_software"),
        gpu_limits=opt_mapping(sec, p, "gpu_limits"),
        allreduce_intra_node_busbw_gbs=opt_number(sec, p, "allreduce_intra_node_busbw_gbs"),
    )


def _nics(sec: Mapping[str, JsonValue], p: str, gpus_per_node: int) -> list[Nic]:
    """``gpucluster_node.nics``: each NIC's name (unique), purpose, rail (compute NICs), rate and addresses."""
    nics: list[Nic] = []
    seen: set[str] = set()
    for i, item in enumerate(given(opt_list(sec, p, "nics"), [])):
        f = f"{p}.nics[{i}]"
        if not isinstance(item, dict):
            raise PlanError(f, item, "a mapping with name, purpose, ...")
        name = text(item, f, "name")
        require(name not in seen, f"{f}.name", name, "a NIC name not used before")
        seen.add(name)
        purpose = check_choice(get(item, f, "purpose"), f"{f}.purpose", NIC_PURPOSES)
        rail = opt_integer(item, f, "rail") if purpose != "compute" else None
        if purpose == "compute":
            rail = check_range(item.get("rail"), f"{f}.rail", 0, gpus_per_node - 1, integer=True)
        rate = item.get("rate_gbps")
        rate_gbps = None if rate is None else check_range(rate, f"{f}.rate_gbps", 1, 3200)
        bus = item.get("pci_bus")
        if bus is not None:
            require(bool(PCI_BUS.match(str(bus))), f"{f}.pci_bus", bus, "a PCI address DDDD:BB:DD.F")
        numa = item.get("numa_node")
        numa_node = None if numa is None else check_range(numa, f"{f}.numa_node", 0, 63, integer=True)
        nics.append(
            Nic(
                name,
                str(item.get("netdev", name)),
                purpose,
                rail,
                rate_gbps,
                str(item.get("width", "4x")),
                opt_text(item, f, "pci_bus"),
                numa_node,
                _pcie_switch(item, f),
            )
        )
    return nics


def _check_unique_pci_bus(gpus: list[Gpu], nics: list[Nic]) -> None:
    """No two devices of a node (GPUs and NICs) at one PCI address: NCCL's topology would list it twice."""
    seen: dict[str, str] = {}
    devices = [(f"gpus[{g.index}]", g.pci_bus) for g in gpus] + [
        (f"nics[{i}]", n.pci_bus) for i, n in enumerate(nics) if n.pci_bus
    ]
    for where, bus in devices:
        bus = bus.lower()
        require(
            bus not in seen,
            f"gpucluster_node.{where}.pci_bus",
            bus,
            f"a PCI address no other device of the node has (gpucluster_node.{seen.get(bus)} is at {bus})",
        )
        seen[bus] = where


def check_gpu_nic_pairing(node: Node, tier: str, fabric_type: str) -> None:
    """Tier2 and up with a fabric: exactly one compute NIC per GPU, each GPU on its own (the 1:1 rail design,
    docs/fabric.md), unless ``gpucluster_node.one_compute_nic_per_gpu: false`` opts out."""
    p = "gpucluster_node"
    if tier == "tier1" or fabric_type == "none" or node.one_compute_nic_per_gpu is False:
        return
    opt_out = f"(or set {p}.one_compute_nic_per_gpu: false to opt out of the 1:1 design)"
    compute = node.compute_nics
    require(
        len(compute) == node.gpus_per_node,
        f"{p}.nics",
        [n.name for n in compute],
        f"exactly one compute NIC per GPU on {tier}: {node.gpus_per_node} for {p}.gpus_per_node "
        f"{node.gpus_per_node}, not {len(compute)} {opt_out}",
    )
    names = {n.name for n in compute}
    owner: dict[str, int] = {}
    for gpu in node.gpus:
        f = f"{p}.gpus[{gpu.index}].nic"
        require(
            gpu.nic in names, f, gpu.nic, f"the name of a compute NIC (one of {', '.join(sorted(names))}) {opt_out}"
        )
        require(
            gpu.nic not in owner,
            f,
            gpu.nic,
            f"a compute NIC no other GPU uses (GPU {owner.get(str(gpu.nic))} is on {gpu.nic}) {opt_out}",
        )
        owner[str(gpu.nic)] = gpu.index
