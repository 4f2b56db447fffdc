"""The plan's address rules (plan/system.py check_addresses): every address on exactly one interface;
every address a client mounts or peers with configured on an interface of its server."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import system

SITES = ["tier2", "tier3", "tier4", "tier4-k8s", "examples/tier2-nvmeof", "examples/tier3-beegfs"]


def _units(plan: dict[str, Any]) -> dict[str, str]:
    """address -> "host netdev" over every host's interface units (asserting each address once)."""
    out: dict[str, str] = {}
    for host, entry in plan["hosts"].items():
        for unit in entry["network_units"]:
            address = unit["address"].split("/")[0]
            assert address not in out, (address, out.get(address), host, unit["netdev"])
            out[address] = f"{host} {unit['netdev']}"
    return out


@pytest.mark.parametrize("site", SITES)
def test_no_address_on_two_interfaces_and_every_served_address_on_its_server(site: str) -> None:
    plan = cluster_plan(*load_inventory(site))
    units = _units(plan)
    served = system.check_addresses(plan["hosts"], plan["storage"])["served"]
    assert served
    for item in served:
        assert units[item["address"]].split()[0] == item["host"], item
        assert item["netdev"] is None or units[item["address"]] == f"{item['host']} {item['netdev']}"
    # compute01: one address per storage NIC (two LNet NIDs, two addresses)
    storage = [u for u in plan["hosts"]["compute01"]["network_units"] if u["purpose"] == "storage"]
    assert len(storage) == 2 and storage[0]["address"] != storage[1]["address"]


def test_what_compute01_mounts_is_on_the_nfs_servers_storage_interface() -> None:
    plan = cluster_plan(*load_inventory("tier2"))
    (mount,) = plan["storage"]["nfs"]["client_mounts"]
    assert mount["what"] == "10.20.2.10:/export/shared"
    assert {u["netdev"]: u["address"] for u in plan["hosts"]["nfs01"]["network_units"]} == {
        "eno1": "10.20.0.11/24",
        "ibp65s0f0": "10.20.2.10/24",
    }
    compute01 = {u["netdev"]: u["address"] for u in plan["hosts"]["compute01"]["network_units"] if u["rail"] is None}
    assert compute01 == {"ibp41s0f0": "10.20.2.11/24", "ibp170s0f0": "10.20.2.12/24", "eno1": "10.20.0.12/24"}


def test_lustre_servers_lnet_is_on_their_own_interfaces() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    lu = plan["storage"]["lustre"]
    assert lu["server_lnet"]["modprobe"] == 'options lnet networks="o2ib0(ibp65s0f0,ibp65s0f1)"'
    assert lu["lnet"]["modprobe"] == 'options lnet networks="o2ib0(ibp41s0f0,ibp170s0f0)"'
    assert lu["client_mount"]["what"] == "10.30.2.10@o2ib0:/aifs"
    mds01 = {u["address"].split("/")[0]: u["netdev"] for u in plan["hosts"]["mds01"]["network_units"]}
    assert mds01["10.30.2.10"] == "ibp65s0f0"


@pytest.mark.parametrize("site", ["tier2", "tier3", "examples/tier3-beegfs", "examples/tier2-nvmeof"])
def test_a_server_without_storage_interfaces_is_an_error_before_any_host(site: str) -> None:
    raw, groups = load_inventory(site)
    raw = copy.deepcopy(raw)
    raw["gpucluster_storage"].pop("server_interfaces")
    with pytest.raises(PlanError, match=r"gpucluster_storage\.server_interfaces"):
        cluster_plan(raw, groups)


def test_one_address_on_two_interfaces_is_an_error() -> None:
    hosts = {
        "a": {"network_units": [{"netdev": "eth0", "address": "10.0.0.1/24"}]},
        "b": {"network_units": [{"netdev": "eth1", "address": "10.0.0.1/24"}]},
    }
    with pytest.raises(PlanError, match=r"gpucluster_network.*10\.0\.0\.1 is planned on a eth0, b eth1"):
        system.check_addresses(hosts, {})


def test_a_mounted_address_on_no_server_interface_is_an_error() -> None:
    hosts = {"nfs01": {"addresses": {"management": "10.0.0.2"}, "network_units": []}}
    storage = {
        "nfs": {
            "server": "nfs01",
            "server_address": "10.0.2.10",
            "client_mounts": [{"what": "10.0.2.10:/export/shared"}],
        }
    }
    with pytest.raises(PlanError, match=r"gpucluster_storage\.server_interfaces.*mounted as 10\.0\.2\.10:/export"):
        system.check_addresses(hosts, storage)
    # the management address is carried by the management interface
    storage["nfs"]["server_address"] = "10.0.0.2"
    assert system.check_addresses(hosts, storage)["served"][0]["interface"] == "management"
