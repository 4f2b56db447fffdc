"""Slurm policy from the plan: priority weights, QOS GPU limits, one account per team, node features."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import accounting


def _plan(tier: str = "tier2", **overrides: Any) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site.update(overrides)
    return cluster_plan(site, groups)


def _acct(tier: str = "tier2", **overrides: Any) -> dict[str, Any]:
    return _plan(tier, **overrides)["slurm"]["accounting"]


def test_defaults_are_multifactor_fair_share_with_enforced_limits() -> None:
    a = _acct()
    assert a["priority_type"] == "priority/multifactor"
    assert a["weights"] == {"fairshare": 10000, "qos": 5000, "age": 1000, "job_size": 0, "partition": 0}
    assert a["enforce"] == "associations,limits,qos"
    assert (a["preempt_type"], a["preempt_mode"]) == ("preempt/qos", "REQUEUE")
    assert a["billing_weights"] == "GRES/gpu=1.0"


@pytest.mark.parametrize(("tier", "high", "preemptible"), [("tier2", 4, 8), ("tier3", 8, 16), ("tier4", 16, 32)])
def test_qos_gpu_limits_follow_the_cluster_size(tier: str, high: int, preemptible: int) -> None:
    qos = {q["name"]: q for q in _acct(tier)["qos"]}
    assert sorted(qos) == ["gpucluster-check", "high", "normal", "preemptible"]
    assert qos["high"]["grp_gpus"] == high and qos["high"]["max_gpus_per_user"] == high
    assert qos["preemptible"]["max_gpus_per_user"] == preemptible and qos["preemptible"]["grp_gpus"] is None
    assert qos["normal"]["grp_gpus"] is None and qos["normal"]["max_gpus_per_user"] is None
    # only the preemptible QOS is preempted, by both others, and it is requeued
    assert qos["high"]["preempt"] == qos["normal"]["preempt"] == ["preemptible"]
    assert qos["preemptible"]["preempt_mode"] == "requeue"
    assert qos["high"]["preempt_mode"] == qos["normal"]["preempt_mode"] == "cluster"
    assert qos["high"]["priority"] > qos["normal"]["priority"] > qos["preemptible"]["priority"]


def test_one_account_per_team_with_its_share_users_and_gpu_cap() -> None:
    plan = _plan("tier3")
    accounts = {a["name"]: a for a in plan["slurm"]["accounting"]["accounts"]}
    assert (
        list(accounts)
        == [t["name"] for t in plan["tenants"]] + ["root"]
        == ["research", "product", "evaluation", "root"]
    )
    accounts.pop("root")  # the maintenance QOS's (test_the_maintenance_qos_is_roots_alone)
    assert [a["fairshare"] for a in accounts.values()] == [50, 30, 20]
    assert accounts["research"]["users"] == ["alice", "bob"]
    # research may borrow the whole cluster: no cap; product: 10 guaranteed (9.6, the largest remainder
    # of 50/30/20 % of 32 gets the spare GPU) + 8 borrowed of 32; evaluation borrows nothing: capped at
    # its 6 guaranteed GPUs
    assert accounts["research"]["grp_gpus"] is None
    assert accounts["product"]["grp_gpus"] == 18
    assert accounts["evaluation"]["grp_gpus"] == 6
    assert all(a["default_qos"] == "normal" and "normal" in a["qos"] for a in accounts.values())


def test_without_teams_every_job_goes_to_one_default_account() -> None:
    a = _acct("tier1")
    assert [x["name"] for x in a["accounts"]] == ["general", "root"]
    assert a["accounts"][0]["users"] == [] and a["accounts"][0]["grp_gpus"] is None
    assert [x["name"] for x in _acct("tier1", gpucluster_slurm={"default_account": "lab"})["accounts"]] == [
        "lab",
        "root",
    ]


def test_inventory_overrides_weights_qos_and_preemption() -> None:
    a = _acct(
        gpucluster_slurm={
            "priority_weights": {"age": 0, "fairshare": 20000},
            "preempt_mode": "cancel",
            "decay_half_life_days": 14,
            "qos": [
                {"name": "high", "grp_gpus_percent": 50},
                {"name": "debug", "priority": 50, "preempt": ["preemptible"], "max_gpus_per_user_percent": 12.5},
            ],
        }
    )
    assert a["weights"]["age"] == 0 and a["weights"]["fairshare"] == 20000 and a["weights"]["qos"] == 5000
    assert a["preempt_mode"] == "CANCEL" and a["decay_half_life"] == "14-0"
    qos = {q["name"]: q for q in a["qos"]}
    assert qos["high"]["grp_gpus"] == 8 and qos["high"]["max_gpus_per_user"] == 4  # 50 % of 16; rest kept
    assert qos["debug"]["max_gpus_per_user"] == 2 and qos["preemptible"]["preempt_mode"] == "cancel"
    assert "debug" in a["accounts"][0]["qos"]


def test_preemption_off_uses_preempt_none_and_no_qos_preempts() -> None:
    a = _acct(gpucluster_slurm={"preempt_mode": "off"})
    assert (a["preempt_type"], a["preempt_mode"]) == ("preempt/none", "OFF")
    assert all(q["preempt"] == [] and q["preempt_mode"] == "cluster" for q in a["qos"])


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ({"preempt_mode": "suspend"}, "gpucluster_slurm.preempt_mode", "suspend"),
        ({"priority_weights": {"fairshare": -1}}, "gpucluster_slurm.priority_weights.fairshare", -1),
        ({"priority_weights": {"fairshare": 2**32}}, "gpucluster_slurm.priority_weights.fairshare", 2**32),
        ({"qos": [{"name": "high", "grp_gpus_percent": 150}]}, "gpucluster_slurm.qos[high].grp_gpus_percent", 150),
        ({"qos": [{"name": "high", "grp_gpus_percent": 0}]}, "gpucluster_slurm.qos[high].grp_gpus_percent", 0),
        ({"qos": [{"name": "high", "preempt": ["nosuch"]}]}, "gpucluster_slurm.qos[high].preempt", "nosuch"),
        ({"qos": [{"name": "high", "preempt": ["high"]}]}, "gpucluster_slurm.qos[high].preempt", "high"),
        ({"default_account": "research"}, "gpucluster_slurm.default_account", "research"),
    ],
)
def test_bad_policy_names_the_field_and_value(section: dict[str, Any], field: str, value: Any) -> None:
    with pytest.raises(PlanError) as err:
        _acct(gpucluster_slurm=section)
    assert err.value.field == field and err.value.value == value
    assert err.value.allowed


def test_unknown_keys_are_refused_by_the_schema() -> None:
    with pytest.raises(PlanError) as err:
        _acct(gpucluster_slurm={"priority_weight": {"age": 1}})
    assert "gpucluster_slurm" in str(err.value)


def test_nodes_carry_gpu_fabric_unit_and_cooling_features() -> None:
    assert _acct("tier2")["node_features"] == [
        {"nodes": "compute[01-02]", "features": ["h100", "infiniband", "su01", "air"]}
    ]
    assert _acct("tier4")["node_features"][0]["features"][-1] == "dlc"
    assert _acct("tier1")["node_features"] == [{"nodes": "dgx01", "features": ["h100", "air"]}]  # no fabric, no SU


def test_nodes_in_different_scalable_units_get_their_own_node_lines() -> None:
    plan = _plan("tier2")
    units = plan["fabric"]["cabling"]["scalable_units"]
    units[:] = [dict(units[0], hosts=["compute01"]), dict(units[0], name="su02", hosts=["compute02"])]
    groups = accounting.accounting_plan(None, plan)["node_features"]
    assert groups == [
        {"nodes": "compute01", "features": ["h100", "infiniband", "su01", "air"]},
        {"nodes": "compute02", "features": ["h100", "infiniband", "su02", "air"]},
    ]
    # the plan's node lines were made before the units changed: one line, both nodes
    assert [(n["nodes"], n["features"]) for n in plan["slurm"]["nodes"]] == [
        ("compute[01-02]", ["h100", "infiniband", "su01", "air"])
    ]


def test_slurm_conf_renders_the_policy() -> None:
    plan = _plan("tier2")
    text = render_role_template("slurm", "slurm.conf.j2", plan, "head01")
    lines = set(text.splitlines())
    for line in (
        "PriorityType=priority/multifactor",
        "PriorityWeightFairshare=10000",
        "PriorityWeightQOS=5000",
        "PreemptType=preempt/qos",
        "PreemptMode=REQUEUE",
        "AccountingStorageEnforce=associations,limits,qos",
    ):
        assert line in lines, line
    parts = [x for x in lines if x.startswith("PartitionName=")]
    assert parts and all('TRESBillingWeights="GRES/gpu=1.0"' in p for p in parts)


#: slurm.conf's NodeName keys, in the line's order, and the ``slurm.nodes[]`` field each writes
NODE_KEYS = {
    "NodeName": "nodes",
    "CPUs": "cpus",
    "Boards": "boards",
    "SocketsPerBoard": "sockets_per_board",
    "CoresPerSocket": "cores_per_socket",
    "ThreadsPerCore": "threads_per_core",
    "RealMemory": "real_memory",
    "Gres": "gres",
    "Features": "features",
    "State": "state",
}


@pytest.mark.parametrize("name", ["tier1", "tier4", "examples/tier2-mig", "examples/tier1-rtxpro6000"])
def test_slurm_conf_writes_a_node_line_per_entry_of_slurm_nodes(name: str) -> None:
    """slurm.nodes is data (issue 31): slurm.conf.j2 writes one NodeName line per entry, in the plan's
    order, every key in slurm.conf's order, the line's values the entry's (Features comma-joined)."""
    plan = cluster_plan(*load_inventory(name))
    nodes = plan["slurm"]["nodes"]
    text = render_role_template("slurm", "slurm.conf.j2", plan, plan["cluster"]["head"])
    lines = [line for line in text.splitlines() if line.startswith("NodeName=")]
    assert len(lines) == len(nodes) >= 1
    for line, node in zip(lines, nodes, strict=True):
        pairs = [part.split("=", 1) for part in line.split(" ")]
        assert [k for k, _ in pairs] == list(NODE_KEYS)
        want = {k: ",".join(node[f]) if f == "features" else str(node[f]) for k, f in NODE_KEYS.items()}
        assert dict(pairs) == want
    assert set(nodes[0]) == set(NODE_KEYS.values())
    # the line before the node lines is a blank one, the partitions follow the last one directly
    after = text.split(lines[-1] + "\n", 1)[1]
    assert after.startswith("PartitionName=") and text.split(lines[0], 1)[0].endswith("\n\n")
    if name == "examples/tier2-mig":
        assert len({n["gres"] for n in nodes}) > 1  # a MIG layout is a node shape of its own


