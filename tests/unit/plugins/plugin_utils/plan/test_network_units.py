"""Interface units name their network (issue 38, build item 3): the common role hands the storage and
fabric units to systemd-networkd by default and never the management one (plan/system.py network_units,
roles/common/templates/network.j2)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import system
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

SITES = ["tier1", "tier2", "tier3", "tier4", "tier4-k8s", "examples/tier2-mig", "examples/tier3-beegfs"]


@pytest.mark.parametrize("site", SITES)
def test_every_unit_names_its_network_and_management_is_the_management_nic(site: str) -> None:
    plan = cluster_plan(*load_inventory(site))
    mgmt_if = None
    for host, entry in plan["hosts"].items():
        by_network: dict[str, list[dict[str, Any]]] = {}
        for unit in entry["network_units"]:
            by_network.setdefault(unit["network"], []).append(unit)
            assert unit["network"] == {"compute": "fabric"}.get(unit["purpose"], unit["purpose"]), (host, unit)
        # exactly one management unit per host, holding the address Ansible reaches the host at
        (mgmt,) = by_network["management"]
        assert mgmt["address"].split("/")[0] == entry["addresses"]["management"], host
        mgmt_if = mgmt_if or mgmt["netdev"]
        assert mgmt["netdev"] == mgmt_if, host
        assert all(u["netdev"] != mgmt_if for n in ("storage", "fabric") for u in by_network.get(n, [])), host


def test_a_storage_nic_that_is_the_management_nic_is_never_handed_over() -> None:
    nics = [
        {"netdev": "eno1", "purpose": "management", "rail": None},
        {"netdev": "eno1", "purpose": "storage", "rail": None},
        {"netdev": "ibp26s0", "purpose": "compute", "rail": 0},
    ]
    addresses = {"management": "10.0.0.5", "storage": "10.0.2.5", "rails": {"0": "10.1.0.5"}}
    units = system.network_units(addresses, system.unit_shapes(nics, {"management": 24, "storage": 24, "rail": 24}))
    assert [(u["netdev"], u["purpose"], u["network"]) for u in units] == [
        ("eno1", "management", "management"),
        ("eno1", "storage", "management"),
        ("ibp26s0", "compute", "fabric"),
    ]


def _unit(plan: dict[str, Any], host: str, network: str) -> str:
    item = next(f for f in files_by_host(plan)[host] if f["src"] == "network.j2" and f["unit"]["network"] == network)
    return render_role_template("common", "network.j2", plan, host, item=item)


def test_the_rendered_units() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    rail = _unit(plan, "compute01", "fabric")
    lines = [line for line in rail.splitlines() if not line.startswith("#")]
    assert lines[lines.index("[Link]") :] == ["[Link]", "RequiredForOnline=no"]
    storage = _unit(plan, "compute01", "storage")
    assert "RequiredForOnline" not in storage and "[Link]" not in storage
    mgmt = _unit(plan, "compute01", "management")
    assert "For review only: never handed to systemd-networkd" in mgmt
