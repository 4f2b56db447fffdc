"""Grafana dashboards as code, from the plan, with the provisioning files that load them.

The plan carries each dashboard's data, not its JSON: title, uid, tags and per panel its title,
unit, queries, threshold steps and description (:func:`grafana_plan`). :func:`dashboard_model`
turns that into Grafana's dashboard JSON model on the way to the host (the filter
``gpucluster.tiers.grafana_dashboard`` in the head role's templates), as plain dicts at
:data:`SCHEMA_VERSION`, the schema version of current Grafana (12.x). No dashboard library is
needed on the controller. grafana-foundation-sdk, Grafana Labs' generated SDK (on PyPI as
``grafana-foundation-sdk``), is a test dependency only: the unit tests read every dashboard with
its typed dashboard model and check that nothing is lost or changed
(tests/unit/plugins/plugin_utils/monitoring/test_dashboards.py).

What the dashboards show and where each metric comes from (:data:`METRIC_SOURCES`):

- ``gpu``: utilisation, power, temperature, SM and memory clocks, framebuffer used, throttling
  (clock-event reasons and violation time) and the last XID per GPU, from dcgm-exporter: only the
  counters the plan enables (``plan.dcgm.exporter.counters``, the compute role's dcgm-exporter
  counters file). The power and temperature panels draw the alert
  thresholds (``plan.monitoring.thresholds``).
- ``fabric``: NVLink bandwidth and CRC errors (dcgm-exporter), InfiniBand port traffic, errors,
  state and rate of the HCAs the plan cables (node-exporter's infiniband collector), with the
  same ``device`` selector and link-rate threshold as the InfiniBand alerts.
- ``storage``: disk and network throughput per host (node-exporter's diskstats and netdev
  collectors) and, on NFS sites, NFS client read/write operations (its nfs collector). Lustre has
  no exporter here: node-exporter has no Lustre collector and Debian packages no Lustre exporter.
- ``cooling``: the DLC loop's supply, return, flow and ΔT from the site's BMC/CDU exporter, with
  the coolant alerts' thresholds. Air-cooled sites get a text panel saying why it is empty.

- ``slurm`` (Slurm clusters only): jobs by state and partition, pending reasons, nodes by state and
  GPUs allocated of the total, from the head's own Slurm exporter (:mod:`slurm_queue`: a timer writes
  node-exporter textfile metrics; Debian packages no Slurm exporter). Its metric names come from the
  exporter's definition (:func:`slurm_queue.exporter_metrics`).

Dashboards do not grow with the cluster: one panel per metric, one series per host/GPU/port by
its labels, and a ``host`` variable (``$host``) to narrow them. Every query reads only metrics in
:func:`metric_catalogue`; the unit tests parse each query with promtool and hold that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.healing import METRICS as HEALING_METRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_choice
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alerts import (
    CLOCKS_EVENT,
    COOLANT_METRICS,
    EVENT_HW_POWER_BRAKE,
    EVENT_HW_SLOWDOWN,
    EVENT_SW_POWER_CAP,
    EVENT_SW_THERMAL,
    FLOW,
    GRAFANA_PORT,
    IB_ACTIVE,
    NVLINK_WINDOW,
    RETURN,
    SUPPLY,
    THERMAL_VIOLATION,
    bit_test,
    dashboard_uid,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.slurm_queue import exporter_metrics

DATASOURCE_UID = "gpucluster-prometheus"
DATASOURCE_NAME = "gpucluster Prometheus"
#: where the provider reads the dashboards' JSON; the Debian/RPM package runs Grafana as user grafana,
#: which reads these world-readable files (roles/head/vars/files.yml writes them 0644)
DASHBOARD_DIR = "/var/lib/grafana/dashboards/gpucluster"
PROVISIONING_DIR = "/etc/grafana/provisioning"
#: Grafana's secrets on the head (root:grafana 0750 folder, 0640 files; the head role writes them,
#: never the plan): the admin password (generated once, or the inventory's vault variable
#: head_grafana_admin_password) and Grafana's own password for Prometheus (prometheus.auth_plan).
#: Grafana expands ``$__file{path}`` in its settings, environment overrides included, and in a
#: provisioned datasource's secureJsonData:
#: https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#variable-expansion,
#: https://grafana.com/docs/grafana/latest/administration/provisioning/#using-environment-variables
GRAFANA_SECRETS_DIR = "/etc/grafana/secrets"
GRAFANA_GROUP = "grafana"
GRAFANA_ADMIN_PASSWORD_FILE = f"{GRAFANA_SECRETS_DIR}/admin.password"
#: Grafana's account on Prometheus (read only: Prometheus' basic auth has no roles, but this account
#: is not in Alertmanager's web config, so it cannot silence alerts)
GRAFANA_PROMETHEUS_USER = "grafana"
GRAFANA_PROMETHEUS_PASSWORD_FILE = f"{GRAFANA_SECRETS_DIR}/prometheus.password"
RATE_WINDOW = "5m"  # 10 scrape intervals of 30 s (prometheus.py SCRAPE_INTERVAL)
#: dashboard variables and what the checks put in their place (a regex matching every value)
VARIABLES = {"host": ".*"}
HOST = 'host=~"$host"'

#: Metrics the dashboards may read beyond the plan's dcgm counters and coolant metrics, with where they
#: come from. node-exporter collectors (v1.5, Debian 12's prometheus-node-exporter):
#: https://github.com/prometheus/node_exporter/blob/v1.5.0/collector/infiniband_linux.go,
#: .../collector/diskstats_linux.go, .../collector/netdev_common.go, .../collector/nfs_linux.go
NODE_EXPORTER_METRICS = {
    "node_infiniband_port_data_received_bytes_total": "infiniband collector (port_rcv_data x 4 lanes)",
    "node_infiniband_port_data_transmitted_bytes_total": "infiniband collector (port_xmit_data x 4 lanes)",
    "node_infiniband_symbol_error_total": "infiniband collector (symbol_error)",
    "node_infiniband_link_downed_total": "infiniband collector (link_downed)",
    "node_infiniband_state_id": "infiniband collector (port state, 4 = ACTIVE)",
    "node_infiniband_rate_bytes_per_second": "infiniband collector (port rate)",
    "node_disk_read_bytes_total": "diskstats collector",
    "node_disk_written_bytes_total": "diskstats collector",
    "node_network_receive_bytes_total": "netdev collector",
    "node_network_transmit_bytes_total": "netdev collector",
    "node_nfs_requests_total": "nfs collector (client RPC operations by method)",
}
#: Prometheus' own per-target series (https://prometheus.io/docs/concepts/jobs_instances/)
PROMETHEUS_METRICS = {"up": "Prometheus, per scrape target"}


#: The classic dashboard JSON model's schema version, as Grafana 12 writes it (docs/sources.md [GF1]);
#: Grafana migrates an older model on load, never a newer one
SCHEMA_VERSION = 41
#: the panel grid is 24 columns wide (docs/sources.md [GF1]): two panels a row, 8 grid rows high
PANEL_WIDTH, PANEL_HEIGHT = 12, 8


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Step:
    """A threshold line: from ``value`` on, the colour; ``plan`` names the plan key it comes from."""

    value: float | None
    color: str
    plan: str = ""


@dataclass
class Panel:
    title: str
    queries: list[Query] = field(default_factory=list)
    unit: str = "short"
    steps: list[Step] = field(default_factory=list)
    description: str = ""
    text: str = ""  # a text panel (no queries) when set


def metric_catalogue(plan: dict[str, Any]) -> dict[str, str]:
    """Every metric name a panel may use, with the exporter or rule that provides it."""
    cat = {c["field"]: "dcgm-exporter (plan.dcgm.exporter.counters)" for c in plan["dcgm"]["exporter"]["counters"]}
    cat.update({k: f"node-exporter {v}" for k, v in NODE_EXPORTER_METRICS.items()})
    cat.update(PROMETHEUS_METRICS)
    if plan["cooling"]["cooling"] == "dlc":
        cat.update({m: "the site's BMC/CDU exporter (docs/monitoring.md)" for m in COOLANT_METRICS})
    if _has_slurm(plan):
        cat.update({m: f"the head's Slurm exporter: {h}" for m, h in exporter_metrics().items()})
    if _has_healing(plan):
        cat.update({m: f"the head's self-healing loop: {h[2]}" for m, h in HEALING_METRICS.items()})
    return cat


def _has_healing(plan: dict[str, Any]) -> bool:
    """The self-healing loop runs (plan.healing.enabled, Slurm only): its metrics and panels exist."""
    return bool((plan.get("healing") or {}).get("enabled"))


def _has_slurm(plan: dict[str, Any]) -> bool:
    return plan["cluster"]["scheduler"] == "slurm"


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"})


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (identifiers that are not functions, keywords,
    label names, label values or grouping labels)."""
    text = _STRINGS.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)  # selectors: label names and values
    text = re.sub(r"\[[^\]]*\]", "", text)  # range windows
    text = _GROUPING.sub("", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in _KEYWORDS}


