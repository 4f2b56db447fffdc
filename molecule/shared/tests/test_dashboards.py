"""Grafana provisioning on the head: the planned files, and every dashboard query accepted by the lab's
Prometheus. The lab has no Grafana (not a Debian package): the dashboards are checked as files and
their queries against Prometheus' query API, which parses each one (empty results are fine: the lab
has no GPUs, HCAs or CDU). The Slurm queue exporter: with a running and a held job, Prometheus has
every metric it defines, nodes by state add up to the plan's compute nodes and GPUs configured to
the plan's GPUs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from monitoring_api import queries as _queries
from monitoring_api import query as _query

VARIABLES = {"host": ".*"}  # what matches every value of a dashboard variable (dashboards.py VARIABLES)


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
    # Grafana's own account on Prometheus; its password only as a $__file{} reference
    assert ds["basicAuth"] is True and ds["basicAuthUser"] == grafana["datasource"]["user"]
    assert ds["secureJsonData"] == {"basicAuthPassword": f"$__file{{{grafana['datasource']['password_file']}}}"}
    provider = yaml.safe_load(head.file("/etc/grafana/provisioning/dashboards/gpucluster.yml").content_string)
    (prov,) = provider["providers"]
    assert prov["options"]["path"] == grafana["dashboard_dir"]
    for key, board in grafana["dashboards"].items():
        on_head = json.loads(head.file(board["file"]).content_string)
        assert board["file"].startswith(grafana["dashboard_dir"] + "/"), key
        # the plan carries the dashboard's data; the head's file is its JSON (filter grafana_dashboard)
        assert on_head["uid"] == board["uid"] and on_head["title"] == board["title"], key
        assert [p["title"] for p in on_head["panels"]] == [p["title"] for p in board["panels"]], key
        for panel, planned in zip(on_head["panels"], board["panels"], strict=True):
            assert [t["expr"] for t in panel.get("targets", [])] == [q["expr"] for q in planned.get("queries", [])]
            steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
            assert [s["value"] for s in planned.get("steps", [])] in ([], [s["value"] for s in steps]), key
        for panel in on_head["panels"]:
            for target in panel.get("targets", []):
                assert target["datasource"]["uid"] == ds["uid"], (key, panel["title"])


def test_grafana_takes_no_default_password_no_anonymous_and_no_sign_up(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    """The lab has no Grafana (not a Debian package): its systemd drop-in is what it would read. No
    admin/admin (the password from a root:grafana file), no anonymous access, no sign-up, and no
    password in the drop-in (0644)."""
    head = hosts[plan["cluster"]["head"]]
    grafana = plan["monitoring"]["grafana"]
    dropin = head.file("/etc/systemd/system/grafana-server.service.d/gpucluster.conf")
    env = {}
    for line in dropin.content_string.splitlines():
        if line.startswith("Environment="):
            key, _, value = line.removeprefix("Environment=").strip('"').partition("=")
            env[key] = value
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == f"$__file{{{grafana['admin_password_file']}}}"
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert not {k for k in env if "PASSWORD" in k or "SECRET" in k} - {"GF_SECURITY_ADMIN_PASSWORD"}
    assert grafana["admin_password_file"].startswith(grafana["secrets_dir"] + "/")


def test_every_panel_query_is_accepted_by_prometheus(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head = hosts[plan["cluster"]["head"]]
    grafana = plan["monitoring"]["grafana"]
    asked = {}  # every target of every dashboard file on the head, asked in one call
    for key, board in grafana["dashboards"].items():
        dashboard = json.loads(head.file(board["file"]).content_string)
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                asked[f"{key}: {panel['title']}: {target['expr']}"] = _substitute(target["expr"])
    assert asked
    answers = _queries(head, plan, list(asked.values()))
    refused = {name: a.get("error") for name, a in zip(asked, answers, strict=True) if a.get("status") != "success"}
    assert refused == {}


# ---------------------------------------------------------------- the Slurm queue exporter (head)


def _values(head: Any, plan: dict[str, Any], expr: str) -> list[tuple[dict[str, str], float]]:
    answer = _query(head, plan, expr)
    assert answer.get("status") == "success", (expr, answer)
    return [(r["metric"], float(r["value"][1])) for r in answer["data"]["result"]]


def _scalar(head: Any, plan: dict[str, Any], expr: str) -> float | None:
    rows = _values(head, plan, expr)
    return rows[0][1] if rows else None


def _wait(head: Any, plan: dict[str, Any], expr: str, ok: Any, timeout: float = 150) -> float | None:
    """Query until ``ok(value)`` (the timer writes every 30 s, Prometheus scrapes every 30 s)."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = _scalar(head, plan, expr)
        if value is not None and ok(value):
            return value
        time.sleep(1)
    raise AssertionError(f"{expr}: {value} after {timeout} s")


