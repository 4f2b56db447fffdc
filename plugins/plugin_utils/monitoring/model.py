"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

``MonitoringSection`` is ``plan.monitoring``: the head's Prometheus and Alertmanager (prometheus.py), the alert
rules and their promtool tests as data (alerts.py, rule_tests.py), the Slurm queue exporter (slurm_queue.py)
and Grafana with each dashboard's data (dashboards.py). TypedDicts are plain dicts at run time: the plan's JSON
is unchanged by them.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

#: a Prometheus label set (name -> value)
Labels = dict[str, str]

# -- alert rules (Prometheus rule file) --------------------------------------------------------------------

#: one alerting rule as Prometheus reads it (``for`` is a Python keyword: the functional form)
AlertRule = TypedDict(
    "AlertRule",
    {"alert": str, "expr": str, "for": str, "labels": Labels, "annotations": dict[str, str]},
)


class RuleGroup(TypedDict):
    name: str
    rules: list[AlertRule]


class RuleGroups(TypedDict):
    """``plan.monitoring.rules``: the rule file's content."""

    groups: list[RuleGroup]


class Threshold(TypedDict):
    """The plan number an alert compares with, and the values its promtool tests pin (fire, quiet)."""

    plan: str
    op: str
    value: float
    fire: float
    quiet: float


#: one input series of a test case: (metric, labels, promtool's expanding notation of the values)
Series = tuple[str, Labels, str]


class AlertCase(TypedDict):
    """One firing or quiet case of an alert (rule_tests.py turns it into a promtool test)."""

    state: str  # "fire" or "quiet"
    value: float | None  # the alert's value when it fires (None: not rendered in the test's name)
    series: list[Series]
    labels: Labels
    start: NotRequired[int]  # minutes before the firing case starts (series that need history)


#: one alert with what its promtool tests need: cases, annotations in mini format, its plan threshold
AlertSpec = TypedDict(
    "AlertSpec",
    {
        "alert": str,
        "for": str,
        "severity": str,
        "summary": str,
        "annotations": dict[str, str],
        "cases": list[AlertCase],
        "threshold": Threshold | None,
    },
)


class AlertRules(TypedDict):
    """alerts.alert_rules: the rule groups and, per alert, its spec."""

    groups: list[RuleGroup]
    alerts: list[AlertSpec]


# -- promtool unit tests of the rules ----------------------------------------------------------------------


class InputSeries(TypedDict):
    series: str
    values: str


class ExpectedAlert(TypedDict):
    exp_labels: Labels
    exp_annotations: dict[str, str]


class AlertCheck(TypedDict):
    eval_time: str
    alertname: str
    exp_alerts: list[ExpectedAlert]


class RuleTest(TypedDict):
    name: str
    interval: str
    input_series: list[InputSeries]
    alert_rule_test: list[AlertCheck]


class RuleTests(TypedDict):
    """``plan.monitoring.rule_tests``: promtool's test file."""

    rule_files: list[str]
    evaluation_interval: str
    tests: list[RuleTest]


# -- Prometheus and Alertmanager ---------------------------------------------------------------------------


class ScrapeTarget(TypedDict):
    address: str
    host: str
    role: str


class ScrapeJob(TypedDict):
    name: str
    targets: list[ScrapeTarget]


class WebConfigs(TypedDict):
    prometheus: str
    alertmanager: str


class Auth(TypedDict):
    """Basic auth in front of Prometheus' and Alertmanager's APIs (paths and user names only)."""

    scheme: str
    user: str
    password_file: str
    secrets_dir: str
    group: str
    program: str
    web_config: WebConfigs


class Inhibit(TypedDict):
    source: str
    target: str
    equal: list[str]


class SlurmQueue(TypedDict):
    """The head's Slurm queue exporter (slurm_queue.py)."""

    program: str
    unit: str
    user: str
    output_dir: str
    output: str
    link: str
    interval: str
    metrics: list[str]


# -- Grafana -----------------------------------------------------------------------------------------------


class QueryData(TypedDict):
    expr: str
    legend: str


class StepData(TypedDict):
    value: float | None
    color: str
    plan: str


class PanelData(TypedDict):
    """A panel as the plan stores it: a timeseries (queries, unit, steps) or a text panel (text)."""

    title: str
    description: str
    queries: NotRequired[list[QueryData]]
    unit: NotRequired[str]
    steps: NotRequired[list[StepData]]
    text: NotRequired[str]


class Dashboard(TypedDict):
    uid: str
    title: str
    tags: list[str]
    file: str
    panels: list[PanelData]


class GrafanaDatasource(TypedDict):
    name: str
    uid: str
    url: str
    user: str
    password_file: str


class Grafana(TypedDict):
    """``plan.monitoring.grafana``: the head's Grafana and each dashboard's data."""

    port: int
    http_addr: str
    anonymous: bool
    allow_sign_up: bool
    secrets_dir: str
    group: str
    admin_password_file: str
    datasource: GrafanaDatasource
    dashboard_dir: str
    dashboards: dict[str, Dashboard]
    metrics: dict[str, str]


# -- the section -------------------------------------------------------------------------------------------


class PrometheusPlan(TypedDict):
    """prometheus.monitoring_plan: what the head's Prometheus and Alertmanager need."""

    server: str
    address: str
    prometheus_port: int
    alertmanager_port: int
    node_exporter_port: int
    dcgm_exporter_port: int
    auth: Auth
    scrape_interval: str
    evaluation_interval: str
    scrape_jobs: list[ScrapeJob]
    targets: dict[str, list[str]]
    alerts: list[str]
    thresholds: dict[str, Threshold]
    inhibit: list[Inhibit]
    coolant_metrics: list[str]
    rules: RuleGroups
    rule_file: str
    rule_test_file: str
    rule_tests: RuleTests


class MonitoringSection(PrometheusPlan):
    """``plan.monitoring``: Prometheus and Alertmanager, the Slurm queue exporter (None on the Kubernetes
    path) and Grafana."""

    slurm_queue: SlurmQueue | None
    grafana: Grafana
