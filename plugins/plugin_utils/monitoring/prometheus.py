"""Monitoring from the plan: what the head's Prometheus scrapes and Alertmanager's inhibitions, with
the alert rules and their promtool tests (:mod:`alerts`) as data (the filters prometheus_rules and
prometheus_rule_tests render them as YAML on the way to the head).

Ports: node-exporter :9100, dcgm-exporter :9400 (docs/sources.md §5.4), Prometheus :9090, Alertmanager
:9093, slurmctld :6817, slurmd :6818, slurmdbd :6819 (docs/monitoring.md). Every node's firewall admits
them from the management network only (plan/firewall.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alerts import alert_rules
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import (
    Auth,
    Inhibit,
    PrometheusPlan,
    ScrapeJob,
    ScrapeTarget,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rule_tests import rule_tests
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import (
    COOLANT_METRICS,
    DCGM_EXPORTER_PORT,
    NODE_EXPORTER_PORT,
    RULE_PATH,
    RULE_TEST_PATH,
)

PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
# Slurm's defaults, written out in slurm.conf/slurmdbd.conf (roles/slurm/templates):
# https://slurm.schedmd.com/slurm.conf.html#OPT_SlurmctldPort, #OPT_SlurmdPort;
# https://slurm.schedmd.com/slurmdbd.conf.html#OPT_DbdPort
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SCRAPE_INTERVAL = "30s"
EVALUATION_INTERVAL = "30s"

# Basic auth in front of Prometheus' and Alertmanager's HTTP APIs: each reads a web config
# (--web.config.file, Prometheus >= 2.24 and Alertmanager >= 0.22 as Debian 12 ships them, their
# --help) holding bcrypt hashes (https://prometheus.io/docs/prometheus/latest/configuration/https/).
# The passwords are generated once on the head (roles/head/files/gpucluster-web-auth) and never
# leave it: the plan holds the paths only. The services run as user prometheus; their secrets are
# root:prometheus 0640 in a root:prometheus 0750 folder.
SECRETS_DIR = "/etc/prometheus/secrets"
SECRETS_GROUP = "prometheus"
WEB_USER = "gpucluster"
WEB_AUTH_PROGRAM = "/usr/local/sbin/gpucluster-web-auth"


def auth_plan() -> Auth:
    """Who may use Prometheus' and Alertmanager's APIs and where the secrets are (paths only).

    One account, ``gpucluster``, for the cluster's own clients (Prometheus' self-scrape and its alerts
    to Alertmanager, the admins' and the lab's queries on the head); Grafana gets its own account on
    Prometheus only (plan.monitoring.grafana.datasource), so its credential cannot silence alerts.
    """
    return {
        "scheme": "basic",
        "user": WEB_USER,
        "password_file": f"{SECRETS_DIR}/{WEB_USER}.password",
        "secrets_dir": SECRETS_DIR,
        "group": SECRETS_GROUP,
        "program": WEB_AUTH_PROGRAM,
        # one web config per service: Grafana's account is on Prometheus' only
        "web_config": {
            "prometheus": "/etc/prometheus/web-prometheus.yml",
            "alertmanager": "/etc/prometheus/web-alertmanager.yml",
        },
    }


def _role(roles: list[str]) -> str:
    return "compute" if "compute" in roles else ("head" if "head" in roles else roles[0])


def scrape_jobs(plan: Mapping[str, Any]) -> list[ScrapeJob]:
    """node-exporter on every host, dcgm-exporter on every compute node, at management addresses."""

    def target(name: str, host: Mapping[str, Any], port: int) -> ScrapeTarget:
        return {"address": f"{host['addresses']['management']}:{port}", "host": name, "role": _role(host["roles"])}

    hosts = plan["hosts"]
    return [
        {"name": "node", "targets": [target(n, h, NODE_EXPORTER_PORT) for n, h in hosts.items()]},
        {
            "name": "dcgm",
            "targets": [target(n, h, DCGM_EXPORTER_PORT) for n, h in hosts.items() if "compute" in h["roles"]],
        },
    ]


#: Alertmanager inhibitions: while the first alert fires, the second one for the same labels is muted.
INHIBIT = (
    ("GpuTemperatureCritical", "GpuTemperatureWarning", ["host", "gpu"]),
    ("NodeDown", "GpuExporterDown", ["host"]),
    ("InfinibandPortDown", "InfinibandPortDegraded", ["host", "device", "port"]),
    ("CoolantSupplyHigh", "CoolantSupplyWarning", ["loop"]),
    ("CoolantReturnHigh", "CoolantReturnWarning", ["loop"]),
    ("CoolantFlowCritical", "CoolantFlowLow", ["loop"]),
)


def monitoring_plan(plan: Mapping[str, Any]) -> PrometheusPlan:
    """Everything the head's Prometheus and Alertmanager need, from the plan."""
    head = plan["cluster"]["head"]
    address = plan["hosts"][head]["addresses"]["management"]
    rules = alert_rules(plan)
    names = [a["alert"] for a in rules["alerts"]]
    jobs = scrape_jobs(plan)

    return {
        "server": head,
        "address": address,
        "prometheus_port": PROMETHEUS_PORT,
        "alertmanager_port": ALERTMANAGER_PORT,
        "node_exporter_port": NODE_EXPORTER_PORT,
        "dcgm_exporter_port": DCGM_EXPORTER_PORT,
        # basic auth on both APIs (paths and user names; the secrets stay on the head)
        "auth": auth_plan(),
        "scrape_interval": SCRAPE_INTERVAL,
        "evaluation_interval": EVALUATION_INTERVAL,
        "scrape_jobs": jobs,
        "targets": {job["name"]: [t["address"] for t in job["targets"]] for job in jobs},
        "alerts": names,
        "thresholds": {a["alert"]: th for a in rules["alerts"] if (th := a["threshold"])},
        "inhibit": [Inhibit(source=s, target=t, equal=eq) for s, t, eq in INHIBIT if s in names and t in names],
        "coolant_metrics": list(COOLANT_METRICS) if plan["cooling"]["cooling"] == "dlc" else [],
        # the rule groups as data: alerts.rules_yaml (filter gpucluster.tiers.prometheus_rules) renders the file
        "rules": {"groups": rules["groups"]},
        "rule_file": RULE_PATH,
        # promtool's tests of the rules: outside Prometheus's rule folder (never loaded as rules)
        "rule_test_file": RULE_TEST_PATH,
        # as data: alerts.rule_tests_yaml (filter gpucluster.tiers.prometheus_rule_tests) renders the file
        "rule_tests": rule_tests(rules["alerts"]),
    }
