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

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.healing import METRICS as HEALING_METRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.board_cooling import cooling_panels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.board_fabric import fabric_panels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.board_gpu import gpu_panels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.board_slurm import (
    healing_panels,
    slurm_panels,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.board_storage import storage_panels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.grafana_model import (
    DASHBOARD_DIR,
    DATASOURCE_NAME,
    DATASOURCE_UID,
    GRAFANA_ADMIN_PASSWORD_FILE,
    GRAFANA_GROUP,
    GRAFANA_PROMETHEUS_PASSWORD_FILE,
    GRAFANA_PROMETHEUS_USER,
    GRAFANA_SECRETS_DIR,
    SCHEMA_VERSION,
    dashboard_model,
    provisioning,
    provisioning_yaml,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import Dashboard, Grafana
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.panels import (
    VARIABLES,
    Panel,
    metric_names,
    panel_data,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import (
    COOLANT_METRICS,
    GRAFANA_PORT,
    dashboard_uid,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.slurm_queue import exporter_metrics

#: Metrics the dashboards may read beyond the plan's dcgm counters and coolant metrics, with where they
#: come from. node-exporter collectors (v1.5, Debian 12's prometheus-node-exporter):
#: https://github.com/prometheus/node_exporter/blob/v1.5.0/collector/infiniband_linux.go,
#: .../collector/diskstats_linux.go, .../collector/netdev_common.go, .../collector/nfs_linux.go
NODE_EXPORTER_METRICS: dict[str, str] = {
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


def metric_catalogue(plan: Mapping[str, Any]) -> dict[str, str]:
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


def _has_healing(plan: Mapping[str, Any]) -> bool:
    """The self-healing loop runs (plan.healing.enabled, Slurm only): its metrics and panels exist."""
    return bool((plan.get("healing") or {}).get("enabled"))


def _has_slurm(plan: Mapping[str, Any]) -> bool:
    return plan["cluster"]["scheduler"] == "slurm"


#: the dashboards (slurm only on Slurm clusters)
DASHBOARDS = ("gpu", "fabric", "storage", "cooling", "slurm")
TITLES = {
    "gpu": "GPUs",
    "fabric": "NVLink and fabric",
    "storage": "Storage throughput",
    "cooling": "DLC loop",
    "slurm": "Slurm queue",
}


def dashboard_panels(plan: Mapping[str, Any]) -> dict[str, list[Panel]]:
    """Each dashboard's panels (``slurm`` on Slurm clusters only)."""
    counters = {c["field"] for c in plan["dcgm"]["exporter"]["counters"]}
    panels: dict[str, list[Panel]] = {
        "gpu": gpu_panels(plan, counters),
        "fabric": fabric_panels(plan, counters),
        "storage": storage_panels(plan),
        "cooling": cooling_panels(plan),
    }
    if _has_slurm(plan):
        panels["slurm"] = slurm_panels(plan) + (healing_panels(plan) if _has_healing(plan) else [])
    return panels


def _title(plan: Mapping[str, Any], key: str) -> str:
    """TITLES[key]; the fabric dashboard of a model without NVLink is "Fabric"."""
    if key == "fabric" and plan["gpu"]["model"].get("nvlink_gen") is None:
        return "Fabric"
    return TITLES[key]


def grafana_plan(plan: Mapping[str, Any]) -> Grafana:
    """The head's Grafana: the datasource, the dashboards' folder and each dashboard's data (the
    provisioning files and the dashboards' JSON are rendered from them by filters)."""
    mon = plan["monitoring"]
    url = f"http://{mon['address']}:{mon['prometheus_port']}"
    # the dashboards' data (queries, thresholds, texts); the head role's templates render the JSON
    # (filter grafana_dashboard -> dashboard_model): the plan stores no rendered dashboard
    boards: dict[str, Dashboard] = {
        key: {
            "uid": dashboard_uid(key),
            "title": f"{plan['cluster']['name']}: {_title(plan, key)}",
            "tags": ["gpucluster", plan["cluster"]["tier"]],
            "file": f"{DASHBOARD_DIR}/{key}.json",
            "panels": [panel_data(p) for p in panels],
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


__all__ = [
    "DASHBOARDS",
    "DASHBOARD_DIR",
    "DATASOURCE_NAME",
    "DATASOURCE_UID",
    "NODE_EXPORTER_METRICS",
    "PROMETHEUS_METRICS",
    "SCHEMA_VERSION",
    "TITLES",
    "VARIABLES",
    "dashboard_model",
    "dashboard_panels",
    "grafana_plan",
    "metric_catalogue",
    "metric_names",
    "provisioning",
    "provisioning_yaml",
]
