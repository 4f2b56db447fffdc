"""Monitoring from the plan: scrape targets and alert rules with their promtool tests.

Thresholds come from the plan (GPU temperatures from the model's limits, the planned
power limit, DLC alarms, the fabric's planned link rate); nothing here is a new number.
Metric names:
- dcgm-exporter (dossier 5.4, port 9400): DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE,
  DCGM_FI_DEV_XID_ERRORS, and the counters the site must enable in its counters file:
  DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL.
- node-exporter (port 9100): up, node_infiniband_state_id (4 = ACTIVE),
  node_infiniband_rate_bytes_per_second.
- coolant (the site's BMC/CDU exporter must publish these names, see docs):
  gpucluster_coolant_supply_celsius, gpucluster_coolant_return_celsius,
  gpucluster_coolant_flow_lpm (one series per rack loop, label "loop").
"""

from __future__ import annotations

from typing import Any

NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
IB_ACTIVE = 4  # node_infiniband_state_id: 4 = ACTIVE


def _alert(name: str, expr: str, for_: str, severity: str, summary: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary},
    }


def alert_rules(plan: dict[str, Any]) -> dict[str, Any]:
    """Prometheus rule groups, plus ``cases``: per alert a firing and a quiet sample value."""
    temp = plan["gpu"]["temperature"]
    power = plan["gpu"]["clocks"]["power_limit_w"]
    groups: list[dict[str, Any]] = []
    cases: list[dict[str, Any]] = []

    def add(group: str, alert: dict[str, Any], metric: str, fire: float, quiet: float, labels: str = "") -> None:
        for g in groups:
            if g["name"] == group:
                g["rules"].append(alert)
                break
        else:
            groups.append({"name": group, "rules": [alert]})
        cases.append({"alert": alert["alert"], "metric": metric, "labels": labels, "fire": fire, "quiet": quiet,
                      "for": alert["for"], "severity": alert["labels"]["severity"]})  # fmt: skip

    gpu = 'gpu="0",Hostname="compute01"'
    if temp.get("warn_c") is not None:
        add("gpu", _alert("GpuTemperatureWarning", f"DCGM_FI_DEV_GPU_TEMP >= {temp['warn_c']}", "2m", "warning",
            f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}} at {{{{ $value }}}} C (warn {temp['warn_c']} C)"),
            "DCGM_FI_DEV_GPU_TEMP", temp["warn_c"], temp["warn_c"] - 1, gpu)  # fmt: skip
        add("gpu", _alert("GpuTemperatureCritical", f"DCGM_FI_DEV_GPU_TEMP >= {temp['critical_c']}", "1m", "critical",
            f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}} at {{{{ $value }}}} C "
            f"(max operating {temp['critical_c']} C): the node is drained"),
            "DCGM_FI_DEV_GPU_TEMP", temp["critical_c"], temp["critical_c"] - 1, gpu)  # fmt: skip
    add("gpu", _alert("GpuPowerAboveCap", f"DCGM_FI_DEV_POWER_USAGE > {power}", "5m", "warning",
        f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}} draws {{{{ $value }}}} W above its {power} W limit"),
        "DCGM_FI_DEV_POWER_USAGE", power + 1, power, gpu)  # fmt: skip
    add("gpu", _alert("GpuXidError", "DCGM_FI_DEV_XID_ERRORS > 0", "0m", "critical",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}"),
        "DCGM_FI_DEV_XID_ERRORS", 79, 0, gpu)  # fmt: skip
    add("gpu", _alert("GpuDoubleBitEcc", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0", "0m", "critical",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has double-bit ECC errors"),
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1, 0, gpu)  # fmt: skip
    add("gpu", _alert("GpuNvlinkErrors", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL > 0", "0m", "warning",
        "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has NVLink CRC errors"),
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 1, 0, gpu)  # fmt: skip
    add("node", _alert("NodeDown", 'up{job="node"} == 0', "2m", "critical",
        "{{ $labels.instance }} does not answer (node-exporter down or host down)"),
        "up", 0, 1, 'job="node",instance="compute01:9100"')  # fmt: skip
    fab = plan["fabric"]
    if fab["type"] in ("infiniband", "roce"):
        rate = int(fab["link_rate_gbps"] * 1e9 / 8)
        port = 'device="mlx5_0",port="1",instance="compute01:9100"'
        add("fabric", _alert("InfinibandPortDown", f"node_infiniband_state_id != {IB_ACTIVE}", "1m", "critical",
            "{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} is not ACTIVE"),
            "node_infiniband_state_id", 1, IB_ACTIVE, port)  # fmt: skip
        add("fabric", _alert("InfinibandPortDegraded", f"node_infiniband_rate_bytes_per_second < {rate}", "5m",
            "warning", f"{{{{ $labels.instance }}}} {{{{ $labels.device }}}} runs below the planned "
            f"{fab['link_rate_gbps']:g} Gb/s"),
            "node_infiniband_rate_bytes_per_second", rate // 2, rate, port)  # fmt: skip
    cool = plan["cooling"]
    if cool["cooling"] == "dlc":
        loop = 'loop="rack1"'
        sup, ret, flow = (
            "gpucluster_coolant_supply_celsius",
            "gpucluster_coolant_return_celsius",
            "gpucluster_coolant_flow_lpm",
        )
        add("cooling", _alert("CoolantSupplyWarning", f"{sup} > {cool['supply_warn_c']}", "2m", "warning",
            f"coolant supply {{{{ $value }}}} C above {cool['supply_warn_c']} C"),
            sup, cool["supply_warn_c"] + 0.5, cool["supply_warn_c"], loop)  # fmt: skip
        add("cooling", _alert("CoolantSupplyHigh", f"{sup} > {cool['supply_max_c']}", "1m", "critical",
            f"coolant supply {{{{ $value }}}} C above the {cool['ashrae_class']} maximum {cool['supply_max_c']} C"),
            sup, cool["supply_max_c"] + 0.5, cool["supply_max_c"], loop)  # fmt: skip
        add("cooling", _alert("CoolantReturnHigh", f"{ret} > {cool['return_max_c']}", "1m", "critical",
            f"coolant return {{{{ $value }}}} C above {cool['return_max_c']} C"),
            ret, cool["return_max_c"] + 0.5, cool["return_max_c"], loop)  # fmt: skip
        add("cooling", _alert("CoolantFlowLow", f"{flow} < {cool['flow_low_lpm']}", "2m", "warning",
            f"coolant flow {{{{ $value }}}} L/min below {cool['flow_low_lpm']} L/min"),
            flow, cool["flow_low_lpm"] - 0.5, cool["flow_low_lpm"], loop)  # fmt: skip
        add("cooling", _alert("CoolantFlowCritical", f"{flow} < {cool['flow_critical_lpm']}", "1m", "critical",
            f"coolant flow {{{{ $value }}}} L/min below {cool['flow_critical_lpm']} L/min"),
            flow, cool["flow_critical_lpm"] - 0.5, cool["flow_critical_lpm"], loop)  # fmt: skip
        add("cooling", _alert("CoolantDeltaTHigh", f"{ret} - {sup} > {cool['delta_t_high_k']}", "5m", "warning",
            f"coolant rise {{{{ $value }}}} K above {cool['delta_t_high_k']} K: flow too low for the load"),
            "delta_t", cool["delta_t_high_k"] + 0.5, cool["delta_t_high_k"], loop)  # fmt: skip
    return {"groups": groups, "cases": cases}


def _series(case: dict[str, Any], value: float, supply: float) -> list[dict[str, str]]:
    labels = case["labels"]
    if case["metric"] == "delta_t":  # two series: return = supply + rise
        return [
            {"series": f"gpucluster_coolant_supply_celsius{{{labels}}}", "values": f"{supply}x15"},
            {"series": f"gpucluster_coolant_return_celsius{{{labels}}}", "values": f"{supply + value}x15"},
        ]
    return [{"series": f"{case['metric']}{{{labels}}}", "values": f"{value}x15"}]


def rule_tests(rules: dict[str, Any], rule_file: str) -> dict[str, Any]:
    """promtool unit tests: each alert fires at its threshold and stays quiet just below it."""
    tests = []
    for case in rules["cases"]:
        for state, value in (("fire", case["fire"]), ("quiet", case["quiet"])):
            labels = dict(part.split("=", 1) for part in case["labels"].split(",") if part)
            exp_labels = {k: v.strip('"') for k, v in labels.items()}
            exp_labels["severity"] = case["severity"]
            alert = {"eval_time": "10m", "alertname": case["alert"], "exp_alerts": []}
            if state == "fire":
                alert["exp_alerts"] = [{"exp_labels": exp_labels}]
            tests.append(
                {
                    "name": f"{case['alert']} {state} at {value}",
                    "interval": "1m",
                    "input_series": _series(case, value, supply=20.0),
                    "alert_rule_test": [alert],
                }
            )
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}


