"""The fabric as the hosts see it: InfiniBand subnet manager and partitions, RoCEv2 lossless settings.

Pure functions, no I/O; the ``fabric`` role renders what they return.

InfiniBand (opensm 3.3 man page, "PARTITION CONFIGURATION"; rdma-core rdma-ndd):
- every port is a full member of the default partition 0x7fff, which also carries IPoIB;
  its SL is the one NCCL uses (``NCCL_IB_SL``), so path records (rdma_cm, IPoIB) and
  NCCL's QPs travel on the same service level;
- the subnet manager runs on the head (``subnet_manager: head``: Debian's opensm.service
  starts one opensm per port listed in /etc/default/opensm, so the head needs one port in
  each planned subnet: one per rail on a rail-optimized fabric without spines) or on a
  managed switch (``subnet_manager: switch``: nothing runs on the hosts);
- rdma-ndd names every HCA ``"<host> <hca>"`` (its default format ``%h %d``, host without
  domain), which is how ``fabric_check`` matches discovered ports to the plan.

RoCEv2 (docs/sources.md §7): trust DSCP, PFC on the RoCE priority (lossless), ECN/DCQCN on it, CNPs
on their own DSCP and priority, the RDMA-CM ToS, and an MTU that carries 4096-byte RoCE
frames. The ToS comes from :func:`nccl.roce_traffic_class`, once, and feeds both the host
script and ``NCCL_IB_TC`` (the plan copies it into nccl.conf), so the two never disagree.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import nccl
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)

SUBNET_MANAGERS = ("head", "switch")
DEFAULT_PKEY = 0x7FFF  # opensm creates it unconditionally; IPoIB's broadcast group lives there
# Above any SM left at opensm's default priority 0, below 15 so an operator can still take over by hand.
SM_PRIORITY = 14
# opensm -R names (opensm(8)). Default per topology: one switch per subnet has no loops
# (minhop, opensm's default); a fat tree needs a credit-loop-free engine (updn ranks from
# auto-detected roots when no root GUID file is given).
ROUTING_ENGINES = ("minhop", "updn", "dnup", "ftree", "lash", "dor", "torus-2QoS", "nue", "dfsssp", "sssp")
DEFAULT_ROUTING = {"fat_tree": "updn"}
ROUTING_NOTES = {
    "minhop": "minimum-hop routing (opensm's default): one switch per subnet has no credit loops",
    "updn": "up/down routing, roots auto-detected: no credit loops across leaves and spines",
}
PORT_GUID = re.compile(r"^0x[0-9a-fA-F]{16}\Z")
OPENSM_PARTITIONS_FILE = "/etc/opensm/partitions.conf"

# docs/sources.md §7.1/7.2: RoCE data DSCP 26 (ToS 106 with ECT(0)) on priority 3, CNP DSCP 48 on
# priority 6; 4200 bytes carry the largest RoCE MTU (4096) plus headers (docs/sources.md §7.3).
ROCE_DSCP = 26
ROCE_CNP_DSCP = 48
ROCE_CNP_PRIORITY = 6
ROCE_MTU = 4200
ETHERNET_MTU = (1500, 9216)  # 9216: the usual switch port maximum the host must not exceed
PRIORITIES = 8


def _pkey(value: Any, field: str) -> str:
    text = str(value).strip().lower() if value is not None else hex(DEFAULT_PKEY)
    try:
        number = int(text, 16) if text.startswith("0x") else int(text)
    except ValueError:
        raise PlanError(field, value, "a partition key such as 0x7fff") from None
    # Only the default partition for now: another P_Key needs IPoIB child interfaces and NCCL_IB_PKEY.
    require(
        0 <= number <= 0xFFFF and number & 0x7FFF == DEFAULT_PKEY,
        field,
        value,
        "0x7fff (the default partition; other partitions are not supported by the fabric role yet)",
    )
    return f"0x{DEFAULT_PKEY:04x}"


def infiniband_settings(
    ib: dict[str, Any] | None,
    *,
    subnet_manager: Any,
    topology: str,
    subnets: int,
    field: str = "gpucluster_fabric",
) -> dict[str, Any]:
    """Checked InfiniBand settings: SL, partition key, subnet manager and its opensm options.

    ``subnets``: how many subnets the plan's cabling forms (each needs its own SM port).
    """
    p = f"{field}.infiniband"
    require(ib is None or isinstance(ib, dict), p, ib, "a mapping {service_level, pkey, sm_priority, ...}")
    ib = dict(ib or {})
    sm = check_choice(subnet_manager, f"{field}.subnet_manager", SUBNET_MANAGERS)
    sl = ib.get("service_level")
    if sl is not None:
        sl = check_range(sl, f"{p}.service_level", 0, 15, integer=True)
    priority = check_range(ib.get("sm_priority", SM_PRIORITY), f"{p}.sm_priority", 0, 15, integer=True)
    routing = check_choice(
        ib.get("routing_engine", DEFAULT_ROUTING.get(topology, "minhop")), f"{p}.routing_engine", ROUTING_ENGINES
    )
    guids = ib.get("sm_port_guids")
    if guids is not None:
        require(
            isinstance(guids, list) and all(isinstance(g, str) and PORT_GUID.match(g) for g in guids),
            f"{p}.sm_port_guids",
            guids,
            "a list of port GUIDs 0x + 16 hex digits (ibstat -p on the head)",
        )
        require(
            len(guids) == subnets and len(set(guids)) == len(guids),
            f"{p}.sm_port_guids",
            guids,
            f"one port per planned subnet ({subnets}), each in a different subnet",
        )
    return {
        "subnet_manager": sm,
        "service_level": sl,
        "pkey": _pkey(ib.get("pkey"), f"{p}.pkey"),
        "sm_priority": priority,
        "routing_engine": routing,
        "sm_port_guids": list(guids) if guids is not None else None,
    }


def roce_settings(roce: dict[str, Any] | None, field: str = "gpucluster_fabric.roce") -> dict[str, Any]:
    """Checked RoCEv2 lossless settings, with the ToS (= NCCL_IB_TC) and the PFC vector.

    Unknown keys (``gid_index``) pass through for NCCL.
    """
    require(roce is None or isinstance(roce, dict), field, roce, "a mapping {dscp, priority, cnp_dscp, ...}")
    roce = dict(roce or {})
    dscp = check_range(roce.get("dscp", ROCE_DSCP), f"{field}.dscp", 0, 63, integer=True)
    ecn = roce.get("ecn", True)
    require(isinstance(ecn, bool), f"{field}.ecn", ecn, "true or false")
    pfc = roce.get("pfc", True)
    require(isinstance(pfc, bool), f"{field}.pfc", pfc, "true (lossless: PFC on the RoCE priority) or false (lossy)")
    # the ConnectX default dscp2prio map is DSCP/8 (docs/sources.md §7.1): DSCP 26 -> priority 3
    priority = check_range(roce.get("priority", dscp // 8), f"{field}.priority", 0, PRIORITIES - 1, integer=True)
    cnp_dscp = check_range(roce.get("cnp_dscp", ROCE_CNP_DSCP), f"{field}.cnp_dscp", 0, 63, integer=True)
    cnp_priority = check_range(
        roce.get("cnp_priority", ROCE_CNP_PRIORITY), f"{field}.cnp_priority", 0, PRIORITIES - 1, integer=True
    )
    require(
        cnp_dscp != dscp or cnp_priority == priority,
        f"{field}.cnp_dscp",
        cnp_dscp,
        f"a DSCP other than the data DSCP {dscp}, or cnp_priority equal to priority (one DSCP has one priority)",
    )
    mtu = check_range(roce.get("mtu", ROCE_MTU), f"{field}.mtu", *ETHERNET_MTU, integer=True)
    roce.update(
        {
            "dscp": dscp,
            "ecn": ecn,
            "traffic_class": nccl.roce_traffic_class(dscp, ecn=ecn, field=f"{field}.dscp"),
            "priority": priority,
            "pfc": pfc,
            "pfc_vector": ",".join("1" if pfc and i == priority else "0" for i in range(PRIORITIES)),
            # set explicitly, so a NIC whose map was changed before still classifies as planned
            "dscp2prio": [{"dscp": dscp, "priority": priority}]
            + ([{"dscp": cnp_dscp, "priority": cnp_priority}] if cnp_dscp != dscp else []),
            "cnp_dscp": cnp_dscp,
            "cnp_priority": cnp_priority,
            "mtu": mtu,
            "roce_mode": "RoCE v2",
        }
    )
    return roce


def partition_lines(ib: dict[str, Any]) -> list[str]:
    """partitions.conf: every port a full member of the default partition, with IPoIB, at the plan's SL."""
    sl = ib["service_level"] or 0
    return [f"Default={ib['pkey']}, ipoib, sl={sl}, defmember=full : ALL=full, SELF=full ;"]


