"""DCGM from the plan: health watches, the violation policy and dcgm-exporter's counters.

The compute role renders ``plan["dcgm"]`` into ``gpucluster-dcgm-policy.service``, a oneshot
unit that runs after the DCGM host engine (nvidia-dcgm.service, nv-hostengine) and sets:

- health watches, ``dcgmi health -s <systems>`` (docs/sources.md §5.2, ``dcgmi/CommandLineParser.cpp``,
  DCGM 4.6.0 [D1]): ``p`` PCIe, ``m`` memory, ``i`` infoROM, ``t`` thermal and power, ``n``
  NVLink (only for GPU models with NVLink, ``gpu.model.nvlink_gen``). DCGM's default is ``pm``.
- the policy, ``dcgmi policy --set A,V <conditions>`` (docs/sources.md [D1]): ``-e`` double-bit ECC
  (DCGM_POLICY_COND_DBE), ``-p`` PCIe replay (PCI), ``-n`` NVLink errors (NVLINK, NVLink models
  only), ``-x`` XID errors (XID), ``-T`` maximum temperature = ``gpu.temperature.critical_c``
  (the model's Max Operating Temp, as docs/sources.md §5.1 suggests; left out when the plan has no
  sourced thermal limits), ``-P`` maximum power = ``gpu.clocks.power_limit_w`` (the power cap
  the clocks unit applies). ``-M`` (retired pages) has no sourced threshold and is not set.
  Action ``0`` (none) and validation ``0`` (none): a violation is reported to DCGM's policy
  listeners (``dcgmi policy --reg``), never answered with a GPU reset (action ``1``), which
  would kill the running job; draining a node is the health check's job.

DCGM keeps watches and policies in the running host engine only, so the unit is bound to
nvidia-dcgm.service (Requires=) and runs again whenever the host engine restarts.

dcgm-exporter (docs/sources.md §5.4, ``etc/default-counters.csv`` [D3]) listens on the management
address, port ``monitoring.dcgm_exporter_port``, and reads the counters listed here: the
stock default set plus ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` and (NVLink models)
``DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL``, which the stock file comments out and
the alert rules GpuDoubleBitEcc and GpuNvlinkErrors need (docs/monitoring.md). It connects
to the host engine (``--remote-hostengine-info``, nv-hostengine's port 5555) instead of
starting a second, embedded one.
"""

from __future__ import annotations

from typing import Any

DCGMI = "/usr/bin/dcgmi"
HOSTENGINE = "localhost:5555"  # nv-hostengine's default port (docs/tiers.md: DCGM listens on 5555)
EXPORTER_COUNTERS_FILE = "/etc/dcgm-exporter/gpucluster-counters.csv"

# docs/sources.md [D1]: dcgmi health -s letters, in the order the watches are listed here
HEALTH_WATCHES = (
    ("p", "pcie"),
    ("m", "memory"),
    ("i", "inforom"),
    ("t", "thermal_power"),
    ("n", "nvlink"),
)

# docs/sources.md [D1]: dcgmi policy --set "action,validation"; 0 = none for both
POLICY_ACTION_NONE = 0
POLICY_VALIDATION_NONE = 0

# docs/sources.md [D1]: the boolean conditions (flag, DCGM_POLICY_COND_* name)
POLICY_FLAGS = (
    ("-e", "dbe"),
    ("-p", "pcie"),
    ("-n", "nvlink"),
    ("-x", "xid"),
)
POLICY_MAX_TEMP = "-T"  # DCGM_POLICY_COND_THERMAL, degrees C
POLICY_MAX_POWER = "-P"  # DCGM_POLICY_COND_POWER, W

# dcgm-exporter's counters (field, Prometheus type, help): the stock defaults of
# etc/default-counters.csv (docs/sources.md [D3]; types as in that file), then the two error
# counters the alert rules read, which the stock file leaves commented out.
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
    # enabled by gpucluster.tiers: alert GpuNvlinkErrors
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        True,
    ),
)


def _command(args: list[str]) -> str:
    return " ".join([DCGMI, *args])


def dcgm_policy(plan: dict[str, Any]) -> dict[str, Any]:
    """DCGM health watches, policy (with the plan's thresholds) and dcgm-exporter's counters."""
    gpu = plan["gpu"]
    nvlink = gpu["model"].get("nvlink_gen") is not None
    max_temp = gpu["temperature"].get("critical_c")
    max_power = gpu["clocks"]["power_limit_w"]

    watches = [(letter, name) for letter, name in HEALTH_WATCHES if nvlink or name != "nvlink"]
    systems = "".join(letter for letter, _name in watches)
    health_args = ["health", "-s", systems]

    conditions = {name: nvlink or name != "nvlink" for _flag, name in POLICY_FLAGS}
    policy_args = ["policy", "--set", f"{POLICY_ACTION_NONE},{POLICY_VALIDATION_NONE}"]
    policy_args += [flag for flag, name in POLICY_FLAGS if conditions[name]]
    if max_temp is not None:
        policy_args += [POLICY_MAX_TEMP, str(max_temp)]
    policy_args += [POLICY_MAX_POWER, str(max_power)]

    notes = []
    if max_temp is None:
        notes.append("no GPU temperature threshold in the plan (gpucluster_node.gpu_temp_limits): policy has no -T")
    if not nvlink:
        notes.append(f"{gpu['model']['key']} has no NVLink: no NVLink health watch, policy condition or counters")

    counters = [
        {"field": field, "type": kind, "help": text}
        for field, kind, text, needs_nvlink in _COUNTERS
        if nvlink or not needs_nvlink
    ]
    return {
        "dcgmi": DCGMI,
        "health_systems": systems,
        "health_watches": [name for _letter, name in watches],
        "health_args": health_args,
        "policy": {
            "action": POLICY_ACTION_NONE,
            "validation": POLICY_VALIDATION_NONE,
            **conditions,
            "max_temp_c": max_temp,
            "max_power_w": max_power,
        },
        "policy_args": policy_args,
        "commands": [_command(health_args), _command(policy_args)],
        "exporter": {
            "counters_file": EXPORTER_COUNTERS_FILE,
            "counters": counters,
            "hostengine": HOSTENGINE,
        },
        "notes": notes,
    }
