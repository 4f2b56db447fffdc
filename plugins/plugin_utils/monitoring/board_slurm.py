"""The ``slurm`` dashboard (Slurm clusters only): the queue from the head's Slurm exporter and, when the
self-healing loop runs, its node states, events and active checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.panels import (
    Panel,
    Query,
    Step,
)


def slurm_panels(plan: Mapping[str, Any]) -> list[Panel]:
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


def healing_panels(plan: Mapping[str, Any]) -> list[Panel]:
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
