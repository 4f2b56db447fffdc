"""The promtool unit tests of the alert rules: per alert one firing and one quiet case, every boundary
pinned from both sides (alerts.py's module doc), as promtool's test file data (``plan.monitoring.rule_tests``)."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import (
    AlertCheck,
    AlertSpec,
    ExpectedAlert,
    InputSeries,
    RuleTest,
    RuleTests,
    Series,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.rulebook import (
    RULE_FILE_FROM_TESTS,
    TEST_INTERVAL_MIN,
    minutes,
    num,
    render,
    selector,
)


def _input_series(series: list[Series]) -> list[InputSeries]:
    horizon = 15  # minutes of samples: past every quiet check (10m) and every ``for`` (<= 5m)
    out: list[InputSeries] = []
    for metric, labels, values in series:
        vals = values if " " in values or "x" in values else f"{values}x{horizon}"
        out.append({"series": f"{metric}{selector(labels)}", "values": vals})
    return out


def rule_tests(alerts: list[AlertSpec], rule_file: str = RULE_FILE_FROM_TESTS) -> RuleTests:
    """promtool unit tests: per alert one firing and one quiet case (see the module doc)."""
    tests: list[RuleTest] = []
    for a in alerts:
        hold = minutes(a["for"])
        if hold > 5:
            raise ValueError(f"{a['alert']}: for {a['for']} is longer than the test series")
        for case in a["cases"]:
            checks: list[AlertCheck] = []
            if case["state"] == "fire":
                start = case.get("start", 0)
                if hold:  # one evaluation before ``for`` has passed: pending, not firing
                    checks.append(
                        {"eval_time": f"{start + hold - TEST_INTERVAL_MIN}m", "alertname": a["alert"], "exp_alerts": []}
                    )
                firing: ExpectedAlert = {
                    "exp_labels": {**case["labels"], "severity": a["severity"]},
                    "exp_annotations": {
                        k: render(v, case["labels"], case["value"]) for k, v in a["annotations"].items()
                    },
                }
                checks.append({"eval_time": f"{start + hold}m", "alertname": a["alert"], "exp_alerts": [firing]})
            else:
                checks.append({"eval_time": "10m", "alertname": a["alert"], "exp_alerts": []})
            value = "" if case["value"] is None else f" at {num(case['value'])}"
            tests.append(
                {
                    "name": f"{a['alert']} {case['state']}{value}",
                    "interval": f"{TEST_INTERVAL_MIN}m",
                    "input_series": _input_series(case["series"]),
                    "alert_rule_test": checks,
                }
            )
    return {"rule_files": [rule_file], "evaluation_interval": f"{TEST_INTERVAL_MIN}m", "tests": tests}