def _threshold_steps(plan: dict[str, Any], *pairs: tuple[str, str]) -> list[Step]:
    """Steps for the alerts named (alert, colour) that the plan has, in rising order."""
    thresholds = plan["monitoring"]["thresholds"]
    steps = [Step(thresholds[a]["value"], color, thresholds[a]["plan"]) for a, color in pairs if a in thresholds]
    return sorted(steps, key=lambda s: s.value or 0)


def _gpu_panels(plan: dict[str, Any], counters: set[str]) -> list[Panel]:
    sel = "{" + HOST + "}"
    gpu = "{{host}} GPU {{gpu}}"
    ok = Step(None, "green")
    events = f"{CLOCKS_EVENT}{sel}"
    candidates = [
        Panel("GPU utilisation", [Query(f"DCGM_FI_DEV_GPU_UTIL{sel}", gpu)], "percent"),
        Panel(
            "GPU power draw",
            [Query(f"DCGM_FI_DEV_POWER_USAGE{sel}", gpu)],
            "watt",
            [ok, *_threshold_steps(plan, ("GpuPowerAboveCap", "red"))],
            "Red line: the GPU power limit the plan sets (gpu.clocks.power_limit_w); GpuPowerAboveCap fires above it.",
        ),
        Panel(
            "GPU temperature",
            [Query(f"DCGM_FI_DEV_GPU_TEMP{sel}", gpu)],
            "celsius",
            [ok, *_threshold_steps(plan, ("GpuTemperatureWarning", "orange"), ("GpuTemperatureCritical", "red"))],
            "Lines: the warning and critical temperatures of the alerts (gpu.temperature.warn_c, critical_c).",
        ),
        Panel(
            "SM clock (MHz)",
            [Query(f"DCGM_FI_DEV_SM_CLOCK{sel}", gpu)],
            "none",
            description="The locked clock range is plan.gpu.clocks (nvidia-smi -lgc).",
        ),
        Panel("Memory clock (MHz)", [Query(f"DCGM_FI_DEV_MEM_CLOCK{sel}", gpu)], "none"),
        Panel("Framebuffer used", [Query(f"DCGM_FI_DEV_FB_USED{sel}", gpu)], "mbytes"),
        Panel(
            "Throttling (clock-event reasons)",
            [
                Query(f"clamp_max({bit_test(events, EVENT_SW_THERMAL, 2)}, 1)", f"{gpu} thermal"),
                Query(
                    f"clamp_max({bit_test(events, EVENT_HW_SLOWDOWN)} + {bit_test(events, EVENT_HW_POWER_BRAKE)}, 1)",
                    f"{gpu} HW slowdown/power brake",
                ),
                Query(bit_test(events, EVENT_SW_POWER_CAP), f"{gpu} power cap"),
            ],
            "none",
            description="1 while the reason holds (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, NVML clocks-event bits): "
            "thermal = SW/HW thermal slowdown 0x20/0x40 (GpuThermalThrottling), HW slowdown 0x8 or power brake "
            "0x80 (GpuHwSlowdown), power cap 0x4: normal for a loaded GPU at the planned power limit.",
        ),
        Panel(
            "Throttle time (violation counters)",
            [
                Query(f"rate({THERMAL_VIOLATION}{sel}[{RATE_WINDOW}])", f"{gpu} thermal"),
                Query(f"rate(DCGM_FI_DEV_POWER_VIOLATION{sel}[{RATE_WINDOW}])", f"{gpu} power"),
            ],
            "short",
            description="Growth of the time the GPU was held below its application clocks by thermal or power "
            "limits (DCGM_FI_DEV_THERMAL_VIOLATION/POWER_VIOLATION). Any thermal growth for 5 minutes fires "
            "GpuThermalThrottling; power growth at the planned power cap is expected. DCGM documents the unit "
            "as microseconds, dcgm-exporter as nanoseconds: read the shape, not the scale.",
        ),
        Panel(
            "Last XID error",
            [Query(f"DCGM_FI_DEV_XID_ERRORS{sel}", gpu)],
            "none",
            [ok, Step(1, "red", "any XID (GpuXidError)")],
        ),
    ]
    return [p for p in candidates if all(metric_names(q.expr) <= counters for q in p.queries)]


