"""Acceptance: what the validate play runs, every check of the tier, and the report.

Two halves, both pure:

- what to run, from the plan (:func:`acceptance_tests`, stored as ``plan.validation.tests``):
  the all_reduce sizes, the ib_write_bw and ib_write_lat rail ring, the HCA ports whose error
  counters perfquery reads, the fio targets (:func:`fio_jobs`);
- what the results mean (:func:`acceptance_checks`): every check as a dict ``{name, nodes,
  measured, floor, unit, status: pass|fail|skipped, reason, drain}``; the report built from them
  is validation/report.py's.

Each check comes from a gate of :mod:`gates` (one tool's result against its floor; the rules of
what passes, fails or is skipped are there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig import mig_hosts
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.floors import GATE_MESSAGE_BYTES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.gates import (
    SKIPPED,
    gate_all_reduce,
    gate_dcgm,
    gate_fio,
    gate_ib_write_bw,
    gate_ib_write_lat,
    gate_port_errors,
    loop_results,
    make_check,
    tool_installed,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import (
    AcceptanceTests,
    AcceptanceView,
    Check,
    CounterPort,
    FioJob,
    Floors,
    IbPair,
    PlanView,
)

IB_BASE_PORT = 18515  # perftest DEF_PORT; rail r listens on DEF_PORT + r
#: ib_write_lat servers listen apart from ib_write_bw's (rail r: IB_LAT_BASE_PORT + r), so a bw server
#: still winding down never takes a latency client's connection
IB_LAT_BASE_PORT = IB_BASE_PORT + 100
#: an HCA's InfiniBand port: the cabling plugs port 1 of each planned HCA (fabric/ibsim.py's net file too)
HCA_PORT = 1
FIO_SUBDIR = ".gpucluster-validate"


# ---------------------------------------------------------------- what to run


def _under(path: str, root: str) -> bool:
    path, root = path.rstrip("/") or "/", root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


def fio_jobs(plan: AcceptanceView | PlanView) -> list[FioJob]:
    """fio targets: the checkpoint path (shared on nfs/lustre, local on local_nvme) and local scratch.

    ``gated``: the tier's storage floors apply (to the checkpoint path only). ``scope``
    shared: the floor is for the sum over all compute nodes writing at once; local: per node.
    Local scratch on the same filesystem as the checkpoints (tier1: /raid and /raid/checkpoints)
    is not measured twice.
    """
    st = plan["storage"]
    ckpt = (st.get("paths") or {}).get("checkpoints")
    shared = st["type"] in ("nfs", "lustre")
    out: list[FioJob] = []
    if ckpt:
        out.append(
            {
                "name": "checkpoints",
                "path": ckpt,
                "dir": f"{ckpt.rstrip('/')}/{FIO_SUBDIR}",
                "scope": "shared" if shared else "local",
                "gated": True,
            }
        )
    local = st.get("local_scratch")
    if local and not (ckpt and not shared and (_under(ckpt, local) or _under(local, ckpt))):
        out.append(
            {
                "name": "local_scratch",
                "path": local,
                "dir": f"{local.rstrip('/')}/{FIO_SUBDIR}",
                "scope": "local",
                "gated": False,
            }
        )
    return out


def ib_write_bw_pairs(plan: AcceptanceView | PlanView) -> list[IbPair]:
    """One ib_write_bw per rail and node in a ring: node i writes to node i+1 on the same rail.

    Every NIC sends once and receives once; links are full duplex, so all pairs of a rail
    can run at the same time. RoCE uses rdma_cm to the server's rail address (-R); InfiniBand
    exchanges QP data over TCP on the management address.
    """
    fab = plan["fabric"]
    if fab["type"] not in RDMA_FABRICS:
        return []
    by_host: dict[str, dict[int, str]] = {}  # the hosts in cabling order, each once: {rail: hca}
    for h in fabric_links.hcas(fab["cabling"]):
        by_host.setdefault(h["host"], {})[h["rail"]] = h["hca"]
    if len(by_host) < 2:
        return []
    roce = fab["type"] == "roce"
    hosts = list(by_host)
    servers = hosts[1:] + hosts[:1]
    addresses = [plan["hosts"][server]["addresses"] for server in servers]  # each server's, looked up once
    pairs: list[IbPair] = []
    for rail in sorted({rail for rails in by_host.values() for rail in rails}):
        key, port = str(rail), IB_BASE_PORT + rail
        pairs += [
            {
                "rail": rail,
                "client": client,
                "server": server,
                "client_hca": by_host[client][rail],
                "server_hca": by_host[server][rail],
                "server_address": addr["rails"][key] if roce else addr["management"],
                "port": port,
                "rdma_cm": roce,
            }
            for client, server, addr in zip(hosts, servers, addresses, strict=True)
        ]
    return pairs


def ib_write_lat_pairs(plan: AcceptanceView | PlanView, bw_pairs: list[IbPair] | None = None) -> list[IbPair]:
    """ib_write_lat on the same ring as ib_write_bw (node i -> node i+1, every rail), on its own ports.

    RDMA writes only on a verbs fabric: InfiniBand, or RoCE through rdma_cm (-R) like ib_write_bw.
    ``bw_pairs``: the plan's :func:`ib_write_bw_pairs` where the caller has them (the ring is built once).
    """
    pairs = ib_write_bw_pairs(plan) if bw_pairs is None else bw_pairs
    return [{**pair, "port": IB_LAT_BASE_PORT + pair["rail"]} for pair in pairs]


def port_counter_ports(plan: AcceptanceView | PlanView) -> list[CounterPort]:
    """Every planned compute HCA port whose perfquery counters the sweep reads (InfiniBand only:
    perfquery reads InfiniBand PortCounters through the subnet's management datagrams)."""
    fab = plan["fabric"]
    if fab["type"] != "infiniband":
        return []
    compute = {host for host, entry in plan["hosts"].items() if "compute" in entry["roles"]}
    return [
        {"host": h["host"], "hca": h["hca"], "port": HCA_PORT, "rail": h["rail"]}
        for h in fabric_links.hcas(fab["cabling"])
        if h["host"] in compute
    ]


#: Why a MIG-partitioned node is left out of the whole-GPU all_reduce tests (docs/sources.md [G1]): a CUDA
#: process sees one MIG device, and MIG instances have no peer-to-peer (NVLink or PCIe) between them.
MIG_EXCLUDED = (
    "MIG-partitioned: one CUDA process sees one MIG device and MIG instances have no peer-to-peer, "
    "so NCCL all_reduce across the node's GPUs cannot run"
)


def all_reduce_nodes(plan: AcceptanceView | PlanView) -> tuple[list[str], dict[str, str]]:
    """(compute nodes the whole-GPU all_reduce tests run on, {node left out: why}): MIG nodes are left out."""
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    mig = set(mig_hosts(plan["gpu"].get("mig")))
    return [h for h in compute if h not in mig], {h: MIG_EXCLUDED for h in compute if h in mig}


def acceptance_tests(plan: AcceptanceView | PlanView) -> AcceptanceTests:
    """What the validate play runs, from the plan (the all_reduce tests on the nodes without MIG)."""
    cl = plan["cluster"]
    gate = plan["validation"]["gate_message_bytes"]
    tested, excluded = all_reduce_nodes(plan)
    nodes = len(tested) if excluded else cl["compute_nodes"]
    gpus = cl["gpus_per_node"]
    bw_pairs = ib_write_bw_pairs(plan)  # ib_write_lat runs on the same ring
    return {
        "all_reduce": {
            "min_bytes": gate // 8,
            "max_bytes": gate,
            "step_factor": 2,
            "gpus_per_node": gpus,
            "intra_node": gpus >= 2,
            "inter_node": nodes >= 2,
            "nodes": nodes,
            "ranks": nodes * gpus,
            "hostlist": hostlist.compress(tested) if excluded else cl["compute_hostlist"],
            # the validate play runs no all_reduce on these (MIG nodes), and the report says why
            "excluded": excluded,
        },
        "ib_write_bw": bw_pairs,
        "ib_write_lat": ib_write_lat_pairs(plan, bw_pairs),
        "port_counters": port_counter_ports(plan),
        "fio": fio_jobs(plan),
    }


# ---------------------------------------------------------------- all checks


def acceptance_checks(
    plan: PlanView,
    hosts: Mapping[str, object],
    cluster: Mapping[str, object] | None = None,
    *,
    dcgm_level: int | None = None,
) -> list[Check]:
    """Every check of the tier from the collected results.

    ``hosts``: compute host -> ``{"tools": {tool: bool} | [tool, ...], "runs": {...}}`` with runs
    ``all_reduce_intra_node``, ``dcgm_diag`` (registered command results), ``fio_write`` and
    ``fio_read`` (target name -> result, or the loop registration), ``ib_write_bw`` (rail ->
    client result, or the loop registration), ``ib_write_lat`` (the same, by rail), ``port_errors``
    (hca -> perfquery result, or the loop registration). ``cluster``: the head's ``{"tools", "runs":
    {"all_reduce_inter_node": ...}}``; its tools must include srun.
    """
    val = plan["validation"]
    tests = val.get("tests") or acceptance_tests(plan)
    got = _Results(
        hosts=hosts,
        cluster=cluster or {},
        compute=[h for h, v in plan["hosts"].items() if "compute" in v["roles"]],
        reasons=val.get("reasons") or {},
    )
    checks = _all_reduce_checks(got, tests, val.get("gate_message_bytes", GATE_MESSAGE_BYTES), val)
    checks += _ib_write_bw_checks(got, tests["ib_write_bw"], val.get("nic_write_bw_gbps"))
    checks += _ib_write_lat_checks(got, tests.get("ib_write_lat") or [])
    checks += [
        gate_port_errors(
            p["host"],
            p["hca"],
            p["port"],
            got.port_run(p["host"], p["hca"]),
            installed=got.installed(p["host"], "perfquery"),
        )
        for p in tests.get("port_counters") or []
    ]
    floors = {"write": val.get("storage_write_gbps"), "read": val.get("storage_read_gbps")}
    for target in tests["fio"]:
        for rw in ("write", "read"):
            runs = {
                h: (loop_results(got.run(h, f"fio_{rw}"), "name").get(target["name"]), got.installed(h, "fio"))
                for h in got.compute
            }
            checks += gate_fio(target, rw, runs, floor=floors[rw])
    checks += [
        gate_dcgm(h, got.run(h, "dcgm_diag"), installed=got.installed(h, "dcgmi"), level=dcgm_level)
        for h in got.compute
    ]
    return checks


@dataclass(frozen=True)
class _Results:
    """What the hosts sent back (acceptance_checks' ``hosts`` and ``cluster``), the compute nodes in plan order
    and the plan's reasons for a missing floor."""

    hosts: Mapping[str, object]
    cluster: Mapping[str, object]
    compute: list[str]
    reasons: Mapping[str, str]

    def entry(self, host: str) -> Mapping[str, object]:
        e = self.hosts.get(host)
        return e if isinstance(e, dict) else {}

    def run(self, host: str, key: str) -> object:
        runs = self.entry(host).get("runs")
        return runs.get(key) if isinstance(runs, dict) else None

    def installed(self, host: str, tool: str) -> bool:
        """The tool is on the host, or the host sent nothing (its missing results fail the check instead)."""
        return tool_installed(self.entry(host), tool) or not self.entry(host)

    def lacking(self, hosts: tuple[str, ...], tool: str) -> list[str]:
        """The hosts that sent results without ``tool``."""
        return [h for h in hosts if self.entry(h) and not tool_installed(self.entry(h), tool)]

    def reason(self, floor: str) -> str:
        return self.reasons.get(floor, "none in the plan")

    def port_run(self, host: str, hca: str) -> object:
        """The perfquery result of one port; a sweep the play did not run (a lab container has no
        HCA) is one skipped registration with its reason, the same for every port of the host."""
        registered = self.run(host, "port_errors")
        if isinstance(registered, dict) and registered.get("skipped") and "results" not in registered:
            return registered
        return loop_results(registered, "hca").get(hca)


def _all_reduce_checks(got: _Results, tests: AcceptanceTests, gate: int, val: Floors) -> list[Check]:
    """all_reduce on each whole-GPU node (intra-node), and across them from the head (inter-node)."""
    ar = tests["all_reduce"]
    excluded = ar.get("excluded") or {}
    whole = [h for h in got.compute if h not in excluded]  # the nodes the whole-GPU all_reduce runs on
    checks: list[Check] = []
    if ar["intra_node"]:
        for h in whole:
            checks.append(
                gate_all_reduce(
                    "all_reduce_intra_node",
                    [h],
                    got.run(h, "all_reduce_intra_node"),
                    installed=got.installed(h, "all_reduce_perf"),
                    floor=val.get("allreduce_intra_node_busbw_gbs"),
                    no_floor=got.reason("allreduce_intra_node_busbw_gbs"),
                    gate_bytes=gate,
                    expected_ranks=ar["gpus_per_node"],
                    drain=[h],
                )
            )
    if ar["inter_node"]:
        missing = got.lacking(tuple(whole), "all_reduce_perf")
        on_head = tool_installed(got.cluster, "srun") if got.cluster else False
        head_runs = got.cluster.get("runs")
        check = gate_all_reduce(
            "all_reduce_inter_node",
            whole,
            head_runs.get("all_reduce_inter_node") if isinstance(head_runs, dict) else None,
            installed=not missing and on_head,
            floor=val.get("allreduce_inter_node_busbw_gbs"),
            no_floor=got.reason("allreduce_inter_node_busbw_gbs"),
            gate_bytes=gate,
            expected_ranks=ar["ranks"],
        )
        if check["status"] == SKIPPED and check["reason"].startswith("not installed"):
            where = [f"all_reduce_perf on {', '.join(missing)}"] if missing else []
            if not on_head:
                where.append("srun on the head")
            check["reason"] = "not installed: " + "; ".join(where)
        checks.append(check)
    return checks


def _ib_write_bw_checks(got: _Results, pairs: list[IbPair], nic_floor: float | None) -> list[Check]:
    """ib_write_bw on every rail pair of the ring; one skipped check when there are no pairs."""
    if not pairs:
        why = got.reasons.get("nic_write_bw_gbps") or ("single node" if len(got.compute) < 2 else "no compute fabric")
        return [make_check("ib_write_bw", got.compute, None, nic_floor, "Gb/s", SKIPPED, f"no pairs: {why}")]
    ib_runs = {h: loop_results(got.run(h, "ib_write_bw"), "rail") for h in got.compute}
    checks = []
    for pair in pairs:
        c, s = pair["client"], pair["server"]
        lacking = got.lacking((c, s), "ib_write_bw")
        run_ = ib_runs[c].get(str(pair["rail"]))
        if got.entry(c) and not got.entry(s):
            run_ = None  # the server host sent nothing: no result, a failure
        check = gate_ib_write_bw(
            pair, run_, installed=not lacking, floor=nic_floor, no_floor=got.reason("nic_write_bw_gbps")
        )
        if lacking:
            check["reason"] = check["reason"].replace("ib_write_bw", f"ib_write_bw on {', '.join(lacking)}", 1)
        checks.append(check)
    return checks


def _ib_write_lat_checks(got: _Results, pairs: list[IbPair]) -> list[Check]:
    """ib_write_lat on every rail pair of the ring (the same ring as ib_write_bw)."""
    lat_runs = {h: loop_results(got.run(h, "ib_write_lat"), "rail") for h in got.compute}
    checks = []
    for pair in pairs:
        c, s = pair["client"], pair["server"]
        lacking = got.lacking((c, s), "ib_write_lat")
        run_ = lat_runs[c].get(str(pair["rail"]))
        if got.entry(c) and not got.entry(s):
            run_ = None  # the server host sent nothing: no result, a failure
        check = gate_ib_write_lat(pair, run_, installed=not lacking)
        if lacking:
            check["reason"] = check["reason"].replace("ib_write_lat", f"ib_write_lat on {', '.join(lacking)}", 1)
        checks.append(check)
    return checks
