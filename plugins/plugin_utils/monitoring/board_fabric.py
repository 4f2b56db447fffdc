"""The ``fabric`` dashboard: NVLink (dcgm-exporter) and the InfiniBand ports the plan cables
(node-exporter's infiniband collector), with the InfiniBand alerts' selector and thresholds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.panels import (
    HOST,
    RATE_WINDOW,
    Panel,
    Query,
    Step,
    metric_names,
    threshold_steps,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import IB_ACTIVE, NVLINK_WINDOW


def fabric_panels(plan: Mapping[str, Any], counters: set[str]) -> list[Panel]:
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
    hcas = sorted({h["hca"] for h in fabric_links.hcas(fab["cabling"])})
    # the HCAs the plan cables, on compute nodes: the InfiniBand alerts' selector (alerts.py)
    ib = "{" + HOST + ',role="compute"' + (f',device=~"{"|".join(hcas)}"' if hcas else "") + "}"
    port = "{{host}} {{device}} port {{port}}"
    rate = threshold_steps(plan, ("InfinibandPortDegraded", "green"))
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
