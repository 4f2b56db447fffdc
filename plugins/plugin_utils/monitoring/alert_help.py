"""Per alert: what it means and the first thing to do, and the dashboard that shows it (the rules'
``description`` and ``dashboard`` annotations, rulebook.py)."""

from __future__ import annotations

#: per alert: what it means and the first thing to do, and the dashboard (key) that shows it.
#: Its runbook section is docs/runbook.md "### <alert>" (a unit test checks each anchor exists).
ALERT_HELP: dict[str, tuple[str, str]] = {
    "GpuTemperatureWarning": (
        "The GPU runs hot but still within its operating range: check the node's coolant or airflow "
        "before it reaches the critical temperature.",
        "gpu",
    ),
    "GpuTemperatureCritical": (
        "At the GPU's maximum operating temperature it throttles and may shut down: drain the node and "
        "check its cooling.",
        "gpu",
    ),
    "GpuPowerAboveCap": (
        "The GPU draws more than the power limit the plan sets: the clocks unit did not apply it; "
        "restart it under a drain.",
        "gpu",
    ),
    "GpuXidError": (
        "The driver reported an XID error: read dmesg and nvidia-smi -q on the node, drain it for the "
        "XIDs that need a reset.",
        "gpu",
    ),
    "GpuDoubleBitEcc": (
        "Uncorrectable memory errors: results on this GPU cannot be trusted; drain the node and reset the GPU.",
        "gpu",
    ),
    "GpuNvlinkErrors": (
        "NVLink CRC errors are rising: a degraded link slows collectives; drain the node and run dcgmi diag -r 2.",
        "fabric",
    ),
    "GpuThermalThrottling": (
        "The GPU lowers its clocks for heat (SW or HW thermal slowdown) for minutes: jobs on the node run "
        "slower; check its coolant or airflow and the GPU temperature.",
        "gpu",
    ),
    "GpuHwSlowdown": (
        "The GPU's hardware slowdown or power brake halves its clocks (over-temperature, or the PSU or "
        "board asserts the power brake): drain the node and check its PSUs and cooling.",
        "gpu",
    ),
    "NodeDown": (
        "Prometheus cannot scrape node-exporter: the host is down or unreachable on the management "
        "network; no alert of this host can fire.",
        "gpu",
    ),
    "GpuExporterDown": (
        "dcgm-exporter does not answer: no GPU alert fires for this node until it does.",
        "gpu",
    ),
    "InfinibandPortDown": (
        "A planned HCA port is not ACTIVE: jobs on this node lose that rail; check the cable and the "
        "subnet manager (ibstat).",
        "fabric",
    ),
    "InfinibandPortDegraded": (
        "A planned HCA port runs below the planned link rate: reseat or replace the cable.",
        "fabric",
    ),
    "CoolantSupplyWarning": (
        "The coolant supply is warmer than planned: check the CDU and the facility water.",
        "cooling",
    ),
    "CoolantSupplyHigh": (
        "The coolant supply is above the ASHRAE class maximum: GPUs will throttle; act on the CDU now.",
        "cooling",
    ),
    "CoolantReturnWarning": ("The coolant return is warmer than planned: load or flow is off plan.", "cooling"),
    "CoolantReturnHigh": (
        "The coolant return is above its maximum: the loop cannot carry the heat; reduce load or fix flow.",
        "cooling",
    ),
    "CoolantFlowLow": ("The loop's flow is low: check pumps, valves and filters.", "cooling"),
    "CoolantFlowCritical": (
        "The loop's flow is critically low: the GPUs will overheat; drain the rack's nodes.",
        "cooling",
    ),
    "CoolantDeltaTHigh": (
        "The rise from supply to return is above the design: too little flow for the heat load.",
        "cooling",
    ),
    "CoolantTelemetryAbsent": (
        "No coolant series at all: the site's CDU exporter is not scraped, so no coolant alert can fire.",
        "cooling",
    ),
    "HealNodeReplace": (
        "The self-healing loop gave up on this node (retries spent, or not back from a reboot): it stays "
        "drained with a replacement ticket in its reason; read its history and open the RMA.",
        "slurm",
    ),
    "HealRemediationStuck": (
        "A node has been under remediation or re-validation longer than a reboot and a re-validation take: "
        "read the loop's journal and the node's history on the head.",
        "slurm",
    ),
    "HealLoopStale": (
        "The head's self-healing loop has not run for three of its intervals (or never ran): drains wait for "
        "an operator until it runs again; check its timer and journal.",
        "slurm",
    ),
    "ActiveCheckOverdue": (
        "No active check result from this node for two intervals: it is busy all the time, or the checks "
        "cannot reach it (QOS, reservation, the loop); idle nodes should be checked on schedule.",
        "slurm",
    ),
    "ActiveCheckFailing": (
        "The node's last active check failed against the plan's floor: it is drained and the self-healing "
        "loop remediates it; watch that it passes the re-validation.",
        "slurm",
    ),
}
