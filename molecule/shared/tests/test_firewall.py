"""Every node's firewall (common role, plan.firewall): the table is loaded with drop policies and
exactly the planned ports and networks; those ports answer the management network and refuse a peer
outside it that still reaches the host's ssh (so the refusal is the policy, not a missing path); a
port outside the list answers the cluster's networks and is dropped from an address outside them
and over IPv6. And the DCGM host engine is no network service a tenant could reach."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import hosts_with

CONNECT = """
import socket, sys
src, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
family, kind, proto, _name, address = socket.getaddrinfo(dst, port, type=socket.SOCK_STREAM)[0]
s = socket.socket(family, kind, proto)
s.settimeout(3)
if src != "-":
    s.bind((src, 0))
try:
    s.connect(address)
    print("open")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as exc:
    print("error", exc)
"""

#: A port on none of the lists (not limited, not open to all): the policy's default decides it.
PROBE_PORT = 18473
#: An address outside every cluster network (TEST-NET-1, RFC 5737): the lab host takes it on the lab's
#: management bridge for the time of a test, so its packets reach the nodes over the real path.
OUTSIDE = "192.0.2.10"


def _connect(host: Any, src: str, dst: str, port: int) -> str:
    """From inside ``host``: a TCP connect from ``src`` (bound; ``-``: any) to ``dst:port``
    (an IPv6 link-local address with its ``%interface``): open, timeout, refused."""
    out = host.check_output(f"python3 -c {shlex.quote(CONNECT)} {src} {shlex.quote(dst)} {port}")
    return out.strip()


def _connect_here(src: str, dst: str, port: int) -> str:
    """The same from the lab host itself."""
    s = socket.socket()
    s.settimeout(3)
    s.bind((src, 0))
    try:
        s.connect((dst, port))
        return "open"
    except TimeoutError:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"
    finally:
        s.close()


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


def test_input_and_forward_drop_by_default_ipv4_and_ipv6(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """The loaded table's chains (nft -j): input drops what it does not accept, forward too (a node is
    no router; the Kubernetes path keeps forwarding for its CNI: plan.firewall.forward_policy)."""
    fw = plan["firewall"]
    assert fw["input_policy"] == "drop"
    assert fw["forward_policy"] == ("accept" if plan["cluster"]["scheduler"] == "kubernetes" else "drop")
    for name, host in hosts.items():
        objects = _nft(host, f"table inet {fw['table']}")
        chains = {o["chain"]["name"]: o["chain"] for o in objects if "chain" in o}
        assert chains["input"]["hook"] == "input" and chains["input"]["policy"] == "drop", name
        assert chains["forward"]["hook"] == "forward", name
        assert chains["forward"]["policy"] == fw["forward_policy"], name
        # the table is inet: one policy for IPv4 and IPv6 (no other family's table of ours)
        assert chains["input"]["family"] == "inet", name
        # the cluster networks the host accepts are the plan's, nothing more
        (cluster,) = [o["set"] for o in objects if "set" in o and o["set"]["name"] == fw["cluster_set"]]
        nets = [f"{e['prefix']['addr']}/{e['prefix']['len']}" for e in cluster["elem"]]
        assert nets == plan["hosts"][name]["firewall"]["accept_ipv4"], name


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


LISTEN = """
import socket, sys, time
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", int(sys.argv[1])))
s.listen(64)
time.sleep(300)
"""


@contextlib.contextmanager
def _listener(host: Any, port: int) -> Iterator[None]:
    """A TCP service on every IPv4 and IPv6 address of ``host`` (one dual-stack socket on ``::``; the
    kernel completes the handshake from its backlog), for the time of a test: a transient unit."""
    unit = f"gpucluster-fwtest-{port}"
    host.run(f"systemctl stop {unit} 2>/dev/null; systemctl reset-failed {unit} 2>/dev/null")
    host.check_output(f"systemd-run --unit={unit} --collect python3 -c {shlex.quote(LISTEN)} {port}")
    try:
        host.check_output(
            f"for i in $(seq 50); do ss -Hltn 'sport = :{port}' | grep -q . && exit 0; sleep 0.1; done; exit 1"
        )
        yield
    finally:
        host.run(f"systemctl stop {unit}")


def _target(plan: dict[str, Any]) -> str:
    """A compute node that is not the head (tier1's one host is both: then that host)."""
    nodes = [n for n in hosts_with(plan, "compute") if n != plan["cluster"]["head"]]
    return (nodes or hosts_with(plan, "compute"))[0]


def _bridge(plan: dict[str, Any]) -> str | None:
    """The lab host's interface on the lab's management network (lab/create.yml's podman network)."""
    if not shutil.which("podman") or not shutil.which("ip"):
        return None
    run = subprocess.run(
        ["podman", "network", "inspect", f"gpucluster-{plan['cluster']['name']}", "--format", "{{.NetworkInterface}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return run.stdout.strip() or None


def test_a_port_off_the_lists_answers_the_cluster_and_is_dropped_from_outside(
    hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    """A listening service on a port no rule names: a cluster address reaches it, an address outside
    every cluster network does not (its SYN is dropped: a timeout), while ssh answers that same address
    over the same path. Today's policy accept would let it through."""
    target = _target(plan)
    dst = plan["hosts"][target]["addresses"]["management"]
    assert PROBE_PORT not in plan["hosts"][target]["firewall"]["tcp_ports"]
    assert PROBE_PORT not in plan["firewall"]["open_tcp_ports"]
    assert not any(
        ipaddress.ip_address(OUTSIDE) in ipaddress.ip_network(n)
        for h in plan["hosts"].values()
        for n in h["firewall"]["accept_ipv4"]
    )
    bridge = _bridge(plan)
    if bridge is None:
        pytest.skip("no podman network of the lab on this host to send from an outside address")
    head = plan["cluster"]["head"]
    src = plan["hosts"][head]["addresses"]["management"]
    with _listener(hosts[target], PROBE_PORT):
        if head != target:
            assert _connect(hosts[head], src, dst, PROBE_PORT) == "open", (head, target)
        subprocess.run(["ip", "addr", "add", f"{OUTSIDE}/32", "dev", bridge], check=True)
        try:
            # the path exists: ssh (open to all) answers the outside address (the node's default route
            # is the lab host, so the answer comes back)
            assert _connect_here(OUTSIDE, dst, 22) == "open", (bridge, target)
            assert _connect_here(OUTSIDE, dst, PROBE_PORT) == "timeout", (bridge, target)
            # and the cluster's own services all the more
            assert _connect_here(OUTSIDE, dst, plan["monitoring"]["node_exporter_port"]) == "timeout"
        finally:
            subprocess.run(["ip", "addr", "del", f"{OUTSIDE}/32", "dev", bridge], check=False)


def _link_local(host: Any, address: str) -> tuple[str, str | None]:
    """(interface, its IPv6 link-local address or None) of the interface holding IPv4 ``address``."""
    line = host.check_output(f"ip -o -4 addr show to {address}/32").split()
    iface = line[1]
    out = host.check_output(f"ip -o -6 addr show dev {iface} scope link").split()
    ll = next((w.split("/")[0] for w in out if w.startswith("fe80:")), None)
    return iface, ll


def test_ipv6_to_a_listening_service_is_dropped(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """The cluster speaks IPv4: over IPv6 (link-local, on the management link) the same listener is
    dropped while ssh still answers on that path (which needs neighbour discovery: RFC 4890's ICMPv6
    gets through). No ping: the lab's containers lack CAP_NET_RAW."""
    target = _target(plan)
    head = plan["cluster"]["head"]
    if head == target:
        pytest.skip("one host only (tier1): no second host on the link to send from")
    _iface, ll = _link_local(hosts[target], plan["hosts"][target]["addresses"]["management"])
    src_iface, src_ll = _link_local(hosts[head], plan["hosts"][head]["addresses"]["management"])
    if ll is None or src_ll is None:
        pytest.skip("the lab's management interfaces have no IPv6 link-local address")
    dst = f"{ll}%{src_iface}"
    with _listener(hosts[target], PROBE_PORT):
        assert _connect(hosts[head], "-", dst, 22) == "open", (head, target, dst)
        assert _connect(hosts[head], "-", dst, PROBE_PORT) == "timeout", (head, target, dst)


# --- the DCGM host engine (compute role, plan.dcgm.hostengine) ------------------------------------


def _tenant(plan: dict[str, Any]) -> str:
    """A tenant's user (the first team's first; created like test_containers.py does), else nobody."""
    team = next((t for t in plan.get("tenants") or [] if t.get("users")), None)
    return team["users"][0] if team else "nobody"


def test_the_dcgm_host_engine_is_no_network_service(hosts: dict[str, Any], plan: dict[str, Any]) -> None:
    """nv-hostengine runs on a root-only unix socket (its drop-in: --domain-socket, RuntimeDirectory
    0700): nothing listens on its TCP port 5555, a tenant cannot connect there, and where the socket's
    folder exists (a node with DCGM) a tenant cannot enter it. The lab has no DCGM: the drop-in is
    written (test_files.py) and the port stays closed."""
    h = plan["dcgm"]["hostengine"]
    user = _tenant(plan)
    for name in hosts_with(plan, "compute"):
        host = hosts[name]
        if user != "nobody":
            host.check_output(
                f"getent passwd {user} >/dev/null || "
                f"useradd --uid 3917 --no-create-home --shell /usr/sbin/nologin {user}"
            )
        dropin = host.file("/etc/systemd/system/nvidia-dcgm.service.d/gpucluster.conf")
        assert dropin.exists and f"--domain-socket {h['socket']}" in dropin.content_string, name
        assert host.check_output(f"ss -Hltn 'sport = :{h['tcp_port']}'") == "", name
        probe = f"python3 -c {shlex.quote(CONNECT)} - 127.0.0.1 {h['tcp_port']}"
        assert host.check_output(f"runuser -u {user} -- {probe}").strip() != "open", name
        folder = host.file(h["socket_dir"])
        if folder.exists:
            assert folder.user == "root" and folder.mode == 0o700, name
            assert host.run(f"runuser -u {user} -- ls {h['socket_dir']}").rc != 0, name
            assert host.run(f"runuser -u {user} -- test -S {h['socket']}").rc != 0, name
