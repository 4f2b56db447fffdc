"""Alert rules from the plan and the promtool tests of those rules (monitoring_plan in prometheus.py
stores both as data in ``plan.monitoring.rules`` and ``plan.monitoring.rule_tests``; :func:`rules_yaml`
and :func:`rule_tests_yaml`, the filters ``gpucluster.tiers.prometheus_rules`` and
``prometheus_rule_tests``, render them as the head's YAML files).

Every threshold is a number the plan already holds; nothing here is a new number:

=========================  ==============================  ===================================
alert                      threshold (plan key)            metric (exporter)
=========================  ==============================  ===================================
GpuTemperatureWarning      gpu.temperature.warn_c          DCGM_FI_DEV_GPU_TEMP (dcgm-exporter)
GpuTemperatureCritical     gpu.temperature.critical_c      DCGM_FI_DEV_GPU_TEMP
GpuPowerAboveCap           gpu.clocks.power_limit_w        DCGM_FI_DEV_POWER_USAGE
GpuXidError                any XID                         DCGM_FI_DEV_XID_ERRORS (last XID)
GpuDoubleBitEcc            any DBE                         DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
GpuNvlinkErrors            any new CRC flit error          DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL (NVLink models)
GpuThermalThrottling       thermal bits 0x20/0x40 or a     DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
                           growing thermal violation time  DCGM_FI_DEV_THERMAL_VIOLATION
GpuHwSlowdown              bits 0x8/0x80                   DCGM_FI_DEV_CLOCKS_EVENT_REASONS
GpuExporterDown            scrape fails                    up{job="dcgm"}
NodeDown                   scrape fails                    up{job="node"} (node-exporter)
InfinibandPortDown         state != ACTIVE                 node_infiniband_state_id
InfinibandPortDegraded     fabric.link_rate_gbps           node_infiniband_rate_bytes_per_second
Coolant* (DLC only)        cooling.supply_warn_c, ...      gpucluster_coolant_* (site BMC/CDU exporter)
HealNodeReplace (Slurm)    state replace                   gpucluster_heal_node_state (the head's
                                                           self-healing loop, compute/healing.py)
HealRemediationStuck       healing.remediation.reboot_     gpucluster_heal_node_state
                           timeout_s + validate_timeout_s
HealLoopStale              3 x healing.remediation.        gpucluster_heal_last_run_timestamp_seconds
                           interval_s
ActiveCheckOverdue         2 x healing.active.interval_s   gpucluster_active_check_last_timestamp_seconds
ActiveCheckFailing         the last result is fail         gpucluster_active_check_last_timestamp_seconds
=========================  ==============================  ===================================

Comparisons. A plan number that is an *alarm point* (warn/critical temperatures, supply and
return warnings, ΔT high, flow low/critical) alerts at the value itself (``>=``/``<=``). A
number that is a *limit of the allowed range* (the power cap, the ASHRAE class maximum, the
return maximum, the planned link rate) is still allowed, so the alert needs a value strictly
beyond it (``>``/``<``). The promtool tests pin every boundary from both sides: an alarm
point fires exactly at its value and stays quiet one step to the safe side; a limit stays
quiet exactly at its value and fires one step beyond. Alerts with ``for:`` are also shown
pending (not firing) one evaluation before the duration has passed.

Annotations. Every alert carries ``summary`` (what fired, with its value), ``description`` (what it
means and the first thing to do, :data:`ALERT_HELP`), ``runbook_url`` (its section in
docs/runbook.md, "Alerts": :data:`RUNBOOK`, relative to the collection's root: the project has no
public documentation host) and ``dashboard`` (the Grafana dashboard that shows it, on the head's
management address, narrowed to the alert's host when it has one). The promtool tests expect all
four, rendered.

Metric names (docs/monitoring.md): dcgm-exporter on :9400 (docs/sources.md §5.4; the ECC DBE and
NVLink counters are commented out in its default counters file and must be enabled),
node-exporter on :9100 with its infiniband collector, and for DLC sites the site's BMC/CDU
exporter publishing gpucluster_coolant_supply_celsius, gpucluster_coolant_return_celsius
and gpucluster_coolant_flow_lpm, one series per rack loop with a ``loop`` label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require

#: the exporters' ports: the rule tests' series carry them in ``instance`` (prometheus.py scrapes them)
NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
IB_ACTIVE = 4  # node_infiniband_state_id: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
RULE_FILE = "gpucluster.rules.yml"
#: where the head keeps the rules and their promtool tests: the tests outside Prometheus's rule folder,
#: naming the rule file relative to their own folder (promtool resolves rule_files from there)
RULE_PATH = f"/etc/prometheus/rules/{RULE_FILE}"
RULE_TEST_PATH = "/etc/prometheus/tests/gpucluster.rules.test.yml"
RULE_FILE_FROM_TESTS = f"../rules/{RULE_FILE}"
#: Grafana's default HTTP port (https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#http_port)
GRAFANA_PORT = 3000
#: the runbook, relative to the collection's root (docs ship in the collection); one section per alert
RUNBOOK = "docs/runbook.md"
TEST_INTERVAL_MIN = 1  # promtool tests step one minute; every ``for`` is whole minutes
NVLINK_WINDOW = "10m"

SUPPLY = "gpucluster_coolant_supply_celsius"
RETURN = "gpucluster_coolant_return_celsius"
FLOW = "gpucluster_coolant_flow_lpm"
COOLANT_METRICS = (SUPPLY, RETURN, FLOW)

# how each comparison is pinned: (value of the firing case, value of the quiet case) from
# the threshold t and the step s of the metric
_PIN = {
    ">=": lambda t, s: (t, t - s),
    "<=": lambda t, s: (t, t + s),
    ">": lambda t, s: (t + s, t),
    "<": lambda t, s: (t - s, t),
}


def dashboard_uid(key: str) -> str:
    """The uid of a dashboard (dashboards.py names them so; alerts link to them by it)."""
    return f"gpucluster-{key}"


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


def runbook_anchor(alert: str) -> str:
    """The anchor of an alert's runbook section (a "### <alert>" heading, GitHub's slug: lower case)."""
    return alert.lower()


def _num(x: float) -> str:
    """A PromQL/YAML number literal: integers without a fraction, floats as Python's shortest repr."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def _go_template(summary: str) -> str:
    """Summary in mini format (``{label}``, ``{value:.Nf}``) -> Prometheus alert template."""
    out = re.sub(r"\{value:\.(\d)f\}", r'{{ $value | printf "%.\1f" }}', summary)
    return re.sub(r"\{(\w+)\}", r"{{ $labels.\1 }}", out)