def host_plan(
    fab: dict[str, Any],
    *,
    head: str,
    compute_hosts: list[str],
    compute_nics: list[dict[str, Any]],
) -> dict[str, Any]:
    """What the fabric role does where: IB and RoCE hosts, rails, node descriptions, opensm.

    ``fab``: the plan's fabric dict; ``compute_nics``: the compute NICs in rail order
    ({name, netdev, rail}).
    """
    ftype = fab["type"]
    rails = [{"rail": n["rail"], "hca": n["name"], "netdev": n["netdev"]} for n in compute_nics]
    out: dict[str, Any] = {
        "infiniband_hosts": [],
        "roce_hosts": [],
        "rails": rails if ftype in ("infiniband", "roce") else [],
        "node_descriptions": {},
        "opensm": None,
        "check_ignore": [],
    }
    if ftype == "roce":
        out["roce_hosts"] = list(compute_hosts)
    if ftype != "infiniband":
        return out
    ib = fab["infiniband"]
    hosts = list(compute_hosts)
    out["node_descriptions"] = {
        h: [{"hca": r["hca"], "desc": ibfabric.hca_desc(h, r["hca"])} for r in rails] for h in compute_hosts
    }
    if ib["subnet_manager"] == "head":
        subnets = [s["name"] for s in ibfabric.subnets(fab["cabling"])]
        out["opensm"] = {
            "host": head,
            "sm_priority": ib["sm_priority"],
            "routing_engine": ib["routing_engine"],
            "routing_note": ROUTING_NOTES.get(ib["routing_engine"], "the site's routing engine"),
            # opensm resets a partition's SL to 0 unless QoS is on (osm_prtn_config.c)
            "qos": bool(ib["service_level"]),
            "partition_config_file": OPENSM_PARTITIONS_FILE,
            "partitions": partition_lines(ib),
            # Debian's opensm.service: one opensm per listed port, or per port ibstat -p lists (ALL)
            "ports": " ".join(ib["sm_port_guids"]) if ib["sm_port_guids"] else "ALL",
            "subnets": subnets,
        }
        if head not in hosts:
            hosts.insert(0, head)
            # the head's own HCAs are on the fabric but not in the planned cabling
            out["check_ignore"] = [f"{head} *"]
    out["infiniband_hosts"] = hosts
    return out


__all__ = ["host_plan", "infiniband_settings", "partition_lines", "roce_settings"]
