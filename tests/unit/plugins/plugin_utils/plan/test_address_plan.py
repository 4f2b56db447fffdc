"""Address plan (ipaddress): one subnet per rail, unique addresses, pool errors."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import addresses
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.addresses import address_plan, etc_hosts_entries

POOLS = {
    "management": {"cidr": "10.30.0.0/24", "first_offset": 10},
    "bmc": {"cidr": "10.30.1.0/24", "first_offset": 10},
    "storage": {"cidr": "10.30.2.0/24", "first_offset": 10},
    "fabric": {"cidr": "10.31.0.0/16", "rail_prefix": 24, "first_offset": 10},
}


def hosts(computes: int) -> list[dict]:
    return (
        [{"name": "head01", "roles": ["head"]}, {"name": "oss01", "roles": ["storage"]}]
        + [{"name": f"compute{i:02d}", "roles": ["compute"]} for i in range(1, computes + 1)]
    )  # fmt: skip


def test_tier3_addresses() -> None:
    plan = address_plan(pools=POOLS, hosts=hosts(4), rails=8)
    assert plan["hosts"]["head01"]["management"] == "10.30.0.10"
    assert plan["hosts"]["compute01"]["management"] == "10.30.0.12"
    assert "storage" not in plan["hosts"]["head01"]
    assert plan["hosts"]["oss01"]["storage"] == "10.30.2.10"
    assert plan["hosts"]["compute02"]["rails"]["3"] == "10.31.3.11"  # rail 3 subnet, compute index 1
    assert [r["cidr"] for r in plan["rails"]][:2] == ["10.31.0.0/24", "10.31.1.0/24"]
    assert etc_hosts_entries(plan, "c.internal")[0] == ["10.30.0.10", "head01.c.internal", "head01"]


def test_overlapping_pools_name_both() -> None:
    pools = {**POOLS, "bmc": {"cidr": "10.30.0.128/25"}}
    with pytest.raises(PlanError, match=r"gpucluster_network\.bmc\.cidr.*gpucluster_network\.management"):
        address_plan(pools=pools, hosts=hosts(2), rails=8)


def test_exhausted_pool() -> None:
    pools = {**POOLS, "management": {"cidr": "10.30.0.0/28", "first_offset": 10}}
    with pytest.raises(PlanError, match=r"gpucluster_network\.management\.cidr.*room for 6 hosts"):
        address_plan(pools=pools, hosts=hosts(4), rails=8)


def test_fabric_too_small_for_rails() -> None:
    pools = {**POOLS, "fabric": {"cidr": "10.31.0.0/22", "rail_prefix": 24}}
    with pytest.raises(PlanError, match=r"gpucluster_network\.fabric\.cidr.*8 rail subnets"):
        address_plan(pools=pools, hosts=hosts(2), rails=8)


def test_bad_cidr() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_network\.management\.cidr"):
        address_plan(pools={**POOLS, "management": {"cidr": "10.30.0.5/24"}}, hosts=hosts(1), rails=0)


@given(computes=st.integers(1, 200), rails=st.integers(0, 8))
def test_addresses_unique_and_inside_their_pools(computes: int, rails: int) -> None:
    plan = address_plan(pools=POOLS, hosts=hosts(computes), rails=rails)
    seen: set[str] = set()
    for entry in plan["hosts"].values():
        for pool in ("management", "bmc", "storage"):
            if pool in entry:
                assert ipaddress.ip_address(entry[pool]) in ipaddress.ip_network(POOLS[pool]["cidr"])
                assert entry[pool] not in seen
                seen.add(entry[pool])
        for rail, address in entry.get("rails", {}).items():
            assert ipaddress.ip_address(address) in ipaddress.ip_network(plan["rails"][int(rail)]["cidr"])
            assert address not in seen
            seen.add(address)


def test_each_storage_interface_gets_its_own_address() -> None:
    """A DGX's two storage NICs are two LNet NIDs: two addresses, never one address on both."""
    given_hosts = [
        {"name": "head01", "roles": ["head"]},
        {"name": "oss01", "roles": ["storage"], "storage_nics": ["ib0", "ib1"]},
        {"name": "compute01", "roles": ["compute"], "storage_nics": ["ibp41s0f0", "ibp170s0f0"]},
        {"name": "compute02", "roles": ["compute"]},  # no storage NIC listed: one address, as before
    ]
    plan = address_plan(pools=POOLS, hosts=given_hosts, rails=0)
    assert plan["hosts"]["oss01"]["storage_interfaces"] == {"ib0": "10.30.2.10", "ib1": "10.30.2.11"}
    assert plan["hosts"]["oss01"]["storage"] == "10.30.2.10"  # the first: what clients name the host by
    assert plan["hosts"]["compute01"]["storage_interfaces"] == {"ibp41s0f0": "10.30.2.12", "ibp170s0f0": "10.30.2.13"}
    assert (
        plan["hosts"]["compute02"]["storage"] == "10.30.2.14" and "storage_interfaces" not in plan["hosts"]["compute02"]
    )