def _render(summary: str, labels: dict[str, str], value: float) -> str:
    """What Prometheus renders from the same summary (Go's %.Nf rounds like Python's)."""
    return summary.format(value=value, **labels)


def _selector(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _minutes(duration: str) -> int:
    m = re.fullmatch(r"(\d+)m", duration)
    if not m:
        raise ValueError(f"alert durations are whole minutes, got {duration!r}")
    return int(m.group(1))


class _Rules:
    """Collects alert rules (by group) and, per alert, its firing and quiet test cases."""

    def __init__(self, grafana_url: str) -> None:
        self.groups: list[dict[str, Any]] = []
        self.alerts: list[dict[str, Any]] = []
        self.grafana_url = grafana_url

    def annotations(self, name: str, summary: str, labels: set[str]) -> dict[str, str]:
        """The alert's annotations in mini format (:func:`_go_template` / :func:`_render` read them)."""
        if name not in ALERT_HELP:
            raise ValueError(f"alert {name} has no ALERT_HELP entry (description, dashboard)")
        description, board = ALERT_HELP[name]
        dashboard = f"{self.grafana_url}/d/{dashboard_uid(board)}"
        if "host" in labels:
            dashboard += "?var-host={host}"
        return {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOK}#{runbook_anchor(name)}",
            "dashboard": dashboard,
        }

    def add(
        self,
        group: str,
        name: str,
        expr: str,
        for_: str,
        severity: str,
        summary: str,
        cases: list[dict[str, Any]],
        threshold: dict[str, Any] | None = None,
    ) -> None:
        rule = {
            "alert": name,
            "expr": expr,
            "for": for_,
            "labels": {"severity": severity},
            "annotations": {},
        }
        labels = set().union(*(c["labels"] for c in cases))
        annotations = self.annotations(name, summary, labels)
        rule["annotations"] = {k: _go_template(v) for k, v in annotations.items()}
        for g in self.groups:
            if g["name"] == group:
                g["rules"].append(rule)
                break
        else:
            self.groups.append({"name": group, "rules": [rule]})
        self.alerts.append(
            {
                "alert": name,
                "for": for_,
                "severity": severity,
                "summary": summary,
                "annotations": annotations,
                "cases": cases,
                "threshold": threshold,
            }
        )

    def threshold(
        self,
        group: str,
        name: str,
        *,
        metric: str,
        op: str,
        value: float,
        plan_key: str,
        step: float,
        for_: str,
        severity: str,
        summary: str,
        labels: dict[str, str],
        selector: str = "",
        convert: tuple[str, float] = ("", 1.0),
    ) -> None:
        """An alert ``metric op value``. ``convert``: PromQL that turns the exporter's unit into the
        plan's, and the factor from the plan's unit back to the exporter's (for the test series)."""
        lhs = f"{metric}{selector}{convert[0]}"
        fire, quiet = (round(v, 6) for v in _PIN[op](value, step))
        cases = [
            {"state": state, "value": v, "series": [(metric, labels, _num(v * convert[1]))], "labels": labels}
            for state, v in (("fire", fire), ("quiet", quiet))
        ]
        self.add(
            group,
            name,
            f"{lhs} {op} {_num(value)}",
            for_,
            severity,
            summary,
            cases,
            {"plan": plan_key, "op": op, "value": value, "fire": fire, "quiet": quiet},
        )


