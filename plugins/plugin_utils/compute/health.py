"""Thresholds of the node health check (/etc/gpucluster/healthcheck.json), from the plan.

The compute role renders ``plan["health"]`` as JSON; ``gpucluster-healthcheck`` (Slurm's
HealthCheckProgram, docs/sources.md §8.4) reads it and drains the node when a check fails. Every
number here comes from another part of the plan:
- GPU temperature warn/critical: ``plan["gpu"]["temperature"]`` (critical = Max Operating Temp);
- the RDMA ports each node must have ACTIVE and their rate: the fabric's expected cabling;
- coolant alarms (supply and return maximum, critical flow): ``plan["cooling"]`` (DLC only).
The Slurm node name of a host is its inventory hostname (slurm.conf lists the same names).

GPU bring-up (``plan["gpu"]["bringup"]``, compute/bringup.py) adds the ``bringup`` check (periodic and
prolog): on an NVSwitch board every GPU's ``nvidia-smi -q`` Fabric State must be ``Completed`` (else
CUDA fails with error 802, docs/sources.md [F3]) and ``nvidia-smi nvlink -s`` must show the model's
NVLink links active on every GPU; GPUDirect RDMA as the plan chose it: where it loads ``nvidia_peermem``
the module must be loaded (/sys/module/nvidia_peermem), with DMA-BUF the loaded driver must be the open
flavour (/proc/driver/nvidia/version: "Open Kernel Module", docs/sources.md [F11]). On an NVLink5 board
(``gpu.bringup.fabric_manager.nvlsm``) the same check reads NVLSM's state: its modules (ib_umad) loaded and
its process (``nvlsm``, run by Fabric Manager's start script, [F20] [F21]) running.

On the Kubernetes path (``cluster.scheduler: kubernetes``) no slurmd runs the check: a systemd timer runs
the periodic mode every ``interval_s`` (Slurm's HealthCheckInterval), and instead of draining the script
cordons the node and taints it (``scheduler.taint``, NoSchedule) with the reason in an annotation,
through ``kubectl --kubeconfig <scheduler.kubeconfig>`` (a credential the site gives the node that may
patch its own Node object); a clean run uncordons only a node it cordoned. Epilog and prolog are
Slurm's and stay off there. In the lab nothing calls the API (``scheduler.dry_run``).

The same script runs in three modes, each with its own checks (``modes``): ``periodic``
(HealthCheckProgram), ``epilog`` (slurm.conf Epilog=, after every job: GPUs, XIDs and
``dcgmi diag -r <level>`` where DCGM is installed) and ``prolog`` (Prolog=, optional, before
every job: GPUs and XIDs only, the job waits for it). Their switches come from the inventory,
``gpucluster_slurm.health`` (``epilog``, ``prolog``, ``dcgm_level``, ``dcgm_timeout_s``).
Slurm drains a node by itself when an Epilog exits non-zero, with the reason "Epilog error",
which would replace ours (docs/sources.md [SL9]); so the epilog drains with its own reason and
exits 0. A failed prolog exits 1 so that Slurm requeues the job, and Slurm keeps a reason that
is already set (node_mgr.c, [SL9]).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.dcgm import HOSTENGINE
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    BringupSection,
    CoolingSection,
    GpuSection,
    HealthCoolant,
    HealthMode,
    HealthNvlsm,
    HealthScheduler,
    HealthSection,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_range, require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.settings import HEALTH_CHECK_INTERVAL_S

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import FabricSection

SCHEMA_VERSION = 1
#: Drains whose reason starts with this belong to the health check; it resumes only those.
REASON_PREFIX = "gpucluster:"
FIELD = "gpucluster_slurm.health"
#: The health check's Slurm programs: the script and the wrappers that give it its mode
#: (slurm.conf Epilog=/Prolog= take a path, no arguments; docs/sources.md [SL9]).
PROGRAM = "/usr/local/sbin/gpucluster-healthcheck"
EPILOG_PROGRAM = "/usr/local/sbin/gpucluster-epilog"
PROLOG_PROGRAM = "/usr/local/sbin/gpucluster-prolog"
#: Checks of each mode. Fabric ports and coolant are facility state, not left behind by a job:
#: the periodic check watches them. ``dcgm`` runs only after a job (a GPU diagnostic under a
#: running job would compete with it; dossier 8.4: light prolog, diag in the epilog).
CHECKS = {
    "periodic": ("gpus", "xid", "fabric", "coolant", "bringup"),
    "epilog": ("gpus", "xid", "dcgm"),
    "prolog": ("gpus", "xid", "bringup"),
}
#: ``dcgmi diag -r``: 1 "Quick (System Validation ~ seconds)", 2 "Medium (~ 2 minutes)", 3 "Long
#: (~ 15 minutes)" (docs/sources.md [D2]). Level 3 and up hold a node for a quarter of an hour after
#: every job, so an epilog allows 0 (off) to 2; the guide's own use of 2 is "epilogue on failure".
DCGM_LEVEL_DEFAULT = 1
DCGM_LEVEL_MAX = 2
#: The budget of one ``dcgmi diag`` run, unconfirmed: level 1 is documented only as "~ seconds" and
#: level 2 as "~ 2 minutes" [D2]; 120 s is our default, an inventory input.
DCGM_TIMEOUT_DEFAULT_S = 120
DCGM_TIMEOUT_RANGE_S = (10, 900)
#: In the lab only: a recorded ``nvidia-smi --query-gpu`` CSV that every mode reads instead of
#: running nvidia-smi when the file exists (a container has no GPU; molecule's tests write it).
LAB_NVIDIA_SMI_OUTPUT = "/run/gpucluster/health/nvidia-smi.csv"
#: The Kubernetes path: the kubeconfig the check uses (the site installs it: a credential that may get,
#: patch and annotate this node), the taint it sets and the annotation that carries its reason.
KUBECTL = "/usr/bin/kubectl"
NODE_KUBECONFIG = "/etc/gpucluster/health-kubeconfig"
K8S_TAINT = "gpucluster.tiers/unhealthy"
K8S_REASON_ANNOTATION = "gpucluster.tiers/health-reason"


@dataclass(frozen=True)
class HookSettings:
    """``gpucluster_slurm.health``: which Slurm hooks run the check, and its DCGM diagnostic."""

    epilog: bool = True
    prolog: bool = False
    dcgm_level: int = DCGM_LEVEL_DEFAULT
    dcgm_timeout_s: int = DCGM_TIMEOUT_DEFAULT_S


def hook_settings(section: object) -> HookSettings:
    """Validate ``gpucluster_slurm.health`` (absent: the defaults)."""
    section = {} if section is None else section
    require(isinstance(section, dict), FIELD, section, "a mapping (epilog, prolog, dcgm_level, dcgm_timeout_s)")
    if not isinstance(section, dict):  # narrowed by the require above
        raise AssertionError(section)
    known = ("epilog", "prolog", "dcgm_level", "dcgm_timeout_s")
    for key in section:
        require(key in known, f"{FIELD}.{key}", section[key], f"one of the keys {', '.join(known)}")
    flags: dict[str, bool] = {}
    for key in ("epilog", "prolog"):
        value = section.get(key, getattr(HookSettings, key))
        require(isinstance(value, bool), f"{FIELD}.{key}", value, "true or false")
        flags[key] = value
    level = check_range(
        section.get("dcgm_level", DCGM_LEVEL_DEFAULT), f"{FIELD}.dcgm_level", 0, DCGM_LEVEL_MAX, integer=True
    )
    low, high = DCGM_TIMEOUT_RANGE_S
    timeout = check_range(
        section.get("dcgm_timeout_s", DCGM_TIMEOUT_DEFAULT_S),
        f"{FIELD}.dcgm_timeout_s",
        low,
        high,
        integer=True,
        unit=" s",
    )
    return HookSettings(dcgm_level=int(level), dcgm_timeout_s=int(timeout), **flags)


def modes(settings: HookSettings, scheduler: str = "slurm") -> dict[str, HealthMode]:
    """Per mode: whether it runs, its program and its checks (no ``dcgm`` at level 0). Epilog and prolog
    are Slurm's hooks: off on the Kubernetes path, where a timer runs the periodic mode."""
    slurm = scheduler == "slurm"
    enabled = {"periodic": True, "epilog": settings.epilog and slurm, "prolog": settings.prolog and slurm}
    programs = {"periodic": PROGRAM, "epilog": EPILOG_PROGRAM, "prolog": PROLOG_PROGRAM}
    return {
        mode: {
            "enabled": enabled[mode],
            "program": programs[mode],
            "checks": [c for c in checks if c != "dcgm" or settings.dcgm_level > 0],
        }
        for mode, checks in CHECKS.items()
    }