def test_storage_pool_too_small_for_the_interfaces() -> None:
    pools = {**POOLS, "storage": {"cidr": "10.30.2.0/29", "first_offset": 1}}  # 6 usable from .1
    many = [{"name": f"compute{i}", "roles": ["compute"], "storage_nics": ["a", "b"]} for i in range(4)]
    with pytest.raises(PlanError, match=r"gpucluster_network\.storage\.cidr.*room for 8 hosts"):
        address_plan(pools=pools, hosts=many, rails=0)


@given(st.lists(st.integers(0, 4), min_size=1, max_size=20))
def test_storage_addresses_are_unique_per_interface(nics: list[int]) -> None:
    given_hosts = [
        {
            "name": f"h{i}",
            "roles": ["storage" if i % 3 == 0 else "compute"],
            "storage_nics": [f"s{j}" for j in range(n)],
        }
        for i, n in enumerate(nics)
    ]
    plan = address_plan(pools=POOLS, hosts=given_hosts, rails=0)
    per_nic = [a for h in plan["hosts"].values() for a in (h.get("storage_interfaces") or {}).values()]
    firsts = [h["storage"] for h in plan["hosts"].values() if "storage_interfaces" not in h]
    assert len(per_nic) == sum(nics) and len(set(per_nic + firsts)) == len(per_nic + firsts)


@given(st.integers(0, 2**32 - 1))
def test_a_dotted_quad_is_the_standard_librarys(value: int) -> None:
    assert addresses._dotted(value) == str(ipaddress.IPv4Address(value))


@given(
    st.sampled_from(["10.0.0.0/16", "10.20.0.0/22", "192.168.7.0/24", "10.1.2.0/28", "10.255.255.0/24"]),
    st.integers(1, 600),
    st.integers(0, 1500),
)
def test_a_run_of_addresses_is_take_one_by_one(cidr: str, offset: int, count: int) -> None:
    """_run gives _take's addresses for indexes 0..count-1 (across /24 blocks), or None where one does not fit."""
    net = ipaddress.IPv4Network(cidr)
    try:
        expected: list[str] | None = [addresses._take(net, offset, i, "f", count) for i in range(count)]
    except PlanError:
        expected = None
    assert addresses._run(net, offset, count) == expected


@given(st.lists(st.integers(0, 2**32 - 1), max_size=30))
def test_etc_hosts_is_in_address_order(values: list[int]) -> None:
    plan = {"hosts": {f"h{i}": {"management": addresses._dotted(v)} for i, v in enumerate(values)}}
    rows = etc_hosts_entries(plan, "c.internal")  # type: ignore[arg-type]
    assert [r[0] for r in rows] == [str(a) for a in sorted(ipaddress.IPv4Address(v) for v in values)]
    assert rows == sorted(rows, key=lambda r: ipaddress.IPv4Address(r[0]))  # a stable sort: ties keep plan order
