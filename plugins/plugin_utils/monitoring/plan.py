"""plan.monitoring: the head's Prometheus and Alertmanager (monitoring/prometheus.py), its Slurm queue
exporter (monitoring/slurm_queue.py) and the Grafana dashboards (monitoring/dashboards.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import dashboards, slurm_queue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import MonitoringSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.prometheus import monitoring_plan


def monitoring_section(plan: Mapping[str, Any]) -> MonitoringSection:
    """Prometheus and Alertmanager, the Slurm queue exporter and the dashboards, which read this section's
    own thresholds and the DCGM counters.

    ``plan``: the sections read (cluster, hosts, gpu, cooling, storage, fabric, dcgm)."""
    prom = monitoring_plan(plan)
    view = {**plan, "monitoring": prom}
    return {
        **prom,
        "slurm_queue": slurm_queue.slurm_queue_plan(view),  # the head's Slurm exporter
        "grafana": dashboards.grafana_plan(view),
    }
