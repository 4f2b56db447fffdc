"""DCGM from the plan: health watches and dcgm-exporter's counters; no violation policy.

The compute role renders ``plan["dcgm"]`` into ``gpucluster-dcgm-policy.service`` (the name of the
unit that used to set a policy too, kept so an upgrade replaces it in place), a oneshot unit that runs
after the DCGM host engine (nvidia-dcgm.service, nv-hostengine), clears a policy an earlier release
set, and sets:

- health watches, ``dcgmi health -s <systems>`` (docs/sources.md §5.2, ``dcgmi/CommandLineParser.cpp``,
  DCGM 4.6.0 [D1]): ``p`` PCIe, ``m`` memory, ``i`` infoROM, ``t`` thermal and power, ``n``
  NVLink (only for GPU models with NVLink, ``gpu.model.nvlink_gen``). DCGM's default is ``pm``.

No policy (``dcgmi policy --set``): with action ``0`` (none) and validation ``0`` (none) DCGM does
nothing about a violation but tell the clients registered for it (``dcgmi policy --reg`` blocks and
prints them, docs/sources.md §5.1 [D1]), and nothing registered, so the policy went nowhere. A
listener would be a second drain path beside the health check, reading a text format DCGM does not
document, for conditions that already have a consumer: double-bit ECC and the critical temperature
(the health check drains, the alerts GpuDoubleBitEcc and GpuTemperatureCritical fire), XIDs (the
health check's epilog and prolog read the kernel log), NVLink errors (GpuNvlinkErrors, and the
health check's NVLink count), PCIe replays (dcgm-exporter's DCGM_FI_DEV_PCIE_REPLAY_COUNTER). The
power condition at the power cap (``-P`` = the cap) would fire at every full-load step, as a GPU at
its cap is normal. A GPU reset (action ``1``) would kill the running job. docs/monitoring.md says
where each condition is watched.

DCGM keeps watches and policies in the running host engine only, so the unit is bound to
nvidia-dcgm.service (Requires=) and runs again whenever the host engine restarts.

dcgm-exporter (docs/sources.md §5.4, ``etc/default-counters.csv`` [D3]) listens on the management
address, port ``monitoring.dcgm_exporter_port``, and reads the counters listed here: the
stock default set plus ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` and (NVLink models)
``DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL``, which the stock file comments out and
the alert rules GpuDoubleBitEcc and GpuNvlinkErrors need (docs/monitoring.md), and the clock-event
(throttle) fields the alerts GpuThermalThrottling and GpuHwSlowdown and the GPU dashboard's
throttling panel read:

- ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` (field 112), the NVML clocks-event bitmask (nvml.h
  ``nvmlClocksEventReasons``; DCGM's ``dcgm_fields.h`` calls its bits ``DCGM_CLOCKS_THROTTLE_REASON_*``,
  "a 1:1 map to the NVML reasons"): 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW
  thermal, 0x80 HW power brake. DCGM 3.x called the field ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``;
  the exporter resolves the CSV's names through go-dcgm's name table (``pkg/dcgm/const_fields.go``,
  ``dcgmFields``), which for the DCGM 4 the plan needs (>= ``MIN_DCGM_VERSION``) knows only
  ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` (https://github.com/NVIDIA/go-dcgm/blob/main/pkg/dcgm/const_fields.go),
  not the old name. A help text holds no comma: the file is CSV.
- ``DCGM_FI_DEV_POWER_VIOLATION`` (240) and ``DCGM_FI_DEV_THERMAL_VIOLATION`` (241), cumulative time
  the GPU was held below its application clocks by power or thermal limits (NVML
  ``nvmlDeviceGetViolationStatus``, ``NVML_PERF_POLICY_POWER``/``_THERMAL``). The stock counters file
  lists both, commented out (etc/default-counters.csv, "Errors and violations" [D3]). Their unit
  differs between sources (``dcgm_fields.h``: usec; the exporter's etc/dcp-metrics-included.csv: ns),
  so the rules read only whether they grow, never their size.

The host engine (``hostengine``) is no network service: nv-hostengine listens, without
authentication, on TCP 127.0.0.1:5555 by default, where any job on the node could change GPU
settings, clear the health watches or start diagnostics on GPUs another job holds. It runs with
``--domain-socket <path>`` instead ("No TCP listening port is opened when this option is
specified": nv-hostengine --help, hostengine/src/HostEngineCommandLine.cpp;
https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/nv-hostengine.html),
the socket in a folder only root may enter (0700, systemd's RuntimeDirectory=, and UMask=0077 for
the socket itself). Its clients are root's: the health watch unit, the health check's epilog and
the validate play pass ``--host unix://<path>`` to dcgmi (``dcgmi <command> --help``: "To connect to a
host engine that was started with -d (unix socket), prefix the unix socket filename with
'unix://'"), and dcgm-exporter, which runs as root (the package's unit), connects with
``--remote-hostengine-info unix://<path>``. The exporter does not embed a second host engine: NVIDIA
advises against two host engines on one node (they do not coordinate; the profiling module cannot
be shared: https://github.com/NVIDIA/DCGM/issues/108, https://github.com/NVIDIA/dcgm-exporter/issues/7).
A ``unix://`` address for the exporter needs DCGM's connection strings (``dcgmConnect_v3``), so DCGM
>= ``MIN_DCGM_VERSION`` and an exporter built against it (go-dcgm: "DCGM connection strings require
DCGM 4.5.0 or newer"); the compute role refuses an older pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    DcgmSection,
    ExporterCounter,
    GpuSection,
    Hostengine,
)

DCGMI = "/usr/bin/dcgmi"
NV_HOSTENGINE = "/usr/bin/nv-hostengine"
#: nv-hostengine's unix socket, in a folder under /run that systemd creates for the unit
#: (RuntimeDirectory=, mode 0700, owned by the unit's user: root)
HOSTENGINE_RUNTIME_DIRECTORY = "nvidia-dcgm"
HOSTENGINE_SOCKET_DIR = f"/run/{HOSTENGINE_RUNTIME_DIRECTORY}"
HOSTENGINE_SOCKET = f"{HOSTENGINE_SOCKET_DIR}/nv-hostengine"
HOSTENGINE_SOCKET_DIR_MODE = "0700"
#: the address dcgmi (--host) and dcgm-exporter (--remote-hostengine-info) connect to
HOSTENGINE = f"unix://{HOSTENGINE_SOCKET}"
#: the account nv-hostengine runs its unprivileged children as (the package's unit passes it too)
HOSTENGINE_SERVICE_ACCOUNT = "nvidia-dcgm"
#: the TCP port nv-hostengine would open without --domain-socket (what the lab checks is closed)
HOSTENGINE_TCP_PORT = 5555
#: the first DCGM whose library takes unix:// connection strings (dcgmConnect_v3), which the exporter needs
MIN_DCGM_VERSION = "4.5.0"
EXPORTER_COUNTERS_FILE = "/etc/dcgm-exporter/gpucluster-counters.csv"

# docs/sources.md [D1]: dcgmi health -s letters, in the order the watches are listed here
HEALTH_WATCHES = (
    ("p", "pcie"),
    ("m", "memory"),
    ("i", "inforom"),
    ("t", "thermal_power"),
    ("n", "nvlink"),
)

# docs/sources.md [D1]: dcgmi policy --clear removes the policy an earlier release set (the unit runs it
# first, and a failure, such as no policy to clear, does not stop the unit)
POLICY_CLEAR_ARGS = ("policy", "--clear")
#: where each condition the removed policy watched is consumed now (docs/monitoring.md, "DCGM policy")
POLICY_CONSUMERS = {
    "dbe": "health check (gpus: uncorrected volatile ECC) and alert GpuDoubleBitEcc",
    "xid": "health check (xid: kernel log in the epilog and prolog)",
    "thermal": "health check (gpus: temperature >= critical) and the temperature alerts",
    "nvlink": "alert GpuNvlinkErrors and the health check's NVLink count (NVSwitch boards)",
    "pcie": "dcgm-exporter DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "power": "the clocks unit's power cap (nvidia-smi -pl); a GPU at its cap is no fault",
}

# dcgm-exporter's counters (field, Prometheus type, help): the stock defaults of
# etc/default-counters.csv (docs/sources.md [D3]; types as in that file), then the error, clock-event
# and violation counters the alert rules read, which the stock file leaves commented out or lacks.
_COUNTERS: tuple[tuple[str, str, str, bool], ...] = (
    # (field, type, help, needs NVLink)
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", False),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", False),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", False),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", False),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", False),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", False),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", False),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", False),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", False),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", False),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", False),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", False),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", False),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", False),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total NVLink bandwidth counter over all lanes.", True),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for uncorrectable errors.", False),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for correctable errors.", False),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed.", False),
    # enabled by gpucluster.tiers: alert GpuDoubleBitEcc
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", False),
    # enabled by gpucluster.tiers: alerts GpuThermalThrottling and GpuHwSlowdown, the GPU dashboard's
    # throttling panel (field 112, DCGM 4 name; bits: nvml.h nvmlClocksEventReasons, see the module doc)
    (
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event (throttle) reasons: bitmask of NVML nvmlClocksEventReasons.",
        False,
    ),
    # commented out in the stock file ("Errors and violations" [D3]); the unit is not read (module doc)
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints.", False),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints.", False),
    # enabled by gpucluster.tiers: alert GpuNvlinkErrors
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        True,
    ),
)


def _command(args: list[str]) -> str:
    """dcgmi with ``args`` against the host engine's socket (``--host`` after the subcommand)."""
    return " ".join([DCGMI, args[0], "--host", HOSTENGINE, *args[1:]])