def _ports(fabric: FabricSection, hosts: list[str]) -> dict[str, list[str]]:
    """Per compute host, the ``hca/port`` names its cabling plan connects (none without a fabric)."""
    ports: dict[str, list[str]] = {h: [] for h in hosts}
    if fabric["type"] not in RDMA_FABRICS:
        return ports
    for host, hca, port in fabric_links.host_ports(fabric["cabling"]):  # not every cable: 393,216 at 16,384 nodes
        if host in ports:
            ports[host].append(f"{hca}/{port}")
    return {h: sorted(set(p)) for h, p in ports.items()}


def health_config(plan: Mapping[str, Any], section: object = None) -> HealthSection:
    """The health check's thresholds, modes and, per compute node, its Slurm name and fabric ports.

    ``section`` is the inventory's ``gpucluster_slurm.health`` (None: the defaults).
    """
    settings = hook_settings(section)
    lab = bool(plan["cluster"]["lab"])
    scheduler = plan["cluster"]["scheduler"]
    gpu: GpuSection = plan["gpu"]  # the plan's earlier sections (plan/assembly.py _needs)
    bringup = gpu["bringup"]
    temps = gpu["temperature"]
    fabric: FabricSection = plan["fabric"]
    cooling: CoolingSection = plan["cooling"]
    compute = sorted(h for h, host in plan["hosts"].items() if "compute" in host["roles"])
    ports = _ports(fabric, compute)
    coolant: HealthCoolant | None = None
    if cooling["cooling"] == "dlc":
        coolant = {
            "supply_max_c": cooling["supply_max_c"],
            "return_max_c": cooling["return_max_c"],
            "flow_min_lpm": cooling["flow_critical_lpm"],
        }
    return {
        "schema": SCHEMA_VERSION,
        "reason_prefix": REASON_PREFIX,
        # lab containers have no GPU or HCA: a missing tool or sysfs tree is skipped, not drained
        "lab": lab,
        "modes": modes(settings, scheduler),
        # the periodic mode's interval: Slurm's HealthCheckInterval, or the Kubernetes path's timer
        "interval_s": HEALTH_CHECK_INTERVAL_S,
        "scheduler": _scheduler(scheduler, lab),
        # host: nv-hostengine's root-only unix socket (dcgmi diag --host; compute/dcgm.py)
        "dcgm": {"level": settings.dcgm_level, "timeout_s": settings.dcgm_timeout_s, "host": HOSTENGINE},
        # recorded inputs read instead of the tools, only in the lab (None on real hosts)
        "recorded": {"nvidia_smi_output": LAB_NVIDIA_SMI_OUTPUT} if lab else None,
        "gpu": {
            "count": plan["cluster"]["gpus_per_node"],
            "temp_warn_c": temps["warn_c"],
            "temp_critical_c": temps["critical_c"],
            "temp_source": temps["source"],
            # bring-up (compute/bringup.py): Fabric State Completed and the NVLink links, NVSwitch boards only
            "fabric_state": bool(bringup["nvswitch"]),
            "nvlink_links": bringup["nvlink_links"],
            # NVLink5 boards: NVLSM's modules and process (compute/bringup.py nvlsm_plan); None: not planned
            "nvlsm": _nvlsm(bringup),
        },
        # the GPUDirect RDMA module the plan loads (None: DMA-BUF or no RDMA fabric, nothing to check)
        "gpudirect_module": bringup["gpudirect"]["module"],
        # DMA-BUF: the loaded driver must be the open flavour (its version file's "Open Kernel Module")
        "gpudirect_open_modules": bool(bringup["gpudirect"]["open_modules_check"]),
        "fabric": {
            "type": fabric["type"],
            "rate_gbps": fabric["link_rate_gbps"] if any(ports.values()) else None,
        },
        "coolant": coolant,
        "nodes": {h: {"slurm_node": h, "fabric_ports": ports[h]} for h in compute},
    }