def scrape_targets(plan: dict[str, Any]) -> dict[str, list[str]]:
    hosts = plan["hosts"]
    return {
        "node": [f"{h['addresses']['management']}:{NODE_EXPORTER_PORT}" for h in hosts.values()],
        "dcgm": [
            f"{h['addresses']['management']}:{DCGM_EXPORTER_PORT}" for h in hosts.values() if "compute" in h["roles"]
        ],
    }


def monitoring_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """Everything the head's monitoring and firewall need, from the plan."""
    import yaml  # PyYAML ships with ansible-core; rendering text here keeps templates trivial

    head = plan["cluster"]["head"]
    address = plan["hosts"][head]["addresses"]["management"]
    rules = alert_rules(plan)
    rule_file = "gpucluster.rules.yml"
    return {
        "server": head,
        "address": address,
        "prometheus_port": PROMETHEUS_PORT,
        "alertmanager_port": ALERTMANAGER_PORT,
        "node_exporter_port": NODE_EXPORTER_PORT,
        "targets": scrape_targets(plan),
        "alerts": [case["alert"] for case in rules["cases"]],
        "rules_yaml": yaml.safe_dump({"groups": rules["groups"]}, sort_keys=False, width=1000),
        "rule_tests_yaml": yaml.safe_dump(rule_tests(rules, rule_file), sort_keys=False, width=1000),
        # head services that answer the management network only (nftables on the head)
        "firewall": {
            "management_cidr": plan["network"]["pools"]["management"]["cidr"],
            "tcp_ports": [6817, 6819, PROMETHEUS_PORT, ALERTMANAGER_PORT, NODE_EXPORTER_PORT],
        },
    }