def _gpu_rules(r: _Rules, plan: dict[str, Any], gpu: dict[str, str]) -> None:
    temp = plan["gpu"]["temperature"]
    where = "GPU {gpu} on {host}"
    if temp.get("warn_c") is not None:
        r.threshold(
            "gpu",
            "GpuTemperatureWarning",
            metric="DCGM_FI_DEV_GPU_TEMP",
            op=">=",
            value=temp["warn_c"],
            plan_key="gpu.temperature.warn_c",
            step=1,
            for_="2m",
            severity="warning",
            labels=gpu,
            summary=f"{where} at {{value:.0f}} C (warning from {temp['warn_c']} C)",
        )
        r.threshold(
            "gpu",
            "GpuTemperatureCritical",
            metric="DCGM_FI_DEV_GPU_TEMP",
            op=">=",
            value=temp["critical_c"],
            plan_key="gpu.temperature.critical_c",
            step=1,
            for_="1m",
            severity="critical",
            labels=gpu,
            summary=f"{where} at {{value:.0f}} C, at or above its max operating {temp['critical_c']} C: drain the node",
        )
    cap = plan["gpu"]["clocks"]["power_limit_w"]
    r.threshold(
        "gpu",
        "GpuPowerAboveCap",
        metric="DCGM_FI_DEV_POWER_USAGE",
        op=">",
        value=cap,
        plan_key="gpu.clocks.power_limit_w",
        step=1,
        for_="5m",
        severity="warning",
        labels=gpu,
        summary=f"{where} draws {{value:.0f}} W, above its {_num(cap)} W limit: the power limit is not applied",
    )

    def flag(name: str, metric: str, fire: float, quiet: float, severity: str, summary: str) -> None:
        cases = [
            {"state": s, "value": v, "series": [(metric, gpu, _num(v))], "labels": gpu}
            for s, v in (("fire", fire), ("quiet", quiet))
        ]
        r.add("gpu", name, f"{metric} > 0", "0m", severity, summary, cases)

    # XID_ERRORS is a gauge holding the last XID (docs/sources.md §5.4): any non-zero value is an XID
    flag("GpuXidError", "DCGM_FI_DEV_XID_ERRORS", 79, 0, "critical", f"{where} reported XID {{value:.0f}}")
    flag(
        "GpuDoubleBitEcc",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        1,
        0,
        "critical",
        f"{where} has {{value:.0f}} double-bit ECC errors: drain the node and reset the GPU",
    )
    if plan["gpu"]["model"].get("nvlink_gen") is None:
        return  # no NVLink (a PCIe-only node): dcgm.py exports no NVLink counter, so no NVLink alert
    # NVLink CRC counters only grow: alert on new errors, not on the total since boot
    metric = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    r.add(
        "gpu",
        "GpuNvlinkErrors",
        f"increase({metric}[{NVLINK_WINDOW}]) > 0",
        "0m",
        "warning",
        f"{where} counted NVLink CRC errors in the last {NVLINK_WINDOW}",
        [
            {"state": "fire", "value": None, "series": [(metric, gpu, "3x5 4x10")], "labels": gpu, "start": 6},
            {"state": "quiet", "value": None, "series": [(metric, gpu, "3x15")], "labels": gpu},
        ],
    )


