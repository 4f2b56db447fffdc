"""Grafana's JSON: a dashboard of the plan as Grafana's dashboard model (:func:`dashboard_model`, the filter
``gpucluster.tiers.grafana_dashboard``) and the provisioning files (:func:`provisioning_yaml`, the filter
``gpucluster.tiers.grafana_provisioning``), rendered on the way to the head, never stored in the plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import check_choice
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import Dashboard, PanelData
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.panels import VARIABLES

DATASOURCE_UID = "gpucluster-prometheus"
DATASOURCE_NAME = "gpucluster Prometheus"
#: where the provider reads the dashboards' JSON; the Debian/RPM package runs Grafana as user grafana,
#: which reads these world-readable files (roles/head/vars/files.yml writes them 0644)
DASHBOARD_DIR = "/var/lib/grafana/dashboards/gpucluster"
#: Grafana's secrets on the head (root:grafana 0750 folder, 0640 files; the head role writes them,
#: never the plan): the admin password (generated once, or the inventory's vault variable
#: head_grafana_admin_password) and Grafana's own password for Prometheus (prometheus.auth_plan).
#: Grafana expands ``$__file{path}`` in its settings, environment overrides included, and in a
#: provisioned datasource's secureJsonData:
#: https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#variable-expansion,
#: https://grafana.com/docs/grafana/latest/administration/provisioning/#using-environment-variables
GRAFANA_SECRETS_DIR = "/etc/grafana/secrets"
GRAFANA_GROUP = "grafana"
GRAFANA_ADMIN_PASSWORD_FILE = f"{GRAFANA_SECRETS_DIR}/admin.password"
#: Grafana's account on Prometheus (read only: Prometheus' basic auth has no roles, but this account
#: is not in Alertmanager's web config, so it cannot silence alerts)
GRAFANA_PROMETHEUS_USER = "grafana"
GRAFANA_PROMETHEUS_PASSWORD_FILE = f"{GRAFANA_SECRETS_DIR}/prometheus.password"

#: The classic dashboard JSON model's schema version, as Grafana 12 writes it (docs/sources.md [GF1]);
#: Grafana migrates an older model on load, never a newer one
SCHEMA_VERSION = 41
#: the panel grid is 24 columns wide (docs/sources.md [GF1]): two panels a row, 8 grid rows high
PANEL_WIDTH, PANEL_HEIGHT = 12, 8


def _datasource() -> dict[str, JsonValue]:
    return {"type": "prometheus", "uid": DATASOURCE_UID}


def _panel_model(panel: PanelData, index: int) -> dict[str, JsonValue]:
    """One panel of the plan (:class:`Panel` as a dict) as Grafana's panel JSON: text or timeseries."""
    pos: dict[str, JsonValue] = {
        "h": PANEL_HEIGHT,
        "w": PANEL_WIDTH,
        "x": (index % 2) * PANEL_WIDTH,
        "y": (index // 2) * PANEL_HEIGHT,
    }
    head: dict[str, JsonValue] = {
        "id": index + 1,
        "title": panel["title"],
        "gridPos": pos,
        "description": panel.get("description", ""),
    }
    if panel.get("text"):
        return {**head, "type": "text", "options": {"mode": "markdown", "content": panel["text"]}}
    steps: list[JsonValue] = [{"color": s["color"], "value": s["value"]} for s in panel["steps"]] or [
        {"color": "green", "value": None}
    ]
    return {
        **head,
        "type": "timeseries",
        "datasource": _datasource(),
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": _datasource(), "expr": q["expr"], "legendFormat": q["legend"]}
            for i, q in enumerate(panel["queries"])
        ],
        "fieldConfig": {
            "defaults": {
                "unit": panel["unit"],
                "thresholds": {"mode": "absolute", "steps": steps},
                "custom": {"thresholdsStyle": {"mode": "line" if panel["steps"] else "off"}},
            },
            "overrides": [],
        },
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []},
            "tooltip": {"mode": "multi", "sort": "none"},
        },
    }


def dashboard_model(board: Dashboard) -> dict[str, JsonValue]:
    """A dashboard of the plan (``plan.monitoring.grafana.dashboards.<key>``) as Grafana's JSON model.

    Plain dicts at :data:`SCHEMA_VERSION`; the filter ``gpucluster.tiers.grafana_dashboard`` writes
    it as JSON. Everything in it comes from the board's data: rendering adds no number of its own
    beyond the layout.
    """
    host: dict[str, JsonValue] = {
        "type": "query",
        "name": "host",
        "label": "host",
        "datasource": _datasource(),
        "query": {"qryType": 1, "query": 'label_values(up{job="node"}, host)', "refId": "host"},
        "includeAll": True,
        "multi": True,
        "allValue": VARIABLES["host"],
        "current": {"text": ["All"], "value": ["$__all"]},
        "refresh": 2,  # on time range change: new hosts appear without editing the dashboard
        "sort": 1,
    }
    return {
        "uid": board["uid"],
        "title": board["title"],
        "tags": list(board["tags"]),
        "editable": False,
        "timezone": "utc",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "graphTooltip": 1,  # shared crosshair: one time across a host's panels
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [host]},
        "panels": [_panel_model(p, i) for i, p in enumerate(board["panels"])],
    }


def provisioning(monitoring: Mapping[str, Any], kind: str) -> dict[str, JsonValue]:
    """Grafana's provisioning file of ``kind`` (``datasource``: the head's Prometheus; ``provider``: the
    plan's dashboards folder) from the plan's ``monitoring`` section (address, prometheus_port,
    scrape_interval)."""
    if kind == "datasource":
        url = f"http://{monitoring['address']}:{monitoring['prometheus_port']}"
        # https://grafana.com/docs/grafana/latest/administration/provisioning/#data-sources
        return {
            "apiVersion": 1,
            "datasources": [
                {
                    "name": DATASOURCE_NAME,
                    "uid": DATASOURCE_UID,
                    "type": "prometheus",
                    "access": "proxy",
                    "url": url,
                    "isDefault": True,
                    "editable": False,
                    # Prometheus answers with credentials only (prometheus.auth_plan): Grafana's own
                    # account, its password read from a root:grafana 0640 file when Grafana starts
                    "basicAuth": True,
                    "basicAuthUser": GRAFANA_PROMETHEUS_USER,
                    "jsonData": {"timeInterval": monitoring["scrape_interval"]},
                    "secureJsonData": {"basicAuthPassword": f"$__file{{{GRAFANA_PROMETHEUS_PASSWORD_FILE}}}"},
                }
            ],
        }
    check_choice(kind, "kind", ("datasource", "provider"))
    # https://grafana.com/docs/grafana/latest/administration/provisioning/#dashboards
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "gpucluster",
                "orgId": 1,
                "folder": "gpucluster",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 30,
                "options": {"path": DASHBOARD_DIR},
            }
        ],
    }


def provisioning_yaml(monitoring: Mapping[str, Any], kind: str) -> str:
    """:func:`provisioning` as YAML, keys in Grafana's documented order: rendered on the way to the head
    (filter gpucluster.tiers.grafana_provisioning), not stored in the plan."""
    import yaml  # PyYAML ships with ansible-core

    return str(yaml.safe_dump(provisioning(monitoring, kind), sort_keys=False, width=1000))
