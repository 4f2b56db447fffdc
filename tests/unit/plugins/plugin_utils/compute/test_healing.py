"""plan["healing"] (compute/healing.py): the section per reference inventory, the gpucluster_healing
field's errors, the limits for every input, and each remediation class against the reasons the health
check really writes (its own functions produce them here)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, TIERS, load_inventory, load_script
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import healing, xid
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import REASON_PREFIX
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view

DATA = ROOT / "tests" / "data"
hc = load_script(ROOT / "roles" / "compute" / "files" / "gpucluster-healthcheck", "gpucluster_healthcheck_heal")


def _plan(tier: str, section: Any = None) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    if section is not None:
        site["gpucluster_healing"] = section
    return cluster_plan(site, groups)


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    return {t: _plan(t) for t in TIERS}


def classify(section: dict[str, Any], reason: str) -> tuple[str, str] | None:
    """(class, action) of a drain reason as the head reads the section: ours only, first match wins."""
    if not reason.startswith(section["reason_prefix"]):
        return None
    text = reason[len(section["reason_prefix"]) :].strip()
    for cls in section["remediation"]["classes"]:
        m = re.search(cls["match"], text)
        if m:
            if cls["class"] == "xid":
                return "xid", cls["by_xid"].get(m.group("xid"), cls["default"])
            return cls["class"], cls["action"]
    return None


# ---------------------------------------------------------------- per reference inventory


@pytest.mark.parametrize("tier", TIERS)
def test_every_reference_plan_has_the_contract_keys(plans: dict[str, dict[str, Any]], tier: str) -> None:
    h = plans[tier]["healing"]
    assert h["schema"] == 1 and h["reason_prefix"] == REASON_PREFIX == "gpucluster:"
    assert (h["program"], h["unit"], h["active"]["qos"], h["active"]["user"]) == (
        "/usr/local/sbin/gpucluster-heal",
        "gpucluster-heal",
        "gpucluster-check",
        "root",
    )
    assert set(h["active"]["checks"]) == {"allreduce", "dcgm", "ib_write_bw", "storage_read"}
    assert h["remediation"]["actions"] == ["none", "gpu_reset", "reboot", "replace"]
    assert h["active"]["nodes_at_once"] == h["remediation"]["nodes_at_once"]
    assert h["metric_names"] == sorted(healing.METRICS)
    rem = h["remediation"]
    budgets = sum(c["budget_s"] for c in h["active"]["checks"].values() if c["enabled"])
    assert rem["validate_timeout_s"] == budgets + healing.VALIDATE_SLACK_S


def test_tier3_reads_the_floors_fabric_storage_and_rollout(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier3"]
    h, val = plan["healing"], plan["validation"]
    checks = h["active"]["checks"]
    assert h["enabled"] and h["why"] is None and not h["dry_run"]
    assert h["active"]["interval_s"] == 43200  # soperator's 12 h
    assert checks["allreduce"]["floor"] == val["allreduce_intra_node_busbw_gbs"] == 460.0
    assert checks["allreduce"]["command"] == ["all_reduce_perf", "-b", "8G", "-e", "8G", "-g", "8"]
    assert checks["ib_write_bw"] == {
        "enabled": False,
        "why": healing.IB_WRITE_BW_OFF,
        "budget_s": 120,
        "floor": val["nic_write_bw_gbps"],
        "unit": "Gb/s",
        "rails": plan["fabric"]["rails"],
    }
    assert checks["dcgm"]["level"] == plan["health"]["dcgm"]["level"]
    # the shared read floor is the sum over all 4 nodes: one node's share
    assert checks["storage_read"]["floor"] == val["storage_read_gbps"] / 4
    assert checks["storage_read"]["path"] == "/lustre/aifs/checkpoints/.gpucluster-validate"
    assert h["bisect"]["floor"] == val["allreduce_inter_node_busbw_gbs"]
    # 25% of 4 nodes: 1
    assert h["remediation"]["rollout_batch_nodes"] == h["remediation"]["nodes_at_once"] == 1


def test_tier1_has_no_rdma_or_shared_file_system_checks(plans: dict[str, dict[str, Any]]) -> None:
    h = plans["tier1"]["healing"]
    assert not h["active"]["checks"]["ib_write_bw"]["enabled"]
    assert "RDMA" in h["active"]["checks"]["ib_write_bw"]["why"]
    assert not h["active"]["checks"]["storage_read"]["enabled"]
    assert h["active"]["checks"]["storage_read"]["path"] is None
    assert h["bisect"]["floor"] is None  # one node: no inter-node all_reduce
    assert h["active"]["nodes_at_once"] == 1


def test_tier4_remediates_two_of_eight_nodes_at_once(plans: dict[str, dict[str, Any]]) -> None:
    assert plans["tier4"]["healing"]["remediation"]["nodes_at_once"] == 2


def test_the_kubernetes_path_is_off_and_says_why(plans: dict[str, dict[str, Any]]) -> None:
    h = _plan("tier4-k8s")["healing"]
    assert h["enabled"] is False and "Slurm only" in h["why"]
    assert h["active"]["enabled"] is False and h["remediation"]["enabled"] is False


def test_the_site_may_lower_the_limits_and_override_actions() -> None:
    h = _plan(
        "tier4",
        {
            "dry_run": True,
            "active": {"interval_s": 86400, "checks": {"allreduce": {"budget_s": 600}, "dcgm": {"enabled": False}}},
            "remediation": {
                "nodes_at_once": 1,
                "retries": 0,
                "actions": {"thermal": "replace", "xid": [{"xid": 79, "action": "replace"}], "xid_default": "reboot"},
            },
        },
    )["healing"]
    assert h["dry_run"] and h["active"]["interval_s"] == 86400
    assert h["active"]["checks"]["allreduce"]["budget_s"] == 600
    assert not h["active"]["checks"]["dcgm"]["enabled"]
    assert h["active"]["nodes_at_once"] == h["remediation"]["nodes_at_once"] == 1
    assert classify(h, "gpucluster: gpu0 91C >= 87C") == ("thermal", "replace")
    assert classify(h, "gpucluster: gpu3 xid 79") == ("xid", "replace")
    assert classify(h, "gpucluster: gpu3 xid 999") == ("xid", "reboot")


def test_off_switch_keeps_the_section_and_says_why() -> None:
    h = _plan("tier2", {"enabled": False})["healing"]
    assert h["enabled"] is False and h["why"] == "gpucluster_healing.enabled is false"
    assert h["active"]["enabled"] is False and h["remediation"]["enabled"] is False


def test_the_section_does_not_grow_with_the_node_count(plans: dict[str, dict[str, Any]]) -> None:
    import json

    def size(tier: str) -> int:
        h = copy.deepcopy(plans[tier]["healing"])
        for key in ("nodes_at_once", "rollout_batch_nodes"):
            h["remediation"][key] = h["active"]["nodes_at_once"] = 0
        h["active"]["checks"]["storage_read"]["floor_basis"] = ""
        h["active"]["checks"]["storage_read"]["floor"] = 0
        return len(json.dumps(h))

    assert size("tier3") == size("tier4")  # 4 and 8 nodes, same fabric and storage kind


def test_only_the_heads_and_compute_nodes_get_the_section(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier3"]
    for host, entry in plan["hosts"].items():
        view = host_view(plan, host)
        if {"head", "compute", "slurm_backup"} & set(entry["roles"]):
            assert view["healing"] is plan["healing"], host
        else:
            assert view["healing"] == {}, host
    assert any("compute" not in e["roles"] and "head" not in e["roles"] for e in plan["hosts"].values())


# ---------------------------------------------------------------- the field's errors


@pytest.mark.parametrize(
    ("section", "field", "allowed"),
    [
        ([], "gpucluster_healing", "a mapping"),
        ({"enable": True}, "gpucluster_healing.enable", "did you mean 'enabled'"),
        ({"enabled": "yes"}, "gpucluster_healing.enabled", "true or false"),
        ({"dry_run": 1}, "gpucluster_healing.dry_run", "true or false"),
        ({"active": {"interval_s": 604801}}, "gpucluster_healing.active.interval_s", "<= 604800 s"),
        ({"active": {"interval_s": 1.5}}, "gpucluster_healing.active.interval_s", "an integer"),
        ({"active": {"checks": {"nccl": {}}}}, "gpucluster_healing.active.checks.nccl", "allreduce, dcgm"),
        (
            {"active": {"checks": {"allreduce": {"budget_s": 10}}}},
            "gpucluster_healing.active.checks.allreduce.budget_s",
            ">= 30 s",
        ),
        (
            {"active": {"checks": {"dcgm": {"budget": 10}}}},
            "gpucluster_healing.active.checks.dcgm.budget",
            "did you mean 'budget_s'",
        ),
        ({"remediation": {"retries": 11}}, "gpucluster_healing.remediation.retries", "<= 10"),
        ({"remediation": {"window_s": 60}}, "gpucluster_healing.remediation.window_s", ">= 3600 s"),
        ({"remediation": {"reboot_timeout_s": 60}}, "gpucluster_healing.remediation.reboot_timeout_s", ">= 300 s"),
        ({"remediation": {"nodes_at_once": 0}}, "gpucluster_healing.remediation.nodes_at_once", ">= 1"),
        ({"remediation": {"nodes_at_once": 3}}, "gpucluster_healing.remediation.nodes_at_once", "<= 2"),
        ({"remediation": {"actions": {"ecc": "rma"}}}, "gpucluster_healing.remediation.actions.ecc", "gpu_reset"),
        ({"remediation": {"actions": {"memory": "none"}}}, "gpucluster_healing.remediation.actions.memory", "ecc"),
        ({"remediation": {"actions": {"xid": "none"}}}, "gpucluster_healing.remediation.actions.xid", "a list"),
        (
            {"remediation": {"actions": {"xid": [{"xid": 1000, "action": "none"}]}}},
            "gpucluster_healing.remediation.actions.xid[0].xid",
            "<= 999",
        ),
        (
            {"remediation": {"actions": {"xid": [{"xid": 79, "action": "rma"}]}}},
            "gpucluster_healing.remediation.actions.xid[0].action",
            "none, gpu_reset, reboot, replace",
        ),
        (
            {"remediation": {"actions": {"xid_default": "retry"}}},
            "gpucluster_healing.remediation.actions.xid_default",
            "none, gpu_reset, reboot, replace",
        ),
    ],
)
def test_bad_fields_name_the_field_value_and_range(section: Any, field: str, allowed: str) -> None:
    with pytest.raises(PlanError) as caught:
        _plan("tier4", section)
    assert caught.value.field == field
    assert allowed in caught.value.allowed
    assert repr(caught.value.value) in str(caught.value) or caught.value.value == section


def test_a_check_the_cluster_cannot_run_cannot_be_turned_on() -> None:
    with pytest.raises(PlanError, match=r"storage_read\.enabled.*no shared file system"):
        _plan("tier1", {"active": {"checks": {"storage_read": {"enabled": True}}}})


# ---------------------------------------------------------------- properties


def _section(batch: int | str, nodes: int, raw: Any = None) -> dict[str, Any]:
    plan = {
        "cluster": {"compute_nodes": nodes, "gpus_per_node": 8, "tier": "tier4", "scheduler": "slurm"},
        "validation": {
            "gate_message_bytes": 8 * 2**30,
            "allreduce_intra_node_busbw_gbs": 460.0,
            "allreduce_inter_node_busbw_gbs": 340.0,
            "nic_write_bw_gbps": 375.0,
            "storage_read_gbps": 160,
            "tests": {"fio": [{"scope": "shared", "dir": "/lustre/x/.v", "gated": True}]},
        },
        "health": {"dcgm": {"level": 1, "timeout_s": 120}},
        "fabric": {"type": "infiniband", "rails": 8},
        "rollout": {"batch_size": batch},
    }
    return healing.healing_plan(plan, raw)


batches = st.one_of(st.integers(1, 5000), st.integers(1, 100).map(lambda p: f"{p}%"))


@given(batch=batches, nodes=st.integers(1, 4096), lower=st.integers(1, 5000))
def test_nodes_at_once_stays_within_one_and_the_rollout_batch(batch: int | str, nodes: int, lower: int) -> None:
    h = _section(batch, nodes)
    at_once = h["remediation"]["nodes_at_once"]
    limit = healing.batch_nodes(batch, nodes)
    assert 1 <= at_once <= nodes and at_once == limit == h["active"]["nodes_at_once"]
    if isinstance(batch, int):
        assert at_once <= batch
    try:
        lowered = _section(batch, nodes, {"remediation": {"nodes_at_once": lower}})
    except PlanError as err:
        assert lower > limit and err.field == "gpucluster_healing.remediation.nodes_at_once"
    else:
        assert lowered["remediation"]["nodes_at_once"] == lower <= limit


@given(
    code=st.integers(1, 999),
    override=st.dictionaries(st.integers(1, 999).map(str), st.sampled_from(xid.ACTIONS), max_size=5),
)
def test_every_xid_maps_to_an_allowed_action(code: int, override: dict[str, str]) -> None:
    items = [{"xid": int(k), "action": v} for k, v in override.items()]
    h = _section(2, 8, {"remediation": {"actions": {"xid": items}}})
    _cls, action = classify(h, f"gpucluster: gpu0 xid {code}") or ("", "")
    assert action in xid.ACTIONS
    assert action == override.get(str(code), xid.XID_ACTIONS.get(str(code), xid.UNKNOWN_XID_ACTION))


def test_the_xid_table_is_sourced_and_follows_the_buckets() -> None:
    assert set(xid.XID_ACTIONS.values()) <= set(xid.ACTIONS)
    assert set(xid.BUCKET_ACTIONS.values()) <= set(xid.ACTIONS)
    text = Path(xid.__file__).read_text()
    for code, (bucket, action, _what) in xid.XID_TABLE.items():
        # each row cites the catalog on its line or on the comment line above it
        assert re.search(
            rf"(# \[XID1\] XID {code}\b.*\n(?:\s*#.*\n)*\s+{code}: \(|^\s+{code}: \(.*# \[XID1\] XID {code}\b)",
            text,
            re.M,
        )
        if bucket in xid.BUCKET_ACTIONS and action != xid.BUCKET_ACTIONS[bucket]:
            assert code in (63, 94), code  # the two rows acting beyond their bucket, with the reason beside them
    assert xid.XID_ACTIONS["79"] == "reboot" and xid.XID_ACTIONS["13"] == "none"
    assert xid.XID_ACTIONS["95"] == "gpu_reset"


# ---------------------------------------------------------------- the health check's real reasons


def _real_problems(tmp_path: Path) -> dict[str, list[str]]:
    """Problems produced by gpucluster-healthcheck's own functions, by the class that must take them."""
    gpus = [
        {"index": 0, "temperature_c": 91, "ecc_uncorrected": 0},
        {"index": 1, "temperature_c": 40, "ecc_uncorrected": 2},
    ]
    hot, _warn = hc.check_gpus({"count": 8, "temp_critical_c": 87, "temp_warn_c": 83}, gpus)
    ports = hc.check_ports(400, {"mlx5_0/1": (None, None), "mlx5_1/1": ("DOWN", 400.0), "mlx5_2/1": ("ACTIVE", 200.0)})
    coolant = hc.check_coolant(
        {"supply_max_c": 45, "return_max_c": 60, "flow_min_lpm": 10},
        {"supply_c": 46, "return_c": 61.5, "flow_lpm": 8},
    )
    fabric, _notes = hc.check_fabric_state(
        [{"state": "In Progress", "status": None}, {"state": hc.FABRIC_DONE, "status": "Failure"}]
    )
    (tmp_path / "proc").mkdir()
    (tmp_path / "module").mkdir()
    nvlsm = hc.check_nvlsm(
        {"modules": ["ib_umad"], "process": "nvlsm"}, str(tmp_path / "module"), str(tmp_path / "proc")
    )
    nvlinks = hc.check_nvlinks(18, {"gpu0": (16, 18)}, 8)
    xids = [f"{g} xid {c}" for g, c in hc.parse_xids("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off", [])]
    dcgm = hc.parse_dcgm_diag((DATA / "acceptance" / "dcgm_diag_r3_h100_memory_fail.json").read_text())
    return {
        "gpu_count": [p for p in hot if "gpus" in p],
        "thermal": [p for p in hot if "C >=" in p],
        "ecc": [p for p in hot if "ecc" in p],
        "fabric_port": ports,
        "coolant": coolant,
        "bringup": fabric + nvlsm + nvlinks,
        "xid": xids,
        "dcgm": dcgm,
    }


