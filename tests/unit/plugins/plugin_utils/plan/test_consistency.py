"""Files == plan, plan within hardware (issue 13, point 4): one consistency property.

For the four reference tiers and for generated valid sites (every catalog GPU model with
sourced power and clock limits, 1..64 compute nodes, feasible rack budgets, every fabric
type, every clock policy, air or DLC), the files the roles render for a host carry the
plan's numbers and nothing else, and the plan's numbers lie within the catalog's hardware
limits. Templates are rendered as the roles render them (conftest.render_role_template),
chosen from the plan's own manifest, files_by_host(plan)[host].

The parsers are strict on purpose: every ``nvidia-smi -pl`` in the clocks unit, every
the DCGM unit (no policy numbers), every comparison and every number with a unit in the
power, temperature and coolant alert rules must equal a plan value. A limit that reaches
a file without passing through the plan fails here.

Power contract (plugins/plugin_utils/compute/power.py): ``gpu.clocks.power_limit_w`` is the APPLIED
per-GPU limit (the policy's, lowered when the fullest rack cannot hold it); ``power.rack_kw``
and ``power.node_kw`` are at that limit; ``power.capped`` says the rack budget lowered it.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from conftest import TIERS, cluster_plan, load_inventory, render_role_template, render_role_template_with_filters
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.cooling import ASHRAE_SUPPLY_MAX_C
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS, GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alerts import IB_ACTIVE
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

#: Catalog models whose power range and clock maxima are all sourced: the ones a site can plan
#: every clock policy for without gpu_facts (catalog.py; clocks.py refuses the others).
MODELS = tuple(
    sorted(
        key
        for key, m in GPUS.items()
        if None not in (m.power_min_w, m.power_default_w, m.power_max_w, m.max_sm_mhz, m.max_mem_mhz)
    )
)

CLOCKS = ("compute", "gpucluster-gpu-clocks.service.j2")
DCGM = ("compute", "gpucluster-dcgm-policy.service.j2")
NCCL = ("compute", "nccl.conf.j2")
HEALTH = ("compute", "healthcheck.json.j2")
GRES = ("slurm", "gres.conf.j2")
SLURM = ("slurm", "slurm.conf.j2")
RULES = ("head", "gpucluster.rules.yml.j2")

#: Templates that use ansible.builtin filters (to_nice_json): rendered with them, as the template module does.
WITH_FILTERS = {HEALTH}

#: libyaml's loader where PyYAML has it: the rule tests of a 64-node plan are ~100 kB of YAML
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

NUMBER = r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"


@dataclass(frozen=True)
class Site:
    """A site as the plan play sees it, and the numbers the test derives from the catalog alone."""

    site: dict[str, Any]
    groups: dict[str, list[str]]

    @property
    def model(self) -> GpuModel:
        return GPUS[self.site["gpucluster_node"]["gpu_model"]]

    @property
    def policy(self) -> dict[str, Any]:
        return self.site.get("gpucluster_gpu_policy") or {"clock_policy": "max_performance"}

    @property
    def requested_w(self) -> int:
        """The per-GPU limit the policy asks for, before any rack budget."""
        cap = self.policy.get("power_cap_w")
        return int(cap) if cap is not None else int(self.model.power_default_w or 0)

    @property
    def compute_hosts(self) -> list[str]:
        return sorted(self.groups["compute"])


def _plan_hosts(plan: dict[str, Any], role: str) -> list[str]:
    return sorted(h for h, v in plan["hosts"].items() if role in v["roles"])


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


# --- checkers: one per rendered file -------------------------------------------------------


def check_clocks(text: str, plan: dict[str, Any], s: Site) -> None:
    """Every nvidia-smi call of the clocks unit, parsed strictly: -pm, -lgc, -lmc, -pl, -rgc, -rmc only."""
    c, m = plan["gpu"]["clocks"], s.model
    start: dict[str, list[str]] = {}
    stop: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key not in ("ExecStart", "ExecStop"):
            assert not re.search(r"nvidia-smi\s+-", line), f"nvidia-smi call outside ExecStart/ExecStop: {line!r}"
            continue
        parts = value.split()
        assert parts[0] == "/usr/bin/nvidia-smi", line
        flag, args = parts[1], parts[2:]
        assert flag in ("-pm", "-lgc", "-lmc", "-pl", "-rgc", "-rmc"), f"unknown nvidia-smi option in {line!r}"
        assert len(args) == (0 if flag in ("-rgc", "-rmc") else 1), line
        (start if key == "ExecStart" else stop).setdefault(flag, []).append(args[0] if args else "")
    # -pl: applied at start = the plan's limit; at stop = the plan's reset (clocks.reset_args); all in the model range
    assert [int(v) for v in start.get("-pl", [])] == [c["power_limit_w"]]
    assert [int(v) for v in stop.get("-pl", [])] == [int(a.split()[1]) for a in c["reset_args"] if a.startswith("-pl ")]
    for value in start.get("-pl", []) + stop.get("-pl", []):
        assert m.power_min_w <= int(value) <= m.power_max_w, f"-pl {value} outside {m.key} limits"
    assert start.get("-pm") == ["1"]
    if c["lock_gpu_clocks"] is None:
        assert "-lgc" not in start and "-rgc" not in stop
    else:
        assert [_ints(v) for v in start["-lgc"]] == [c["lock_gpu_clocks"]]
        low, high = c["lock_gpu_clocks"]
        assert 1 <= low <= high <= m.max_sm_mhz, f"-lgc {low},{high} above {m.key} max SM {m.max_sm_mhz} MHz"
        assert stop["-rgc"] == [""]
    if c["lock_memory_clocks"] is None:
        assert "-lmc" not in start and "-rmc" not in stop
    else:
        assert m.memory_clock_lock
        assert [_ints(v) for v in start["-lmc"]] == [c["lock_memory_clocks"]]
        low, high = c["lock_memory_clocks"]
        assert 1 <= low <= high <= m.max_mem_mhz, f"-lmc {low},{high} above {m.key} max memory {m.max_mem_mhz} MHz"
        assert stop["-rmc"] == [""]


def check_dcgm(text: str, plan: dict[str, Any], s: Site) -> None:
    """The DCGM unit runs the plan's commands only: the health watches, no policy (docs/monitoring.md,
    "DCGM policy"), so no W or C number of its own that could disagree with the plan."""
    runs = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith("ExecStart=")]
    assert runs == [f"-{plan['dcgm']['clear_command']}", *plan["dcgm"]["commands"]], text
    assert not any("policy --set" in r for r in runs)
    assert not re.findall(rf"({NUMBER}) [WC]\b", text), text


def check_nccl(text: str, plan: dict[str, Any], s: Site) -> None:
    """Every KEY=VALUE is the plan's; NCCL_IB_HCA lists exactly the compute HCAs, in rail order."""
    conf: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"NCCL_[A-Z0-9_]+", key), f"not a NCCL KEY=VALUE line: {line!r}"
        assert key not in conf, f"{key} twice"
        conf[key] = value
    assert conf == plan["nccl"]["conf"]
    nics = [n for n in s.site["gpucluster_node"]["nics"] if n["purpose"] == "compute"]
    hcas = [n["name"] for n in sorted(nics, key=lambda n: n["rail"])]
    ftype = plan["fabric"]["type"]
    if ftype in ("infiniband", "roce"):
        # nccl.py / dossier 2.1: "=" makes the names exact (mlx5_1 would otherwise match mlx5_10..)
        value = conf["NCCL_IB_HCA"]
        assert value.startswith("=")
        listed = [item.split(":")[0] for item in value[1:].split(",")]
        assert listed == hcas
        cabled = sorted({(h["rail"], h["hca"]) for h in fabric_links.hcas(plan["fabric"]["cabling"])})
        assert [hca for _, hca in cabled] == hcas
        assert plan["fabric"]["rails"] == len(hcas)
    else:
        assert ftype == "tcp"
        assert "NCCL_IB_HCA" not in conf and conf.get("NCCL_IB_DISABLE") == "1"
    topo = plan["nccl"].get("topo_file")
    assert conf.get("NCCL_TOPO_FILE") == topo
    if topo:  # the file NCCL is pointed at is installed on every compute node
        for host in _plan_hosts(plan, "compute"):
            assert topo in {f["dest"] for f in files_by_host(plan)[host]}, host


