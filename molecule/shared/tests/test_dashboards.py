"""Grafana provisioning on the head: the planned files, and every dashboard query accepted by the lab's
Prometheus. The lab has no Grafana (not a Debian package): the dashboards are checked as files and
their queries against Prometheus' query API, which parses each one (empty results are fine: the lab
has no GPUs, HCAs or CDU)."""

from __future__ import annotations

import json
import shlex
from typing import Any
from urllib.parse import urlencode

import yaml

VARIABLES = {"host": ".*"}  # what matches every value of a dashboard variable (dashboards.py VARIABLES)


def _query(head: Any, plan: dict[str, Any], expr: str) -> dict[str, Any]:
    mon = plan["monitoring"]
    url = f"http://{mon['address']}:{mon['prometheus_port']}/api/v1/query?{urlencode({'query': expr})}"
    script = (
        "import json,urllib.request,urllib.error\n"
        "try:\n"
        f"    print(urllib.request.urlopen({url!r}, timeout=10).read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.read().decode())\n"
    )
    return json.loads(head.check_output(f"python3 -c {shlex.quote(script)}"))


def _substitute(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(f"${name}", value)
    return expr


def test_provisioning_files_hold_the_planned_values(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = hosts[plan["cluster"]["head"]]
    grafana = plan["monitoring"]["grafana"]
    source = yaml.safe_load(head.file("/etc/grafana/provisioning/datasources/gpucluster.yml").content_string)
    (ds,) = source["datasources"]
    assert ds["url"] == f"http://{plan['monitoring']['address']}:{plan['monitoring']['prometheus_port']}"
    assert ds["url"] == grafana["datasource"]["url"] and ds["type"] == "prometheus"
    provider = yaml.safe_load(head.file("/etc/grafana/provisioning/dashboards/gpucluster.yml").content_string)
    (prov,) = provider["providers"]
    assert prov["options"]["path"] == grafana["dashboard_dir"]
    for key, board in grafana["dashboards"].items():
        on_head = json.loads(head.file(board["file"]).content_string)
        assert board["file"].startswith(grafana["dashboard_dir"] + "/"), key
        assert on_head["uid"] == board["uid"] and on_head == json.loads(board["json"]), key
        for panel in on_head["panels"]:
            for target in panel.get("targets", []):
                assert target["datasource"]["uid"] == ds["uid"], (key, panel["title"])


def test_every_panel_query_is_accepted_by_prometheus(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = hosts[plan["cluster"]["head"]]
    grafana = plan["monitoring"]["grafana"]
    refused = {}
    checked = 0
    for key, board in grafana["dashboards"].items():
        dashboard = json.loads(head.file(board["file"]).content_string)
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                answer = _query(head, plan, _substitute(target["expr"]))
                checked += 1
                if answer.get("status") != "success":
                    refused[f"{key}: {panel['title']}: {target['expr']}"] = answer.get("error")
    assert checked > 0
    assert refused == {}
