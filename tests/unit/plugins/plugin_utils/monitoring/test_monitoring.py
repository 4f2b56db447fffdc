"""Monitoring from the plan: scrape targets, alert rules and their promtool tests.

promtool (Debian package prometheus) checks the rules and runs their unit tests as the head
role's templates render them; mutating the rules (comparators flipped, ``for`` shortened)
must make those tests fail, which shows the tests pin each boundary and each duration.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from conftest import ROLE_FILES, ROOT, TIERS, cluster_plan, collection_filters, load_inventory
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import alerts as mon
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring import rulebook
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool not installed (Debian package prometheus)")
TEMPLATES = ROOT / "roles" / "head" / "templates"
RULES_DEST = "/etc/prometheus/rules/gpucluster.rules.yml"
TESTS_DEST = "/etc/prometheus/tests/gpucluster.rules.test.yml"
COMPARISON = re.compile(r" (>=|<=|==|!=|>|<) (\S+)$")


@cache
def _plan(tier: str) -> dict[str, Any]:
    return cluster_plan(*load_inventory(tier))


def _render(template: str, plan: dict[str, Any]) -> str:
    """A head template as the template module renders it (trim_blocks on)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(collection_filters())  # gpucluster.tiers.prometheus_rules, ... as the role calls them
    return env.get_template(template).render(gpucluster_host_plan=plan)


def _rules(m: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in m["rules"]["groups"] for r in g["rules"]}


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def _install_rules(plan: dict[str, Any], root: Path, rules_yaml: str | None = None) -> Path:
    """Rules and tests rendered from the templates into <root>/etc/prometheus/{rules,tests}; the test file."""
    folder = root / Path(RULES_DEST).parent.relative_to("/")
    folder.mkdir(parents=True, exist_ok=True)
    tests = root / Path(TESTS_DEST).parent.relative_to("/")
    tests.mkdir(parents=True, exist_ok=True)
    if rules_yaml is None:
        (folder / Path(RULES_DEST).name).write_text(_render("gpucluster.rules.yml.j2", plan))
    else:
        (folder / Path(RULES_DEST).name).write_text(rules_yaml)
    (tests / Path(TESTS_DEST).name).write_text(_render("gpucluster.rules.test.yml.j2", plan))
    return tests / Path(TESTS_DEST).name


def _failing_alerts(output: str) -> set[str]:
    return set(re.findall(r"alertname: (\w+), time:", output))


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> str:
    return request.param


# --- promtool -----------------------------------------------------------------------------