#: DCGM_FI_DEV_CLOCKS_EVENT_REASONS (dcgm.py): NVML's nvmlClocksEventReasons bits (nvml.h;
#: DCGM dcgm_fields.h DCGM_CLOCKS_THROTTLE_REASON_*, "a 1:1 map to the NVML reasons")
CLOCKS_EVENT = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
EVENT_SW_POWER_CAP = 0x4  # the power cap: normal for a loaded GPU at the planned -pl, never alerted
EVENT_HW_SLOWDOWN = 0x8
EVENT_SW_THERMAL = 0x20
EVENT_HW_THERMAL = 0x40
EVENT_HW_POWER_BRAKE = 0x80
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
#: how long a throttle must last to alert: the exporter samples every 30 s (docs/sources.md §5.4), and
#: HW slowdown "may be also reported during PState or clock change" (dcgm_fields.h): minutes, not a sample
THROTTLE_FOR = "5m"
THROTTLE_WINDOW = "5m"


def bit_test(metric: str, mask: int, width: int = 1) -> str:
    """PromQL has no bitwise AND (https://prometheus.io/docs/prometheus/latest/querying/operators/):
    ``floor(x / mask) % 2^width`` is non-zero exactly when one of the ``width`` bits from ``mask`` up is
    set. The metric is an integer below 2^53 (NVML's bits end at 0x100), exact as a float64; DCGM's
    blank values (>= 0x7ffffffffffffff0, no reading) round to 2^63, whose low bits are all zero."""
    return f"floor({metric} / {mask}) % {2**width}"


def _throttle_rules(r: _Rules, gpu: dict[str, str]) -> None:
    """Sustained thermal throttling and HW slowdown (clock-event reasons and the thermal violation
    counter; the power violation counter and the SW power cap bit only on the dashboard: a loaded GPU
    at its planned power cap sits there by design, GpuPowerAboveCap watches the cap itself)."""
    where = "GPU {gpu} on {host}"
    thermal = bit_test(CLOCKS_EVENT, EVENT_SW_THERMAL, 2)  # 0x20 and 0x40 are adjacent bits
    r.add(
        "gpu_throttle",
        "GpuThermalThrottling",
        f"{thermal} > 0 or rate({THERMAL_VIOLATION}[{THROTTLE_WINDOW}]) > 0",
        THROTTLE_FOR,
        "warning",
        f"{where} is thermally throttled (SW/HW thermal slowdown) for {THROTTLE_FOR}",
        [
            # HW thermal (0x40) with the power cap (0x4) set too; the violation counter still flat
            {
                "state": "fire",
                "value": None,
                "series": [
                    (CLOCKS_EVENT, gpu, _num(EVENT_HW_THERMAL | EVENT_SW_POWER_CAP)),
                    (THERMAL_VIOLATION, gpu, "0"),
                ],
                "labels": gpu,
            },
            # power cap, HW slowdown, power brake, idle: no thermal bit, and no thermal violation time
            {
                "state": "quiet",
                "value": None,
                "series": [
                    (
                        CLOCKS_EVENT,
                        gpu,
                        _num(0x1 | EVENT_SW_POWER_CAP | EVENT_HW_SLOWDOWN | EVENT_HW_POWER_BRAKE | 0x10),
                    ),
                    (THERMAL_VIOLATION, gpu, "5000"),
                ],
                "labels": gpu,
            },
        ],
    )
    slowdown = f"{bit_test(CLOCKS_EVENT, EVENT_HW_SLOWDOWN)} + {bit_test(CLOCKS_EVENT, EVENT_HW_POWER_BRAKE)}"
    r.add(
        "gpu_throttle",
        "GpuHwSlowdown",
        f"{slowdown} > 0",
        THROTTLE_FOR,
        "warning",
        f"{where} is in HW slowdown or power brake for {THROTTLE_FOR}: clocks halved",
        [
            {
                "state": "fire",
                "value": None,
                "series": [(CLOCKS_EVENT, gpu, _num(EVENT_HW_POWER_BRAKE))],
                "labels": gpu,
            },
            # SW power cap and SW/HW thermal (GpuThermalThrottling's) and display clocks (0x100): not this alert
            {
                "state": "quiet",
                "value": None,
                "series": [(CLOCKS_EVENT, gpu, _num(EVENT_SW_POWER_CAP | EVENT_SW_THERMAL | EVENT_HW_THERMAL | 0x100))],
                "labels": gpu,
            },
        ],
    )


