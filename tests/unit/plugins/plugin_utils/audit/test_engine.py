"""The audit's engine: a cluster that matches its plan has no finding; each kind of difference is
found once, with its class, severity, fix and cost (plugins/plugin_utils/audit/)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import audit_probe, hostlist, ibfabric, lustre_yaml
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.driver import DRAIN_PREFIX, audit
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.report import report_markdown
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.request import host_request, planned_layouts
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig import mig_enabled
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.services import FIREWALL_UNIT

DATA = Path(__file__).resolve().parents[4] / "data"
DRIVER = "550.54.15"
VBIOS = "96.00.89.00.01"

_PLANS: dict[str, dict[str, Any]] = {}


def plan_of(tier: str) -> dict[str, Any]:
    if tier not in _PLANS:
        _PLANS[tier] = cluster_plan(*load_inventory(tier))
    return _PLANS[tier]


def sha(host: str, dest: str) -> str:
    return f"sha256-of-{host}:{dest}"


def compute_of(plan: dict[str, Any]) -> list[str]:
    return sorted(h for h, v in plan["hosts"].items() if "compute" in v["roles"])


def as_planned(plan: dict[str, Any], host: str) -> dict[str, Any]:
    """What audit_facts reads on a host that is exactly as planned (synthetic, in the module's shape)."""
    req = host_request(host_view(plan, host), host, compute_of(plan)[0])
    gplan = plan["gpu"]
    facts: dict[str, Any] = {
        "files": {d: sha(host, d) for d in req["files"]},
        "services": {u: {"active": "active", "enabled": "enabled"} for u in req["services"]},
        "gpu": {"state": "skipped", "reason": None},
        "hca": {"state": "skipped", "reason": None},
        "fabric_manager": {"state": "skipped", "reason": None},
        "firewall": {"state": "ok", "reason": None, "table_loaded": True},
        "slurm": {"state": "skipped", "reason": None},
    }
    if req["gpu"]:
        n = plan["cluster"]["gpus_per_node"]
        links = gplan["bringup"]["nvlink_links"] or 0
        facts["gpu"] = {
            "state": "ok",
            "reason": None,
            "gpus": [
                {
                    "index": i,
                    "pci_bus_id": f"00000000:{i + 0x19:02X}:00.0",
                    "name": "NVIDIA H100 80GB HBM3",
                    "power_limit_w": gplan["clocks"]["power_limit_w"],
                    "persistence": gplan["clocks"]["persistence"],
                    "mig": mig_enabled(gplan.get("mig"), host, i),
                    "driver_version": DRIVER,
                    "vbios_version": VBIOS,
                }
                for i in range(n)
            ],
            "nvlink": [{"index": i, "links": links, "active": links} for i in range(n)],
        }
    if req["fabric_manager"]:
        facts["fabric_manager"] = {"state": "ok", "reason": None, "version": DRIVER}
    if req["hca"]:
        facts["hca"] = {
            "state": "ok",
            "reason": None,
            "ports": [
                {
                    "ca": r["hca"],
                    "port": 1,
                    "state": "Active",
                    "physical_state": "LinkUp",
                    "rate_gbps": float(plan["fabric"]["link_rate_gbps"]),
                    "firmware": "28.39.1002",
                    "port_guid": f"0x{abs(hash((host, r['hca']))):016x}",
                }
                for r in plan["fabric_host"]["rails"]
            ],
        }
    if req["slurm_nodes"]:
        nodes = {}
        for line in plan["slurm"]["nodes"]:
            features = ",".join(line["features"])
            for node in hostlist.expand(line["nodes"]):
                nodes[node] = {"gres": line["gres"] + "(S:0-1)", "features": features, "state": "IDLE"}
        facts["slurm"] = {"state": "ok", "reason": None, "nodes": nodes}
    if req["job_env_nodes"]:
        # the nodes' job environment: nothing but what /etc/nccl.conf says too (a redundant value is no drift)
        assert hostlist.expand(req["job_env_nodes"]) == compute_of(plan)
        env = {"NCCL_DEBUG": plan["nccl"]["conf"]["NCCL_DEBUG"]} if plan["nccl"]["conf"] else {}
        facts["job_env"] = {"state": "ok", "reason": None, "nodes": {n: dict(env) for n in compute_of(plan)}}
    if req["layouts"]:
        layouts = planned_layouts(plan)
        assert layouts and req["layouts"]["dirs"] == sorted(layouts["dirs"])
        facts["layouts"] = {
            "state": "ok",
            "reason": None,
            "kind": layouts["kind"],
            "dirs": {p: {"state": "ok", "reason": None, "layout": d["want"]} for p, d in layouts["dirs"].items()},
        }
    return facts


def collected(plan: dict[str, Any]) -> dict[str, Any]:
    hosts = sorted(plan["hosts"])
    return {
        "hosts": {h: as_planned(plan, h) for h in hosts},
        "planned_files": {h: {f["dest"]: sha(h, f["dest"]) for f in files_by_host(plan)[h]} for h in hosts},
    }


def only(result: dict[str, Any]) -> dict[str, Any]:
    assert len(result["findings"]) == 1, result["findings"]
    return result["findings"][0]


@pytest.mark.parametrize("tier", ["tier1", "tier3"])
def test_a_cluster_as_planned_has_no_finding(tier: str) -> None:
    plan = plan_of(tier)
    result = audit(plan, collected(plan))
    assert result["findings"] == []
    assert result["failed"] is False
    assert result["unchecked"] == []
    assert result["hosts_audited"] == len(plan["hosts"])


def test_absent_tools_are_unchecked_not_findings() -> None:
    """The lab's containers have no nvidia-smi or ibstat: recorded as not checked, never as a finding."""
    plan = plan_of("tier3")
    data = collected(plan)
    for h in ("compute01", "compute02"):
        data["hosts"][h]["gpu"] = {"state": "absent", "reason": "nvidia-smi not found in PATH"}
        data["hosts"][h]["hca"] = {"state": "absent", "reason": "ibstat not found in PATH"}
    data["hosts"]["compute01"]["fabric_manager"] = {"state": "absent", "reason": "nv-fabricmanager not found in PATH"}
    result = audit(plan, data)
    assert result["findings"] == []
    assert {(u["host"], u["check"]) for u in result["unchecked"]} == {
        ("compute01", "fabric_manager"),
        ("compute01", "gpu"),
        ("compute01", "hca"),
        ("compute02", "gpu"),
        ("compute02", "hca"),
    }
    assert "- gpu on compute[01-02]: nvidia-smi not found in PATH" in report_markdown(result)


def test_an_edited_planned_file_is_drift_fixed_by_site_yml() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute03"]["files"]["/etc/slurm/slurm.conf"] = "edited-by-hand"
    f = only(audit(plan, data))
    assert (f["host"], f["cls"], f["check"], f["subject"]) == ("compute03", "drift", "file", "/etc/slurm/slurm.conf")
    assert f["fix"] == "run site.yml --limit compute03"
    assert f["found"] == "edited-by-hand"


def test_a_missing_planned_file_is_drift() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["head01"]["files"]["/etc/prometheus/prometheus.yml"] = None
    f = only(audit(plan, data))
    assert (f["host"], f["cls"], f["found"]) == ("head01", "drift", None)


def test_a_stopped_service_is_critical_drift() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute02"]["services"]["slurmd"] = {"active": "inactive", "enabled": "enabled"}
    f = only(audit(plan, data))
    assert (f["cls"], f["check"], f["subject"], f["severity"]) == ("drift", "service", "slurmd", "critical")
    assert f["cost"] == "no jobs run on this node"
    assert "site.yml --limit compute02" in f["fix"]


def test_a_disabled_service_is_warning_drift() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["head01"]["services"]["chrony"] = {"active": "active", "enabled": "disabled"}
    f = only(audit(plan, data))
    assert (f["check"], f["planned"], f["found"], f["severity"]) == ("service", "enabled", "disabled", "warning")


def test_a_firewall_table_not_loaded_is_critical_drift() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["oss01"]["firewall"]["table_loaded"] = False
    f = only(audit(plan, data))
    assert (f["host"], f["check"], f["severity"]) == ("oss01", "firewall", "critical")


def test_a_firewall_switched_off_by_its_role_switch_is_no_finding() -> None:
    """common_firewall_enabled: false on a host: the role writes the policy and its unit but neither loads
    nor enables it, so neither the stopped unit nor the unloaded table is a finding there; the hosts whose
    switch is on (passed true, or not passed: the role's default) still get both."""
    plan = plan_of("tier3")
    data = collected(plan)
    for host in ("compute01", "compute02", "oss01"):
        data["hosts"][host]["services"][FIREWALL_UNIT] = {"active": "inactive", "enabled": "disabled"}
        data["hosts"][host]["firewall"]["table_loaded"] = False
    switches = {"common_firewall_enabled": {"compute01": False, "compute02": True}}
    result = audit(plan, data, {"role_switches": switches})
    found = {(f["host"], f["check"], f["subject"].split()[0], f["severity"]) for f in result["findings"]}
    assert found == {
        (host, check, subject, "critical")
        for host in ("compute02", "oss01")
        for check, subject in (("service", FIREWALL_UNIT), ("firewall", "nftables"))
    }
    # switched off everywhere (group_vars of all): the same cluster has no finding
    everywhere = {"common_firewall_enabled": dict.fromkeys(plan["hosts"], False)}
    assert audit(plan, data, {"role_switches": everywhere})["findings"] == []


@pytest.mark.parametrize(
    "switches",
    [
        {"common_firewall": {"compute01": False}},  # not a switch of plan/services.py
        {"common_firewall_enabled": {"compute01": "no"}},  # not a boolean
        {"common_firewall_enabled": False},  # not per host
    ],
)
def test_bad_role_switches_name_the_setting(switches: dict[str, Any]) -> None:
    plan = plan_of("tier1")
    with pytest.raises(PlanError, match="audit role_switches"):
        audit(plan, collected(plan), {"role_switches": switches})


def test_a_power_limit_changed_by_hand_is_drift_with_its_rack_cost() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute01"]["gpu"]["gpus"][5]["power_limit_w"] = 500
    f = only(audit(plan, data))
    assert (f["cls"], f["check"], f["subject"], f["planned"], f["found"]) == (
        "drift",
        "gpu_power",
        "GPU 5",
        plan["gpu"]["clocks"]["power_limit_w"],
        500,
    )
    assert f["cost"].startswith(f"{500 - plan['gpu']['clocks']['power_limit_w']:+g} W")
    assert "gpucluster-gpu-clocks" in f["fix"] and "-pl" in f["fix"]


def test_persistence_and_mig_off_plan_are_drift() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute01"]["gpu"]["gpus"][0]["persistence"] = False
    data["hosts"]["compute01"]["gpu"]["gpus"][1]["mig"] = True
    result = audit(plan, data)
    assert [(f["check"], f["subject"], f["cls"]) for f in result["findings"]] == [
        ("mig", "GPU 1", "drift"),
        ("persistence", "GPU 0", "drift"),
    ]


def test_a_short_nvlink_and_a_missing_gpu_are_hardware() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute02"]["gpu"]["nvlink"][3]["active"] = 12
    del data["hosts"]["compute04"]["gpu"]["gpus"][7]
    result = audit(plan, data)
    got = {(f["host"], f["cls"], f["check"]): f for f in result["findings"]}
    assert set(got) == {("compute02", "hardware", "nvlink"), ("compute04", "hardware", "gpu_count")}
    nv = got[("compute02", "hardware", "nvlink")]
    assert (nv["subject"], nv["planned"], nv["found"]) == ("GPU 3", 18, 12)
    assert "12/18" in nv["cost"]
    assert got[("compute04", "hardware", "gpu_count")]["found"] == 7


def test_an_hca_port_down_costs_a_rail() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute03"]["hca"]["ports"][2]["state"] = "Down"
    f = only(audit(plan, data))
    assert (f["cls"], f["check"], f["subject"]) == ("hardware", "hca", "mlx5_2 port 1 (rail 2)")
    assert f["cost"].startswith("jobs on compute03 keep 7/8 of the planned rails' bandwidth")


def test_a_slow_hca_port_is_hardware() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute03"]["hca"]["ports"][0]["rate_gbps"] = 200.0
    f = only(audit(plan, data))
    assert (f["check"], f["planned"], f["found"]) == ("link_rate", 400.0, 200.0)


def test_driver_skew_names_the_odd_node_only() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    for g in data["hosts"]["compute02"]["gpu"]["gpus"]:
        g["driver_version"] = "535.161.08"
    result = audit(plan, data)
    # the driver differs from its peers, and Fabric Manager (still the peers' version) from the driver
    assert [(f["host"], f["cls"], f["check"], f["found"]) for f in result["findings"]] == [
        ("compute02", "version_skew", "driver", "535.161.08"),
        ("compute02", "version_skew", "fabric_manager", DRIVER),
    ]
    assert result["findings"][0]["planned"] == DRIVER


def test_fabric_manager_off_the_driver_is_critical_skew() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    for h in ("compute01", "compute02", "compute03", "compute04"):
        data["hosts"][h]["fabric_manager"]["version"] = "550.54.14"
    result = audit(plan, data)
    assert {f["host"] for f in result["findings"]} == {"compute01", "compute02", "compute03", "compute04"}
    assert all(f["severity"] == "critical" and "802" in f["cost"] for f in result["findings"])


def test_hca_firmware_skew() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    for p in data["hosts"]["compute04"]["hca"]["ports"]:
        p["firmware"] = "28.36.1010"
    f = only(audit(plan, data))
    assert (f["host"], f["cls"], f["check"], f["planned"]) == (
        "compute04",
        "version_skew",
        "hca_firmware",
        "28.39.1002",
    )


def test_a_cable_on_the_wrong_rail_from_the_recorded_fabric() -> None:
    """tests/data/ibnetdiscover/tier3-miscabled.txt: compute02's rail 3 on leaf05 port 5 (rail 4's leaf)."""
    plan = plan_of("tier3")
    fabric = copy.deepcopy(plan["fabric"])
    fabric["cabling"].pop("sm_links", None)  # the recording predates the subnet manager's cabled ports
    ports = ibfabric.parse_ibnetdiscover_ports((DATA / "ibnetdiscover" / "tier3-miscabled.txt").read_text())
    report = ibfabric.compare(fabric, ports, expected_rate=200)
    result = audit(plan, {**collected(plan), "fabric": report})
    cable = [f for f in result["findings"] if f["check"] == "cable"]
    assert len(cable) == 1
    f = cable[0]
    assert (f["host"], f["cls"], f["subject"], f["planned"], f["found"]) == (
        "compute02",
        "hardware",
        "mlx5_3 (rail 3)",
        "leaf04:2",
        "leaf05:5",
    )
    assert f["fix"] == "move the cable at leaf05:5 to leaf04:2"
    assert "off its planned leaf" in f["cost"]
    slow = [f for f in result["findings"] if f["check"] == "link_rate"]
    assert [(f["host"], f["subject"]) for f in slow] == [("fabric", "link compute03 mlx5_6:1 - leaf07:3")]


def test_a_replaced_hca_is_found_by_its_new_guid() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    baseline = audit(plan, data)["guids"]
    data["hosts"]["compute01"]["hca"]["ports"][4]["port_guid"] = "0xb8cef60300aa0001"
    f = only(audit(plan, {**data, "baseline": baseline}))
    assert (f["host"], f["cls"], f["check"], f["subject"], f["found"]) == (
        "compute01",
        "hardware",
        "guid",
        "mlx5_4/1",
        "0xb8cef60300aa0001",
    )


def test_slurm_gres_and_features_off_plan_and_an_unknown_node() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    nodes = data["hosts"]["head01"]["slurm"]["nodes"]
    nodes["compute01"]["gres"] = "gpu:h100:4(S:0)"
    nodes["compute02"]["features"] = "h100,infiniband"
    del nodes["compute03"]
    result = audit(plan, data)
    got = [(f["host"], f["check"], f["subject"], f["severity"]) for f in result["findings"]]
    assert got == [
        ("compute01", "slurm", "Gres", "critical"),
        ("compute02", "slurm", "features", "warning"),
        ("compute03", "slurm", "node", "critical"),
    ]
    assert result["findings"][0]["planned"] == "gpu:h100:8"
    assert result["findings"][0]["found"] == "gpu:h100:4"


def test_slurm_as_slurm_conf_says_has_no_finding_and_a_mig_node_off_plan_is_found() -> None:
    """The audit reads slurm.nodes (data): slurmctld's view of the rendered slurm.conf's NodeName lines (a
    MIG site: a line per layout, several GPU types in a Gres) matches it; a MIG node whose slurmd reports
    whole GPUs is a Gres finding naming the planned MIG types."""
    plan = cluster_plan(*load_inventory("examples/tier2-mig"))
    data = collected(plan)
    head = plan["cluster"]["head"]
    conf = render_role_template("slurm", "slurm.conf.j2", plan, head)
    seen = {}
    for line in conf.splitlines():
        if line.startswith("NodeName="):
            fields = dict(part.split("=", 1) for part in line.split())
            for node in hostlist.expand(fields["NodeName"]):
                seen[node] = {"gres": fields["Gres"] + "(S:0-1)", "features": fields["Features"], "state": "IDLE"}
    assert len({v["gres"] for v in seen.values()}) > 1 and sorted(seen) == compute_of(plan)
    data["hosts"][head]["slurm"]["nodes"] = seen
    assert audit(plan, data)["findings"] == []
    planned = seen["compute01"]["gres"].split("(")[0]
    seen["compute01"]["gres"] = "gpu:h100:8(S:0-1)"
    f = only(audit(plan, data))
    assert (f["host"], f["check"], f["subject"], f["found"]) == ("compute01", "slurm", "Gres", "gpu:h100:8")
    assert f["planned"] == ",".join(sorted(planned.split(","))) and "gpu:h100:8" not in f["planned"]


def test_recorded_scontrol_output_against_the_plan() -> None:
    """tests/data/slurm: the recorded nodes are DLC (features 'dlc'), the tier3 plan says air."""
    plan = plan_of("tier3")
    data = collected(plan)
    text = (DATA / "slurm" / "scontrol-show-node-d-oneliner-registered.txt").read_text()
    data["hosts"]["head01"]["slurm"]["nodes"] = audit_probe.parse_scontrol_nodes(text)
    result = audit(plan, data)
    assert {(f["host"], f["check"], f["subject"]) for f in result["findings"]} == {
        (f"compute0{i}", "slurm", "features") for i in range(1, 5)
    }


def test_fail_on_threshold() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["head01"]["services"]["chrony"] = {"active": "active", "enabled": "disabled"}  # a warning
    assert audit(plan, data, {"fail_on": "warning"})["failed"] is True
    assert audit(plan, data, {"fail_on": "critical"})["failed"] is False
    assert audit(plan, data, {"fail_on": "never"})["failed"] is False


def test_an_unreached_host_fails_the_audit() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    del data["hosts"]["compute04"]
    result = audit(plan, {**data, "unreachable": ["compute04"]}, {"fail_on": "critical"})
    assert result["unreachable"] == ["compute04"] and result["failed"] is True
    assert "- compute04: not audited (unreachable)" in report_markdown(result)


@pytest.mark.parametrize(
    ("settings", "field"),
    [({"fail_on": "sometimes"}, "audit_fail_on"), ({"drain_hardware": "yes"}, "audit_drain_hardware")],
)
def test_bad_settings_name_the_field(settings: dict[str, Any], field: str) -> None:
    plan = plan_of("tier1")
    with pytest.raises(PlanError) as err:
        audit(plan, collected(plan), settings)
    assert f"'{field}'" in str(err.value)
    assert next(iter(settings.values())) in str(err.value).replace("'", "")


def test_a_host_outside_the_plan_is_refused() -> None:
    plan = plan_of("tier1")
    with pytest.raises(PlanError, match="audit hosts"):
        audit(plan, {"hosts": {"stranger": {}}})


def test_drain_never_touches_a_node_someone_else_drained() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    for h in ("compute01", "compute02", "compute03"):
        data["hosts"][h]["gpu"]["nvlink"][0]["active"] = 0
    nodes = data["hosts"]["head01"]["slurm"]["nodes"]
    nodes["compute02"].update(state="IDLE+DRAIN", reason="operator: replace DIMM")
    nodes["compute03"].update(state="IDLE+DRAIN", reason=f"{DRAIN_PREFIX} hardware: nvlink GPU 0")
    result = audit(plan, data, {"drain_hardware": True, "fail_on": "never"})
    assert [d["node"] for d in result["drain"]] == ["compute01", "compute03"]
    assert all(d["reason"].startswith("gpucluster-audit: hardware: nvlink GPU 0") for d in result["drain"])
    # the health check resumes only reasons starting "gpucluster:"; the audit's are not its own
    assert not DRAIN_PREFIX.startswith("gpucluster:")
    assert audit(plan, data, {"fail_on": "never"})["drain"] == []


def test_report_has_one_line_per_finding_grouped_by_host_and_class() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute01"]["files"]["/etc/slurm/slurm.conf"] = "x"
    data["hosts"]["compute01"]["gpu"]["nvlink"][2]["active"] = 17
    data["hosts"]["compute02"]["services"]["munge"] = {"active": "failed", "enabled": "enabled"}
    result = audit(plan, data)
    md = report_markdown(result)
    lines = md.splitlines()
    assert (
        lines.index("## compute01")
        < lines.index("### drift")
        < lines.index("### hardware")
        < lines.index("## compute02")
    )
    assert sum(1 for ln in lines if ln.startswith("- **")) == len(result["findings"]) == 3
    assert "fix: run site.yml --limit compute02 (starts munge)" in md
    assert "**FAILED**" in md


def test_host_request_follows_the_roles() -> None:
    plan = plan_of("tier3")
    head = host_request(host_view(plan, "head01"), "head01")
    compute = host_request(host_view(plan, "compute01"), "compute01")
    oss = host_request(host_view(plan, "oss01"), "oss01")
    assert head["slurm_nodes"] and not compute["slurm_nodes"]
    assert {"slurmctld", "slurmdbd", "prometheus"} <= set(head["services"])
    assert "slurmd" in compute["services"] and "slurmctld" not in compute["services"]
    assert compute["gpu"] and compute["hca"] and compute["fabric_manager"]
    assert not (oss["gpu"] or oss["hca"] or oss["fabric_manager"])
    assert compute["files"] == [f["dest"] for f in files_by_host(plan)["compute01"]]
    assert head["nft_table"] == plan["firewall"]["table"]
    with pytest.raises(PlanError, match="audit host"):
        host_request(host_view(plan, "head01"), "compute99")


def test_host_request_in_the_lab_leaves_out_fabric_manager_unit() -> None:
    site, groups = load_inventory("tier1")
    site = {**site, "gpucluster_lab": {"enabled": True}}
    plan = cluster_plan(site, groups)
    req = host_request(host_view(plan, "dgx01"), "dgx01")
    assert "nvidia-fabricmanager" not in req["services"]
    assert {"slurmd", "slurmctld", "munge"} <= set(req["services"])


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_single_file_edit_is_exactly_one_drift_finding(data: st.DataObject) -> None:
    plan = plan_of("tier3")
    host = data.draw(st.sampled_from(sorted(plan["hosts"])))
    dest = data.draw(st.sampled_from([f["dest"] for f in files_by_host(plan)[host]]))
    facts = collected(plan)
    facts["hosts"][host]["files"][dest] = data.draw(st.one_of(st.none(), st.text(min_size=1, max_size=8)))
    f = only(audit(plan, facts))
    assert (f["host"], f["cls"], f["subject"], f["fix"]) == (host, "drift", dest, f"run site.yml --limit {host}")


def test_only_the_head_reads_the_job_environment_and_only_the_first_compute_node_the_layouts() -> None:
    plan = plan_of("tier3")
    reqs = {h: host_request(host_view(plan, h), h, "compute01") for h in sorted(plan["hosts"])}
    assert {h for h, r in reqs.items() if r["job_env_nodes"]} == {"head01"}
    assert reqs["head01"]["job_env_nodes"] == "compute[01-04]"  # a hostlist: O(1) in the cluster size
    assert {h for h, r in reqs.items() if r["layouts"]} == {"compute01"}
    assert reqs["compute01"]["layouts"] == {
        "kind": "lustre",
        "mount": "/lustre/aifs",
        "dirs": ["/lustre/aifs/checkpoints", "/lustre/aifs/datasets", "/lustre/aifs/home"],
    }
    # no client named (or not a compute node): nobody reads the layouts
    assert host_request(host_view(plan, "head01"), "head01", "head01")["layouts"] is None


def test_a_job_environment_override_is_drift_with_its_source_as_the_fix() -> None:
    """NCCL reads /etc/nccl.conf, and the job's own NCCL_* wins: a different value, or one the plan does not
    set, is drift; a value equal to the plan's is not."""
    plan = plan_of("tier3")
    data = collected(plan)
    nodes = data["hosts"]["head01"]["job_env"]["nodes"]
    nodes["compute02"]["NCCL_IB_HCA"] = "=mlx5_0:1"
    nodes["compute03"]["NCCL_P2P_DISABLE"] = "1"
    nodes["compute04"]["NCCL_SOCKET_IFNAME"] = plan["nccl"]["conf"]["NCCL_SOCKET_IFNAME"]  # the plan's value
    result = audit(plan, data)
    got = [(f["host"], f["cls"], f["check"], f["subject"], f["planned"], f["found"]) for f in result["findings"]]
    assert got == [
        ("compute02", "drift", "nccl_env", "NCCL_IB_HCA", plan["nccl"]["conf"]["NCCL_IB_HCA"], "=mlx5_0:1"),
        ("compute03", "drift", "nccl_env", "NCCL_P2P_DISABLE", "unset (NCCL's default)", "1"),
    ]
    first, second = result["findings"]
    assert first["fix"].startswith("remove NCCL_IB_HCA from the job environment on compute02 (/etc/environment")
    assert "not /etc/nccl.conf's =mlx5_0:1,mlx5_1:1" in first["cost"]
    assert second["cost"].endswith("the plan leaves it to NCCL on this GPU board")
    assert {f["severity"] for f in result["findings"]} == {"warning"}


def test_a_single_node_cluster_without_nccl_conf_still_checks_the_job_environment() -> None:
    """tier1 has no fabric, so no /etc/nccl.conf: any NCCL_* a job sees is an override of NCCL's default."""
    plan = plan_of("tier1")
    assert plan["nccl"]["enabled"] is False
    data = collected(plan)
    data["hosts"]["dgx01"]["job_env"]["nodes"]["dgx01"] = {"NCCL_P2P_DISABLE": "1"}
    f = only(audit(plan, data))
    assert (f["host"], f["check"], f["subject"], f["found"]) == ("dgx01", "nccl_env", "NCCL_P2P_DISABLE", "1")


def test_a_job_environment_not_read_is_unchecked_never_a_finding() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["head01"]["job_env"] = {
        "state": "error",
        "reason": "srun --label ... failed (rc 1): srun: error: Unable to allocate resources: Requested nodes are busy",
        "nodes": {},
    }
    result = audit(plan, data)
    assert result["findings"] == [] and result["failed"] is False
    assert [(u["host"], u["check"]) for u in result["unchecked"]] == [("head01", "nccl_env")]
    assert "Requested nodes are busy" in result["unchecked"][0]["reason"]
    # a node srun did not print anything for: that node is not checked
    data = collected(plan)
    del data["hosts"]["head01"]["job_env"]["nodes"]["compute04"]
    result = audit(plan, data)
    assert result["findings"] == [] and [(u["host"], u["check"]) for u in result["unchecked"]] == [
        ("compute04", "nccl_env")
    ]


def test_a_lustre_layout_reset_is_drift_fixed_by_site_yml() -> None:
    """tests/data/lfs/checkpoints_wide.yaml (a hand-made layout) on the planned checkpoint directory."""
    plan = plan_of("tier3")
    data = collected(plan)
    wide = lustre_yaml.parse_getstripe_yaml((DATA / "lfs" / "checkpoints_wide.yaml").read_text())
    data["hosts"]["compute01"]["layouts"]["dirs"]["/lustre/aifs/checkpoints"]["layout"] = wide
    recorded = lustre_yaml.parse_getstripe_yaml((DATA / "lfs" / "datasets_tier3.yaml").read_text())
    data["hosts"]["compute01"]["layouts"]["dirs"]["/lustre/aifs/datasets"]["layout"] = recorded  # as planned
    f = only(audit(plan, data))
    ckpt = plan["storage"]["lustre"]["layouts"]["checkpoints"]
    assert (f["host"], f["cls"], f["check"], f["subject"]) == ("compute01", "drift", "layout", ckpt["path"])
    assert f["planned"] == f"lfs setstripe {ckpt['setstripe_args']} {ckpt['path']}"
    assert "component 2: stripe_count -1, the plan has 8" in f["found"]
    assert f["fix"].startswith("run site.yml --limit compute01 (lustre_layout sets: lfs setstripe")
    assert "existing files keep theirs" in f["cost"]


def test_a_missing_planned_directory_is_drift_and_an_unreadable_one_unchecked() -> None:
    plan = plan_of("tier3")
    data = collected(plan)
    dirs = data["hosts"]["compute01"]["layouts"]["dirs"]
    dirs["/lustre/aifs/home"] = {"state": "missing", "reason": "no such directory", "layout": None}
    dirs["/lustre/aifs/datasets"] = {"state": "error", "reason": "lfs failed", "layout": None}
    result = audit(plan, data)
    f = only(result)
    assert (f["subject"], f["found"], f["fix"]) == (
        "/lustre/aifs/home",
        "missing",
        "run site.yml --limit compute01 (creates it with its layout)",
    )
    assert result["unchecked"] == [
        {"host": "compute01", "check": "layout /lustre/aifs/datasets", "reason": "lfs failed"}
    ]


@pytest.mark.parametrize("state", ["absent", "error"])
def test_layouts_not_read_are_unchecked(state: str) -> None:
    """The lab has no lfs (absent); a file system not mounted on the client is an error: never a finding."""
    plan = plan_of("tier3")
    data = collected(plan)
    data["hosts"]["compute01"]["layouts"] = {"state": state, "reason": f"lfs {state}"}
    result = audit(plan, data)
    assert result["findings"] == []
    assert result["unchecked"] == [{"host": "compute01", "check": "layout", "reason": f"lfs {state}"}]


def test_a_beegfs_pattern_off_the_plan_is_drift_fixed_by_the_plans_command() -> None:
    """inventories/examples/tier3-beegfs: the recorded directory pattern (1M chunks on 4 targets) on the
    planned checkpoint directory; the compute role re-applies patterns only when the plan changes them."""
    site, groups = load_inventory("examples/tier3-beegfs")
    plan = cluster_plan(site, groups)
    assert plan["storage"]["type"] == "beegfs"
    data = collected(plan)
    client = compute_of(plan)[0]
    ckpt = plan["storage"]["beegfs"]["patterns"]["checkpoints"]
    recorded = audit_probe.parse_beegfs_entryinfo((DATA / "audit" / "beegfs-getentryinfo-dir.txt").read_text())
    data["hosts"][client]["layouts"]["dirs"][ckpt["path"]]["layout"] = recorded
    f = only(audit(plan, data))
    assert (f["host"], f["cls"], f["check"], f["subject"]) == (client, "drift", "layout", ckpt["path"])
    assert f["fix"] == f"on {client}: {ckpt['command']}"
    assert f"chunksize 1048576, the plan has {ckpt['chunksize']}" in f["found"]


@pytest.mark.parametrize(
    ("probe", "check"),
    [("gpu", "gpu"), ("hca", "hca"), ("fabric_manager", "fabric_manager"), ("firewall", "firewall")],
)
def test_every_probe_that_could_not_run_is_unchecked_with_its_reason(probe: str, check: str) -> None:
    """One rule for every probe: ok is compared, skipped (not asked) is nothing, anything else is unchecked."""
    plan = plan_of("tier3")
    data = collected(plan)
    host = "compute02"
    data["hosts"][host][probe] = {"state": "error", "reason": f"{probe} timed out"}
    result = audit(plan, data)
    assert result["findings"] == []
    assert result["unchecked"] == [{"host": host, "check": check, "reason": f"{probe} timed out"}]
    data["hosts"][host][probe] = {"state": "skipped", "reason": None}
    if probe in ("fabric_manager", "firewall"):
        assert audit(plan, data)["unchecked"] == []


_NAMES = st.sampled_from(
    ["NCCL_DEBUG", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_SL", "NCCL_P2P_DISABLE", "NCCL_ALGO", "NCCL_PROTO"]
)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_job_environment_findings_are_exactly_the_overrides(data: st.DataObject) -> None:
    """For any job environment: one drift per NCCL_* whose value is not /etc/nccl.conf's (or that the plan does
    not set), none for a value equal to the plan's."""
    plan = plan_of("tier3")
    conf = plan["nccl"]["conf"]
    node = data.draw(st.sampled_from(compute_of(plan)))
    env = data.draw(
        st.dictionaries(_NAMES, st.one_of(st.sampled_from(sorted(conf.values())), st.text("=abc019:,", min_size=1)))
    )
    facts = collected(plan)
    facts["hosts"]["head01"]["job_env"]["nodes"][node] = dict(env)
    got = {(f["host"], f["subject"]) for f in audit(plan, facts)["findings"]}
    assert got == {(node, k) for k, v in env.items() if conf.get(k) != v}


def test_mig_mode_is_planned_per_gpu_and_read_from_the_hosts_slice() -> None:
    """examples/tier2-mig: compute01's GPUs all in MIG mode; compute02 leaves GPUs 4-7 whole, so its GPU 5
    in MIG mode is drift and GPU 1 out of it too; the answer is the same from a host's slice of the plan."""
    plan = cluster_plan(*load_inventory("examples/tier2-mig"))
    mig = plan["gpu"]["mig"]
    assert [mig_enabled(mig, "compute02", i) for i in range(8)] == [True] * 4 + [False] * 4
    assert all(mig_enabled(mig, "compute01", i) for i in range(8))
    view = host_view(plan, "compute02")["gpu"]["mig"]
    assert view["host_config"] == {"compute02": mig["host_config"]["compute02"]}  # narrowed to the host
    assert [mig_enabled(view, "compute02", i) for i in range(8)] == [True] * 4 + [False] * 4
    data = collected(plan)
    assert audit(plan, data)["findings"] == []
    gpus = data["hosts"]["compute02"]["gpu"]["gpus"]
    gpus[5]["mig"], gpus[1]["mig"] = True, False
    found = [(f["host"], f["check"], f["subject"], f["planned"]) for f in audit(plan, data)["findings"]]
    assert found == [("compute02", "mig", "GPU 1", True), ("compute02", "mig", "GPU 5", False)]