def test_each_class_matches_the_problems_the_health_check_writes(
    plans: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    h = plans["tier4"]["healing"]
    found = _real_problems(tmp_path)
    assert all(found.values()), found
    for want, problems in found.items():
        for problem in problems:
            reason = hc.reason_for(REASON_PREFIX, [problem])
            assert classify(h, reason) is not None and classify(h, reason)[0] == want, reason  # type: ignore[index]


@pytest.mark.parametrize("cls", healing.CLASSES, ids=lambda c: c["class"])
def test_each_class_matches_its_written_formats_and_no_other_class_first(cls: dict[str, Any]) -> None:
    h = _section(2, 8)
    for text in cls["written"]:
        got = classify(h, f"{REASON_PREFIX} {text}")
        assert got is not None and got[0] == cls["class"], text


def test_the_active_check_reasons_of_the_contract() -> None:
    h = _section(2, 8)
    assert classify(h, "gpucluster: check allreduce 312.4 GB/s < floor 460 GB/s") == ("check", "reboot")
    assert classify(h, "gpucluster: check ib_write_bw failed: no neighbour on rail 0") == ("check", "reboot")


def test_an_operators_drain_is_never_classified() -> None:
    h = _section(2, 8)
    assert classify(h, "replacing PSU (ticket 4711): gpu0 xid 79") is None
    assert classify(h, "Epilog error") is None


# ---------------------------------------------------------------- alerts and dashboard


HEAL_ALERTS = {"HealNodeReplace", "HealRemediationStuck", "HealLoopStale", "ActiveCheckOverdue", "ActiveCheckFailing"}


def test_the_alerts_read_the_sections_limits(plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["tier4"]
    h, mon = plan["healing"], plan["monitoring"]
    assert set(mon["alerts"]) >= HEAL_ALERTS
    rem = h["remediation"]
    assert rem["stuck_after_s"] == rem["reboot_timeout_s"] + rem["validate_timeout_s"]
    assert mon["thresholds"]["HealLoopStale"]["value"] == rem["stale_after_s"] == 3 * rem["interval_s"]
    assert mon["thresholds"]["ActiveCheckOverdue"]["value"] == h["active"]["overdue_after_s"]
    assert h["active"]["overdue_after_s"] == 2 * h["active"]["interval_s"]
    rules = {r["alert"]: r["expr"] for g in mon["rules"]["groups"] for r in g["rules"]}
    minutes = -(-rem["stuck_after_s"] // 60)
    assert rules["HealRemediationStuck"].endswith(f"[{minutes}m:1m]) >= {minutes}")
    slurm_board = plan["monitoring"]["grafana"]["dashboards"]["slurm"]
    assert any(p["title"].startswith("Self-healing") for p in slurm_board["panels"])
    assert set(healing.METRICS) <= set(plan["monitoring"]["grafana"]["metrics"])


def test_no_healing_alerts_or_panels_when_it_is_off() -> None:
    plan = _plan("tier4", {"enabled": False})
    assert not HEAL_ALERTS & set(plan["monitoring"]["alerts"])
    titles = [p["title"] for p in plan["monitoring"]["grafana"]["dashboards"]["slurm"]["panels"]]
    assert not [t for t in titles if "Self-healing" in t or "Active checks" in t]
    k8s = _plan("tier4-k8s")
    assert not HEAL_ALERTS & set(k8s["monitoring"]["alerts"])


def test_active_checks_off_drop_their_alerts_only() -> None:
    alerts = set(_plan("tier4", {"active": {"enabled": False}})["monitoring"]["alerts"])
    assert {"HealNodeReplace", "HealLoopStale"} <= alerts
    assert not {"ActiveCheckOverdue", "ActiveCheckFailing"} & alerts


def test_the_report_lists_schedule_checks_classes_and_limits(plans: dict[str, dict[str, Any]]) -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

    section = next(s for s in report_sections(plans["tier4"]) if s["title"] == "Self-healing")
    rows = {r[0]: r for r in section["rows"]}
    assert rows["active checks"][1] == "every 12 h per idle node, at most 2 at once"
    assert rows["check allreduce"][1] == ">= 460 GB/s, budget 300 s"
    assert rows["check ib_write_bw"][1] == "off"
    assert "79: reboot" in rows["class xid"][1] and rows["class xid"][1].endswith("other XIDs: replace")
    assert rows["class fabric_port"][1] == "reboot"
    assert rows["limits"][1] == "2 remediation(s) per node and class in 7 d, then replace"
    off = next(s for s in report_sections(_plan("tier4-k8s")) if s["title"] == "Self-healing")
    assert off["rows"] == [["self-healing", "off", _plan("tier4-k8s")["healing"]["why"]]]