def _up_rule(r: _Rules, name: str, job: str, severity: str, labels: dict[str, str], summary: str) -> None:
    lab = {"job": job, **labels}
    cases = [
        {"state": s, "value": v, "series": [("up", lab, _num(v))], "labels": lab}
        for s, v in (("fire", 0), ("quiet", 1))
    ]
    r.add("node", name, f'up{{job="{job}"}} == 0', "2m" if job == "node" else "5m", severity, summary, cases)


def _fabric_rules(r: _Rules, fab: dict[str, Any], port: dict[str, str]) -> None:
    hcas = sorted({h["hca"] for h in fabric_links.hcas(fab.get("cabling") or {})})
    sel = {"role": "compute"}
    selector = _selector(sel)[:-1] + (f',device=~"{"|".join(hcas)}"' if hcas else "") + "}"
    where = "{host} {device} port {port}"
    cases = [
        {"state": s, "value": v, "series": [("node_infiniband_state_id", port, _num(v))], "labels": port}
        for s, v in (("fire", 1), ("quiet", IB_ACTIVE))
    ]
    r.add(
        "fabric",
        "InfinibandPortDown",
        f"node_infiniband_state_id{selector} != {IB_ACTIVE}",
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
        selector=selector,
        convert=(" * 8 / 1e9", 1e9 / 8),
        summary=f"{where} runs at {{value:.0f}} Gb/s, below the planned {_num(rate)} Gb/s",
    )


def _cooling_rules(r: _Rules, cool: dict[str, Any], loop: dict[str, str]) -> None:
    at = "coolant {what} of loop {loop} at {value:.1f} "
    for name, metric, key, op, for_, severity, what, unit, limit in (
        ("CoolantSupplyWarning", SUPPLY, "supply_warn_c", ">=", "2m", "warning", "supply", "C", "warning from"),
        (
            "CoolantSupplyHigh",
            SUPPLY,
            "supply_max_c",
            ">",
            "1m",
            "critical",
            "supply",
            "C",
            f"above the {cool['ashrae_class']} maximum",
        ),
        ("CoolantReturnWarning", RETURN, "return_warn_c", ">=", "2m", "warning", "return", "C", "warning from"),
        ("CoolantReturnHigh", RETURN, "return_max_c", ">", "1m", "critical", "return", "C", "above the maximum"),
        ("CoolantFlowLow", FLOW, "flow_low_lpm", "<=", "2m", "warning", "flow", "L/min", "low from"),
        ("CoolantFlowCritical", FLOW, "flow_critical_lpm", "<=", "1m", "critical", "flow", "L/min", "critical from"),
    ):
        r.threshold(
            "cooling",
            name,
            metric=metric,
            op=op,
            value=cool[key],
            plan_key=f"cooling.{key}",
            step=0.1,
            for_=for_,
            severity=severity,
            labels=loop,
            summary=at.replace("{what}", what) + f"{unit} ({limit} {_num(cool[key])} {unit})",
        )

    # dT: return - supply of the same loop; the supply sample is chosen so the difference is exact
    rise = cool["delta_t_high_k"]
    fire, quiet = rise, round(rise - 0.1, 6)
    base = next(
        s for s in (float(cool["supply_warn_c"] - 10), 20.0, 16.0, 0.0) if all((s + v) - s == v for v in (fire, quiet))
    )

    def dt_case(state: str, v: float) -> dict[str, Any]:
        return {
            "state": state,
            "value": v,
            "labels": {"loop": loop["loop"]},
            "series": [(SUPPLY, loop, _num(base)), (RETURN, loop, _num(base + v))],
        }

    r.add(
        "cooling",
        "CoolantDeltaTHigh",
        f"{RETURN} - on(loop) {SUPPLY} >= {_num(rise)}",
        "5m",
        "warning",
        f"coolant of loop {{loop}} rises {{value:.1f}} K (warning from {_num(rise)} K, design "
        f"{_num(cool['design_delta_t_k'])} K): flow too low for the heat load",
        [dt_case("fire", fire), dt_case("quiet", quiet)],
        {"plan": "cooling.delta_t_high_k", "op": ">=", "value": rise, "fire": fire, "quiet": quiet},
    )

    # without the coolant series every rule above stays silent: say so
    present = [(m, loop, "20x15") for m in COOLANT_METRICS]
    r.add(
        "cooling",
        "CoolantTelemetryAbsent",
        " or ".join(f"absent({m})" for m in COOLANT_METRICS),
        "5m",
        "warning",
        "no coolant telemetry: the BMC/CDU exporter must publish "
        + ", ".join(COOLANT_METRICS)
        + " (docs/monitoring.md)",
        [
            {"state": "fire", "value": 1, "series": present[:2], "labels": {}},
            {"state": "quiet", "value": None, "series": present, "labels": {}},
        ],
    )


