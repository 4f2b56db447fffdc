"""The fabric as the hosts see it: InfiniBand subnet manager and partitions, RoCEv2 lossless settings.

Pure functions, no I/O; the ``fabric`` role renders what they return.

InfiniBand (opensm 3.3 man page, "PARTITION CONFIGURATION"; rdma-core rdma-ndd):
- every port is a full member of the default partition 0x7fff, which also carries IPoIB;
  its SL is the one NCCL uses (``NCCL_IB_SL``), so path records (rdma_cm, IPoIB) and
  NCCL's QPs travel on the same service level;
- every planned subnet needs a subnet manager port in it (opensm(8) ``--guid``: one opensm
  binds one port, so one SM instance per subnet). ``subnet_manager: head``: opensm on the
  head, whose HCAs the inventory lists (``gpucluster_fabric.infiniband.sm_hcas``, one per planned
  subnet, in the order of the subnets: one per rail on a rail-optimized fabric without spines);
  :func:`sm_cabling` cables each to a free host port of a switch of its subnet, so the cabling
  plan, ibsim and the fabric check all hold them. Debian's opensm.service starts one
  ``opensm@<port GUID>`` (``opensm --guid``) per port of PORTS in /etc/default/opensm, each
  reading /etc/opensm/opensm.conf. ``subnet_manager: switch`` (the SM of a managed switch) or
  ``external`` (a UFM or another fabric manager the site runs): nothing runs on the hosts and
  the report names who runs it;
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
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import (
    Cabling,
    FabricHostSection,
    FabricRail,
    FabricSection,
    InfinibandSection,
    Link,
    OpensmSection,
    RoceSection,
    SmHca,
    SmPort,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
    require,
)

SUBNET_MANAGERS = ("head", "switch", "external")
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
HCA_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}\Z")
#: Who runs the subnet manager, as the report says it.
SM_WHERE = {
    "head": "opensm on the head, one instance per subnet port",
    "switch": "the subnet manager of a managed switch (nothing runs on the hosts)",
    "external": "an external fabric manager such as UFM (nothing runs on the hosts)",
}
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
) -> InfinibandSection:
    """Checked InfiniBand settings: SL, partition key, subnet manager and its opensm options.

    ``subnets``: how many subnets the plan's cabling forms (each needs its own SM port).
    """
    p = f"{field}.infiniband"
    require(ib is None or isinstance(ib, dict), p, ib, "a mapping {service_level, pkey, sm_priority, ...}")
    ib = dict(ib or {})
    sm = check_choice(subnet_manager, f"{field}.subnet_manager", SUBNET_MANAGERS)
    sl = ib.get("service_level")
    if sl is not None:
        sl = int(check_range(sl, f"{p}.service_level", 0, 15, integer=True))
    priority = int(check_range(ib.get("sm_priority", SM_PRIORITY), f"{p}.sm_priority", 0, 15, integer=True))
    routing = check_choice(
        ib.get("routing_engine", DEFAULT_ROUTING.get(topology, "minhop")), f"{p}.routing_engine", ROUTING_ENGINES
    )
    hcas = ib.get("sm_hcas")
    if sm == "head":
        require(
            isinstance(hcas, list)
            and all(isinstance(h, str) and HCA_NAME.match(h) for h in hcas)
            and len(hcas) == subnets
            and len(set(hcas)) == len(hcas),
            f"{p}.sm_hcas",
            hcas,
            f"the head's HCAs that run the subnet manager, one per planned subnet ({subnets}, in subnet order),"
            f" each cabled into its subnet; or {field}.subnet_manager: switch or external",
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
        "sm_port_guids": list(guids) if isinstance(guids, list) else None,  # checked above: a list or None
        "sm_hcas": list(hcas) if sm == "head" and isinstance(hcas, list) else [],  # checked above for the head
        "sm_where": SM_WHERE[sm],
    }


def sm_cabling(cabling: Cabling, *, host: str, hcas: list[str], field: str) -> Cabling:
    """The cabling with the subnet manager's ports: HCA i of ``host`` on subnet i's first free host port.

    A subnet's switches in plan order (leaves before spines); a host port is one not used by a
    link, at most the switch's ``ports`` (a fat tree's leaves: the lower half, the upper half faces
    the spines). The SM's HCAs and cables go to ``sm_hcas`` and ``sm_links`` (not ``hcas`` and
    ``links``, which are the compute nodes' rails for Slurm, NCCL and the acceptance tests);
    ibsim simulates them and the fabric check expects them (ibfabric.all_links).
    """
    nets = ibfabric.subnets(cabling)
    fat_tree = cabling.get("topology") == "fat_tree"
    used: dict[str, set[int]] = {}
    for link in ibfabric.all_links(cabling):
        for end in (link["a"], link["b"]):
            if not end.get("hca"):
                used.setdefault(end["node"], set()).add(int(end["port"]))
    switches = {s["name"]: s for s in cabling.get("switches", [])}
    sm_hcas: list[SmHca] = []
    sm_links: list[Link] = []
    for net, hca in zip(nets, hcas, strict=True):  # infiniband_settings: one HCA per subnet
        rail = net["rails"][0]
        place: tuple[str, int] | None = None
        for name in sorted(net["switches"], key=lambda n: switches[n]["kind"] == "spine"):
            sw = switches[name]
            top = int(sw["ports"]) // 2 if fat_tree and sw["kind"] == "leaf" else int(sw["ports"])
            free = [port for port in range(1, top + 1) if port not in used.get(name, set())]
            if free:
                place = (name, free[0])
                break
        if place is None:
            raise PlanError(
                f"{field}.infiniband.sm_hcas",
                hca,
                f"a free host port in subnet {net['name']} for {host}'s {hca} (its switches"
                f" {', '.join(net['switches'])} are full: a larger {field}.switch_radix, or {field}.subnet_manager:"
                " switch or external)",
            )
        name, port = place
        used.setdefault(name, set()).add(port)
        sm_hcas.append({"host": host, "hca": hca, "rail": rail, "subnet": net["name"]})
        sm_links.append(
            {"a": {"node": host, "hca": hca, "port": 1}, "b": {"node": name, "port": port}, "rail": rail,
             "kind": "subnet_manager"}
        )  # fmt: skip
    return {**cabling, "sm_hcas": sm_hcas, "sm_links": sm_links}


def roce_settings(roce: dict[str, Any] | None, field: str = "gpucluster_fabric.roce") -> RoceSection:
    """Checked RoCEv2 lossless settings, with the ToS (= NCCL_IB_TC) and the PFC vector.

    Unknown keys (``gid_index``) pass through for NCCL.
    """
    require(roce is None or isinstance(roce, dict), field, roce, "a mapping {dscp, priority, cnp_dscp, ...}")
    roce = dict(roce or {})
    dscp = int(check_range(roce.get("dscp", ROCE_DSCP), f"{field}.dscp", 0, 63, integer=True))
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
    return roce  # type: ignore[return-value]  # RoceSection's keys, the site's own (gid_index) kept beside them


def partition_lines(ib: InfinibandSection) -> list[str]:
    """partitions.conf: every port a full member of the default partition, with IPoIB, at the plan's SL."""
    sl = ib["service_level"] or 0
    return [f"Default={ib['pkey']}, ipoib, sl={sl}, defmember=full : ALL=full, SELF=full ;"]


