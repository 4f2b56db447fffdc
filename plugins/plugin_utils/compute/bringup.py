"""What a GPU node needs to come up, from the catalog and the inventory, checked before any host is touched.

Two rules (docs/DESIGN, "The plan against the hardware"):

- **NVSwitch boards need Fabric Manager.** On an HGX/DGX board (catalog ``nvswitch``: H100/H200/B200 SXM,
  A100 SXM4 8-GPU) the driver leaves each GPU's fabric state "In Progress" until ``nv-fabricmanager`` has
  trained the NVSwitch fabric; CUDA fails with error 802 "system not yet initialized" until then and
  ``nvidia-smi -q`` shows ``Fabric > State`` other than ``Completed`` (docs/sources.md [F1] [F3]). The
  Fabric Manager package must be the driver's exact version ([F2]): the compute role installs
  ``nvidia-fabricmanager-<driver branch>`` from the site's GPU repository, pinned and held like the
  driver, and orders it before the GPU clocks unit, DCGM, slurmd and kubelet. PCIe cards (RTX PRO 6000,
  L40S, H100 PCIe/NVL) have no NVSwitch and get none.
- **NVLink5 boards need NVLSM too.** On DGX/HGX B200 and HGX B100 (fourth-generation NVSwitch, catalog
  ``nvlsm``) Fabric Manager needs the NVLink Subnet Manager: without it Fabric Manager does not start, the
  fabric state stays ``In Progress`` and CUDA fails with error 802 (docs/sources.md [F20]). The compute
  role installs the ``nvlsm`` package with Fabric Manager, whose start script runs NVLSM in its own unit,
  and loads ``ib_umad`` at boot (/etc/modules-load.d/gpucluster-nvlsm.conf), which Fabric Manager's start
  check needs there ([F21]); Fabric Manager's drop-in orders it after the modules are loaded, and every
  GPU user after it. The health check drains a node where ``ib_umad`` is missing or the fabric state is not
  ``Completed``.
- **GPUDirect RDMA needs a kernel path the target OS has.** Where the NCCL plan sends over RDMA NICs
  (InfiniBand, RoCE) NCCL registers GPU memory with the NIC either through the kernel's DMA-BUF or through
  the legacy ``nvidia_peermem`` module of the driver (R470 and later); without either NCCL copies through
  host memory without a word (docs/sources.md [F4] [F5] [F6]). DMA-BUF, which NVIDIA recommends, needs the
  driver's open kernel modules (R515 is the first branch that has them; the default flavour since R560 and
  the only one on Blackwell), a kernel of 5.12 or later (the RDMA subsystem's DMA-BUF memory registration)
  and NCCL 2.13 or later (``NCCL_DMABUF_ENABLE``) ([F4] [F5] [F7] [F8] [F11]). ``nvidia_peermem`` needs the
  PeerDirect peer-memory API of MLNX_OFED / DOCA-OFED's ib_core, which a distribution kernel such as
  Debian 12's does not have: there modprobe fails ([F10]). The plan decides from
  ``gpucluster_node.gpu_software`` (driver branch, kernel version, kernel module flavour, NCCL version,
  ``rdma_stack``: Debian's ``inbox`` rdma-core or ``doca_ofed``/``mlnx_ofed``) and ``gpudirect_rdma``
  (``auto``, ``dmabuf``, ``nvidia_peermem``, ``none``). What the inventory leaves out is the target OS's
  (Debian 12: kernel 6.1, [F12]) and a current driver's (R560 and later: open modules). ``auto`` takes
  DMA-BUF wherever those allow it, ``nvidia_peermem`` only where DOCA-OFED/MLNX_OFED is declared
  (``rdma_stack``; the compute role installs DOCA-OFED from the site's repository when given,
  ``compute_doca_repo``), and refuses the rest with the field and the fix. ``nvidia_peermem`` is loaded at
  boot through /etc/modules-load.d; the health check drains a node where the module is missing, or, with
  DMA-BUF, where the loaded driver is not the open flavour (/proc/driver/nvidia/version).
- **The PCIe path between GPU and NIC.** With GPUDirect RDMA the NIC reads GPU memory across the PCIe
  switch they share; ACS on that switch's bridges redirects the traffic to the root complex (slower, or a
  hang), and a translating IOMMU adds a lookup to each DMA. NCCL's troubleshooting guide: disable ACS on
  the PCIe switches (``setpci ... ECAP_ACS+0x6.w=0000``) and run the IOMMU in pass-through (``iommu=pt``)
  on bare metal ([N4] [F13]). The plan gives the compute role what to do: a oneshot unit that clears ACS
  Control on every PCI-to-PCI bridge (class 0x0604) found at boot, and ``iommu=pt`` in a GRUB drop-in;
  both take effect at the next boot, which the role records as a pending reboot, carried out under a
  drain only when the operator allows it (``compute_apply_reboot``). ``pcie_acs: keep`` and
  ``iommu: keep`` opt out (virtual machines, sites that pass devices through to guests).

A site that cannot satisfy a rule (DMA-BUF asked for on a proprietary driver, ``none`` while the NCCL
plan uses GPUDirect RDMA, ``nvidia_peermem`` on a driver before R470 or without DOCA-OFED/MLNX_OFED,
proprietary modules on Blackwell) gets a PlanError naming the field.
No I/O; pure functions of plain data.
"""

