"""Every node's firewall: which TCP ports of the cluster's own services answer the management
network (and the host itself) only.

Per host, from its roles (a host with several roles gets the union; tier1's one host is head,
compute and storage at once):

- every host: node-exporter 9100 (the common role runs it everywhere; the head's Prometheus scrapes it);
- head: slurmctld 6817, slurmdbd 6819, Prometheus 9090, Alertmanager 9093, Grafana 3000 (the plan
  always provisions Grafana on the head; the port is closed to all but the management network whether
  or not the site installs it);
- slurm_backup (a backup Slurm controller, slurm/ha.py): slurmctld 6817;
- compute: slurmd 6818, dcgm-exporter 9400.

Only these ports are limited. Everything else stays open on purpose: ssh, NFS (2049 on the
storage network), the ephemeral ports srun and slurmstepd listen on for a job step's I/O
(https://slurm.schedmd.com/slurm.conf.html#OPT_SrunPortRange: unset, any port), MPI and NCCL's
bootstrap and socket transports (any port), and Lustre's LNet. IPv6 to the limited ports is
dropped: the cluster speaks IPv4 on its management network. The common role renders the policy as
one nftables table (roles/common/templates/nftables-gpucluster.nft.j2). No I/O; pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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

#: The nftables table the common role owns (``inet``: one table for IPv4 and IPv6,
#: https://wiki.nftables.org/wiki-nftables/index.php/Nftables_families#inet).
TABLE = "gpucluster"
#: Its named set of the limited TCP ports (what the lab's check reads back with ``nft -j``).
PORT_SET = "management_tcp"
#: The file the policy is written to and loaded from (``nft -f``), and the unit that loads it.
POLICY_FILE = "/etc/gpucluster/nftables.nft"
UNIT = "gpucluster-nftables.service"


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


def host_policy(roles: Iterable[str]) -> dict[str, Any]:
    """The limited services of a host with ``roles`` (the union over its roles), by port.

    ``{"tcp_ports": [6818, 9100, 9400], "services": [{"port": 6818, "name": "slurmd"}, ...]}``:
    small and constant per host (it never grows with the node count)."""
    mine = set(roles)
    chosen = sorted((s for s in SERVICES if s.roles is None or s.roles & mine), key=lambda s: s.port)
    return {
        "tcp_ports": [s.port for s in chosen],
        "services": [{"port": s.port, "name": s.name} for s in chosen],
    }


def firewall_plan(network: Mapping[str, Any]) -> dict[str, Any]:
    """What every host's policy shares: the management network (``network``: the plan's
    ``network``, the address plan's pools) that alone reaches the limited ports, and the names."""
    return {
        "management_cidr": str(network["pools"]["management"]["cidr"]),
        "table": TABLE,
        "port_set": PORT_SET,
        "policy_file": POLICY_FILE,
        "unit": UNIT,
    }


__all__ = ["POLICY_FILE", "PORT_SET", "SERVICES", "TABLE", "UNIT", "Service", "firewall_plan", "host_policy"]
