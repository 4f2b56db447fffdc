"""The InfiniBand/RoCE port alerts (node-exporter's infiniband collector) on the HCAs the plan cables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import AlertCase, Labels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import (
    IB_ACTIVE,
    RuleBook,
    num,
    selector,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import FabricSection


def fabric_rules(r: RuleBook, fab: FabricSection, port: Labels) -> None:
    """A planned port not ACTIVE, or below the planned link rate (``port``: the labels of the test series)."""
    hcas = sorted({h["hca"] for h in fabric_links.hcas(fab["cabling"])})
    sel = {"role": "compute"}
    match = selector(sel)[:-1] + (f',device=~"{"|".join(hcas)}"' if hcas else "") + "}"
    where = "{host} {device} port {port}"
    cases: list[AlertCase] = [
        {"state": s, "value": v, "series": [("node_infiniband_state_id", port, num(v))], "labels": port}
        for s, v in (("fire", 1), ("quiet", IB_ACTIVE))
    ]
    r.add(
        "fabric",
        "InfinibandPortDown",
        f"node_infiniband_state_id{match} != {IB_ACTIVE}",
        "1m",
        "critical",
        f"{where} is not ACTIVE (state {{value:.0f}})",
        cases,
    )
    rate = fab["link_rate_gbps"]
    r.threshold(
        "fabric",
        "InfinibandPortDegraded",
        metric="node_infiniband_rate_bytes_per_second",
        op="<",
        value=rate,
        plan_key="fabric.link_rate_gbps",
        step=1,
        for_="5m",
        severity="warning",
        labels=port,
        selector=match,
        convert=(" * 8 / 1e9", 1e9 / 8),
        summary=f"{where} runs at {{value:.0f}} Gb/s, below the planned {num(rate)} Gb/s",
    )