from __future__ import annotations

import re

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    BringupSection,
    EffectiveSoftware,
    GpudirectPlan,
    GpuSoftware,
    NvlsmPlan,
    PciePlan,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)

FIELD = "gpucluster_node.gpu_software"
KERNEL_MODULES = ("open", "proprietary")
GPUDIRECT_METHODS = ("auto", "dmabuf", "nvidia_peermem", "none")
#: the RDMA stack of the nodes: Debian's own (kernel ib_core + rdma-core) or NVIDIA's, which adds PeerDirect
RDMA_STACKS = ("inbox", "doca_ofed", "mlnx_ofed")
#: docs/sources.md [F10]: nvidia_peermem registers with MLNX_OFED / DOCA-OFED's PeerDirect API only
PEERDIRECT_STACKS = ("doca_ofed", "mlnx_ofed")
PCIE_ACS = ("disable", "keep")
IOMMU = ("pt", "keep")
#: docs/sources.md [F12]: the target OS, Debian 12 (bookworm), runs Linux 6.1 (linux-image-amd64)
TARGET_OS = "Debian 12"
TARGET_KERNEL = "6.1"
#: docs/sources.md [F11]: the open kernel module flavour is the default installation from R560 on
OPEN_DEFAULT_DRIVER = 560
#: docs/sources.md [F11]: Blackwell GPUs run only on the open kernel modules (catalog names)
OPEN_ONLY_MODELS = ("b200", "rtx_pro_6000")
#: docs/sources.md [F5]: NCCL registers GPU memory through dma-buf from 2.13 (NCCL_DMABUF_ENABLE)
DMABUF_MIN_NCCL = (2, 13)
#: docs/sources.md [F6]: nvidia-peermem ships with the driver since CUDA 11.4 / R470
PEERMEM_MIN_DRIVER = 470
#: docs/sources.md [F4] [F7]: DMA-BUF needs the open GPU kernel modules, first released with R515
DMABUF_MIN_DRIVER = 515
#: docs/sources.md [F8]: the RDMA subsystem registers DMA-BUF memory from Linux 5.12
DMABUF_MIN_KERNEL = (5, 12)
#: the fabric types whose NCCL transport is RDMA verbs (NCCL_IB_HCA): GPUDirect RDMA is planned there
PEERMEM_MODULE = "nvidia_peermem"
MODULES_LOAD_FILE = "/etc/modules-load.d/gpucluster-gpudirect.conf"
#: what the health check reads for the loaded driver's flavour ("... Open Kernel Module for <arch> ...")
DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"
OPEN_MODULE_MARK = "Open Kernel Module"
#: PCIe ACS and the IOMMU (docs/sources.md [N4] [F13]): the boot unit, its program and the GRUB drop-in
ACS_UNIT = "gpucluster-pcie-acs.service"
ACS_PROGRAM = "/usr/local/sbin/gpucluster-pcie-acs"
#: PCI class of a PCI-to-PCI bridge (the ports of a PCIe switch and the root ports): PCI Code and ID
#: Assignment, base class 06 subclass 04; ACS Control is the 16-bit word at offset 6 of the ACS capability
ACS_BRIDGE_CLASS = "0x0604"
ACS_CONTROL_REGISTER = "ECAP_ACS+0x6.w"
ACS_CONTROL_VALUE = "0000"
GRUB_DROPIN = "/etc/default/grub.d/gpucluster.cfg"
IOMMU_KERNEL_ARGS = ("iommu=pt",)
FABRIC_MANAGER_SERVICE = "nvidia-fabricmanager.service"
#: NVIDIA's CUDA repositories name the package per driver branch (docs/sources.md [F2])
FABRIC_MANAGER_PACKAGE_PREFIX = "nvidia-fabricmanager-"
#: the units that use the GPUs and must start after Fabric Manager (its drop-in orders them: Before=)
FABRIC_MANAGER_BEFORE = (
    "gpucluster-gpu-clocks.service",
    "gpucluster-mig.service",
    "nvidia-dcgm.service",
    "nvidia-dcgm-exporter.service",
    "slurmd.service",
    "kubelet.service",
)
#: NVLink5 boards (catalog ``nvlsm``): the NVLink Subnet Manager's package in NVIDIA's repository and the
#: InfiniBand management-datagram module its NVSwitch management port needs (docs/sources.md [F20] [F21])
NVLSM_PACKAGE = "nvlsm"
NVLSM_MODULES = ("ib_umad",)
NVLSM_MODULES_LOAD_FILE = "/etc/modules-load.d/gpucluster-nvlsm.conf"
#: Fabric Manager starts after the boot's modules are loaded (ib_umad) where NVLSM is planned
NVLSM_AFTER = ("systemd-modules-load.service",)
_KERNEL = re.compile(r"^(\d+)\.(\d+)(?:[.\-+~].*)?$")
_NCCL = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)*(?:[-+].*)?$")