def _fabric_panels(plan: dict[str, Any], counters: set[str]) -> list[Panel]:
    gpu = "{{host}} GPU {{gpu}}"
    sel = "{" + HOST + "}"
    panels = [
        Panel(
            "NVLink bandwidth counter rate",
            [Query(f"rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{sel}[{RATE_WINDOW}])", gpu)],
            "short",
            description="Per-second increase of DCGM's total NVLink bandwidth counter over all lanes.",
        ),
        Panel(
            f"NVLink CRC errors (new in {NVLINK_WINDOW})",
            [Query(f"increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{sel}[{NVLINK_WINDOW}])", gpu)],
            "short",
            [Step(None, "green"), Step(1, "orange", "any new CRC error (GpuNvlinkErrors)")],
        ),
    ]
    panels = [p for p in panels if all(metric_names(q.expr) <= counters for q in p.queries)]
    if not panels:  # a PCIe-only model: dcgm.py exports no NVLink counter (compute/interconnect.py)
        model = plan["gpu"]["model"]["key"]
        panels = [Panel("NVLink", text=f"{model} has no NVLink: its GPUs talk over PCIe, no NVLink counters.")]
    fab = plan["fabric"]
    if fab["type"] not in RDMA_FABRICS:
        return [
            *panels,
            Panel("InfiniBand", text=f"This site has no InfiniBand/RoCE fabric (fabric type {fab['type']}): no ports."),
        ]
    hcas = sorted({h["hca"] for h in fabric_links.hcas(fab.get("cabling") or {})})
    # the HCAs the plan cables, on compute nodes: the InfiniBand alerts' selector (alerts.py)
    ib = "{" + HOST + ',role="compute"' + (f',device=~"{"|".join(hcas)}"' if hcas else "") + "}"
    port = "{{host}} {{device}} port {{port}}"
    rate = _threshold_steps(plan, ("InfinibandPortDegraded", "green"))
    return [
        *panels,
        Panel(
            "InfiniBand receive",
            [Query(f"rate(node_infiniband_port_data_received_bytes_total{ib}[{RATE_WINDOW}]) * 8", port)],
            "bps",
        ),
        Panel(
            "InfiniBand transmit",
            [Query(f"rate(node_infiniband_port_data_transmitted_bytes_total{ib}[{RATE_WINDOW}]) * 8", port)],
            "bps",
        ),
        Panel(
            "InfiniBand link rate (Gb/s)",
            [Query(f"node_infiniband_rate_bytes_per_second{ib} * 8 / 1e9", port)],
            "none",
            [Step(None, "red"), *rate],
            "Below the planned rate (fabric.link_rate_gbps) InfinibandPortDegraded fires.",
        ),
        Panel(
            "InfiniBand port state",
            [Query(f"node_infiniband_state_id{ib}", port)],
            "none",
            [Step(None, "red"), Step(IB_ACTIVE, "green", "ACTIVE (InfinibandPortDown)")],
            "4 is ACTIVE; anything else fires InfinibandPortDown.",
        ),
        Panel(
            f"InfiniBand errors (new in {NVLINK_WINDOW})",
            [
                Query(f"increase(node_infiniband_symbol_error_total{ib}[{NVLINK_WINDOW}])", "symbol " + port),
                Query(f"increase(node_infiniband_link_downed_total{ib}[{NVLINK_WINDOW}])", "link downed " + port),
            ],
            "short",
        ),
    ]


