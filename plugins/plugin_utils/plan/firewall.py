"""Every node's firewall: default-drop input and forward chains for IPv4 and IPv6 (one nftables
``inet`` table), the cluster's own networks open between its hosts, and the cluster's own service
ports limited to the management network.

The input chain (policy drop) accepts, in this order:

1. loopback, and packets of connections the host made or accepted (conntrack established/related;
   invalid ones are dropped);
2. the limited ports: from the management network (and the host itself) only, dropped from
   everywhere else (IPv6 to them always);
3. ICMP: IPv4's echo request and the errors PMTU discovery and traceroute need; ICMPv6 as RFC 4890
   section 4.4 asks of a host's own traffic (https://www.rfc-editor.org/rfc/rfc4890#section-4.4):
   the errors (destination unreachable, packet too big, time exceeded, parameter problem), echo, and
   neighbour discovery and MLD with the hop limit 255 / link-local source the RFCs require (RFC 4861
   section 7.1.1, RFC 3810 section 5);
4. ssh (22), from anywhere: who reaches it is the site's perimeter (IPv4 and IPv6);
5. the host's own cluster networks (``accept_ipv4``, per host: the management network, the storage
   network where the host has a storage address, the fabric's rail subnets where it has rail
   addresses): MPI, NCCL's bootstrap and socket transports, srun's and slurmstepd's I/O ports
   (https://slurm.schedmd.com/slurm.conf.html#OPT_SrunPortRange: unset, any port), PMIx, NFS, LNet,
   BeeGFS pick ports at run time, so traffic between the cluster's hosts stays open apart from the
   limited ports. The BMC network is not one of them: a host talks to BMCs, BMCs never to a host.

Everything else is dropped: any other port from any other address, and every other IPv6 packet (the
cluster speaks IPv4; the plan gives no host an IPv6 address). No DHCP client rule: the address plan
gives every interface a static address (common role, network.j2); a DHCP client receives its offers
on a packet socket before netfilter, and its unicast renewals' answers are conntrack-established.

Forward (policy drop): a node is no router. Job containers (runc ``--rootless`` bundles, Enroot) share
the host's network namespace (no veth, nothing forwarded: docs/containers.md). A Kubernetes cluster
keeps ``accept``: its CNI forwards the pods' traffic through the host, and Kubernetes' own isolation
there is NetworkPolicy (https://kubernetes.io/docs/concepts/cluster-administration/networking/).

The limited ports, per host from its roles (a host with several roles gets the union; tier1's one
host is head, compute and storage at once):

- every host: node-exporter 9100 (the common role runs it everywhere; the head's Prometheus scrapes it);
- head: slurmctld 6817, slurmdbd 6819, Prometheus 9090, Alertmanager 9093, Grafana 3000 (the plan
  always provisions Grafana on the head; the port is closed to all but the management network whether
  or not the site installs it);
- slurm_backup (a backup Slurm controller, slurm/ha.py): slurmctld 6817;
- compute: slurmd 6818, dcgm-exporter 9400.

The common role renders the policy (roles/common/templates/nftables-gpucluster.nft.j2) from these
values alone: no address arithmetic in the template. No I/O; pure functions.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import choices as groups
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alerts import GRAFANA_PORT
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.prometheus import (
    ALERTMANAGER_PORT,
    DCGM_EXPORTER_PORT,
    NODE_EXPORTER_PORT,
    PROMETHEUS_PORT,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMDBD_PORT,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import (
    FirewallSection,
    HostAddresses,
    HostFirewall,
    NetworkSection,
)

#: The nftables table the common role owns (``inet``: one table for IPv4 and IPv6,
#: https://wiki.nftables.org/wiki-nftables/index.php/Nftables_families#inet).
TABLE = "gpucluster"
#: Its named set of the limited TCP ports (what the lab's check reads back with ``nft -j``).
PORT_SET = "management_tcp"
#: Its named set of the host's own cluster networks (IPv4, interval set).
CLUSTER_SET = "cluster_ipv4"
#: The file the policy is written to and loaded from (``nft -f``), and the unit that loads it.
POLICY_FILE = "/etc/gpucluster/nftables.nft"
UNIT = "gpucluster-nftables.service"
#: ssh: open from anywhere (the site's perimeter decides who reaches it).
SSH_PORT = 22

#: IPv4 ICMP accepted (nft names): ping, and the errors PMTU discovery (fragmentation needed is a
#: destination-unreachable code) and traceroute need. Errors about the host's own connections are
#: conntrack-related anyway; a new echo request is not.
ICMP_TYPES: tuple[str, ...] = ("echo-request", "destination-unreachable", "time-exceeded", "parameter-problem")
#: ICMPv6 RFC 4890 section 4.4.1 says a host must not drop (nft names; 1-4 the errors, 128 echo).
ICMPV6_TYPES: tuple[str, ...] = (
    "destination-unreachable",
    "packet-too-big",
    "time-exceeded",
    "parameter-problem",
    "echo-request",
    "echo-reply",
)
#: Neighbour discovery (RFC 4861 section 6.1, 7.1: valid only with hop limit 255, i.e. never routed).
ICMPV6_ND_TYPES: tuple[str, ...] = (
    "nd-router-solicit",
    "nd-router-advert",
    "nd-neighbor-solicit",
    "nd-neighbor-advert",
    "ind-neighbor-solicit",
    "ind-neighbor-advert",
)
#: Multicast listener discovery (RFC 2710, RFC 3810 section 5: link-local source only).
ICMPV6_MLD_TYPES: tuple[str, ...] = (
    "mld-listener-query",
    "mld-listener-report",
    "mld-listener-done",
    "mld2-listener-report",
)

#: The forward chain's policy per scheduler (see the module's doc).
FORWARD_POLICY = {"slurm": "drop", "kubernetes": "accept"}


@dataclass(frozen=True)
class Service:
    """A TCP service limited to the management network: its daemon, its port, the roles that run it."""

    name: str
    port: int
    roles: frozenset[str] | None  # None: every host


#: The services per role (ports: monitoring/prometheus.py, with their sources).
SERVICES: tuple[Service, ...] = (
    Service("slurmctld", SLURMCTLD_PORT, groups.SLURM_CONTROLLERS),  # backup controllers too
    Service("slurmd", SLURMD_PORT, frozenset({groups.COMPUTE})),
    Service("slurmdbd", SLURMDBD_PORT, frozenset({groups.HEAD})),
    Service("prometheus", PROMETHEUS_PORT, frozenset({groups.HEAD})),
    Service("alertmanager", ALERTMANAGER_PORT, frozenset({groups.HEAD})),
    Service("grafana", GRAFANA_PORT, frozenset({groups.HEAD})),
    Service("node-exporter", NODE_EXPORTER_PORT, None),
    Service("dcgm-exporter", DCGM_EXPORTER_PORT, frozenset({groups.COMPUTE})),
)


def _networks(addresses: HostAddresses, network: NetworkSection) -> list[str]:
    """The cluster networks the host is on (``addresses``: its entry of the address plan;
    ``network``: the plan's pools and rails): management always, storage where it has a storage
    address, the rail subnets it has addresses in; adjacent subnets merged (8 rails of /24: one /21)."""
    pools = network["pools"]
    cidrs = [pools["management"]["cidr"]]
    if addresses.get("storage") and pools.get("storage"):
        cidrs.append(pools["storage"]["cidr"])
    mine = addresses.get("rails", {})
    cidrs += [r["cidr"] for r in network.get("rails") or [] if str(r["rail"]) in mine]
    return list(_collapsed(tuple(cidrs)))


@functools.lru_cache(maxsize=64)
def _collapsed(cidrs: tuple[str, ...]) -> tuple[str, ...]:
    """``cidrs`` with adjacent subnets merged. Cached: the hosts of a cluster share a handful of network
    sets, and merging with ipaddress per host was a second of the plan at 16,384 nodes."""
    return tuple(str(n) for n in ipaddress.collapse_addresses(ipaddress.IPv4Network(c) for c in cidrs))


@functools.lru_cache(maxsize=64)
def _services(roles: frozenset[str]) -> tuple[Service, ...]:
    """The limited services of a host with these roles, by port. Cached: a cluster has a handful of role sets."""
    return tuple(sorted((s for s in SERVICES if s.roles is None or s.roles & roles), key=lambda s: s.port))


def host_policy(
    roles: Iterable[str], addresses: HostAddresses | None = None, network: NetworkSection | None = None
) -> HostFirewall:
    """A host's own part of the policy: its limited services (the union over its roles), by port, and
    the cluster networks it accepts (``accept_ipv4``; without ``addresses`` and ``network``: none).

    ``{"tcp_ports": [6818, 9100, 9400], "services": [{"port": 6818, "name": "slurmd"}, ...],
    "accept_ipv4": ["10.30.0.0/24", "10.30.2.0/24", "10.31.0.0/21"]}``: small and constant per host
    (it never grows with the node count)."""
    chosen = _services(frozenset(roles))
    return {
        "tcp_ports": [s.port for s in chosen],
        "services": [{"port": s.port, "name": s.name} for s in chosen],
        "accept_ipv4": _networks(addresses, network) if addresses is not None and network is not None else [],
    }


def firewall_plan(network: NetworkSection, scheduler: str = "slurm") -> FirewallSection:
    """What every host's policy shares: the management network (``network``: the plan's ``network``,
    the address plan's pools) that alone reaches the limited ports, the chains' policies (the forward
    chain's by ``scheduler``), the ports open to all, the ICMP types, and the names."""
    return {
        "management_cidr": network["pools"]["management"]["cidr"],
        "input_policy": "drop",
        "forward_policy": FORWARD_POLICY.get(scheduler, "drop"),
        "open_tcp_ports": [SSH_PORT],
        "icmp_types": list(ICMP_TYPES),
        "icmpv6_types": list(ICMPV6_TYPES),
        "icmpv6_nd_types": list(ICMPV6_ND_TYPES),
        "icmpv6_mld_types": list(ICMPV6_MLD_TYPES),
        "table": TABLE,
        "port_set": PORT_SET,
        "cluster_set": CLUSTER_SET,
        "policy_file": POLICY_FILE,
        "unit": UNIT,
    }


__all__ = [
    "CLUSTER_SET",
    "FORWARD_POLICY",
    "ICMPV6_MLD_TYPES",
    "ICMPV6_ND_TYPES",
    "ICMPV6_TYPES",
    "ICMP_TYPES",
    "POLICY_FILE",
    "PORT_SET",
    "SERVICES",
    "SSH_PORT",
    "TABLE",
    "UNIT",
    "Service",
    "firewall_plan",
    "host_policy",
]