@pytest.fixture(scope="module")
def queue_jobs(hosts: dict[str, Any], plan: dict[str, Any]) -> Any:
    """A running job holding one node's GPUs and a held (pending) job, cancelled afterwards."""
    if plan["monitoring"].get("slurm_queue") is None:
        pytest.skip("no Slurm on this cluster: no queue exporter")
    head = hosts[plan["cluster"]["head"]]
    gpus = plan["cluster"]["gpus_per_node"]
    running = head.check_output(
        f"sbatch --parsable --job-name=lab-queue-run --nodes=1 --gres=gpu:{gpus} --time=5 --wrap='sleep 240'"
    ).strip()
    held = head.check_output("sbatch --parsable --hold --job-name=lab-queue-held --time=1 --wrap=true").strip()
    head.check_output(
        f'for i in $(seq 60); do [ "$(squeue --noheader --jobs={running} --format=%T)" = RUNNING ] && break; '
        "sleep 1; done"
    )
    yield {"running": running, "held": held, "gpus": gpus}
    head.run(f"scancel {running} {held}")


def test_the_queue_exporter_runs_on_the_head(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    queue = plan["monitoring"].get("slurm_queue")
    if queue is None:
        pytest.skip("no Slurm on this cluster: no queue exporter")
    head = hosts[plan["cluster"]["head"]]
    assert head.service(f"{queue['unit']}.timer").is_enabled
    assert head.service(f"{queue['unit']}.timer").is_running
    assert head.file(queue["program"]).mode == 0o755
    # never root: SlurmUser, writing only its own folder; node-exporter's folder holds a link
    unit = head.check_output(f"systemctl show --property=User,Group {queue['unit']}.service")
    assert set(unit.split()) == {f"User={queue['user']}", f"Group={queue['user']}"}, unit
    folder = head.file(queue["output_dir"])
    assert (folder.user, folder.group, folder.mode) == (queue["user"], queue["user"], 0o755)
    out = head.file(queue["output"])
    assert out.exists and out.mode == 0o644 and out.user == queue["user"]
    assert "gpucluster_slurm_exporter_success 1" in out.content_string
    link = head.file(queue["link"])
    assert link.is_symlink and link.linked_to == queue["output"]
    textfile = head.file(queue["link"].rsplit("/", 1)[0])
    assert textfile.user == "root" and not textfile.mode & 0o022  # still root's only
    # node-exporter serves the file (its textfile collector reads the folder by default on Debian)
    served = head.check_output(
        f'python3 -c "import urllib.request;print(urllib.request.urlopen('
        f"'http://{plan['monitoring']['address']}:{plan['monitoring']['node_exporter_port']}/metrics').read().decode())\""
    )
    assert "gpucluster_slurm_nodes{" in served
    assert "node_textfile_scrape_error 0" in served


def test_prometheus_has_the_queue_with_plausible_values(
    hosts: dict[str, Any], plan: dict[str, Any], queue_jobs: dict[str, Any]
) -> None:
    head = hosts[plan["cluster"]["head"]]
    head.check_output(f"systemctl start {plan['monitoring']['slurm_queue']['unit']}.service")
    gpus = queue_jobs["gpus"]
    _wait(head, plan, 'sum(gpucluster_slurm_jobs{state="running"})', lambda v: v >= 1)
    _wait(head, plan, 'gpucluster_slurm_pending_jobs{reason="JobHeldUser"}', lambda v: v >= 1)
    assert _scalar(head, plan, "gpucluster_slurm_exporter_success") == 1
    nodes = _values(head, plan, "gpucluster_slurm_nodes")
    assert sum(v for _, v in nodes) == plan["cluster"]["compute_nodes"], nodes
    assert {m["host"] for m, _ in nodes} == {plan["cluster"]["head"]}  # served by the head's node-exporter
    assert _scalar(head, plan, "gpucluster_slurm_gpus_total") == plan["cluster"]["gpus_total"]
    assert _wait(head, plan, "gpucluster_slurm_gpus_allocated", lambda v: v >= gpus) <= plan["cluster"]["gpus_total"]
    assert _scalar(head, plan, "gpucluster_slurm_nodes_not_responding") == 0
    # every metric the exporter defines is in Prometheus
    missing = [m for m in plan["monitoring"]["slurm_queue"]["metrics"] if not _values(head, plan, m)]
    assert missing == []