def _storage_panels(plan: dict[str, Any]) -> list[Panel]:
    sel = "{" + HOST + "}"
    net = "{" + HOST + ',device!="lo"}'
    rates = (
        ("Disk read", "node_disk_read_bytes_total", sel),
        ("Disk write", "node_disk_written_bytes_total", sel),
        ("Network receive", "node_network_receive_bytes_total", net),
        ("Network transmit", "node_network_transmit_bytes_total", net),
    )
    panels = [
        Panel(title, [Query(f"rate({metric}{match}[{RATE_WINDOW}])", "{{host}} {{device}}")], "Bps")
        for title, metric, match in rates
    ]
    kind = plan["storage"]["type"]
    if kind == "nfs":
        nfs = "{" + HOST + ',method=~"Read|Write"}'
        panels.append(
            Panel(
                "NFS client read/write operations",
                [
                    Query(
                        f"sum by (host, method) (rate(node_nfs_requests_total{nfs}[{RATE_WINDOW}]))",
                        "{{host}} {{method}}",
                    )
                ],
                "ops",
                description="Operations, not bytes: node-exporter's nfs collector counts RPCs.",
            )
        )
    elif kind == "lustre":
        panels.append(
            Panel(
                "Lustre",
                text="No Lustre client or server metrics: node-exporter has no Lustre collector and Debian "
                "packages no Lustre exporter. The network panels above include the LNet traffic.",
            )
        )
    return panels