def _kernel(value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    text = str(value)
    m = _KERNEL.match(text)
    if m is None:
        raise PlanError(f"{FIELD}.kernel_version", value, "a kernel release such as 6.8 or 5.15.0-91-generic")
    return int(m.group(1)), int(m.group(2))


def _nccl(value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    m = _NCCL.match(str(value))
    if m is None:
        raise PlanError(f"{FIELD}.nccl_version", value, "an NCCL release such as 2.21.5 or 2.28")
    return int(m.group(1)), int(m.group(2))


KNOWN_KEYS = (
    "driver_branch",
    "kernel_version",
    "kernel_modules",
    "gpudirect_rdma",
    "nccl_version",
    "rdma_stack",
    "pcie_acs",
    "iommu",
)


def software(section: object) -> GpuSoftware:
    """``gpucluster_node.gpu_software`` checked, as written (None: not given)."""
    section = {} if section is None else section
    require(isinstance(section, dict), FIELD, section, "a mapping (" + ", ".join(KNOWN_KEYS) + ")")
    if not isinstance(section, dict):  # narrowed by the require above
        raise AssertionError(section)
    for key in section:
        require(key in KNOWN_KEYS, f"{FIELD}.{key}", section[key], "one of the keys " + ", ".join(KNOWN_KEYS))
    raw_branch = section.get("driver_branch")
    branch = (
        None if raw_branch is None else int(check_range(raw_branch, f"{FIELD}.driver_branch", 450, 999, integer=True))
    )
    raw_modules = section.get("kernel_modules")
    modules = None if raw_modules is None else check_choice(raw_modules, f"{FIELD}.kernel_modules", KERNEL_MODULES)
    kernel = section.get("kernel_version")
    _kernel(kernel)
    nccl = section.get("nccl_version")
    _nccl(nccl)
    method = check_choice(section.get("gpudirect_rdma", "auto"), f"{FIELD}.gpudirect_rdma", GPUDIRECT_METHODS)
    return {
        "driver_branch": branch,
        "kernel_version": None if kernel is None else str(kernel),
        "kernel_modules": modules,
        "gpudirect_rdma": method,
        "nccl_version": None if nccl is None else str(nccl),
        "rdma_stack": check_choice(section.get("rdma_stack", "inbox"), f"{FIELD}.rdma_stack", RDMA_STACKS),
        "pcie_acs": check_choice(section.get("pcie_acs", "disable"), f"{FIELD}.pcie_acs", PCIE_ACS),
        "iommu": check_choice(section.get("iommu", "pt"), f"{FIELD}.iommu", IOMMU),
    }


def effective(sw: GpuSoftware, model_key: str | None = None) -> EffectiveSoftware:
    """What the nodes run: the inventory's values, else the target OS's and a current driver's.

    Each value with where it comes from (``inventory`` or the default's reason), for report.md."""
    kernel = sw["kernel_version"] or TARGET_KERNEL
    kernel_from = "inventory" if sw["kernel_version"] else f"{TARGET_OS}'s kernel"
    branch = sw["driver_branch"]
    modules = sw["kernel_modules"]
    if model_key in OPEN_ONLY_MODELS:
        require(
            modules in (None, "open"),
            f"{FIELD}.kernel_modules",
            modules,
            f"open: {model_key} (Blackwell) runs only on the open GPU kernel modules",
        )
    if modules is not None:
        modules_from = "inventory"
    elif model_key in OPEN_ONLY_MODELS:
        modules, modules_from = "open", "Blackwell: open modules only"
    elif branch is None or branch >= OPEN_DEFAULT_DRIVER:
        modules = "open"
        modules_from = f"default flavour from R{OPEN_DEFAULT_DRIVER}" + ("" if branch else "; branch not given")
    else:
        modules, modules_from = "proprietary", f"R{branch} installs the proprietary flavour by default"
    return {
        "kernel_version": kernel,
        "kernel_from": kernel_from,
        "kernel_modules": modules,
        "kernel_modules_from": modules_from,
        "driver_branch": branch,
        "nccl_version": sw["nccl_version"],
        "rdma_stack": sw["rdma_stack"],
    }


def _dmabuf_missing(eff: EffectiveSoftware) -> list[tuple[str, object, str]]:
    """(field, value, what DMA-BUF needs) for each requirement the nodes do not meet."""
    missing: list[tuple[str, object, str]] = []
    branch = eff["driver_branch"]
    if branch is not None and branch < DMABUF_MIN_DRIVER:
        missing.append((f"{FIELD}.driver_branch", branch, f"{DMABUF_MIN_DRIVER} or later for DMA-BUF"))
    if eff["kernel_modules"] != "open":
        missing.append(
            (f"{FIELD}.kernel_modules", eff["kernel_modules"], "open (DMA-BUF needs the open kernel modules)")
        )
    kernel = _kernel(eff["kernel_version"])
    if kernel is None or kernel < DMABUF_MIN_KERNEL:
        low = ".".join(map(str, DMABUF_MIN_KERNEL))
        missing.append((f"{FIELD}.kernel_version", eff["kernel_version"], f"{low} or later for DMA-BUF"))
    nccl = _nccl(eff["nccl_version"])
    if nccl is not None and nccl < DMABUF_MIN_NCCL:
        low = ".".join(map(str, DMABUF_MIN_NCCL))
        missing.append((f"{FIELD}.nccl_version", eff["nccl_version"], f"{low} or later for DMA-BUF"))
    return missing


def _inputs(eff: EffectiveSoftware) -> str:
    nccl = eff["nccl_version"] or f"the jobs' (>= {'.'.join(map(str, DMABUF_MIN_NCCL))} assumed)"
    branch = f"R{eff['driver_branch']}" if eff["driver_branch"] else "not given"
    return (
        f"kernel {eff['kernel_version']} ({eff['kernel_from']}), {eff['kernel_modules']} kernel modules "
        f"({eff['kernel_modules_from']}), driver {branch}, NCCL {nccl}, RDMA stack {eff['rdma_stack']}"
    )


def _peermem_refused(field: str, value: object, missing: list[tuple[str, object, str]]) -> None:
    dmabuf_fix = (
        "; or give DMA-BUF what it needs: " + "; ".join(f"{f.rsplit('.', 1)[-1]} {a}" for f, _v, a in missing)
        if missing
        else "; or gpudirect_rdma: auto/dmabuf (DMA-BUF works on these nodes)"
    )
    require(
        False,
        field,
        value,
        f"nvidia_peermem needs the PeerDirect API of DOCA-OFED or MLNX_OFED, which {TARGET_OS}'s kernel lacks "
        f"(modprobe fails): declare {FIELD}.rdma_stack: doca_ofed (the compute role installs it from the "
        "site's repository with compute_doca_repo, or the site has) or mlnx_ofed" + dmabuf_fix,
    )


def pcie_plan(sw: GpuSoftware, method: str) -> PciePlan:
    """PCIe ACS off on the bridges and the IOMMU in pass-through, where GPUDirect RDMA is used."""
    used = method != "none"
    acs = used and sw["pcie_acs"] == "disable"
    iommu = used and sw["iommu"] == "pt"
    return {
        "acs_disable": acs,
        "acs_unit": ACS_UNIT if acs else None,
        "acs_program": ACS_PROGRAM if acs else None,
        "bridge_class": ACS_BRIDGE_CLASS,
        "acs_register": ACS_CONTROL_REGISTER,
        "acs_value": ACS_CONTROL_VALUE,
        "kernel_args": list(IOMMU_KERNEL_ARGS) if iommu else [],
        "grub_dropin": GRUB_DROPIN if iommu else None,
        # files whose change takes effect at the next boot: a reboot under a drain (compute role)
        "reboot_paths": ([GRUB_DROPIN] if iommu else [])
        + ([f"/etc/systemd/system/{ACS_UNIT}", ACS_PROGRAM] if acs else []),
        "reason": (
            "no GPUDirect RDMA: PCIe ACS and the IOMMU left as they are"
            if not used
            else (
                ("ACS Control cleared on every PCI bridge at boot" if acs else f"ACS kept ({FIELD}.pcie_acs: keep)")
                + "; "
                + ("iommu=pt on the kernel command line" if iommu else f"IOMMU kept ({FIELD}.iommu: keep)")
                + " (NCCL troubleshooting: GPU-NIC traffic must not detour through the root complex); "
                "both at the next boot, a reboot under a drain"
            )
        ),
    }


def gpudirect_plan(
    sw: GpuSoftware, fabric_type: str, nccl_enabled: bool, model_key: str | None = None
) -> GpudirectPlan:
    """How GPU memory reaches the RDMA NICs: DMA-BUF, nvidia_peermem or nothing (no RDMA fabric)."""
    needed = bool(nccl_enabled) and fabric_type in RDMA_FABRICS
    asked = sw["gpudirect_rdma"]
    eff = effective(sw, model_key)
    missing = _dmabuf_missing(eff)
    peerdirect = eff["rdma_stack"] in PEERDIRECT_STACKS
    if asked == "none":
        require(
            not needed,
            f"{FIELD}.gpudirect_rdma",
            asked,
            f"auto, dmabuf or nvidia_peermem: the NCCL plan sends over RDMA NICs (gpucluster_fabric.type: "
            f"{fabric_type}) and without GPUDirect RDMA NCCL copies through host memory",
        )
        method = "none"
    elif asked == "dmabuf":
        if missing:
            field, value, allowed = missing[0]
            require(False, field, value, allowed + f" ({FIELD}.gpudirect_rdma: dmabuf)")
        method = "dmabuf"
    elif asked == "nvidia_peermem":
        if not peerdirect:
            _peermem_refused(f"{FIELD}.gpudirect_rdma", asked, missing)
        method = "nvidia_peermem"
    elif not needed:
        method = "none"  # auto without an RDMA fabric: nothing to load
    elif not missing:
        method = "dmabuf"
    elif peerdirect:
        method = "nvidia_peermem"
    else:
        field, value, _allowed = missing[0]
        _peermem_refused(field, value, missing)
        method = "none"  # not reached
    branch = eff["driver_branch"]
    if method == "nvidia_peermem" and branch is not None:
        check_range(branch, f"{FIELD}.driver_branch", PEERMEM_MIN_DRIVER, 999, integer=True)
    inputs = _inputs(eff)
    if method == "dmabuf":
        reason = (
            f"DMA-BUF, no module to load: {inputs} "
            f"(needs >= R{DMABUF_MIN_DRIVER} open modules, kernel >= {'.'.join(map(str, DMABUF_MIN_KERNEL))}, "
            f"NCCL >= {'.'.join(map(str, DMABUF_MIN_NCCL))})"
        )
    elif method == "nvidia_peermem":
        why = "; ".join(f"{f.rsplit('.', 1)[-1]} {v}" for f, v, _a in missing)
        reason = (
            f"nvidia_peermem, loaded at boot ({MODULES_LOAD_FILE}) through {eff['rdma_stack']}'s PeerDirect: "
            + (f"DMA-BUF not possible ({why})" if asked == "auto" else f"{FIELD}.gpudirect_rdma")
            + f"; {inputs}"
        )
    else:
        reason = "no RDMA fabric: NCCL uses no GPUDirect RDMA" if not needed else "off"
    return {
        "needed": needed,
        "method": method,
        "module": PEERMEM_MODULE if method == "nvidia_peermem" else None,
        "modules_load_file": MODULES_LOAD_FILE if method == "nvidia_peermem" else None,
        # the health check: with DMA-BUF the loaded driver must be the open flavour
        "open_modules_check": method == "dmabuf",
        "driver_version_file": DRIVER_VERSION_FILE,
        "open_module_mark": OPEN_MODULE_MARK,
        "inputs": eff,
        "rdma_stack": eff["rdma_stack"],
        # DOCA-OFED from the site's repository (compute_doca_repo): only where declared and used
        "doca_ofed": eff["rdma_stack"] == "doca_ofed" and method == "nvidia_peermem",
        "pcie": pcie_plan(sw, method),
        "reason": reason,
    }


def nvlsm_plan(model: GpuModel) -> NvlsmPlan:
    """NVLSM with Fabric Manager on NVLink5 NVSwitch boards (catalog ``nvlsm``), else nothing to install."""
    required = bool(model.nvlsm and model.nvswitch)
    return {
        "required": required,
        "package": NVLSM_PACKAGE if required else None,
        "modules": list(NVLSM_MODULES) if required else [],
        "modules_load_file": NVLSM_MODULES_LOAD_FILE if required else None,
        # Fabric Manager's drop-in: After= these (the modules NVLSM's management port needs)
        "after": list(NVLSM_AFTER) if required else [],
        "reason": (
            f"{model.key}: NVLink5 NVSwitch board, Fabric Manager needs the NVLink Subnet Manager (nvlsm) and "
            f"{', '.join(NVLSM_MODULES)} (Fabric Manager user guide; docs/sources.md [F20] [F21])"
            if required
            else f"{model.key}: no NVLSM on this node"
        ),
    }


def bringup_plan(model: GpuModel, section: object, fabric_type: str, nccl_enabled: bool) -> BringupSection:
    """The node's bring-up: Fabric Manager (NVSwitch models), GPUDirect RDMA, the NVLink count to check."""
    sw = software(section)
    branch = sw["driver_branch"]
    fm_required = bool(model.nvswitch)
    return {
        "software": sw,
        "nvswitch": fm_required,
        "fabric_manager": {
            "required": fm_required,
            "service": FABRIC_MANAGER_SERVICE,
            "package_prefix": FABRIC_MANAGER_PACKAGE_PREFIX,
            # None: the compute role pins it to compute_gpu_driver_branch, as the driver
            "package": f"{FABRIC_MANAGER_PACKAGE_PREFIX}{branch}" if fm_required and branch is not None else None,
            "before": list(FABRIC_MANAGER_BEFORE) if fm_required else [],
            # NVLink5 boards: NVLSM and ib_umad with Fabric Manager (docs/sources.md [F20] [F21])
            "nvlsm": nvlsm_plan(model),
            "reason": (
                f"{model.key} sits on an NVSwitch board: Fabric Manager must finish (Fabric State Completed) "
                "before CUDA starts, else CUDA error 802"
                if fm_required
                else f"{model.key} has no NVSwitch: no Fabric Manager"
            ),
        },
        "gpudirect": gpudirect_plan(sw, fabric_type, nccl_enabled, model.key),
        # NVLink links each GPU must have active (NVSwitch boards only; None: not counted)
        "nvlink_links": model.nvlink_links if fm_required else None,
    }


def bringup_rows(plan_bringup: BringupSection) -> list[list[str]]:
    """[item, value, why] rows for the report."""
    fm = plan_bringup["fabric_manager"]
    gd = plan_bringup["gpudirect"]
    links = plan_bringup["nvlink_links"]
    return [
        ["Fabric Manager", "required" if fm["required"] else "not needed", fm["reason"]],
        ["NVLink Subnet Manager", "required" if fm["nvlsm"]["required"] else "not needed", fm["nvlsm"]["reason"]],
        ["GPUDirect RDMA", gd["method"], gd["reason"]],
        [
            "PCIe ACS / IOMMU",
            ", ".join(
                x
                for x in (
                    "ACS off" if gd["pcie"]["acs_disable"] else "",
                    " ".join(gd["pcie"]["kernel_args"]),
                )
                if x
            )
            or "unchanged",
            gd["pcie"]["reason"],
        ],
        ["NVLink links per GPU", str(links) if links else "not counted", "the health check drains a node with fewer"],
    ]


__all__ = [
    "ACS_UNIT",
    "DMABUF_MIN_DRIVER",
    "DMABUF_MIN_KERNEL",
    "DMABUF_MIN_NCCL",
    "DRIVER_VERSION_FILE",
    "FIELD",
    "GPUDIRECT_METHODS",
    "GRUB_DROPIN",
    "MODULES_LOAD_FILE",
    "PEERMEM_MIN_DRIVER",
    "bringup_plan",
    "bringup_rows",
    "effective",
    "gpudirect_plan",
    "nvlsm_plan",
    "pcie_plan",
    "software",
]