def _age_rule(
    r: _Rules,
    name: str,
    age: str,
    *,
    limit: int,
    plan_key: str,
    series: tuple[str, dict[str, str]],
    labels: dict[str, str],
    summary: str,
) -> None:
    """``age > limit`` where ``age`` is ``time() - <a timestamp gauge>``: the test series grows by 60 s a
    minute, so the age is the same at every evaluation: quiet exactly at the limit, firing one second past."""
    metric, series_labels = series
    cases = [
        {"state": state, "value": v, "series": [(metric, series_labels, f"-{v}+60x15")], "labels": labels}
        for state, v in (("fire", limit + 1), ("quiet", limit))
    ]
    threshold = {"plan": plan_key, "op": ">", "value": limit, "fire": limit + 1, "quiet": limit}
    r.add("healing", name, f"{age} > {limit}", "1m", "warning", summary, cases, threshold)


def _healing_rules(r: _Rules, heal: Mapping[str, Any], head: dict[str, str], node: str) -> None:
    """The self-healing loop's alerts (compute/healing.py METRICS, from the head's textfile collector)."""
    state = "gpucluster_heal_node_state"
    last_run = "gpucluster_heal_last_run_timestamp_seconds"
    checked = "gpucluster_active_check_last_timestamp_seconds"
    replace = {**head, "node": node, "state": "replace"}
    r.add(
        "healing",
        "HealNodeReplace",
        f'{state}{{state="replace"}} == 1',
        "1m",
        "warning",
        "{node} awaits replacement: the self-healing loop gave up on it",
        [
            {"state": "fire", "value": 1, "series": [(state, replace, "1")], "labels": replace},
            {"state": "quiet", "value": None, "series": [(state, replace, "0")], "labels": replace},
        ],
    )
    rem = heal["remediation"]
    minutes = -(-rem["stuck_after_s"] // 60)  # whole minutes of the 1m subquery, rounded up
    busy = {**head, "node": node, "state": "remediating"}
    busy_expr = f'max without (state) ({state}{{state=~"remediating|validating"}}) == 1'
    r.add(
        "healing",
        "HealRemediationStuck",
        f"count_over_time(({busy_expr})[{minutes}m:1m]) >= {minutes}",
        "0m",
        "warning",
        f"{{node}} under remediation for {{value:.0f}} minutes (limit {minutes}: reboot_timeout_s + "
        "validate_timeout_s)",
        [
            {
                "state": "fire",
                "value": minutes,
                "start": minutes - 1,  # the series starts at 0: minutes samples by then
                "series": [(state, busy, f"1x{minutes + 10}")],
                "labels": {k: v for k, v in busy.items() if k != "state"},
            },
            {"state": "quiet", "value": None, "series": [(state, busy, "1x15")], "labels": {}},
        ],
    )
    _age_rule(
        r,
        "HealLoopStale",
        f"time() - (max({last_run}) or vector(0))",
        limit=rem["stale_after_s"],
        plan_key="healing.remediation.stale_after_s",
        series=(last_run, head),
        labels={},
        summary="the self-healing loop last ran {value:.0f} s ago (more than 3 of its intervals, "
        f"{rem['stale_after_s']} s; never: since 1970)",
    )
    act = heal["active"]
    if not act["enabled"]:
        return
    done = {**head, "node": node, "check": "allreduce", "result": "pass"}
    _age_rule(
        r,
        "ActiveCheckOverdue",
        f"time() - max by (node) ({checked})",
        limit=act["overdue_after_s"],
        plan_key="healing.active.overdue_after_s",
        series=(checked, done),
        labels={"node": node},
        summary=f"{{node}} has no active check result for {{value:.0f}} s (2 intervals: {act['overdue_after_s']} s)",
    )
    fail = {**done, "result": "fail"}
    last_fail = f'max by (node, check) ({checked}{{result="fail"}})'
    last_pass = f'max by (node, check) ({checked}{{result="pass"}})'
    where = {"node": node, "check": "allreduce"}
    r.add(
        "healing",
        "ActiveCheckFailing",
        f"{last_fail} > {last_pass} or ({last_fail} unless on (node, check) {last_pass})",
        "1m",
        "warning",
        "active check {check} failed on {node}",
        [
            {
                "state": "fire",
                "value": 100,
                "series": [(checked, fail, "100x15"), (checked, done, "50x15")],
                "labels": where,
            },
            {
                "state": "quiet",
                "value": None,
                "series": [(checked, fail, "50x15"), (checked, done, "100x15")],
                "labels": where,
            },
        ],
    )


def alert_rules(plan: Mapping[str, Any]) -> dict[str, Any]:
    """Rule groups (``groups``) and per alert its cases and threshold (``alerts``)."""
    hosts = plan["hosts"]
    compute = next((h for h, v in hosts.items() if "compute" in v["roles"]), plan["cluster"]["head"])
    addr = hosts[compute]["addresses"]["management"]
    grafana = f"http://{hosts[plan['cluster']['head']]['addresses']['management']}:{GRAFANA_PORT}"
    r = _Rules(grafana)
    gpu = {"job": "dcgm", "instance": f"{addr}:{DCGM_EXPORTER_PORT}", "host": compute, "role": "compute", "gpu": "0"}
    _gpu_rules(r, plan, gpu)
    _throttle_rules(r, gpu)
    node = {"instance": f"{addr}:{NODE_EXPORTER_PORT}", "host": compute, "role": "compute"}
    _up_rule(r, "NodeDown", "node", "critical", node, "{host} ({instance}) does not answer: host or node-exporter down")
    _up_rule(
        r,
        "GpuExporterDown",
        "dcgm",
        "warning",
        {**node, "instance": gpu["instance"]},
        "dcgm-exporter on {host} ({instance}) does not answer: no GPU alerts from this node",
    )
    if plan["fabric"]["type"] in RDMA_FABRICS:
        port = {"job": "node", **node, "device": "mlx5_0", "port": "1"}
        _fabric_rules(r, plan["fabric"], port)
    if plan["cooling"]["cooling"] == "dlc":
        _cooling_rules(r, plan["cooling"], {"job": "facility", "instance": "cdu01:9100", "loop": "rack1"})
    heal = plan.get("healing") or {}
    if heal.get("enabled"):  # the head's self-healing loop (Slurm): its textfile metrics on the head's node-exporter
        head = plan["cluster"]["head"]
        head_labels = {
            "job": "node",
            "instance": f"{hosts[head]['addresses']['management']}:{NODE_EXPORTER_PORT}",
            "host": head,
            "role": "head",
        }
        _healing_rules(r, heal, head_labels, compute)
    return {"groups": r.groups, "alerts": r.alerts}


def _input_series(series: list[tuple[str, dict[str, str], str]]) -> list[dict[str, str]]:
    horizon = 15  # minutes of samples: past every quiet check (10m) and every ``for`` (<= 5m)
    out = []
    for metric, labels, values in series:
        vals = values if " " in values or "x" in values else f"{values}x{horizon}"
        out.append({"series": f"{metric}{_selector(labels)}", "values": vals})
    return out


def rule_tests(alerts: list[dict[str, Any]], rule_file: str = RULE_FILE_FROM_TESTS) -> dict[str, Any]:
    """promtool unit tests: per alert one firing and one quiet case (see the module doc)."""
    tests = []
    for a in alerts:
        hold = _minutes(a["for"])
        if hold > 5:
            raise ValueError(f"{a['alert']}: for {a['for']} is longer than the test series")
        for case in a["cases"]:
            checks: list[dict[str, Any]] = []
            if case["state"] == "fire":
                start = case.get("start", 0)
                if hold:  # one evaluation before ``for`` has passed: pending, not firing
                    checks.append(
                        {"eval_time": f"{start + hold - TEST_INTERVAL_MIN}m", "alertname": a["alert"], "exp_alerts": []}
                    )
                firing = {
                    "exp_labels": {**case["labels"], "severity": a["severity"]},
                    "exp_annotations": {
                        k: _render(v, case["labels"], case["value"]) for k, v in a["annotations"].items()
                    },
                }
                checks.append({"eval_time": f"{start + hold}m", "alertname": a["alert"], "exp_alerts": [firing]})
            else:
                checks.append({"eval_time": "10m", "alertname": a["alert"], "exp_alerts": []})
            value = "" if case["value"] is None else f" at {_num(case['value'])}"
            tests.append(
                {
                    "name": f"{a['alert']} {case['state']}{value}",
                    "interval": f"{TEST_INTERVAL_MIN}m",
                    "input_series": _input_series(case["series"]),
                    "alert_rule_test": checks,
                }
            )
    return {"rule_files": [rule_file], "evaluation_interval": f"{TEST_INTERVAL_MIN}m", "tests": tests}


#: The key order of the rule and test files (Prometheus's and promtool's documented order), whatever the
#: order of the data: a plan read back from plan.json (keys sorted) renders the same bytes. Label names
#: are in it too (job, instance, host, ...; severity last); keys not listed follow in sorted order.
KEY_ORDER: tuple[str, ...] = (
    "groups",
    "rule_files",
    "evaluation_interval",
    "tests",
    "name",
    "rules",
    "alert",
    "expr",
    "for",
    "labels",
    "annotations",
    "interval",
    "input_series",
    "alert_rule_test",
    "series",
    "values",
    "eval_time",
    "alertname",
    "exp_alerts",
    "exp_labels",
    "exp_annotations",
    "job",
    "instance",
    "host",
    "role",
    "gpu",
    "device",
    "port",
    "loop",
    "node",
    "check",
    "result",
    "state",
    "severity",
    "summary",
    "description",
    "runbook_url",
    "dashboard",
)
_RANK = {key: i for i, key in enumerate(KEY_ORDER)}


def _ordered(value: Any) -> Any:
    """Plain dicts and lists with every mapping's keys in :data:`KEY_ORDER` (unknown keys after, sorted)."""
    if isinstance(value, Mapping):
        keys = sorted(value, key=lambda k: (_RANK.get(str(k), len(_RANK)), str(k)))
        return {str(k): _ordered(value[k]) for k in keys}
    if isinstance(value, (list, tuple)):
        return [_ordered(v) for v in value]
    return value


def _dump(data: Any) -> str:
    import yaml  # PyYAML ships with ansible-core

    return yaml.safe_dump(_ordered(data), sort_keys=False, width=1000, allow_unicode=True)


def rules_yaml(rules: Mapping[str, Any]) -> str:
    """The head's rule file (Prometheus rule groups) from ``plan.monitoring.rules`` (``{"groups": [...]}``)."""
    require(
        isinstance(rules, Mapping) and isinstance(rules.get("groups"), list),
        "plan.monitoring.rules",
        type(rules).__name__,
        "the plan's rule groups, a mapping with a list 'groups'",
    )
    return _dump({"groups": rules["groups"]})


def rule_tests_yaml(tests: Mapping[str, Any]) -> str:
    """The rules' promtool test file from ``plan.monitoring.rule_tests`` (:func:`rule_tests`)."""
    require(
        isinstance(tests, Mapping) and isinstance(tests.get("tests"), list),
        "plan.monitoring.rule_tests",
        type(tests).__name__,
        "the plan's rule tests, a mapping with rule_files, evaluation_interval and a list 'tests'",
    )
    return _dump(tests)