def _cooling_panels(plan: dict[str, Any]) -> list[Panel]:
    if plan["cooling"]["cooling"] != "dlc":
        return [
            Panel(
                "Coolant loop",
                text=f"Cooling is {plan['cooling']['cooling']}: the plan has no coolant loop and no coolant alerts.",
            )
        ]
    loop = "{{loop}}"
    return [
        Panel(
            "Coolant supply temperature",
            [Query(SUPPLY, loop)],
            "celsius",
            [
                Step(None, "green"),
                *_threshold_steps(plan, ("CoolantSupplyWarning", "orange"), ("CoolantSupplyHigh", "red")),
            ],
        ),
        Panel(
            "Coolant return temperature",
            [Query(RETURN, loop)],
            "celsius",
            [
                Step(None, "green"),
                *_threshold_steps(plan, ("CoolantReturnWarning", "orange"), ("CoolantReturnHigh", "red")),
            ],
        ),
        Panel(
            "Coolant flow (L/min)",
            [Query(FLOW, loop)],
            "none",
            [
                Step(None, "red"),
                *_threshold_steps(plan, ("CoolantFlowCritical", "orange"), ("CoolantFlowLow", "green")),
            ],
            "The alerts fire at or below these values (CoolantFlowLow, CoolantFlowCritical).",
        ),
        Panel(
            "Coolant ΔT (return − supply)",
            [Query(f"{RETURN} - on(loop) {SUPPLY}", loop)],
            "none",
            [Step(None, "green"), *_threshold_steps(plan, ("CoolantDeltaTHigh", "orange"))],
            "Kelvin; CoolantDeltaTHigh fires at or above the line (cooling.delta_t_high_k).",
        ),
    ]