@needs_promtool
def test_promtool_checks_and_unit_tests_the_rules(tier: str, tmp_path: Path) -> None:
    plan = _plan(tier)
    tests = _install_rules(plan, tmp_path)
    # run from elsewhere: the test file names its rule file relative to its own folder, as on the head
    check = _promtool("check", "rules", str(tmp_path / RULES_DEST.lstrip("/")), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(plan['monitoring']['alerts'])} rules found" in check.stdout
    run = _promtool("test", "rules", str(tests), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


@needs_promtool
def test_prometheus_config_passes_promtool(tier: str, tmp_path: Path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(_render("prometheus.yml.j2", _plan(tier)))
    check = _promtool("check", "config", "--syntax-only", str(config), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr


@needs_promtool
@pytest.mark.parametrize("mutation", ["flip the comparison", "shorten for by a minute"])
def test_the_rule_tests_catch_a_moved_boundary(mutation: str, tmp_path: Path) -> None:
    """tier4 has every alert. Each mutation must fail exactly the alerts it touches."""
    plan = _plan("tier4")
    doc = yaml.safe_load(mon.rules_yaml(plan["monitoring"]["rules"]))
    flip = {">=": ">", ">": ">=", "<=": "<", "<": "<=", "==": "!=", "!=": "=="}
    touched = set()
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        if mutation == "flip the comparison":
            new = COMPARISON.sub(lambda m: f" {flip[m.group(1)]} {m.group(2)}", rule["expr"])
        else:
            minutes = int(rule["for"].rstrip("m"))
            new = f"{minutes - 1}m" if minutes else rule["for"]
        key = "expr" if mutation == "flip the comparison" else "for"
        if new != rule[key]:
            rule[key] = new
            touched.add(rule["alert"])
    tests = _install_rules(plan, tmp_path, yaml.safe_dump(doc, sort_keys=False, width=1000))
    run = _promtool("test", "rules", str(tests), cwd=tmp_path)
    assert run.returncode != 0
    assert _failing_alerts(run.stdout + run.stderr) == touched
    assert touched  # the mutation did something


# --- the tests cover every alert, at the plan's boundary ----------------------------------


def test_every_alert_has_a_firing_and_a_quiet_case(tier: str) -> None:
    m = _plan(tier)["monitoring"]
    rules = _rules(m)
    assert list(rules) == m["alerts"]
    tests = yaml.safe_load(mon.rule_tests_yaml(m["rule_tests"]))["tests"]
    for name, rule in rules.items():
        hold = int(rule["for"].rstrip("m"))
        cases = {t["name"].split()[1]: t for t in tests if t["name"].split()[0] == name}
        assert set(cases) == {"fire", "quiet"}, name
        fire = cases["fire"]["alert_rule_test"]
        assert all(c["alertname"] == name for c in fire)
        assert fire[-1]["exp_alerts"], name
        if hold:  # one evaluation earlier the alert is still pending
            assert int(fire[-2]["eval_time"].rstrip("m")) == int(fire[-1]["eval_time"].rstrip("m")) - 1
            assert fire[-2]["exp_alerts"] == []
        quiet = cases["quiet"]["alert_rule_test"]
        assert quiet == [{"eval_time": quiet[0]["eval_time"], "alertname": name, "exp_alerts": []}]
        assert int(quiet[0]["eval_time"].rstrip("m")) > hold  # long enough to have fired


def test_each_boundary_is_tested_at_the_plan_value(tier: str) -> None:
    """Alarm points fire at their value; limits are quiet at theirs (module doc)."""
    m = _plan(tier)["monitoring"]
    names = {t["name"] for t in yaml.safe_load(mon.rule_tests_yaml(m["rule_tests"]))["tests"]}
    for alert, t in m["thresholds"].items():
        at, beyond = ("fire", "quiet") if t["op"] in (">=", "<=") else ("quiet", "fire")
        assert f"{alert} {at} at {rulebook.num(t['value'])}" in names
        step = t[beyond] - t["value"]
        assert 0 < abs(step) <= 1, alert
        away = {">=": -1, "<=": 1, ">": 1, "<": -1}[t["op"]]  # where the other case sits
        assert step * away > 0, alert
        assert f"{alert} {beyond} at {rulebook.num(t[beyond])}" in names


# --- thresholds are the plan's numbers ----------------------------------------------------


def _at(plan: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        plan = plan[part]
    return plan


def _assert_rules_match_plan(plan: dict[str, Any]) -> None:
    m = plan["monitoring"]
    rules = _rules(m)
    for alert, t in m["thresholds"].items():
        op, number = COMPARISON.search(rules[alert]["expr"]).groups()
        assert (op, float(number)) == (t["op"], float(_at(plan, t["plan"]))), alert
        assert t["value"] == _at(plan, t["plan"])


def test_thresholds_come_from_the_plan(tier: str) -> None:
    _assert_rules_match_plan(_plan(tier))


def test_tier4_rules_read_as_the_dossier_says() -> None:
    plan = _plan("tier4")
    rules = {a: r["expr"] for a, r in _rules(plan["monitoring"]).items()}
    assert rules["GpuTemperatureWarning"] == "DCGM_FI_DEV_GPU_TEMP >= 84"  # 3 C under the max operating temp
    assert rules["GpuTemperatureCritical"] == "DCGM_FI_DEV_GPU_TEMP >= 87"  # dossier 1.2: H100 max operating temp
    assert rules["GpuPowerAboveCap"] == "DCGM_FI_DEV_POWER_USAGE > 700"
    assert rules["CoolantSupplyHigh"] == "gpucluster_coolant_supply_celsius > 32"  # dossier 6.1: ASHRAE W32
    assert rules["CoolantFlowLow"] == f"gpucluster_coolant_flow_lpm <= {plan['cooling']['flow_low_lpm']}"
    assert rules["CoolantDeltaTHigh"].endswith(">= 15")  # 1.5 x the 10 K design rise
    assert rules["InfinibandPortDegraded"].endswith("* 8 / 1e9 < 400")  # NDR
    assert 'device=~"mlx5_0|mlx5_1|mlx5_2|mlx5_3|mlx5_4|mlx5_5|mlx5_6|mlx5_7"' in rules["InfinibandPortDown"]


def test_alerts_follow_the_site() -> None:
    tier1 = _plan("tier1")["monitoring"]["alerts"]  # air cooled, no fabric
    assert not [a for a in tier1 if a.startswith(("Coolant", "Infiniband"))]
    assert {"GpuTemperatureCritical", "GpuPowerAboveCap", "GpuXidError", "NodeDown"} <= set(tier1)
    tier3 = _plan("tier3")["monitoring"]["alerts"]  # air cooled, InfiniBand
    assert "InfinibandPortDegraded" in tier3 and not [a for a in tier3 if a.startswith("Coolant")]
    tier4 = _plan("tier4")["monitoring"]["alerts"]  # DLC, InfiniBand
    assert {"CoolantSupplyHigh", "CoolantFlowLow", "CoolantDeltaTHigh", "CoolantTelemetryAbsent"} <= set(tier4)


def test_models_without_thermal_limits_take_the_inventorys() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_node"]["gpu_model"] = "b200"  # dossier 10.8: no thermal limits found
    with pytest.raises(PlanError, match=r"gpu_temp_limits\.max_operating_c"):  # issue 43: refused, not unalerted
        cluster_plan(site, groups)
    site["gpucluster_node"]["gpu_temp_limits"] = {"max_operating_c": 85}
    rules = _rules(cluster_plan(site, groups)["monitoring"])
    assert rules["GpuTemperatureCritical"]["expr"] == "DCGM_FI_DEV_GPU_TEMP >= 85"


MODELS = ["h100_sxm", "h200_sxm", "a100_sxm4", "l40s"]


@settings(max_examples=20, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    cap=st.floats(0, 1),
    dt=st.sampled_from([5, 8, 10, 12]),
    ashrae=st.sampled_from(["W17", "W27", "W32", "W40", "W45"]),
)
def test_rule_thresholds_are_the_plans_numbers(model: str, cap: float, dt: int, ashrae: str) -> None:
    site, groups = load_inventory("tier4")
    site = copy.deepcopy(site)
    gm = gpu_model(model)
    site["gpucluster_node"]["gpu_model"] = model
    power = round(gm.power_min_w + cap * (gm.power_max_w - gm.power_min_w))
    site["gpucluster_gpu_policy"] = {"clock_policy": "power_capped", "power_cap_w": power}
    site["gpucluster_facility"] = {**site["gpucluster_facility"], "coolant_delta_t_k": dt, "ashrae_class": ashrae}
    plan = cluster_plan(site, groups)
    _assert_rules_match_plan(plan)
    m = plan["monitoring"]
    assert m["thresholds"]["GpuPowerAboveCap"]["value"] == power
    assert m["thresholds"]["GpuTemperatureCritical"]["value"] == gm.temp_max_operating_c
    assert m["thresholds"]["CoolantSupplyHigh"]["value"] == int(ashrae[1:])


# --- targets, listen address, files --------------------------------------------------------


def test_scrape_targets_are_management_addresses(tier: str) -> None:
    plan = _plan(tier)
    m = plan["monitoring"]
    mgmt = {h: v["addresses"]["management"] for h, v in plan["hosts"].items()}
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    assert m["targets"]["node"] == [f"{a}:9100" for a in mgmt.values()]
    assert m["targets"]["dcgm"] == [f"{mgmt[h]}:9400" for h in compute]
    assert m["address"] == mgmt[plan["cluster"]["head"]]
    config = yaml.safe_load(_render("prometheus.yml.j2", plan))
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    node = {t["labels"]["host"]: t["targets"] for t in jobs["node"]["static_configs"]}
    assert node == {h: [f"{a}:9100"] for h, a in mgmt.items()}
    assert {t["labels"]["role"] for t in jobs["dcgm"]["static_configs"]} == {"compute"}
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [f"{m['address']}:9093"]


def test_alertmanager_config_inhibits_only_known_alerts(tier: str) -> None:
    m = _plan(tier)["monitoring"]
    config = yaml.safe_load(_render("alertmanager.yml.j2", _plan(tier)))
    assert config["route"]["receiver"] == "default"
    for rule in config["inhibit_rules"]:
        for side in ("source_matchers", "target_matchers"):
            assert rule[side][0].split('"')[1] in m["alerts"]
        assert rule["equal"]


def test_the_head_gets_the_monitoring_files(tier: str) -> None:
    plan = _plan(tier)
    head = {f["dest"] for f in files_by_host(plan)[plan["cluster"]["head"]]}
    assert {"/etc/prometheus/prometheus.yml", RULES_DEST, TESTS_DEST, "/etc/prometheus/alertmanager.yml"} <= head
    others = [h for h, v in plan["hosts"].items() if "head" not in v["roles"]]
    assert not [h for h in others if RULES_DEST in {f["dest"] for f in files_by_host(plan)[h]}]
    assert all((TEMPLATES / f["src"]).is_file() for f in ROLE_FILES["head"] if not f.get("static"))


# --- annotations: description, runbook, dashboard -------------------------------------------


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, spaces to hyphens, punctuation other than - and _ dropped."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_every_alert_has_a_description_a_runbook_section_and_a_dashboard(tier: str) -> None:
    plan = _plan(tier)
    anchors = _anchors((ROOT / "docs" / "runbook.md").read_text())
    uids = {b["uid"] for b in plan["monitoring"]["grafana"]["dashboards"].values()}
    head = plan["hosts"][plan["cluster"]["head"]]["addresses"]["management"]
    for name, rule in _rules(plan["monitoring"]).items():
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url", "dashboard"}, name
        assert len(notes["description"]) > 40, name
        page, _, anchor = notes["runbook_url"].partition("#")
        assert page == "docs/runbook.md" and anchor in anchors, (name, notes["runbook_url"])
        url = notes["dashboard"]
        assert url.startswith(f"http://{head}:{plan['monitoring']['grafana']['port']}/d/"), (name, url)
        assert url.split("/d/")[1].split("?")[0] in uids, (name, url)


def test_the_runbook_has_a_section_for_every_alert_of_every_tier() -> None:
    anchors = _anchors((ROOT / "docs" / "runbook.md").read_text())
    assert {mon.runbook_anchor(a) for a in mon.ALERT_HELP} <= anchors
    names = {a for t in TIERS for a in _plan(t)["monitoring"]["alerts"]}
    assert names <= set(mon.ALERT_HELP)


def test_the_rule_tests_are_kept_out_of_the_rule_folder() -> None:
    m = _plan("tier1")["monitoring"]
    assert Path(m["rule_test_file"]).parent != Path(m["rule_file"]).parent
    assert yaml.safe_load(mon.rule_tests_yaml(m["rule_tests"]))["rule_files"] == ["../rules/gpucluster.rules.yml"]
    assert Path(m["rule_test_file"]).parent.joinpath("../rules/gpucluster.rules.yml").resolve() == Path(m["rule_file"])


def test_an_alert_without_help_is_refused() -> None:
    with pytest.raises(ValueError, match="NewAlert has no ALERT_HELP entry"):
        rulebook.RuleBook("http://h:3000").annotations("NewAlert", "x", set())


@pytest.mark.parametrize("tier", TIERS)
def test_the_rule_files_render_from_plan_data_as_the_stored_text_was(tier: str) -> None:
    """The plan holds the rules and their tests as data; the filters render the bytes the plan used to store
    (``yaml.safe_dump(..., sort_keys=False, width=1000)`` of the engine's own order), and a plan read back from
    plan.json (keys sorted) renders the same bytes. No string of the monitoring section is a document."""
    m = _plan(tier)["monitoring"]
    filters = collection_filters()

    def stored(data: Any) -> str:
        return yaml.safe_dump(data, sort_keys=False, width=1000, allow_unicode=True)

    rules = filters["gpucluster.tiers.prometheus_rules"](m["rules"])
    tests = filters["gpucluster.tiers.prometheus_rule_tests"](m["rule_tests"])
    assert rules == stored({"groups": m["rules"]["groups"]})
    assert tests == stored(m["rule_tests"])
    back = json.loads(json.dumps(m, sort_keys=True))
    assert mon.rules_yaml(back["rules"]) == rules and mon.rule_tests_yaml(back["rule_tests"]) == tests
    assert not [k for k, v in m.items() if isinstance(v, str) and len(v) > 2048]


def test_the_rule_filters_refuse_what_is_not_the_plans_rule_data() -> None:
    filters = collection_filters()
    with pytest.raises(AnsibleFilterError, match=r"plan\.monitoring\.rules.*a list 'groups'"):
        filters["gpucluster.tiers.prometheus_rules"]({"rules": []})
    with pytest.raises(AnsibleFilterError, match=r"plan\.monitoring\.rule_tests.*a list 'tests'"):
        filters["gpucluster.tiers.prometheus_rule_tests"]("tests")


# --- throttling: clock-event bits without a bitwise AND --------------------------------------


def _eval_bits(expr: str, value: int) -> float:
    """Evaluate a bit_test expression (floor, /, %, +) for one sample, as PromQL does on float64."""
    import math

    text = expr.replace(mon.CLOCKS_EVENT, repr(float(value))).replace("floor(", "math.floor(")
    return float(eval(text, {"math": math}))  # our own expression: numbers only


def test_the_bit_tests_decode_every_clock_event_mask() -> None:
    thermal = mon.bit_test(mon.CLOCKS_EVENT, mon.EVENT_SW_THERMAL, 2)
    slowdown = f"{mon.bit_test(mon.CLOCKS_EVENT, mon.EVENT_HW_SLOWDOWN)} + " + mon.bit_test(
        mon.CLOCKS_EVENT, mon.EVENT_HW_POWER_BRAKE
    )
    for value in range(0x200):  # NVML's bits end at 0x100
        assert (_eval_bits(thermal, value) > 0) == bool(value & 0x60), hex(value)
        assert (_eval_bits(slowdown, value) > 0) == bool(value & 0x88), hex(value)


def test_a_blank_dcgm_value_is_no_throttle() -> None:
    """DCGM's blank int64 (0x7ffffffffffffff0 and up: no reading) is 2^63 as a float64: no bit below it."""
    for blank in (0x7FFFFFFFFFFFFFF0, 0x7FFFFFFFFFFFFFFF):
        assert _eval_bits(mon.bit_test(mon.CLOCKS_EVENT, mon.EVENT_SW_THERMAL, 2), blank) == 0
        assert _eval_bits(mon.bit_test(mon.CLOCKS_EVENT, mon.EVENT_HW_SLOWDOWN), blank) == 0


def test_throttle_alerts_leave_the_power_cap_alone(tier: str) -> None:
    rules = _rules(_plan(tier)["monitoring"])
    assert rules["GpuThermalThrottling"]["expr"] == (
        "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 32) % 4 > 0 or rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) > 0"
    )
    assert rules["GpuHwSlowdown"]["expr"] == (
        "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 8) % 2 + floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 128) % 2 > 0"
    )
    assert "POWER_VIOLATION" not in str(rules) and "/ 4)" not in str(rules)
