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

The rules live by concern: rules_gpu.py (GPU and exporters), rules_fabric.py, rules_cooling.py,
rules_healing.py, built on rulebook.py; rule_tests.py writes the promtool tests and rule_files.py the
YAML files. This module assembles them (:func:`alert_rules`) and keeps the names callers import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alert_help import ALERT_HELP
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import AlertRules, Labels
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rule_files import (
    KEY_ORDER,
    rule_tests_yaml,
    rules_yaml,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rule_tests import rule_tests
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import (
    COOLANT_METRICS,
    DCGM_EXPORTER_PORT,
    FLOW,
    GRAFANA_PORT,
    IB_ACTIVE,
    NODE_EXPORTER_PORT,
    NVLINK_WINDOW,
    RETURN,
    RULE_FILE,
    RULE_FILE_FROM_TESTS,
    RULE_PATH,
    RULE_TEST_PATH,
    RUNBOOK,
    SUPPLY,
    TEST_INTERVAL_MIN,
    RuleBook,
    dashboard_uid,
    runbook_anchor,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rules_cooling import cooling_rules
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rules_fabric import fabric_rules
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rules_gpu import (
    CLOCKS_EVENT,
    EVENT_HW_POWER_BRAKE,
    EVENT_HW_SLOWDOWN,
    EVENT_HW_THERMAL,
    EVENT_SW_POWER_CAP,
    EVENT_SW_THERMAL,
    THERMAL_VIOLATION,
    THROTTLE_FOR,
    THROTTLE_WINDOW,
    bit_test,
    gpu_rules,
    throttle_rules,
    up_rule,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rules_healing import healing_rules


def alert_rules(plan: Mapping[str, Any]) -> AlertRules:
    """Rule groups (``groups``) and per alert its cases and threshold (``alerts``)."""
    hosts = plan["hosts"]
    compute = next((h for h, v in hosts.items() if "compute" in v["roles"]), plan["cluster"]["head"])
    addr = hosts[compute]["addresses"]["management"]
    grafana = f"http://{hosts[plan['cluster']['head']]['addresses']['management']}:{GRAFANA_PORT}"
    r = RuleBook(grafana)
    gpu: Labels = {
        "job": "dcgm",
        "instance": f"{addr}:{DCGM_EXPORTER_PORT}",
        "host": compute,
        "role": "compute",
        "gpu": "0",
    }
    gpu_rules(r, plan["gpu"], gpu)
    throttle_rules(r, gpu)
    node = {"instance": f"{addr}:{NODE_EXPORTER_PORT}", "host": compute, "role": "compute"}
    up_rule(r, "NodeDown", "node", "critical", node, "{host} ({instance}) does not answer: host or node-exporter down")
    up_rule(
        r,
        "GpuExporterDown",
        "dcgm",
        "warning",
        {**node, "instance": gpu["instance"]},
        "dcgm-exporter on {host} ({instance}) does not answer: no GPU alerts from this node",
    )
    if plan["fabric"]["type"] in RDMA_FABRICS:
        port = {"job": "node", **node, "device": "mlx5_0", "port": "1"}
        fabric_rules(r, plan["fabric"], port)
    if plan["cooling"]["cooling"] == "dlc":
        cooling_rules(r, plan["cooling"], {"job": "facility", "instance": "cdu01:9100", "loop": "rack1"})
    heal = plan.get("healing")  # the head's self-healing loop (Slurm): its textfile metrics on the head's node-exporter
    if heal and heal["enabled"]:
        head = plan["cluster"]["head"]
        head_labels = {
            "job": "node",
            "instance": f"{hosts[head]['addresses']['management']}:{NODE_EXPORTER_PORT}",
            "host": head,
            "role": "head",
        }
        healing_rules(r, heal, head_labels, compute)
    return {"groups": r.groups, "alerts": r.alerts}


__all__ = [
    "ALERT_HELP",
    "CLOCKS_EVENT",
    "COOLANT_METRICS",
    "DCGM_EXPORTER_PORT",
    "EVENT_HW_POWER_BRAKE",
    "EVENT_HW_SLOWDOWN",
    "EVENT_HW_THERMAL",
    "EVENT_SW_POWER_CAP",
    "EVENT_SW_THERMAL",
    "FLOW",
    "GRAFANA_PORT",
    "IB_ACTIVE",
    "KEY_ORDER",
    "NODE_EXPORTER_PORT",
    "NVLINK_WINDOW",
    "RETURN",
    "RULE_FILE",
    "RULE_FILE_FROM_TESTS",
    "RULE_PATH",
    "RULE_TEST_PATH",
    "RUNBOOK",
    "SUPPLY",
    "TEST_INTERVAL_MIN",
    "THERMAL_VIOLATION",
    "THROTTLE_FOR",
    "THROTTLE_WINDOW",
    "alert_rules",
    "bit_test",
    "dashboard_uid",
    "rule_tests",
    "rule_tests_yaml",
    "rules_yaml",
    "runbook_anchor",
]