def _slurm_panels(plan: dict[str, Any]) -> list[Panel]:
    """The queue, cluster-wide: the exporter runs on the head only, so no ``$host`` selector."""
    nodes = plan["cluster"]["compute_nodes"]
    gpus = plan["cluster"]["gpus_total"]
    return [
        Panel(
            "Jobs by state",
            [Query("sum by (state) (gpucluster_slurm_jobs)", "{{state}}")],
            "short",
            description="squeue on the head, every scrape interval; array tasks count one by one.",
        ),
        Panel(
            "Running and pending jobs by partition",
            [
                Query(
                    'sum by (partition, state) (gpucluster_slurm_jobs{state=~"running|pending"})',
                    "{{partition}} {{state}}",
                )
            ],
            "short",
        ),
        Panel(
            "Pending jobs by reason",
            [Query("gpucluster_slurm_pending_jobs", "{{reason}}")],
            "short",
            description="Priority and Resources are a busy queue; QOS*/Assoc* limits, ReqNodeNotAvail or "
            'PartitionDown need an operator (docs/runbook.md, "Reading the dashboards").',
        ),
        Panel(
            "Nodes by state",
            [
                Query("gpucluster_slurm_nodes", "{{state}}"),
                Query("gpucluster_slurm_nodes_not_responding", "not responding"),
            ],
            "short",
            description=f"The plan has {nodes} compute nodes: idle + mixed + allocated is that number when all are "
            "in service; drained/down nodes carry a reason (sinfo -R).",
        ),
        Panel(
            "GPUs allocated",
            [
                Query("gpucluster_slurm_gpus_allocated", "allocated"),
                Query("gpucluster_slurm_gpus_total", "configured"),
            ],
            "short",
            description=f"The plan has {gpus} GPUs (cluster.gpus_total); configured below that means nodes "
            "or GRES are missing from Slurm.",
        ),
        Panel(
            "Slurm exporter",
            [Query("gpucluster_slurm_exporter_success", "last run read squeue/sinfo/scontrol")],
            "none",
            [Step(None, "red"), Step(1, "green", "1: the exporter read the queue")],
            "0: a Slurm command failed on the head (journalctl -u gpucluster-slurm-metrics); the queue panels "
            "are empty until it reads again.",
        ),
    ]


def _healing_panels(plan: dict[str, Any]) -> list[Panel]:
    """Node health history from the head's self-healing loop (compute/healing.py): states, events by class
    and action, and the active checks' results; on the Slurm dashboard, cluster-wide like the queue."""
    heal = plan["healing"]
    interval_h = heal["active"]["interval_s"] / 3600
    stale = 3 * heal["remediation"]["interval_s"]
    return [
        Panel(
            "Self-healing: nodes by state",
            [Query("sum by (state) (gpucluster_heal_node_state)", "{{state}}")],
            "short",
            description="remediating: under an action (GPU reset, reboot); validating: the re-validation job runs "
            "in the node's reservation; replace: the loop gave up, the node stays drained with a ticket.",
        ),
        Panel(
            "Self-healing: events per hour by class and action",
            [Query("sum by (class, action) (increase(gpucluster_heal_events_total[1h]))", "{{class}} {{action}}")],
            "short",
            description="The node history on the head (/var/log/gpucluster/node-history.jsonl, make history "
            "NODE=...) as counts: a node that keeps coming back for the same class is an RMA case.",
        ),
        Panel(
            "Active checks: last figure",
            [Query("gpucluster_active_check_value", "{{node}} {{check}} ({{unit}})")],
            "short",
            description="all_reduce busbw (GB/s), ib_write_bw (Gb/s) and the storage read (GB/s) of the last active "
            "check of each idle node, against the plan's floors (plan.healing.active.checks).",
        ),
        Panel(
            "Active checks: hours since each node's last result",
            [Query("(time() - max by (node) (gpucluster_active_check_last_timestamp_seconds)) / 3600", "{{node}}")],
            "h",
            [Step(None, "green"), Step(2 * interval_h, "orange", "2 x healing.active.interval_s")],
            f"Each idle node is checked every {interval_h:g} h; ActiveCheckOverdue fires beyond the line.",
        ),
        Panel(
            "Self-healing loop: seconds since its last run",
            [Query("time() - gpucluster_heal_last_run_timestamp_seconds", "seconds")],
            "s",
            [Step(None, "green"), Step(stale, "red", "3 x healing.remediation.interval_s")],
            "HealLoopStale fires beyond the line: drains wait for an operator until the loop runs again.",
        ),
    ]


