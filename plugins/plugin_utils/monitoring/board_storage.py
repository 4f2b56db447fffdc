"""The ``storage`` dashboard: disk and network throughput per host and, on NFS sites, NFS client
operations (node-exporter)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.panels import (
    HOST,
    RATE_WINDOW,
    Panel,
    Query,
)


def storage_panels(plan: Mapping[str, Any]) -> list[Panel]:
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