#: the process name of the NVLink Subnet Manager, as Fabric Manager's start script runs it ([F20])
NVLSM_PROCESS = "nvlsm"


def _nvlsm(bringup: BringupSection) -> HealthNvlsm | None:
    """What the check reads of NVLSM where the plan has it: the modules to find loaded, the process."""
    nvlsm = bringup["fabric_manager"]["nvlsm"]
    if not nvlsm["required"]:
        return None
    return {"modules": list(nvlsm["modules"]), "process": NVLSM_PROCESS}


def _scheduler(kind: str, lab: bool) -> HealthScheduler:
    """How the check takes a node out: scontrol (Slurm) or kubectl cordon and taint (Kubernetes)."""
    if kind != "kubernetes":
        return {"kind": kind}
    return {
        "kind": kind,
        "kubectl": KUBECTL,
        "kubeconfig": NODE_KUBECONFIG,
        "taint": K8S_TAINT,
        "reason_annotation": K8S_REASON_ANNOTATION,
        # the lab has no Kubernetes API: the commands are printed, never run
        "dry_run": lab,
    }


INTRO = (
    "One script checks the node in three modes and drains it with a reason that starts with "
    f"'{REASON_PREFIX}' and names the check; a clean run resumes only its own drains (not XID drains). "
    "The epilog exits 0 after draining, so Slurm keeps that reason instead of 'Epilog error'."
)


def health_rows(cfg: HealthSection) -> list[list[str]]:
    """[setting, value, why] rows of the report's "Node health check" section."""
    if cfg["scheduler"]["kind"] == "kubernetes":
        return [
            [
                "gpucluster-healthcheck.timer",
                f"{cfg['modes']['periodic']['program']} ({', '.join(cfg['modes']['periodic']['checks'])})",
                f"every {cfg['interval_s']} s; cordon + taint {cfg['scheduler']['taint']}:NoSchedule",
            ]
        ]
    slurm_key = {"periodic": "HealthCheckProgram", "epilog": "Epilog", "prolog": "Prolog"}
    rows = []
    for mode, entry in cfg["modes"].items():
        value = f"{entry['program']} ({', '.join(entry['checks'])})" if entry["enabled"] else "off"
        why = "every HealthCheckInterval" if mode == "periodic" else f"gpucluster_slurm.health.{mode}"
        rows.append([slurm_key[mode], value, why])
    dcgm = cfg["dcgm"]
    value = f"-r {dcgm['level']}, at most {dcgm['timeout_s']} s" if dcgm["level"] else "off"
    rows.append(["dcgmi diag (epilog)", value, "where DCGM is installed; -r 1 is 'Quick (~ seconds)' (dcgmi docs)"])
    return rows