def _gres_type(plan: dict[str, Any]) -> str:
    gtype = plan["slurm"]["gres"].split(":")[1]
    assert plan["cluster"]["gpu_model"].startswith(gtype), f"Slurm GPU type {gtype} is not the model's"
    return gtype


def check_gres(text: str, plan: dict[str, Any], s: Site) -> None:
    """gres.conf: one GPU device per GPU of the node, the model's type, every compute node."""
    gtype = _gres_type(plan)
    devices: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or line == "AutoDetect=off":
            continue
        fields = dict(part.split("=", 1) for part in line.split())
        assert hostlist.expand(fields["NodeName"]) == s.compute_hosts
        assert fields["Name"] == "gpu" and fields["Type"] == gtype
        devices += hostlist.expand(fields["File"])
    assert sorted(devices) == sorted(f"/dev/nvidia{i}" for i in range(plan["cluster"]["gpus_per_node"]))


def check_slurm_conf(text: str, plan: dict[str, Any], s: Site) -> None:
    """slurm.conf's node lines (one per scalable unit's Features): every compute node once,
    gpu:<model type>:<GPUs per node>."""
    lines = [line for line in text.splitlines() if line.startswith("NodeName=")]
    named: list[str] = []
    for line in lines:
        fields = dict(part.split("=", 1) for part in line.split())
        named += hostlist.expand(fields["NodeName"])
        assert fields["Gres"] == f"gpu:{_gres_type(plan)}:{plan['cluster']['gpus_per_node']}"
    assert sorted(named) == sorted(s.compute_hosts)
    assert plan["cluster"]["gpus_per_node"] == s.site["gpucluster_node"]["gpus_per_node"]


