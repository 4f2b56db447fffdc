"""Each host's services in the plan (plugins/plugin_utils/plan/services.py): the units the roles start on
each host of the reference tiers, the role switches the audit must be handed, and a host's view of them."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.services import (
    FIREWALL_UNIT,
    SERVICES,
    SWITCHES,
    services_plan,
)

EVERY_HOST = ["chrony", "prometheus-node-exporter", FIREWALL_UNIT]
HEAD = ["prometheus", "prometheus-alertmanager"]
#: the head role's timers on the Slurm path: the queue exporter's and the self-healing loop's (primary only)
TIMERS = ["gpucluster-slurm-metrics.timer", "gpucluster-heal.timer"]
SLURM_HEAD = [*EVERY_HOST, *HEAD, *TIMERS, "munge", "slurmctld", "slurmdbd"]
SLURM_COMPUTE = [*EVERY_HOST, "munge", "slurmd", "nvidia-fabricmanager"]
SLURM_STORAGE = [*EVERY_HOST, "munge"]

#: The planned units of each host of the reference tiers (inventories/tierN), in the plan's order.
PLANNED: dict[str, dict[str, list[str]]] = {
    "tier1": {"dgx01": [*SLURM_HEAD, "slurmd", "nvidia-fabricmanager"]},
    "tier2": {"head01": SLURM_HEAD, "compute01": SLURM_COMPUTE, "compute02": SLURM_COMPUTE, "nfs01": SLURM_STORAGE},
    "tier3": {
        "head01": SLURM_HEAD,
        **{f"compute{i:02d}": SLURM_COMPUTE for i in range(1, 5)},
        **{h: SLURM_STORAGE for h in ("mds01", "oss01", "oss02")},
    },
    "tier4": {
        "head01": SLURM_HEAD,
        "head02": [*EVERY_HOST, "munge", "slurmctld"],  # the backup controller
        **{f"compute{i:02d}": SLURM_COMPUTE for i in range(1, 9)},
        **{h: SLURM_STORAGE for h in ("mds01", "oss01", "oss02")},
    },
    "tier4-k8s": {
        "head01": [*EVERY_HOST, *HEAD],
        **{f"compute{i:02d}": [*EVERY_HOST, "nvidia-fabricmanager"] for i in range(1, 9)},
        **{h: EVERY_HOST for h in ("mds01", "oss01", "oss02")},
    },
}

_PLANS: dict[str, dict[str, Any]] = {}


def plan_of(tier: str) -> dict[str, Any]:
    if tier not in _PLANS:
        _PLANS[tier] = cluster_plan(*load_inventory(tier))
    return _PLANS[tier]


@pytest.mark.parametrize("tier", sorted(PLANNED))
def test_the_planned_units_of_each_host_of_the_reference_tiers(tier: str) -> None:
    plan = plan_of(tier)
    assert {h: [u["unit"] for u in units] for h, units in plan["services"].items()} == PLANNED[tier]
    firewall = [u for units in plan["services"].values() for u in units if u["unit"] == FIREWALL_UNIT]
    assert firewall and all(u["switch"] == "common_firewall_enabled" and u["role"] == "common" for u in firewall)


def test_the_lab_starts_no_fabric_manager_and_a_host_sees_only_its_own_units() -> None:
    site, groups = load_inventory("tier3")
    plan = cluster_plan({**site, "gpucluster_lab": {"enabled": True}}, groups)
    assert "nvidia-fabricmanager" not in [u["unit"] for u in plan["services"]["compute01"]]
    view = host_view(plan, "compute01")
    assert view["services"] == {"compute01": plan["services"]["compute01"]}
    # hosts with the same roles share one list: the plan's memory does not grow by a copy per node
    assert plan["services"]["compute01"] is plan["services"]["compute04"]


def test_services_plan_reads_only_the_sections_it_names() -> None:
    plan = plan_of("tier4")
    needs = {k: plan[k] for k in ("cluster", "hosts", "gpu", "monitoring", "slurm")}
    assert services_plan(needs) == plan["services"]


def test_the_head_timers_run_on_the_primary_controller_only() -> None:
    plan = plan_of("tier4")
    # a second host of the head group: Prometheus and Alertmanager there too, the timers on the primary only
    hosts = {**plan["hosts"], "head03": {**plan["hosts"]["head01"], "roles": ["head"]}}
    view = {"cluster": plan["cluster"], "hosts": hosts, "gpu": plan["gpu"], "monitoring": plan["monitoring"]}
    units = services_plan({**view, "slurm": plan["slurm"]})
    assert plan["slurm"]["controller"] == "head01"
    assert [u["unit"] for u in units["head01"]] == SLURM_HEAD
    assert [u["unit"] for u in units["head03"]] == [*EVERY_HOST, *HEAD, "munge", "slurmctld", "slurmdbd"]
    assert all(u["role"] == "head" for u in units["head01"] if u["unit"] in TIMERS)


def test_each_role_switch_is_the_roles_variable_with_its_default_and_the_audit_passes_it() -> None:
    named = {row.switch for row in SERVICES if row.switch}
    assert named == set(SWITCHES)
    for name, default in SWITCHES.items():
        role = next(row.role for row in SERVICES if row.switch == name)
        defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
        spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
        assert defaults[name] is default
        assert spec["argument_specs"]["main"]["options"][name]["type"] == "bool"
    # playbooks/audit.yml hands the audit every switch, per host (docs/audit.md)
    plays = yaml.safe_load((ROOT / "playbooks" / "audit.yml").read_text())
    report = next(p for p in plays if p["name"] == "Classify the differences and write the report")
    assert set(report["vars"]["_audit_role_switches"]) == set(SWITCHES)
    assert all(
        f"attribute='{name}', default={str(d).lower()}" in report["vars"]["_audit_role_switches"][name]
        for name, d in SWITCHES.items()
    )
