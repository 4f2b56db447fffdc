"""Prometheus and Alertmanager on the head: every node-exporter up, every planned rule group loaded."""

from __future__ import annotations

import json
from typing import Any


def _api(head: Any, plan: dict[str, Any], path: str) -> Any:
    mon = plan["monitoring"]
    url = f"http://{mon['address']}:{mon['prometheus_port']}/api/v1/{path}"
    script = f"import json,urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).read().decode())"
    return json.loads(head.check_output(f"python3 -c {json.dumps(script)}"))["data"]


def test_services_listen_on_the_management_address(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = hosts[plan["cluster"]["head"]]
    mon = plan["monitoring"]
    for service in ("prometheus", "prometheus-alertmanager"):
        assert head.service(service).is_running, service
    for port in (mon["prometheus_port"], mon["alertmanager_port"]):
        assert head.socket(f"tcp://{mon['address']}:{port}").is_listening, port
    for name, host in hosts.items():
        assert host.service("prometheus-node-exporter").is_running, name
        address = plan["hosts"][name]["addresses"]["management"]
        assert host.socket(f"tcp://{address}:{mon['node_exporter_port']}").is_listening, name


def test_every_node_exporter_target_is_up(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = hosts[plan["cluster"]["head"]]
    port = plan["monitoring"]["node_exporter_port"]
    wanted = {f"{h['addresses']['management']}:{port}" for h in plan["hosts"].values()}
    health: dict[str, str] = {}
    for _ in range(30):  # the first scrape comes one interval after a (re)start
        targets = _api(head, plan, "targets?state=active")["activeTargets"]
        health = {t["labels"]["instance"]: t["health"] for t in targets if t["labels"]["instance"] in wanted}
        if len(health) == len(wanted) and set(health.values()) == {"up"}:
            break
        head.run("sleep 2")
    assert health == dict.fromkeys(wanted, "up")


def test_every_rule_group_is_loaded_and_unit_tested(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = hosts[plan["cluster"]["head"]]
    loaded = {g["name"]: len(g["rules"]) for g in _api(head, plan, "rules")["groups"]}
    groups = plan["monitoring"]["rules"]["groups"]  # the rule groups as data (filter prometheus_rules renders them)
    planned = {g["name"]: len(g["rules"]) for g in groups}
    assert loaded == planned
    tests = plan["monitoring"]["rule_test_file"]
    assert not tests.startswith("/etc/prometheus/rules/")  # never in the folder Prometheus reads rules from
    result = head.run(f"promtool test rules {tests}")
    assert result.rc == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr
    assert not head.file("/etc/prometheus/rules/gpucluster.rules.test.yml").exists