def hostengine() -> Hostengine:
    """How nv-hostengine runs (the compute role's drop-in for nvidia-dcgm.service) and where its clients
    find it: ``-n`` (foreground, under systemd), the package unit's service account, the socket."""
    return {
        "command": " ".join(
            [NV_HOSTENGINE, "-n", "--service-account", HOSTENGINE_SERVICE_ACCOUNT, "--domain-socket", HOSTENGINE_SOCKET]
        ),
        "socket": HOSTENGINE_SOCKET,
        "socket_dir": HOSTENGINE_SOCKET_DIR,
        "socket_dir_mode": HOSTENGINE_SOCKET_DIR_MODE,
        "runtime_directory": HOSTENGINE_RUNTIME_DIRECTORY,
        "address": HOSTENGINE,
        "tcp_port": HOSTENGINE_TCP_PORT,
        "min_dcgm_version": MIN_DCGM_VERSION,
    }


def dcgm_policy(plan: Mapping[str, Any]) -> DcgmSection:
    """DCGM health watches (no violation policy: see the module's doc) and dcgm-exporter's counters."""
    gpu: GpuSection = plan["gpu"]  # the plan's earlier sections (plan/assembly.py _needs)
    nvlink = gpu["model"]["nvlink_gen"] is not None

    watches = [(letter, name) for letter, name in HEALTH_WATCHES if nvlink or name != "nvlink"]
    systems = "".join(letter for letter, _name in watches)
    health_args = ["health", "-s", systems]

    notes = ["no DCGM policy: each condition has a consumer already (docs/monitoring.md, 'DCGM policy')"]
    if not nvlink:
        notes.append(f"{gpu['model']['key']} has no NVLink: no NVLink health watch or counters")

    counters: list[ExporterCounter] = [
        {"field": field, "type": kind, "help": text}
        for field, kind, text, needs_nvlink in _COUNTERS
        if nvlink or not needs_nvlink
    ]
    return {
        "dcgmi": DCGMI,
        "health_systems": systems,
        "health_watches": [name for _letter, name in watches],
        "health_args": health_args,
        "policy": None,
        "hostengine": hostengine(),
        "policy_consumers": dict(POLICY_CONSUMERS),
        # run first, its failure ignored (systemd's "-" prefix): a host engine with no policy is fine
        "clear_command": _command(list(POLICY_CLEAR_ARGS)),
        "commands": [_command(health_args)],
        "exporter": {
            "counters_file": EXPORTER_COUNTERS_FILE,
            "counters": counters,
            "hostengine": HOSTENGINE,
        },
        "notes": notes,
    }