#: the dashboards (slurm only on Slurm clusters)
DASHBOARDS = ("gpu", "fabric", "storage", "cooling", "slurm")
TITLES = {
    "gpu": "GPUs",
    "fabric": "NVLink and fabric",
    "storage": "Storage throughput",
    "cooling": "DLC loop",
    "slurm": "Slurm queue",
}


def dashboard_panels(plan: dict[str, Any]) -> dict[str, list[Panel]]:
    counters = {c["field"] for c in plan["dcgm"]["exporter"]["counters"]}
    panels = {
        "gpu": _gpu_panels(plan, counters),
        "fabric": _fabric_panels(plan, counters),
        "storage": _storage_panels(plan),
        "cooling": _cooling_panels(plan),
    }
    if _has_slurm(plan):
        panels["slurm"] = _slurm_panels(plan) + (_healing_panels(plan) if _has_healing(plan) else [])
    return panels


def _datasource() -> dict[str, str]:
    return {"type": "prometheus", "uid": DATASOURCE_UID}


def _panel_model(panel: dict[str, Any], index: int) -> dict[str, Any]:
    """One panel of the plan (:class:`Panel` as a dict) as Grafana's panel JSON: text or timeseries."""
    pos = {
        "h": PANEL_HEIGHT,
        "w": PANEL_WIDTH,
        "x": (index % 2) * PANEL_WIDTH,
        "y": (index // 2) * PANEL_HEIGHT,
    }
    head = {"id": index + 1, "title": panel["title"], "gridPos": pos, "description": panel.get("description", "")}
    if panel.get("text"):
        return {**head, "type": "text", "options": {"mode": "markdown", "content": panel["text"]}}
    steps = [{"color": s["color"], "value": s["value"]} for s in panel["steps"]] or [{"color": "green", "value": None}]
    return {
        **head,
        "type": "timeseries",
        "datasource": _datasource(),
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": _datasource(), "expr": q["expr"], "legendFormat": q["legend"]}
            for i, q in enumerate(panel["queries"])
        ],
        "fieldConfig": {
            "defaults": {
                "unit": panel["unit"],
                "thresholds": {"mode": "absolute", "steps": steps},
                "custom": {"thresholdsStyle": {"mode": "line" if panel["steps"] else "off"}},
            },
            "overrides": [],
        },
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []},
            "tooltip": {"mode": "multi", "sort": "none"},
        },
    }


def dashboard_model(board: dict[str, Any]) -> dict[str, Any]:
    """A dashboard of the plan (``plan.monitoring.grafana.dashboards.<key>``) as Grafana's JSON model.

    Plain dicts at :data:`SCHEMA_VERSION`; the filter ``gpucluster.tiers.grafana_dashboard`` writes
    it as JSON. Everything in it comes from the board's data: rendering adds no number of its own
    beyond the layout.
    """
    host = {
        "type": "query",
        "name": "host",
        "label": "host",
        "datasource": _datasource(),
        "query": {"qryType": 1, "query": 'label_values(up{job="node"}, host)', "refId": "host"},
        "includeAll": True,
        "multi": True,
        "allValue": VARIABLES["host"],
        "current": {"text": ["All"], "value": ["$__all"]},
        "refresh": 2,  # on time range change: new hosts appear without editing the dashboard
        "sort": 1,
    }
    return {
        "uid": board["uid"],
        "title": board["title"],
        "tags": list(board["tags"]),
        "editable": False,
        "timezone": "utc",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "graphTooltip": 1,  # shared crosshair: one time across a host's panels
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [host]},
        "panels": [_panel_model(p, i) for i, p in enumerate(board["panels"])],
    }


def _title(plan: dict[str, Any], key: str) -> str:
    """TITLES[key]; the fabric dashboard of a model without NVLink is "Fabric"."""
    if key == "fabric" and plan["gpu"]["model"].get("nvlink_gen") is None:
        return "Fabric"
    return TITLES[key]


def _panel_data(panel: Panel) -> dict[str, Any]:
    """A panel as the plan stores it: its fields, without the empty ones of the other panel kind."""
    data = asdict(panel)
    if panel.text:
        return {"title": panel.title, "text": panel.text, "description": panel.description}
    del data["text"]
    return data


