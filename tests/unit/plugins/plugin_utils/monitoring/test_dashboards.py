"""Grafana dashboards from the plan (plugins/plugin_utils/monitoring/dashboards.py).

Every panel query must parse as PromQL and read only metrics an exporter or rule of the plan
provides. promtool (Debian package prometheus) is the parser: `promtool check rules` on a rule file
with one recording rule per query rejects a query that does not parse.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TIERS, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import grafana_dashboard
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import dashboards as dash

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool not installed (Debian package prometheus)")


def panel_queries(board: dict[str, Any]) -> list[str]:
    """Every query of a dashboard's panels, as written (with ``$host``): of the plan's data or of the JSON model."""
    return [q.get("expr", "") for p in board["panels"] for q in p.get("queries", p.get("targets", [])) if q.get("expr")]


def substitute(expr: str) -> str:
    """A panel query with its dashboard variables replaced by what matches every value."""
    for name, value in dash.VARIABLES.items():
        expr = expr.replace(f"${name}", value)
    return expr


@cache
def _plan(tier: str) -> dict[str, Any]:
    return cluster_plan(*load_inventory(tier))


def _boards(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The dashboards as the head gets them: the plan's data through the filter the templates call."""
    return {k: json.loads(grafana_dashboard(b)) for k, b in plan["monitoring"]["grafana"]["dashboards"].items()}