def test_accounting_plan_without_tenants_key_is_the_default_account() -> None:
    plan = _plan("tier2")
    plan.pop("tenants")
    assert [a["name"] for a in accounting.accounting_plan(None, plan)["accounts"]] == ["general", "root"]


@pytest.mark.parametrize("tier", ["tier1", "tier3"])
def test_the_maintenance_qos_is_roots_alone(tier: str) -> None:
    """The active checks' QOS (plan healing.active.qos): priority 0, never preempts, never preempted, no
    limits; root's account lists it, no team's does."""
    plan = _plan(tier)
    acct = plan["slurm"]["accounting"]
    qos = {q["name"]: q for q in acct["qos"]}
    check = qos[accounting.MAINTENANCE_QOS]
    assert plan["healing"]["active"]["qos"] == accounting.MAINTENANCE_QOS
    assert (check["priority"], check["preempt"], check["preempt_mode"]) == (0, [], "cluster")
    assert check["grp_gpus"] is None and check["max_gpus_per_user"] is None
    assert all(accounting.MAINTENANCE_QOS not in q["preempt"] for q in qos.values())
    by_name = {a["name"]: a for a in acct["accounts"]}
    assert by_name["root"]["users"] == ["root"] and accounting.MAINTENANCE_QOS in by_name["root"]["qos"]
    assert by_name["root"]["default_qos"] == "normal"
    assert all(accounting.MAINTENANCE_QOS not in a["qos"] for n, a in by_name.items() if n != "root")


def test_a_site_qos_cannot_take_the_maintenance_name() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_slurm\.qos"):
        _acct("tier2", gpucluster_slurm={"qos": [{"name": "gpucluster-check", "priority": 5}]})
