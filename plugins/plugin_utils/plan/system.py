"""Host settings every node gets from the plan: sysctls, limits, time service.

Sources: NVIDIA GPUDirect RDMA and ConnectX tuning guides recommend locking memory
without limit for RDMA (registered memory must be pinned; ``memlock unlimited``) and
large socket buffers for the bootstrap/TCP paths; NUMA balancing off on GPU nodes so the
kernel does not migrate pages under pinned DMA buffers.
"""

from __future__ import annotations

from typing import Any

#: sysctls for GPU/RDMA hosts. ``netns`` marks keys that live in a network namespace
#: (settable inside a container); the others are host-wide kernel settings.
_SYSCTLS: list[tuple[str, str, bool, str]] = [
    ("net.core.rmem_max", "268435456", False, "256 MiB socket receive buffers (NCCL socket/bootstrap, NFS)"),
    ("net.core.wmem_max", "268435456", False, "256 MiB socket send buffers"),
    ("net.ipv4.tcp_rmem", "4096 87380 134217728", True, "TCP autotuning up to 128 MiB"),
    ("net.ipv4.tcp_wmem", "4096 65536 134217728", True, "TCP autotuning up to 128 MiB"),
    ("net.ipv4.tcp_mtu_probing", "1", True, "find the path MTU across jumbo/non-jumbo segments"),
    ("vm.zone_reclaim_mode", "0", False, "no node-local reclaim stalls on big-memory NUMA hosts"),
    ("kernel.numa_balancing", "0", False, "no page migration under pinned GPU/RDMA buffers"),
]


def sysctls(roles: list[str]) -> list[dict[str, Any]]:
    """The sysctls a host with these roles gets (every host gets the network ones)."""
    gpu_only = {"vm.zone_reclaim_mode", "kernel.numa_balancing"}
    out = []
    for key, value, netns, why in _SYSCTLS:
        if key in gpu_only and "compute" not in roles:
            continue
        out.append({"key": key, "value": value, "netns": netns, "why": why})
    return out


def limits(roles: list[str], memlock: str = "unlimited") -> list[dict[str, str]]:
    """pam_limits entries: RDMA needs unlimited locked memory on compute and storage hosts.

    ``memlock`` is "unlimited" on real hosts; the lab passes the container's hard limit,
    because pam_limits cannot raise a limit above it there (no CAP_SYS_RESOURCE).
    """
    if not {"compute", "storage"} & set(roles):
        return []
    return [
        {"domain": "*", "type": "soft", "item": "memlock", "value": memlock},
        {"domain": "*", "type": "hard", "item": "memlock", "value": memlock},
        {"domain": "root", "type": "soft", "item": "memlock", "value": memlock},
        {"domain": "root", "type": "hard", "item": "memlock", "value": memlock},
    ]


def network_units(
    addresses: dict[str, Any], nics: list[dict[str, Any]], prefixes: dict[str, int]
) -> list[dict[str, Any]]:
    """systemd-networkd units for a host's management, storage and rail interfaces.

    ``addresses``: the host's entry of the address plan; ``nics``: the NICs the host has
    ({netdev, purpose, rail}); ``prefixes``: prefix length per pool ("management",
    "storage", "rail").
    """
    units = []
    for nic in nics:
        purpose = nic["purpose"]
        if purpose == "compute":
            rail = str(nic.get("rail"))
            address = (addresses.get("rails") or {}).get(rail)
            prefix = prefixes.get("rail")
        else:
            address = addresses.get(purpose)
            prefix = prefixes.get(purpose)
        if not address or prefix is None:
            continue
        units.append(
            {
                "name": f"10-gpucluster-{nic['netdev']}.network",
                "netdev": nic["netdev"],
                "purpose": purpose,
                "rail": nic.get("rail"),
                "address": f"{address}/{prefix}",
            }
        )
    return units