def _promtool_check(exprs: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    rules = {
        "groups": [{"name": "panels", "rules": [{"record": f"panel:{i}", "expr": e} for i, e in enumerate(exprs)]}]
    }
    path = tmp_path / "panels.rules.yml"
    path.write_text(yaml.safe_dump(rules, width=1000))
    return subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("tier", TIERS)
def test_dashboards_for_every_tier(tier: str) -> None:
    boards = _boards(_plan(tier))
    assert set(boards) == {"gpu", "fabric", "storage", "cooling", "slurm"}  # the reference tiers run Slurm
    for key, board in boards.items():
        assert board["uid"] == f"gpucluster-{key}"
        assert board["panels"], key
        assert [v["name"] for v in board["templating"]["list"]] == ["host"]
    assert panel_queries(boards["gpu"]), "the GPU dashboard has queries on every tier"


@needs_promtool
@pytest.mark.parametrize("tier", TIERS)
def test_every_panel_query_parses_and_reads_known_metrics(tier: str, tmp_path: Path) -> None:
    plan = _plan(tier)
    catalogue = dash.metric_catalogue(plan)
    exprs = [substitute(q) for b in _boards(plan).values() for q in panel_queries(b)]
    assert exprs
    result = _promtool_check(exprs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for expr in exprs:
        names = dash.metric_names(expr)
        assert names, expr
        assert names <= set(catalogue), f"{expr}: {names - set(catalogue)} not provided by the plan's exporters"


@needs_promtool
def test_promtool_check_rejects_a_broken_query(tmp_path: Path) -> None:
    """The parse check can fail: an unbalanced query is refused."""
    result = _promtool_check(["rate(DCGM_FI_DEV_GPU_UTIL[5m]"], tmp_path)
    assert result.returncode != 0


def test_metric_names() -> None:
    expr = 'sum by (host, method) (rate(node_nfs_requests_total{host=~"$host",method=~"Read|Write"}[5m])) * 8 / 1e9'
    assert dash.metric_names(expr) == {"node_nfs_requests_total"}
    assert dash.metric_names("a_b - on(loop) c_d >= 15") == {"a_b", "c_d"}
    assert dash.metric_names('up{job="node"} == 0 and bool x') == {"up", "x"}


def test_catalogue_follows_the_plan() -> None:
    air, dlc = _plan("tier1"), _plan("tier4")
    assert "gpucluster_coolant_flow_lpm" not in dash.metric_catalogue(air)
    assert "gpucluster_coolant_flow_lpm" in dash.metric_catalogue(dlc)
    # a dcgm counter the plan does not enable is not in the catalogue, and its panel is dropped
    plan = copy.deepcopy(air)
    plan["dcgm"]["exporter"]["counters"] = [
        c for c in plan["dcgm"]["exporter"]["counters"] if c["field"] != "DCGM_FI_DEV_SM_CLOCK"
    ]
    assert "DCGM_FI_DEV_SM_CLOCK" not in dash.metric_catalogue(plan)
    titles = [p.title for p in dash.dashboard_panels(plan)["gpu"]]
    assert "SM clock (MHz)" not in titles and "GPU utilisation" in titles


@pytest.mark.parametrize("tier", TIERS)
def test_datasource_is_the_heads_prometheus(tier: str) -> None:
    plan = _plan(tier)
    grafana = plan["monitoring"]["grafana"]
    address = plan["hosts"][plan["cluster"]["head"]]["addresses"]["management"]
    url = f"http://{address}:{plan['monitoring']['prometheus_port']}"
    assert "datasource_yaml" not in grafana and "provider_yaml" not in grafana  # rendered, not stored
    (source,) = yaml.safe_load(dash.provisioning_yaml(plan["monitoring"], "datasource"))["datasources"]
    assert source["url"] == url == grafana["datasource"]["url"]
    assert source["uid"] == dash.DATASOURCE_UID and source["type"] == "prometheus"
    assert source["jsonData"]["timeInterval"] == plan["monitoring"]["scrape_interval"]
    # Prometheus wants credentials: Grafana's own account, the password only as a file reference
    assert source["basicAuth"] is True and source["basicAuthUser"] == grafana["datasource"]["user"] == "grafana"
    assert source["secureJsonData"] == {"basicAuthPassword": "$__file{/etc/grafana/secrets/prometheus.password}"}
    assert grafana["datasource"]["password_file"].startswith(grafana["secrets_dir"] + "/")
    assert grafana["datasource"]["user"] != plan["monitoring"]["auth"]["user"]  # not Alertmanager's account
    (provider,) = yaml.safe_load(dash.provisioning_yaml(plan["monitoring"], "provider"))["providers"]
    assert provider["options"]["path"] == dash.DASHBOARD_DIR
    for board in _boards(plan).values():
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                assert target["datasource"]["uid"] == dash.DATASOURCE_UID


def test_thresholds_are_the_alerts() -> None:
    plan = _plan("tier4")
    th = plan["monitoring"]["thresholds"]

    def steps(board: str, title: str) -> list[float]:
        (panel,) = [p for p in _boards(plan)[board]["panels"] if p["title"] == title]
        return [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"] if s["value"] is not None]

    assert steps("gpu", "GPU temperature") == [
        th["GpuTemperatureWarning"]["value"],
        th["GpuTemperatureCritical"]["value"],
    ]
    assert steps("gpu", "GPU power draw") == [th["GpuPowerAboveCap"]["value"]]
    assert steps("fabric", "InfiniBand link rate (Gb/s)") == [th["InfinibandPortDegraded"]["value"]]
    assert steps("cooling", "Coolant supply temperature") == [
        th["CoolantSupplyWarning"]["value"],
        th["CoolantSupplyHigh"]["value"],
    ]
    assert steps("cooling", "Coolant flow (L/min)") == [
        th["CoolantFlowCritical"]["value"],
        th["CoolantFlowLow"]["value"],
    ]
    # an air-cooled site: a text panel, no coolant query
    air = _boards(_plan("tier1"))["cooling"]
    assert panel_queries(air) == [] and air["panels"][0]["type"] == "text"


def _grown_tier4(nodes: int) -> dict[str, Any]:
    site, groups = load_inventory("tier4")
    base = groups["compute"][0].rstrip("0123456789")
    extra = [f"{base}{i:02d}" for i in range(len(groups["compute"]) + 1, nodes + 1)]
    for group in ("compute", "all"):
        groups[group] = sorted(groups[group] + extra)
    site = copy.deepcopy(site)
    site["gpucluster_facility"]["racks"] = nodes // 8  # keep each rack within its power budget
    site["gpucluster_fabric"]["spines"] = 8  # enough spine ports for the leaves
    site["gpucluster_fabric"]["subnet_manager"] = "switch"  # 64 hosts fill every port: no room for the head's SM
    return cluster_plan(site, groups)


def test_dashboards_do_not_grow_with_the_node_count() -> None:
    small, big = _plan("tier4"), _grown_tier4(64)
    assert big["cluster"]["compute_nodes"] == 64 > small["cluster"]["compute_nodes"]
    for key, board in _boards(small).items():
        grown = _boards(big)[key]
        assert [p["title"] for p in grown["panels"]] == [p["title"] for p in board["panels"]], key
        assert panel_queries(grown) == panel_queries(board), key


def _lost(model: Any, read: Any, path: str = "$") -> list[str]:
    """Keys or values of model that read (the same JSON through a typed model) lost or changed."""
    if isinstance(model, dict) and isinstance(read, dict):
        return [f"{path}.{k}" for k in model if k not in read] + [
            p for k in model if k in read for p in _lost(model[k], read[k], f"{path}.{k}")
        ]
    if isinstance(model, list) and isinstance(read, list) and len(model) == len(read):
        return [p for i, (m, r) in enumerate(zip(model, read, strict=True)) for p in _lost(m, r, f"{path}[{i}]")]
    return [] if model == read else [path]


@pytest.mark.parametrize("tier", TIERS)
def test_dashboards_are_current_grafana_json_read_by_the_foundation_sdk(tier: str) -> None:
    """schemaVersion 41 (Grafana 12), and Grafana's own typed dashboard model (grafana-foundation-sdk)
    reads every dashboard without losing or changing a key: no legacy or unknown field."""
    sdk = pytest.importorskip("grafana_foundation_sdk")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    assert sdk
    register_default_plugins()  # the panel kinds (timeseries, text) and the prometheus query
    for key, board in _boards(_plan(tier)).items():
        assert board["schemaVersion"] == dash.SCHEMA_VERSION >= 41, key
        assert {p["type"] for p in board["panels"]} <= {"timeseries", "text"}, key
        read = json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder))
        assert _lost(board, read) == [], key


def test_the_plan_stores_the_dashboards_data_not_their_json() -> None:
    """Issue 31: the plan carries panels' queries and thresholds; the JSON is rendered for the host only."""
    plan = _plan("tier3")
    grafana = plan["monitoring"]["grafana"]
    for key, board in grafana["dashboards"].items():
        assert set(board) == {"uid", "title", "tags", "file", "panels"}, key
        for panel in board["panels"]:
            assert set(panel) <= {"title", "queries", "unit", "steps", "description", "text"}, (key, panel)
    size = len(json.dumps(grafana))
    assert size < 0.15 * len(json.dumps(plan)), size
    # the rendered JSON holds the plan's queries and thresholds, nothing else decides them
    board = grafana["dashboards"]["gpu"]
    assert panel_queries(_boards(plan)["gpu"]) == panel_queries(board)


def test_a_template_renders_the_filter() -> None:
    """The head role's dashboard templates call the filter on the plan's data (no stored JSON)."""
    from conftest import ROOT

    for key in dash.DASHBOARDS:
        text = (ROOT / "roles" / "head" / "templates" / f"grafana-dashboard-{key}.json.j2").read_text()
        assert text.strip() == (
            f"{{{{ gpucluster_host_plan.monitoring.grafana.dashboards.{key} | gpucluster.tiers.grafana_dashboard }}}}"
        )


def test_slurm_queue_dashboard_reads_the_exporters_metrics() -> None:
    plan = _plan("tier2")
    board = _boards(plan)["slurm"]
    titles = [p["title"] for p in board["panels"]]
    assert titles[:2] == ["Jobs by state", "Running and pending jobs by partition"]
    exporter = set(plan["monitoring"]["slurm_queue"]["metrics"])
    read = set().union(*(dash.metric_names(q) for q in panel_queries(board)))
    healing = set(plan["healing"]["metric_names"])  # the self-healing loop's node health history (its rows)
    assert read == exporter | healing  # every metric the exporters write has a panel, and nothing else is read
    nodes = next(p for p in board["panels"] if p["title"] == "Nodes by state")
    assert f"{plan['cluster']['compute_nodes']} compute nodes" in nodes["description"]


def test_kubernetes_clusters_get_no_slurm_dashboard() -> None:
    plan = copy.deepcopy(_plan("tier2"))
    plan["cluster"]["scheduler"] = "kubernetes"
    assert "slurm" not in dash.dashboard_panels(plan)
    assert not set(plan["monitoring"]["slurm_queue"]["metrics"]) & set(dash.metric_catalogue(plan))


def test_the_provisioning_files_render_the_same_from_plan_json_and_refuse_an_unknown_kind() -> None:
    plan = _plan("tier3")
    read_back = json.loads(json.dumps(plan, sort_keys=True))
    for kind in ("datasource", "provider"):
        text = dash.provisioning_yaml(plan["monitoring"], kind)
        assert dash.provisioning_yaml(read_back["monitoring"], kind) == text
        assert text.startswith("apiVersion: 1\n")
    with pytest.raises(PlanError) as err:
        dash.provisioning_yaml(plan["monitoring"], "alerting")
    assert err.value.field == "kind" and "datasource" in err.value.allowed