def host_plan(
    fab: FabricSection,
    *,
    head: str,
    compute_hosts: list[str],
    compute_nics: list[dict[str, Any]],
) -> FabricHostSection:
    """What the fabric role does where: IB and RoCE hosts, rails, node descriptions, opensm.

    ``fab``: the plan's fabric dict; ``compute_nics``: the compute NICs in rail order
    ({name, netdev, rail}).
    """
    ftype = fab["type"]
    rails: list[FabricRail] = [{"rail": n["rail"], "hca": n["name"], "netdev": n["netdev"]} for n in compute_nics]
    out: FabricHostSection = {
        "infiniband_hosts": [],
        "roce_hosts": [],
        "rails": rails if ftype in RDMA_FABRICS else [],
        "node_descriptions": {},
        "opensm": None,
        "check_ignore": [],
    }
    if ftype == "roce":
        out["roce_hosts"] = list(compute_hosts)
    if ftype != "infiniband":
        return out
    ib = fab["infiniband"]
    if ib is None:  # pragma: no cover - fabric_plan sets it for every InfiniBand fabric
        raise PlanError("gpucluster_fabric.infiniband", None, "the checked InfiniBand settings")
    hosts = list(compute_hosts)
    out["node_descriptions"] = {
        h: [{"hca": r["hca"], "desc": ibfabric.hca_desc(h, r["hca"])} for r in rails] for h in compute_hosts
    }
    if ib["subnet_manager"] == "head":
        nets = ibfabric.subnets(fab["cabling"])
        subnets = [s["name"] for s in nets]
        sm_links = fab["cabling"].get("sm_links") or []
        ports: list[SmPort] = [
            {
                "subnet": net["name"],
                "hca": link["a"]["hca"],
                "desc": ibfabric.hca_desc(head, link["a"]["hca"]),
                "switch": link["b"]["node"],
                "switch_port": link["b"]["port"],
            }
            for net, link in zip(nets, sm_links, strict=True)
        ]
        out["node_descriptions"][head] = [{"hca": p["hca"], "desc": p["desc"]} for p in ports]
        opensm: OpensmSection = {
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
            # the head's SM ports, one per subnet, cabled in the plan (sm_cabling)
            "sm_ports": ports,
        }
        out["opensm"] = opensm
        if head not in hosts:
            hosts.insert(0, head)
    out["infiniband_hosts"] = hosts
    return out


__all__ = ["host_plan", "infiniband_settings", "partition_lines", "roce_settings", "sm_cabling"]