def provisioning(monitoring: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Grafana's provisioning file of ``kind`` (``datasource``: the head's Prometheus; ``provider``: the
    plan's dashboards folder) from the plan's ``monitoring`` section (address, prometheus_port,
    scrape_interval)."""
    if kind == "datasource":
        url = f"http://{monitoring['address']}:{monitoring['prometheus_port']}"
        # https://grafana.com/docs/grafana/latest/administration/provisioning/#data-sources
        return {
            "apiVersion": 1,
            "datasources": [
                {
                    "name": DATASOURCE_NAME,
                    "uid": DATASOURCE_UID,
                    "type": "prometheus",
                    "access": "proxy",
                    "url": url,
                    "isDefault": True,
                    "editable": False,
                    # Prometheus answers with credentials only (prometheus.auth_plan): Grafana's own
                    # account, its password read from a root:grafana 0640 file when Grafana starts
                    "basicAuth": True,
                    "basicAuthUser": GRAFANA_PROMETHEUS_USER,
                    "jsonData": {"timeInterval": monitoring["scrape_interval"]},
                    "secureJsonData": {"basicAuthPassword": f"$__file{{{GRAFANA_PROMETHEUS_PASSWORD_FILE}}}"},
                }
            ],
        }
    check_choice(kind, "kind", ("datasource", "provider"))
    # https://grafana.com/docs/grafana/latest/administration/provisioning/#dashboards
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "gpucluster",
                "orgId": 1,
                "folder": "gpucluster",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 30,
                "options": {"path": DASHBOARD_DIR},
            }
        ],
    }


def provisioning_yaml(monitoring: Mapping[str, Any], kind: str) -> str:
    """:func:`provisioning` as YAML, keys in Grafana's documented order: rendered on the way to the head
    (filter gpucluster.tiers.grafana_provisioning), not stored in the plan."""
    import yaml  # PyYAML ships with ansible-core

    return str(yaml.safe_dump(provisioning(monitoring, kind), sort_keys=False, width=1000))


def grafana_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The head's Grafana: the datasource, the dashboards' folder and each dashboard's data (the
    provisioning files and the dashboards' JSON are rendered from them by filters)."""
    mon = plan["monitoring"]
    url = f"http://{mon['address']}:{mon['prometheus_port']}"
    # the dashboards' data (queries, thresholds, texts); the head role's templates render the JSON
    # (filter grafana_dashboard -> dashboard_model): the plan stores no rendered dashboard
    boards = {
        key: {
            "uid": dashboard_uid(key),
            "title": f"{plan['cluster']['name']}: {_title(plan, key)}",
            "tags": ["gpucluster", plan["cluster"]["tier"]],
            "file": f"{DASHBOARD_DIR}/{key}.json",
            "panels": [_panel_data(p) for p in panels],
        }
        for key, panels in dashboard_panels(plan).items()
    }

    return {
        "port": GRAFANA_PORT,
        # Grafana answers on the head's management address only, like Prometheus and Alertmanager
        # ([server] http_addr, set as GF_SERVER_HTTP_ADDR: https://grafana.com/docs/grafana/latest/
        # setup-grafana/configure-grafana/#override-configuration-with-environment-variables)
        "http_addr": mon["address"],
        # no anonymous access, no sign-up, the admin password from a secret file (never admin/admin):
        # https://grafana.com/docs/grafana/latest/setup-grafana/configure-security/
        "anonymous": False,
        "allow_sign_up": False,
        "secrets_dir": GRAFANA_SECRETS_DIR,
        "group": GRAFANA_GROUP,
        "admin_password_file": GRAFANA_ADMIN_PASSWORD_FILE,
        "datasource": {
            "name": DATASOURCE_NAME,
            "uid": DATASOURCE_UID,
            "url": url,
            "user": GRAFANA_PROMETHEUS_USER,
            "password_file": GRAFANA_PROMETHEUS_PASSWORD_FILE,
        },
        "dashboard_dir": DASHBOARD_DIR,
        "dashboards": boards,
        "metrics": metric_catalogue(plan),
    }
