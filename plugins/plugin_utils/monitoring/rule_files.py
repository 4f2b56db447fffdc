"""The head's rule file and the rules' promtool test file as YAML (the filters
``gpucluster.tiers.prometheus_rules`` and ``prometheus_rule_tests``), keys in the documented order."""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.model import JsonValue

#: The key order of the rule and test files (Prometheus's and promtool's documented order), whatever the
#: order of the data: a plan read back from plan.json (keys sorted) renders the same bytes. Label names
#: are in it too (job, instance, host, ...; severity last); keys not listed follow in sorted order.
KEY_ORDER: tuple[str, ...] = (
    "groups",
    "rule_files",
    "evaluation_interval",
    "tests",
    "name",
    "rules",
    "alert",
    "expr",
    "for",
    "labels",
    "annotations",
    "interval",
    "input_series",
    "alert_rule_test",
    "series",
    "values",
    "eval_time",
    "alertname",
    "exp_alerts",
    "exp_labels",
    "exp_annotations",
    "job",
    "instance",
    "host",
    "role",
    "gpu",
    "device",
    "port",
    "loop",
    "node",
    "check",
    "result",
    "state",
    "severity",
    "summary",
    "description",
    "runbook_url",
    "dashboard",
)
_RANK = {key: i for i, key in enumerate(KEY_ORDER)}


def _ordered(value: object) -> JsonValue:
    """Plain dicts and lists with every mapping's keys in :data:`KEY_ORDER` (unknown keys after, sorted)."""
    if isinstance(value, Mapping):
        keys = sorted(value, key=lambda k: (_RANK.get(str(k), len(_RANK)), str(k)))
        return {str(k): _ordered(value[k]) for k in keys}
    if isinstance(value, (list, tuple)):
        return [_ordered(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"not JSON data: {type(value).__name__}")


def _dump(data: object) -> str:
    import yaml  # PyYAML ships with ansible-core

    return yaml.safe_dump(_ordered(data), sort_keys=False, width=1000, allow_unicode=True)


def rules_yaml(rules: object) -> str:
    """The head's rule file (Prometheus rule groups) from ``plan.monitoring.rules`` (``{"groups": [...]}``)."""
    groups = rules.get("groups") if isinstance(rules, Mapping) else None
    require(
        isinstance(groups, list),
        "plan.monitoring.rules",
        type(rules).__name__,
        "the plan's rule groups, a mapping with a list 'groups'",
    )
    return _dump({"groups": groups})


def rule_tests_yaml(tests: object) -> str:
    """The rules' promtool test file from ``plan.monitoring.rule_tests`` (rule_tests.py)."""
    require(
        isinstance(tests, Mapping) and isinstance(tests.get("tests"), list),
        "plan.monitoring.rule_tests",
        type(tests).__name__,
        "the plan's rule tests, a mapping with rule_files, evaluation_interval and a list 'tests'",
    )
    return _dump(tests)
