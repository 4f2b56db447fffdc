"""Every node's firewall (common role, plan.firewall): the table is loaded with exactly the planned
ports, those ports answer the management network, and refuse a peer outside it that still reaches
the host's ssh (so the refusal is the policy, not a missing path)."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

CONNECT = """
import socket, sys
src, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket()
s.settimeout(3)
s.bind((src, 0))
try:
    s.connect((dst, port))
    print("open")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as exc:
    print("error", exc)
"""


def _connect(host: Any, src: str, dst: str, port: int) -> str:
    """From inside ``host``: a TCP connect from ``src`` (bound) to ``dst:port``: open, timeout, refused."""
    out = host.check_output(f"python3 -c {shlex.quote(CONNECT)} {src} {dst} {port}")
    return out.strip()


def _nft(host: Any, what: str) -> list[dict[str, Any]]:
    return json.loads(host.check_output(f"nft -j list {what}"))["nftables"]


def test_every_host_loads_exactly_its_planned_ports(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    fw = plan["firewall"]
    for name, host in hosts.items():
        assert host.service("gpucluster-nftables").is_enabled, name
        assert host.service("gpucluster-nftables").is_running, name
        sets = [o["set"] for o in _nft(host, f"set inet {fw['table']} {fw['port_set']}") if "set" in o]
        assert len(sets) == 1, (name, sets)
        assert sorted(sets[0]["elem"]) == plan["hosts"][name]["firewall"]["tcp_ports"], name
        table = host.check_output(f"nft list table inet {fw['table']}")
        assert f"tcp dport @{fw['port_set']} ip saddr != {fw['management_cidr']} drop" in table, (name, table)
        assert f"tcp dport @{fw['port_set']} meta nfproto ipv6 drop" in table, (name, table)
        assert "policy accept;" in table, (name, table)


def _compute(plan: dict[str, Any]) -> str:
    return next(n for n, h in plan["hosts"].items() if "compute" in h["roles"])


def test_management_network_reaches_slurmd_and_node_exporter(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    head_name = plan["cluster"]["head"]
    compute = _compute(plan)
    src = plan["hosts"][head_name]["addresses"]["management"]
    dst = plan["hosts"][compute]["addresses"]["management"]
    for port in (6818, plan["monitoring"]["node_exporter_port"]):
        assert port in plan["hosts"][compute]["firewall"]["tcp_ports"]
        assert _connect(hosts[head_name], src, dst, port) == "open", (head_name, compute, port)


def test_outside_the_management_network_slurmd_is_dropped_ssh_is_not(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    storage = {n: h["addresses"].get("storage") for n, h in plan["hosts"].items() if h["addresses"].get("storage")}
    targets = [n for n in storage if "compute" in plan["hosts"][n]["roles"]]
    if not targets:
        pytest.skip("no compute node has a storage address (a tier without a storage network, e.g. tier1)")
    target = targets[0]
    # the head if it is on the storage network, else any other host that is
    head_name = plan["cluster"]["head"]
    sources = [head_name] if head_name in storage and head_name != target else []
    sources += [n for n in storage if n not in (target, head_name)]
    if not sources:
        pytest.skip("no second host on the storage network to connect from")
    source = sources[0]
    src, dst = storage[source], storage[target]
    # the path exists: ssh (not limited) answers on the storage address
    assert _connect(hosts[source], src, dst, 22) == "open", (source, target)
    # slurmd listens on every address; the policy drops the SYN from outside the management
    # network: a timeout (a refusal would only say that nothing listens there)
    assert 6818 in plan["hosts"][target]["firewall"]["tcp_ports"]
    assert hosts[target].socket("tcp://0.0.0.0:6818").is_listening  # "tcp://6818" would need IPv6 too
    assert _connect(hosts[source], src, dst, 6818) == "timeout", (source, target)
