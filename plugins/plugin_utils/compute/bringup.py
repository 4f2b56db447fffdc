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
- **GPUDirect RDMA needs a kernel path.** Where the NCCL plan sends over RDMA NICs (InfiniBand, RoCE)
  NCCL registers GPU memory with the NIC either through the kernel's DMA-BUF or through the legacy
  ``nvidia_peermem`` module of the driver (R470 and later); without either NCCL copies through host
  memory without a word (docs/sources.md [F4] [F5] [F6]). DMA-BUF, which NVIDIA recommends, needs the
  driver's open kernel modules (R515 is the first branch that has them) and a kernel of 5.12 or later
  (the RDMA subsystem's DMA-BUF memory registration) ([F4] [F7] [F8]). The plan decides from
  ``gpucluster_node.gpu_software`` (driver branch, kernel version, kernel module flavour) and
  ``gpudirect_rdma`` (``auto``, ``dmabuf``, ``nvidia_peermem``, ``none``); ``auto`` takes DMA-BUF when
  the inventory shows all three requirements and ``nvidia_peermem`` otherwise (it works with every
  driver since R470 and NCCL still prefers DMA-BUF where that works, [F5]). ``nvidia_peermem`` is
  loaded at boot through /etc/modules-load.d and the health check drains a node where it is missing.

A site that cannot satisfy a rule (DMA-BUF asked for on a proprietary driver, ``none`` while the NCCL
plan uses GPUDirect RDMA, ``nvidia_peermem`` on a driver before R470) gets a PlanError naming the field.
No I/O; pure functions of plain data.
"""

from __future__ import annotations

import re
from typing import Any

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
#: docs/sources.md [F6]: nvidia-peermem ships with the driver since CUDA 11.4 / R470
PEERMEM_MIN_DRIVER = 470
#: docs/sources.md [F4] [F7]: DMA-BUF needs the open GPU kernel modules, first released with R515
DMABUF_MIN_DRIVER = 515
#: docs/sources.md [F8]: the RDMA subsystem registers DMA-BUF memory from Linux 5.12
DMABUF_MIN_KERNEL = (5, 12)
#: the fabric types whose NCCL transport is RDMA verbs (NCCL_IB_HCA): GPUDirect RDMA is planned there
PEERMEM_MODULE = "nvidia_peermem"
MODULES_LOAD_FILE = "/etc/modules-load.d/gpucluster-gpudirect.conf"
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


def _kernel(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    text = str(value)
    m = _KERNEL.match(text)
    if m is None:
        raise PlanError(f"{FIELD}.kernel_version", value, "a kernel release such as 6.8 or 5.15.0-91-generic")
    return int(m.group(1)), int(m.group(2))


def software(section: Any) -> dict[str, Any]:
    """``gpucluster_node.gpu_software`` checked: driver_branch, kernel_version, kernel_modules, gpudirect_rdma."""
    section = {} if section is None else section
    require(
        isinstance(section, dict),
        FIELD,
        section,
        "a mapping (driver_branch, kernel_version, kernel_modules, gpudirect_rdma)",
    )
    known = ("driver_branch", "kernel_version", "kernel_modules", "gpudirect_rdma")
    for key in section:
        require(key in known, f"{FIELD}.{key}", section[key], "one of the keys " + ", ".join(known))
    branch = section.get("driver_branch")
    if branch is not None:
        branch = int(check_range(branch, f"{FIELD}.driver_branch", 450, 999, integer=True))
    modules = section.get("kernel_modules")
    if modules is not None:
        modules = check_choice(modules, f"{FIELD}.kernel_modules", KERNEL_MODULES)
    kernel = section.get("kernel_version")
    _kernel(kernel)
    method = check_choice(section.get("gpudirect_rdma", "auto"), f"{FIELD}.gpudirect_rdma", GPUDIRECT_METHODS)
    return {
        "driver_branch": branch,
        "kernel_version": None if kernel is None else str(kernel),
        "kernel_modules": modules,
        "gpudirect_rdma": method,
    }


def _dmabuf_missing(sw: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(field, value, what DMA-BUF needs) for each requirement the inventory does not show."""
    missing = []
    branch = sw["driver_branch"]
    if branch is None or branch < DMABUF_MIN_DRIVER:
        missing.append((f"{FIELD}.driver_branch", branch, f"{DMABUF_MIN_DRIVER} or later for DMA-BUF"))
    if sw["kernel_modules"] != "open":
        missing.append(
            (f"{FIELD}.kernel_modules", sw["kernel_modules"], "open (DMA-BUF needs the open kernel modules)")
        )
    kernel = _kernel(sw["kernel_version"])
    if kernel is None or kernel < DMABUF_MIN_KERNEL:
        low = ".".join(map(str, DMABUF_MIN_KERNEL))
        missing.append((f"{FIELD}.kernel_version", sw["kernel_version"], f"{low} or later for DMA-BUF"))
    return missing


def gpudirect_plan(sw: dict[str, Any], fabric_type: str, nccl_enabled: bool) -> dict[str, Any]:
    """How GPU memory reaches the RDMA NICs: DMA-BUF, nvidia_peermem or nothing (no RDMA fabric)."""
    needed = bool(nccl_enabled) and fabric_type in RDMA_FABRICS
    asked = sw["gpudirect_rdma"]
    missing = _dmabuf_missing(sw)
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
        method = "nvidia_peermem"
    elif not needed:
        method = "none"  # auto without an RDMA fabric: nothing to load
    else:
        method = "nvidia_peermem" if missing else "dmabuf"
    branch = sw["driver_branch"]
    if method == "nvidia_peermem" and branch is not None:
        check_range(branch, f"{FIELD}.driver_branch", PEERMEM_MIN_DRIVER, 999, integer=True)
    if method == "dmabuf":
        reason = (
            f"DMA-BUF: driver R{branch} open kernel modules, kernel {sw['kernel_version']} "
            f"(>= R{DMABUF_MIN_DRIVER} open, >= {'.'.join(map(str, DMABUF_MIN_KERNEL))}); no module to load"
        )
    elif method == "nvidia_peermem":
        why = "; ".join(f"{f.rsplit('.', 1)[-1]} {v if v is not None else 'not given'}" for f, v, _a in missing)
        reason = f"nvidia_peermem, loaded at boot ({MODULES_LOAD_FILE})" + (
            f": DMA-BUF not shown by the inventory ({why})" if asked == "auto" else f" ({FIELD}.gpudirect_rdma)"
        )
    else:
        reason = "no RDMA fabric: NCCL uses no GPUDirect RDMA" if not needed else "off"
    return {
        "needed": needed,
        "method": method,
        "module": PEERMEM_MODULE if method == "nvidia_peermem" else None,
        "modules_load_file": MODULES_LOAD_FILE if method == "nvidia_peermem" else None,
        "reason": reason,
    }


def nvlsm_plan(model: GpuModel) -> dict[str, Any]:
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


def bringup_plan(model: GpuModel, section: Any, fabric_type: str, nccl_enabled: bool) -> dict[str, Any]:
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
        "gpudirect": gpudirect_plan(sw, fabric_type, nccl_enabled),
        # NVLink links each GPU must have active (NVSwitch boards only; None: not counted)
        "nvlink_links": model.nvlink_links if fm_required else None,
    }


def bringup_rows(plan_bringup: dict[str, Any]) -> list[list[str]]:
    """[item, value, why] rows for the report."""
    fm = plan_bringup["fabric_manager"]
    gd = plan_bringup["gpudirect"]
    links = plan_bringup["nvlink_links"]
    return [
        ["Fabric Manager", "required" if fm["required"] else "not needed", fm["reason"]],
        ["NVLink Subnet Manager", "required" if fm["nvlsm"]["required"] else "not needed", fm["nvlsm"]["reason"]],
        ["GPUDirect RDMA", gd["method"], gd["reason"]],
        ["NVLink links per GPU", str(links) if links else "not counted", "the health check drains a node with fewer"],
    ]


__all__ = [
    "DMABUF_MIN_DRIVER",
    "DMABUF_MIN_KERNEL",
    "FIELD",
    "GPUDIRECT_METHODS",
    "MODULES_LOAD_FILE",
    "PEERMEM_MIN_DRIVER",
    "bringup_plan",
    "bringup_rows",
    "gpudirect_plan",
    "nvlsm_plan",
    "software",
]
