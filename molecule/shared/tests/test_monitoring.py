"""Prometheus and Alertmanager on the head: every node-exporter up, every planned rule group loaded;
both answer only with the head's credentials (basic auth), so a tenant's job on a compute node can
neither read the metrics nor silence an alert (issue 37)."""

from __future__ import annotations

import json
import shlex
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from conftest import hosts_with
from monitoring_api import api as _api
from monitoring_api import call

TENANT_UID = 3917  # the tenant user's id on every node (test_containers.py's UID: one user, one id)


def _tenant(hosts: dict[str, Any], plan: dict[str, Any], *names: str) -> str:
    """The first tenant's first user (an unprivileged account, no Slurm rights needed), on ``names``."""
    team = next((t for t in plan.get("tenants") or [] if t["users"]), None)
    user = team["users"][0] if team else "labtenant"
    for name in names:
        hosts[name].check_output(
            f"getent passwd {user} >/dev/null || useradd --uid {TENANT_UID} --no-create-home "
            f"--shell /usr/sbin/nologin {user}"
        )
    return user


def _silence(minutes: int = 5) -> dict[str, Any]:
    """A silence of every GPU-temperature alert: what a job would post to hide its GPUs' heat."""
    now = datetime.now(UTC)
    return {
        "matchers": [{"name": "alertname", "value": "GpuTemperature.*", "isRegex": True, "isEqual": True}],
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(minutes=minutes)).isoformat(),
        "createdBy": "tenant",
        "comment": "lab attack test",
    }


def test_a_tenant_on_a_compute_node_cannot_query_or_silence_without_credentials(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    """As an unprivileged user on a compute node (where jobs run): no query, no silence (401)."""
    node = hosts_with(plan, "compute")[0]
    user = _tenant(hosts, plan, node)
    compute = hosts[node]
    status, body = call(compute, plan, "prometheus", "/api/v1/query?query=up", credentials=False, run_as=user)
    assert status == 401, (status, body[:200])
    status, body = call(compute, plan, "prometheus", "/metrics", credentials=False, run_as=user)
    assert status == 401, (status, body[:200])
    status, body = call(
        compute,
        plan,
        "alertmanager",
        "/api/v2/silences",
        method="POST",
        body=_silence(),
        credentials=False,
        run_as=user,
    )
    assert status == 401, (status, body[:200])
    status, body = call(compute, plan, "alertmanager", "/api/v2/silences", credentials=False, run_as=user)
    assert status == 401, (status, body[:200])
    # a wrong password is refused as well
    status, _ = call(compute, plan, "alertmanager", "/api/v2/status", password="admin", run_as=user)
    assert status == 401


def test_the_password_files_are_root_only_and_in_no_readable_file(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head_name = plan["cluster"]["head"]
    head = hosts[head_name]
    auth = plan["monitoring"]["auth"]
    user = _tenant(hosts, plan, head_name)
    secret = head.file(auth["password_file"])
    assert (secret.user, secret.group, secret.mode) == ("root", auth["group"], 0o640)
    folder = head.file(auth["secrets_dir"])
    assert (folder.user, folder.group, folder.mode) == ("root", auth["group"], 0o750)
    for service, path in auth["web_config"].items():
        web = head.file(path)
        assert (web.user, web.group, web.mode) == ("root", auth["group"], 0o640), service
        assert "basic_auth_users:" in web.content_string and f"  {auth['user']}: '$2" in web.content_string
    for path in (auth["password_file"], *auth["web_config"].values()):
        denied = head.run(f"cd /tmp && runuser -u {user} -- cat {shlex.quote(path)}")
        assert denied.rc != 0 and "Permission denied" in denied.stderr, path
    # the password is in no file anybody may read (the plan's files, /etc/default, units, ...)
    readable = head.run(
        f"find /etc /usr/local /var/lib/gpucluster-slurm-metrics -xdev -type f -perm -o=r "
        f"-exec grep -lF -f {shlex.quote(auth['password_file'])} {{}} +"
    )
    assert readable.stdout.strip() == "", readable.stdout


def test_the_heads_credentials_work_from_a_compute_node(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """The right password (read from the head's root-only file) opens both APIs: a query answers and
    a silence is created (then expired)."""
    node = hosts_with(plan, "compute")[0]
    user = _tenant(hosts, plan, node)
    head = hosts[plan["cluster"]["head"]]
    password = head.file(plan["monitoring"]["auth"]["password_file"]).content_string.strip()
    compute = hosts[node]
    status, body = call(compute, plan, "prometheus", "/api/v1/query?query=up", password=password, run_as=user)
    assert status == 200 and json.loads(body)["status"] == "success", (status, body[:200])
    status, body = call(
        compute,
        plan,
        "alertmanager",
        "/api/v2/silences",
        method="POST",
        body=_silence(1),
        password=password,
        run_as=user,
    )
    assert status == 200, (status, body[:200])
    silence = json.loads(body)["silenceID"]
    status, body = call(head, plan, "alertmanager", f"/api/v2/silence/{silence}", method="DELETE")
    assert status == 200, (status, body[:200])


def test_prometheus_scrapes_itself_and_reaches_alertmanager_with_its_password_file(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    head = hosts[plan["cluster"]["head"]]
    up: list[Any] = []
    for _ in range(90):  # the first scrape comes one interval after a (re)start
        up = _api(head, plan, "query?query=up%7Bjob%3D%22prometheus%22%7D")["result"]
        if up and up[0]["value"][1] == "1":
            break
        time.sleep(1)
    assert up and up[0]["value"][1] == "1", up
    managers = _api(head, plan, "alertmanagers")["activeAlertmanagers"]
    mon = plan["monitoring"]
    assert [m["url"] for m in managers] == [f"http://{mon['address']}:{mon['alertmanager_port']}/api/v2/alerts"]
    # whatever Prometheus sent to Alertmanager was accepted (a refused login counts as an error)
    errors = _api(head, plan, "query?query=sum(prometheus_notifications_errors_total)")["result"]
    assert errors and float(errors[0]["value"][1]) == 0, errors


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
    for _ in range(60):  # the first scrape comes one interval after a (re)start
        targets = _api(head, plan, "targets?state=active")["activeTargets"]
        health = {t["labels"]["instance"]: t["health"] for t in targets if t["labels"]["instance"] in wanted}
        if len(health) == len(wanted) and set(health.values()) == {"up"}:
            break
        time.sleep(1)
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