def check_health(text: str, plan: dict[str, Any], s: Site) -> None:
    """The node health check's GPU count, temperatures and coolant alarms are the plan's."""
    data = json.loads(text)
    temp, cool = plan["gpu"]["temperature"], plan["cooling"]
    assert data["gpu"]["count"] == plan["cluster"]["gpus_per_node"]
    assert (data["gpu"]["temp_warn_c"], data["gpu"]["temp_critical_c"]) == (temp["warn_c"], temp["critical_c"])
    if cool["cooling"] == "dlc":
        assert data["coolant"] == {
            "supply_max_c": cool["supply_max_c"],
            "return_max_c": cool["return_max_c"],
            "flow_min_lpm": cool["flow_critical_lpm"],
        }
    else:
        assert data["coolant"] is None


def _rule_table(plan: dict[str, Any]) -> dict[str, tuple[str | None, float | None, set[float], float]]:
    """Alert -> (comparison, threshold, numbers its summary may name, step of its promtool cases).

    Thresholds are plan values; the event alerts (> 0, == 0, != ACTIVE) carry fixed values that
    are no hardware limit. An alert missing here fails the test: add it with its plan key.
    """
    clocks, temp, cool, fab = plan["gpu"]["clocks"], plan["gpu"]["temperature"], plan["cooling"], plan["fabric"]
    table: dict[str, tuple[str | None, float | None, set[float], float]] = {
        "GpuPowerAboveCap": (">", clocks["power_limit_w"], {clocks["power_limit_w"]}, 1),
        "GpuXidError": (">", 0, set(), 1),
        "GpuDoubleBitEcc": (">", 0, set(), 1),
        "NodeDown": ("==", 0, set(), 1),
        "GpuExporterDown": ("==", 0, set(), 1),
        "GpuThermalThrottling": (">", 0, set(), 1),  # clock-event bits and a growing counter: no limit
        "GpuHwSlowdown": (">", 0, set(), 1),
    }
    if plan["gpu"]["model"].get("nvlink_gen") is not None:  # no NVLink, no NVLink counter, no alert (alerts.py)
        table["GpuNvlinkErrors"] = (">", 0, set(), 1)
    if temp["critical_c"] is not None:
        table["GpuTemperatureWarning"] = (">=", temp["warn_c"], {temp["warn_c"]}, 1)
        table["GpuTemperatureCritical"] = (">=", temp["critical_c"], {temp["critical_c"]}, 1)
    if fab["type"] in ("infiniband", "roce"):
        table["InfinibandPortDown"] = ("!=", IB_ACTIVE, set(), 1)  # node_infiniband_state_id ACTIVE: no limit
        table["InfinibandPortDegraded"] = ("<", fab["link_rate_gbps"], {fab["link_rate_gbps"]}, 1)
    if cool["cooling"] == "dlc":
        for name, op, key in (
            ("CoolantSupplyWarning", ">=", "supply_warn_c"),
            ("CoolantSupplyHigh", ">", "supply_max_c"),
            ("CoolantReturnWarning", ">=", "return_warn_c"),
            ("CoolantReturnHigh", ">", "return_max_c"),
            ("CoolantFlowLow", "<=", "flow_low_lpm"),
            ("CoolantFlowCritical", "<=", "flow_critical_lpm"),
        ):
            table[name] = (op, cool[key], {cool[key]}, 0.1)
        table["CoolantDeltaTHigh"] = (
            ">=",
            cool["delta_t_high_k"],
            {cool["delta_t_high_k"], cool["design_delta_t_k"]},
            0.1,
        )
        table["CoolantTelemetryAbsent"] = (None, None, set(), 0.1)
    heal = plan.get("healing") or {}
    if heal.get("enabled"):  # the self-healing loop's alerts: its limits are the healing section's
        rem, act = heal["remediation"], heal["active"]
        table["HealNodeReplace"] = ("==", 1, set(), 1)  # a state flag: no limit
        table["HealRemediationStuck"] = (">=", -(-rem["stuck_after_s"] // 60), set(), 1)  # whole minutes
        table["HealLoopStale"] = (">", rem["stale_after_s"], {rem["stale_after_s"]}, 1)
        if act["enabled"]:
            table["ActiveCheckOverdue"] = (">", act["overdue_after_s"], {act["overdue_after_s"]}, 1)
            table["ActiveCheckFailing"] = (None, None, set(), 1)  # the last result compared with the last pass
    return table


def check_rules(text: str, plan: dict[str, Any], s: Site) -> None:
    """Every alert rule: its comparison is the plan's threshold, every number with a unit is a plan value."""
    rules = {r["alert"]: r for g in yaml.load(text, Loader=YAML_LOADER)["groups"] for r in g["rules"]}
    table = _rule_table(plan)
    assert set(rules) == set(table), f"alerts without a plan threshold in this test: {set(rules) ^ set(table)}"
    for name, rule in rules.items():
        op, value, named, _ = table[name]
        expr = rule["expr"]
        found = re.search(rf" (>=|<=|==|!=|>|<) ({NUMBER})$", expr)
        if op is None:
            assert found is None, f"{name}: {expr}"
        else:
            assert found, f"{name}: no comparison with a number in {expr!r}"
            assert (found.group(1), float(found.group(2))) == (op, float(value)), f"{name}: {expr!r} vs plan {value}"
        summary = rule["annotations"]["summary"]
        for number in re.findall(rf"(?<![\w.])({NUMBER}) (?:C|W|K|L/min|Gb/s)\b", summary):
            assert float(number) in named, f"{name}: {number} in {summary!r} is not a plan value ({named})"
    # the hardware side: the power alert is never above what the GPU can draw
    assert float(s.model.power_min_w) <= table["GpuPowerAboveCap"][1] <= float(s.model.power_max_w)


def check_rule_tests(text: str, plan: dict[str, Any], s: Site) -> None:
    """The promtool cases pin each threshold from both sides: their values sit at the plan's threshold."""
    table = _rule_table(plan)
    for test in yaml.load(text, Loader=YAML_LOADER)["tests"]:
        found = re.fullmatch(rf"(\w+) (fire|quiet) at ({NUMBER})", test["name"])
        if not found:
            continue
        name, value = found.group(1), float(found.group(3))
        assert name in table, f"promtool case of an unknown alert: {test['name']}"
        _, threshold, named, step = table[name]
        if named:  # a plan threshold (not an event flag): fire/quiet one step either side of it
            allowed = {round(threshold, 6), round(threshold + step, 6), round(threshold - step, 6)}
            assert round(value, 6) in allowed, f"{test['name']}: not at the plan's {threshold}"


CHECKS = {
    CLOCKS: check_clocks,
    DCGM: check_dcgm,
    NCCL: check_nccl,
    HEALTH: check_health,
    GRES: check_gres,
    SLURM: check_slurm_conf,
    RULES: check_rules,
    ("head", "gpucluster.rules.test.yml.j2"): check_rule_tests,
}


# --- the plan itself ----------------------------------------------------------------------


def check_plan_within_hardware(plan: dict[str, Any], s: Site) -> None:
    m, c, temp = s.model, plan["gpu"]["clocks"], plan["gpu"]["temperature"]
    assert plan["gpu"]["model"]["key"] == m.key
    assert m.power_min_w <= c["power_limit_w"] <= m.power_max_w
    assert c["power_limit_w"] <= s.requested_w
    if c["lock_gpu_clocks"]:
        assert c["lock_gpu_clocks"][1] <= m.max_sm_mhz
    if c["lock_memory_clocks"]:
        assert c["lock_memory_clocks"][1] <= m.max_mem_mhz
    if m.temp_max_operating_c is not None and not s.site["gpucluster_node"].get("gpu_temp_limits"):
        # dossier 1.2 / 5.1: critical = Max Operating Temp; warn below it; slowdown and shutdown above
        assert temp["critical_c"] == m.temp_max_operating_c
        assert temp["warn_c"] < temp["critical_c"]
        for above in (m.temp_slowdown_c, m.temp_shutdown_c):
            assert above is None or temp["critical_c"] <= above


def check_power(plan: dict[str, Any], s: Site) -> None:
    """Applied rack kW within the budget, circuits within their kW, node kW at the applied limit."""
    p, fac = plan["power"], s.site["gpucluster_facility"]
    gpus, base = s.site["gpucluster_node"]["gpus_per_node"], s.site["gpucluster_node"]["base_power_w"]
    limit_w = plan["gpu"]["clocks"]["power_limit_w"]
    budget = fac["rack_power_budget_kw"]
    limit_kw = min(budget, fac.get("pdu_rating_kw", budget))
    nodes = len(s.compute_hosts)
    per_rack = math.ceil(nodes / fac.get("racks", 1))
    assert p["nodes_per_rack"] == per_rack
    assert p["rack_budget_kw"] == pytest.approx(limit_kw)
    assert p["node_kw"] == pytest.approx((gpus * limit_w + base) / 1000.0, abs=1e-4)
    assert p["rack_kw"] == pytest.approx(per_rack * p["node_kw"], abs=1e-3)
    assert p["rack_kw"] <= limit_kw + 1e-9, f"{p['rack_kw']} kW per rack above the {limit_kw} kW budget"
    assert p["nodes_per_circuit"] * p["node_kw"] <= p["circuit_kw"] + 1e-9
    assert (p["nodes_per_circuit"] + 1) * p["node_kw"] > p["circuit_kw"]  # no circuit left underused
    if "power_limit_w" in p:  # one decision: the power section holds the limit the clocks apply
        assert p["power_limit_w"] == limit_w
    assert p["capped"] is (limit_w < s.requested_w)
    if p["capped"]:
        # the largest whole watt that fits: one more and the fullest rack is over its budget
        assert per_rack * (gpus * (limit_w + 1) + base) / 1000.0 > limit_kw
    else:
        assert limit_w == s.requested_w
    if plan["cooling"]["cooling"] == "dlc":  # the loop carries the heat of the applied load
        assert plan["cooling"]["heat_load_kw"] == pytest.approx(p["rack_kw"], abs=1e-3)
        assert plan["cooling"]["supply_max_c"] == ASHRAE_SUPPLY_MAX_C[fac["ashrae_class"]]


def check_manifest(plan: dict[str, Any]) -> None:
    """The templates checked here are in the manifest of exactly the hosts that install them."""
    for host, info in plan["hosts"].items():
        have = {(f["role"], f["src"]) for f in files_by_host(plan)[host]}
        compute, head = "compute" in info["roles"], "head" in info["roles"]
        for item in (CLOCKS, DCGM, HEALTH, GRES):
            assert (item in have) == compute, (host, item)
        assert (NCCL in have) == (compute and plan["nccl"]["enabled"]), host
        backup = "slurm_backup" in info["roles"]  # a backup Slurm controller reads slurm.conf too
        assert (SLURM in have) == (compute or head or backup), host
        assert (RULES in have) == head, host


def check_consistency(plan: dict[str, Any], s: Site, hosts: list[str] | None = None) -> int:
    """All checks; the files of ``hosts`` (default: every host) are rendered. Returns the files checked."""
    check_manifest(plan)
    check_plan_within_hardware(plan, s)
    check_power(plan, s)
    checked = 0
    for host in hosts or sorted(plan["hosts"]):
        for item in files_by_host(plan)[host]:
            key = (item["role"], item["src"])
            if key not in CHECKS:
                continue
            render = render_role_template_with_filters if key in WITH_FILTERS else render_role_template
            CHECKS[key](render(item["role"], item["src"], plan, host), plan, s)
            checked += 1
    return checked


# --- reference tiers and the tier3 cap case -----------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
def test_reference_tier_files_equal_the_plan(tier: str) -> None:
    site, groups = load_inventory(tier)
    s = Site(site, groups)
    plan = cluster_plan(site, groups)
    assert check_consistency(plan, s) >= 6 * len(s.compute_hosts)


def _tier3(budget_kw: float) -> Site:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    site["gpucluster_facility"].update(rack_power_budget_kw=budget_kw, pdu_rating_kw=budget_kw, racks=1)
    return Site(site, groups)


def test_tier3_on_a_30_kw_rack_carries_the_fitting_cap_everywhere() -> None:
    """4 nodes x (8 x 700 W + 4600 W) = 40.8 kW > 30 kW: 30000 / 4 = 7500 W per node,
    (7500 - 4600) / 8 = 362.5 -> 362 W per GPU (H100 SXM range 200-700 W, dossier 1.1)."""
    s = _tier3(30)
    plan = cluster_plan(s.site, s.groups)
    assert plan["gpu"]["clocks"]["power_limit_w"] == 362
    assert plan["power"]["capped"] is True
    assert plan["power"]["rack_kw"] == pytest.approx(4 * (8 * 362 + 4600) / 1000)  # 29.984 kW
    check_consistency(plan, s)
    for host in s.compute_hosts:
        clocks = render_role_template(*CLOCKS, plan, host)
        assert "ExecStart=/usr/bin/nvidia-smi -pl 362" in clocks.splitlines()
        assert "policy --set" not in render_role_template(*DCGM, plan, host)  # no -P to carry the cap
    rules = render_role_template(*RULES, plan, plan["cluster"]["head"])
    assert "expr: DCGM_FI_DEV_POWER_USAGE > 362" in rules
    assert not re.search(r"\b700 W\b", rules)


def test_tier3_on_a_20_kw_rack_is_refused_naming_the_budget() -> None:
    """Even at 200 W per GPU, 4 x (8 x 200 + 4600) W = 24.8 kW > 20 kW."""
    s = _tier3(20)
    with pytest.raises(PlanError) as err:
        cluster_plan(s.site, s.groups)
    assert err.value.field == "gpucluster_facility.rack_power_budget_kw"
    assert err.value.value == 20
    assert "24.8 kW" in err.value.allowed


def _power_limits_in_clocks_unit(text: str) -> list[tuple[str, int]]:
    """(ExecStart|ExecStop, W) of every ``nvidia-smi -pl`` in the clocks unit."""
    return [(m[0], int(m[1])) for m in re.findall(r"^(ExecStart|ExecStop)=/usr/bin/nvidia-smi -pl (\d+)$", text, re.M)]


@pytest.mark.parametrize(
    "policy",
    [{"clock_policy": "max_performance"}, {"clock_policy": "power_capped", "power_cap_w": 300}],
    ids=["budget-capped", "site-capped"],
)
def test_stopping_the_clocks_unit_never_lifts_a_rack_over_its_budget(policy: dict[str, Any]) -> None:
    """tier3 on a 30 kW rack: the budget caps the GPUs at 362 W, or the site caps them at 300 W
    (4 x (8 x 300 + 4600) W = 28 kW). No -pl the unit runs, at start or at stop (systemctl stop,
    a restart after a template change), may let the rack draw more than 30 kW: a reset to the
    700 W default would draw 40.8 kW."""
    s = _tier3(30)
    s.site["gpucluster_gpu_policy"] = policy
    plan = cluster_plan(s.site, s.groups)
    node = s.site["gpucluster_node"]
    text = render_role_template(*CLOCKS, plan, s.compute_hosts[0])
    limits = _power_limits_in_clocks_unit(text)
    assert ("ExecStart", plan["gpu"]["clocks"]["power_limit_w"]) in limits
    for key, watts in limits:
        rack_kw = 4 * (node["gpus_per_node"] * watts + node["base_power_w"]) / 1000.0
        assert rack_kw <= 30, f"{key}=/usr/bin/nvidia-smi -pl {watts}: the rack would draw {rack_kw:g} kW > 30 kW"


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


def _replace_in(data: Any, old: str, new: str) -> Any:
    """``data`` (plain JSON data, e.g. the plan's rule groups) with ``old`` replaced in its strings."""
    return json.loads(_replace(json.dumps(data), old, new))


def _swap(items: list[str], old: str, new: str) -> list[str]:
    """``items`` with ``old`` replaced by ``new`` (which must occur in one of them)."""
    assert any(old in item for item in items), old
    return [item.replace(old, new) for item in items]


#: Files that drift from the plan (the plan value stays 362 W / 8 GPUs / the compute HCAs): each must fail.
DRIFTS = {
    "clocks -pl uncapped": lambda p: p["gpu"]["clocks"].update(
        apply_args=_swap(p["gpu"]["clocks"]["apply_args"], "-pl 362", "-pl 700")
    ),
    "clocks second -pl": lambda p: p["gpu"]["clocks"]["apply_args"].append("-pl 700"),
    "clocks -lgc above the model": lambda p: p["gpu"]["clocks"].update(
        apply_args=_swap(p["gpu"]["clocks"]["apply_args"], "-lgc 1980,1980", "-lgc 2505,2505")
    ),
    "plan and file -lgc above the model": lambda p: p["gpu"]["clocks"].update(
        lock_gpu_clocks=[2505, 2505], apply_args=_swap(p["gpu"]["clocks"]["apply_args"], "1980,1980", "2505,2505")
    ),
    "power alert uncapped": lambda p: p["monitoring"].update(
        rules=_replace_in(p["monitoring"]["rules"], "DCGM_FI_DEV_POWER_USAGE > 362", "DCGM_FI_DEV_POWER_USAGE > 700")
    ),
    "power alert summary uncapped": lambda p: p["monitoring"].update(
        rules=_replace_in(p["monitoring"]["rules"], "its 362 W limit", "its 700 W limit")
    ),
    "temperature alert not the plan's": lambda p: p["monitoring"].update(
        rules=_replace_in(p["monitoring"]["rules"], "DCGM_FI_DEV_GPU_TEMP >= 87", "DCGM_FI_DEV_GPU_TEMP >= 92")
    ),
    "nccl storage HCA": lambda p: p["nccl"]["conf"].update(
        NCCL_IB_HCA=_replace(p["nccl"]["conf"]["NCCL_IB_HCA"], "mlx5_7:1", "mlx5_7:1,mlx5_8:1")
    ),
    "gres one GPU short": lambda p: p["slurm"].update(
        gres_conf_lines=_swap(p["slurm"]["gres_conf_lines"], "nvidia[4-7]", "nvidia[4-6]")
    ),
    "slurm.conf GPU count": lambda p: [n.update(gres=_replace(n["gres"], ":8", ":4")) for n in p["slurm"]["nodes"]],
    "health temperature": lambda p: p["health"]["gpu"].update(temp_critical_c=92),
    "rack kW uncapped": lambda p: p["power"].update(rack_kw=40.8),  # 4 x (8 x 700 W + 4600 W)
}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_a_limit_that_bypasses_the_plan_fails(drift: str) -> None:
    """The checkers are strict: a file (or figure) that is not the plan's value is caught."""
    s = _tier3(30)
    plan = copy.deepcopy(cluster_plan(s.site, s.groups))
    DRIFTS[drift](plan)
    with pytest.raises(AssertionError):
        check_consistency(plan, s)


# --- generated sites ----------------------------------------------------------------------

#: Circuits (breaker A, V, phases): 3-phase 400 V and single-phase 230 V feeds.
CIRCUITS = ((32, 400, 3), (63, 400, 3), (16, 400, 3), (32, 230, 1))


def _topologies(nodes: int, radix: int) -> list[str]:
    """Switched topologies fabric.py accepts for ``nodes`` hosts of 8 rails on ``radix``-port switches."""
    out = ["rail_optimized"] if nodes <= radix else []
    out.append("fat_tree")  # 8 spines: leaves x radix/2/8 uplinks fit a spine up to 2 SUs (64 hosts)
    if nodes * 8 <= radix:
        out.append("single_switch")
    return out


@functools.cache
def _base_inventory(tier: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A reference inventory, read once (sites() deep-copies what it changes)."""
    return load_inventory(tier)


@st.composite
def sites(draw: st.DrawFn) -> Site:
    tier = draw(st.sampled_from(("tier2", "tier3", "tier4")))
    raw, base_groups = _base_inventory(tier)
    site = copy.deepcopy(raw)
    # tier4's 160 GB/s storage read floor needs two nodes' 800 Gb/s storage links (storage/sizing.py's ceiling)
    nodes = draw(st.integers(2 if tier == "tier4" else 1, 64))
    compute = [f"compute{i:02d}" for i in range(1, nodes + 1)]
    groups = {k: list(v) for k, v in base_groups.items() if k != "all"}
    groups["compute"] = compute
    groups["all"] = sorted({h for k, v in groups.items() for h in v})

    model = GPUS[draw(st.sampled_from(MODELS))]
    node = site["gpucluster_node"]
    node["gpu_model"] = model.key
    gpus, base_w = node["gpus_per_node"], node["base_power_w"]

    fabric = site["gpucluster_fabric"]
    ftype = draw(
        st.sampled_from(("none", "infiniband", "roce", "tcp") if nodes == 1 else ("infiniband", "roce", "tcp"))
    )
    fabric["type"] = ftype
    if ftype != "infiniband":  # an InfiniBand section on another fabric is refused (inventory/rules.py)
        fabric.pop("infiniband", None)
    if ftype == "none":
        fabric["topology"] = "none"
    else:
        radix = fabric.get("switch_radix", 64)
        fabric["topology"] = draw(st.sampled_from(_topologies(nodes, radix)))
        if fabric["topology"] == "fat_tree":
            fabric.update(spines=8, spine_scope="shared")
        # the head's SM needs one free host port per subnet (fabric_host.sm_cabling); a full fabric
        # (every host port taken) runs the SM on a managed switch
        free = {"rail_optimized": nodes < radix, "single_switch": nodes * 8 < radix}
        if ftype == "infiniband" and free.get(fabric["topology"], nodes % (radix // 2) != 0):
            subnets = 8 if fabric["topology"] == "rail_optimized" else 1
            fabric["subnet_manager"] = "head"
            fabric["infiniband"] = {**fabric.get("infiniband", {}), "sm_hcas": [f"mlx5_{i}" for i in range(subnets)]}
        else:
            fabric["subnet_manager"] = draw(st.sampled_from(("switch", "external")))

    policy: dict[str, Any] = {"clock_policy": draw(st.sampled_from(("max_performance", "fixed", "power_capped")))}
    if policy["clock_policy"] == "fixed":
        policy["sm_mhz"] = draw(st.integers(1, model.max_sm_mhz))
    if model.memory_clock_lock and policy["clock_policy"] != "max_performance" and draw(st.booleans()):
        policy["mem_mhz"] = draw(st.integers(1, model.max_mem_mhz))
    if policy["clock_policy"] == "power_capped" or draw(st.integers(0, 3)) == 0:
        policy["power_cap_w"] = draw(st.integers(model.power_min_w, model.power_max_w))
    site["gpucluster_gpu_policy"] = policy
    requested = policy.get("power_cap_w", model.power_default_w)

    racks = draw(st.integers(1, nodes))
    per_rack = math.ceil(nodes / racks)
    # feasible: the fullest rack holds its nodes with every GPU at the model's minimum limit; a site's own
    # power_cap_w must fit too (power.py refuses a site cap the budget cannot hold: gpucluster_gpu_policy.power_cap_w)
    floor_gpu_w = model.power_min_w if "power_cap_w" not in policy else requested
    floor_w = per_rack * (gpus * floor_gpu_w + base_w)
    full_w = per_rack * (gpus * requested + base_w)
    budget_w = draw(st.integers(floor_w, max(floor_w, full_w * 3 // 2)))
    pdu_w = draw(st.one_of(st.just(budget_w), st.integers(floor_w, max(floor_w, full_w * 3 // 2))))
    amps, volts, phases = draw(st.sampled_from(CIRCUITS))
    cooling = draw(st.sampled_from(("air", "dlc")))
    site["gpucluster_facility"].update(
        racks=racks,
        rack_power_budget_kw=budget_w / 1000,
        pdu_rating_kw=pdu_w / 1000,
        breaker_amps=amps,
        circuit_voltage_v=volts,
        circuit_phases=phases,
        cooling=cooling,
        ashrae_class=draw(st.sampled_from(sorted(ASHRAE_SUPPLY_MAX_C))),
        coolant_delta_t_k=draw(st.sampled_from((5, 10, 15))),
    )
    return Site(site, groups)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=sites())
def test_generated_site_files_equal_the_plan_within_hardware(s: Site) -> None:
    plan = cluster_plan(s.site, s.groups)
    event(f"power limit from {plan['gpu']['clocks'].get('power_limit_source')}")
    event(f"fabric {plan['fabric']['type']}, cooling {plan['cooling']['cooling']}")
    compute = s.compute_hosts
    # compute files are the same plan values on every node: render the first and the last
    hosts = sorted({plan["cluster"]["head"], compute[0], compute[-1]})
    assert check_consistency(plan, s, hosts) >= 6
