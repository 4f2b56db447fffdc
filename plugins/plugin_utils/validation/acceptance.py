"""Acceptance: what the validate play runs, every check of the tier, and the report.

Two halves, both pure:

- what to run, from the plan (:func:`acceptance_tests`, stored as ``plan.validation.tests``):
  the all_reduce sizes, the ib_write_bw and ib_write_lat rail ring, the HCA ports whose error
  counters perfquery reads, the fio targets (:func:`fio_jobs`);
- what the results mean (:func:`acceptance_checks`): every check as a dict ``{name, nodes,
  measured, floor, unit, status: pass|fail|skipped, reason, drain}`` and the report built
  from them (:func:`acceptance_report`, :func:`report_markdown`, :func:`drain_list`).

Each check comes from a gate of :mod:`gates` (one tool's result against its floor; the rules of
what passes, fails or is skipped are there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.mig import mig_hosts
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.floors import GATE_MESSAGE_BYTES
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.gates import (
    FAIL,
    PASS,
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

IB_BASE_PORT = 18515  # perftest DEF_PORT; rail r listens on DEF_PORT + r
#: ib_write_lat servers listen apart from ib_write_bw's (rail r: IB_LAT_BASE_PORT + r), so a bw server
#: still winding down never takes a latency client's connection
IB_LAT_BASE_PORT = IB_BASE_PORT + 100
#: an HCA's InfiniBand port: the cabling plugs port 1 of each planned HCA (fabric/ibsim.py's net file too)
HCA_PORT = 1
FIO_SUBDIR = ".gpucluster-validate"
TOOLS = {
    "all_reduce_intra_node": "all_reduce_perf",
    "all_reduce_inter_node": "all_reduce_perf",
    "ib_write_bw": "ib_write_bw",
    "fio": "fio",
    "dcgm_diag": "dcgmi",
    "ib_write_lat": "ib_write_lat",
    "port_errors": "perfquery",
}
DRAIN_REASON_MAX = 200


# ---------------------------------------------------------------- what to run


def _under(path: str, root: str) -> bool:
    path, root = path.rstrip("/") or "/", root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


def fio_jobs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """fio targets: the checkpoint path (shared on nfs/lustre, local on local_nvme) and local scratch.

    ``gated``: the tier's storage floors apply (to the checkpoint path only). ``scope``
    shared: the floor is for the sum over all compute nodes writing at once; local: per node.
    Local scratch on the same filesystem as the checkpoints (tier1: /raid and /raid/checkpoints)
    is not measured twice.
    """
    st = plan["storage"]
    ckpt = (st.get("paths") or {}).get("checkpoints")
    shared = st["type"] in ("nfs", "lustre")
    out = []
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


def ib_write_bw_pairs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """One ib_write_bw per rail and node in a ring: node i writes to node i+1 on the same rail.

    Every NIC sends once and receives once; links are full duplex, so all pairs of a rail
    can run at the same time. RoCE uses rdma_cm to the server's rail address (-R); InfiniBand
    exchanges QP data over TCP on the management address.
    """
    fab = plan["fabric"]
    if fab["type"] not in RDMA_FABRICS:
        return []
    seen: dict[str, None] = {}  # the hosts in cabling order, each once (a dict: linear at any size)
    hcas: dict[tuple[str, int], str] = {}
    for h in fabric_links.hcas(fab["cabling"]):
        seen.setdefault(h["host"])
        hcas[(h["host"], h["rail"])] = h["hca"]
    hosts = list(seen)
    if len(hosts) < 2:
        return []
    roce = fab["type"] == "roce"
    pairs = []
    rails = sorted({rail for _host, rail in hcas})
    for rail in rails:
        for i, client in enumerate(hosts):
            server = hosts[(i + 1) % len(hosts)]
            addr = plan["hosts"][server]["addresses"]
            pairs.append(
                {
                    "rail": rail,
                    "client": client,
                    "server": server,
                    "client_hca": hcas[(client, rail)],
                    "server_hca": hcas[(server, rail)],
                    "server_address": addr["rails"][str(rail)] if roce else addr["management"],
                    "port": IB_BASE_PORT + rail,
                    "rdma_cm": roce,
                }
            )
    return pairs


def ib_write_lat_pairs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """ib_write_lat on the same ring as ib_write_bw (node i -> node i+1, every rail), on its own ports.

    RDMA writes only on a verbs fabric: InfiniBand, or RoCE through rdma_cm (-R) like ib_write_bw.
    """
    return [{**pair, "port": IB_LAT_BASE_PORT + pair["rail"]} for pair in ib_write_bw_pairs(plan)]


def port_counter_ports(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every planned compute HCA port whose perfquery counters the sweep reads (InfiniBand only:
    perfquery reads InfiniBand PortCounters through the subnet's management datagrams)."""
    fab = plan["fabric"]
    if fab["type"] != "infiniband":
        return []
    hosts = plan["hosts"]
    return [
        {"host": h["host"], "hca": h["hca"], "port": HCA_PORT, "rail": h["rail"]}
        for h in fabric_links.hcas(fab.get("cabling") or {})
        if "compute" in hosts.get(h["host"], {}).get("roles", [])
    ]


#: Why a MIG-partitioned node is left out of the whole-GPU all_reduce tests (docs/sources.md [G1]): a CUDA
#: process sees one MIG device, and MIG instances have no peer-to-peer (NVLink or PCIe) between them.
MIG_EXCLUDED = (
    "MIG-partitioned: one CUDA process sees one MIG device and MIG instances have no peer-to-peer, "
    "so NCCL all_reduce across the node's GPUs cannot run"
)


def all_reduce_nodes(plan: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(compute nodes the whole-GPU all_reduce tests run on, {node left out: why}): MIG nodes are left out."""
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    mig = set(mig_hosts(plan["gpu"].get("mig")))
    return [h for h in compute if h not in mig], {h: MIG_EXCLUDED for h in compute if h in mig}


def acceptance_tests(plan: Mapping[str, Any]) -> dict[str, Any]:
    """What the validate play runs, from the plan (the all_reduce tests on the nodes without MIG)."""
    cl = plan["cluster"]
    gate = plan["validation"]["gate_message_bytes"]
    tested, excluded = all_reduce_nodes(plan)
    nodes = len(tested) if excluded else cl["compute_nodes"]
    gpus = cl["gpus_per_node"]
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
        "ib_write_bw": ib_write_bw_pairs(plan),
        "ib_write_lat": ib_write_lat_pairs(plan),
        "port_counters": port_counter_ports(plan),
        "fio": fio_jobs(plan),
    }


# ---------------------------------------------------------------- all checks


def acceptance_checks(
    plan: dict[str, Any],
    hosts: dict[str, Any],
    cluster: dict[str, Any] | None = None,
    *,
    dcgm_level: int | None = None,
) -> list[dict[str, Any]]:
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
    reasons = val.get("reasons") or {}
    compute = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    cluster = cluster or {}
    checks: list[dict[str, Any]] = []

    def entry(host: str) -> dict[str, Any]:
        e = hosts.get(host)
        return e if isinstance(e, dict) else {}

    def run(host: str, key: str) -> Any:
        return (entry(host).get("runs") or {}).get(key)

    ar = tests["all_reduce"]
    gate = val.get("gate_message_bytes", GATE_MESSAGE_BYTES)
    excluded = ar.get("excluded") or {}
    whole = [h for h in compute if h not in excluded]  # the nodes the whole-GPU all_reduce runs on
    if ar["intra_node"]:
        for h in whole:
            checks.append(
                gate_all_reduce(
                    "all_reduce_intra_node",
                    [h],
                    run(h, "all_reduce_intra_node"),
                    installed=tool_installed(entry(h), "all_reduce_perf") or not entry(h),
                    floor=val.get("allreduce_intra_node_busbw_gbs"),
                    no_floor=reasons.get("allreduce_intra_node_busbw_gbs", "none in the plan"),
                    gate_bytes=gate,
                    expected_ranks=ar["gpus_per_node"],
                    drain=[h],
                )
            )
    if ar["inter_node"]:
        missing = [h for h in whole if entry(h) and not tool_installed(entry(h), "all_reduce_perf")]
        on_head = tool_installed(cluster, "srun") if cluster else False
        inter = (cluster.get("runs") or {}).get("all_reduce_inter_node")
        check = gate_all_reduce(
            "all_reduce_inter_node",
            whole,
            inter,
            installed=not missing and on_head,
            floor=val.get("allreduce_inter_node_busbw_gbs"),
            no_floor=reasons.get("allreduce_inter_node_busbw_gbs", "none in the plan"),
            gate_bytes=gate,
            expected_ranks=ar["ranks"],
        )
        if check["status"] == SKIPPED and check["reason"].startswith("not installed"):
            where = [f"all_reduce_perf on {', '.join(missing)}"] if missing else []
            if not on_head:
                where.append("srun on the head")
            check["reason"] = "not installed: " + "; ".join(where)
        checks.append(check)

    nic_floor = val.get("nic_write_bw_gbps")
    ib_runs = {h: loop_results(run(h, "ib_write_bw"), "rail") for h in compute}
    if tests["ib_write_bw"]:
        for pair in tests["ib_write_bw"]:
            c, s = pair["client"], pair["server"]
            lacking = [h for h in (c, s) if entry(h) and not tool_installed(entry(h), "ib_write_bw")]
            run_ = ib_runs[c].get(str(pair["rail"]))
            if entry(c) and not entry(s):
                run_ = None  # the server host sent nothing: no result, a failure
            check = gate_ib_write_bw(
                pair,
                run_,
                installed=not lacking,
                floor=nic_floor,
                no_floor=reasons.get("nic_write_bw_gbps", "none in the plan"),
            )
            if lacking:
                check["reason"] = check["reason"].replace("ib_write_bw", f"ib_write_bw on {', '.join(lacking)}", 1)
            checks.append(check)
    else:
        why = reasons.get("nic_write_bw_gbps") or ("single node" if len(compute) < 2 else "no compute fabric")
        checks.append(make_check("ib_write_bw", compute, None, nic_floor, "Gb/s", SKIPPED, f"no pairs: {why}"))

    lat_runs = {h: loop_results(run(h, "ib_write_lat"), "rail") for h in compute}
    for pair in tests.get("ib_write_lat") or []:
        c, s = pair["client"], pair["server"]
        lacking = [h for h in (c, s) if entry(h) and not tool_installed(entry(h), "ib_write_lat")]
        run_ = lat_runs[c].get(str(pair["rail"]))
        if entry(c) and not entry(s):
            run_ = None  # the server host sent nothing: no result, a failure
        check = gate_ib_write_lat(pair, run_, installed=not lacking)
        if lacking:
            check["reason"] = check["reason"].replace("ib_write_lat", f"ib_write_lat on {', '.join(lacking)}", 1)
        checks.append(check)

    def port_run(host: str, hca: str) -> Any:
        """The perfquery result of one port; a sweep the play did not run (a lab container has no
        HCA) is one skipped registration with its reason, the same for every port of the host."""
        registered = run(host, "port_errors")
        if isinstance(registered, dict) and registered.get("skipped") and "results" not in registered:
            return registered
        return loop_results(registered, "hca").get(hca)

    for p in tests.get("port_counters") or []:
        h = p["host"]
        checks.append(
            gate_port_errors(
                h,
                p["hca"],
                p["port"],
                port_run(h, p["hca"]),
                installed=tool_installed(entry(h), "perfquery") or not entry(h),
            )
        )

    floors = {"write": val.get("storage_write_gbps"), "read": val.get("storage_read_gbps")}
    for target in tests["fio"]:
        for rw in ("write", "read"):
            runs = {}
            for h in compute:
                results = loop_results(run(h, f"fio_{rw}"), "name")
                runs[h] = (results.get(target["name"]), tool_installed(entry(h), "fio") or not entry(h))
            checks += gate_fio(target, rw, runs, floor=floors[rw])

    for h in compute:
        checks.append(
            gate_dcgm(
                h, run(h, "dcgm_diag"), installed=tool_installed(entry(h), "dcgmi") or not entry(h), level=dcgm_level
            )
        )
    return checks


# ---------------------------------------------------------------- report


def drain_list(checks: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Nodes to drain: per node, its first failing check as the Slurm reason (and how many more)."""
    per_node: dict[str, list[dict[str, Any]]] = {}
    for c in checks:
        if c["status"] != FAIL:
            continue
        for node in c["drain"]:
            per_node.setdefault(node, []).append(c)
    out = []
    for node in sorted(per_node):
        first = per_node[node][0]
        if isinstance(first["measured"], (int, float)) and isinstance(first["floor"], (int, float)):
            what = f"{first['name']} {first['measured']:g} < {first['floor']:g}"
            if first["measured"] >= first["floor"]:
                what = f"{first['name']} {first['reason'].split(';')[0]}"
        else:
            what = f"{first['name']} {first['reason'].split(';')[0]}"
        more = len(per_node[node]) - 1
        reason = f"gpucluster-validate: {what}" + (f" (+{more} more)" if more else "")
        out.append({"node": node, "reason": reason.replace('"', "'")[:DRAIN_REASON_MAX]})
    return out


def acceptance_report(plan: dict[str, Any], checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The report: cluster, the floors, every check, a summary and the nodes a drain would take out."""
    counts = {s: sum(1 for c in checks if c["status"] == s) for s in (PASS, FAIL, SKIPPED)}
    result = FAIL if counts[FAIL] else ("incomplete" if counts[SKIPPED] else PASS)
    floors = {k: v for k, v in plan["validation"].items() if k != "tests"}
    tested, excluded = all_reduce_nodes(plan)
    return {
        "schema": 1,
        "cluster": plan["cluster"]["name"],
        "tier": plan["cluster"]["tier"],
        "lab": plan["cluster"]["lab"],
        "summary": {**counts, "total": len(checks), "result": result},
        "floors": floors,
        "checks": checks,
        "drain": drain_list(checks),
        # which nodes the whole-GPU all_reduce tests ran on, and why the others were left out
        "all_reduce_nodes": {"tested": tested, "excluded": excluded},
    }


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def report_markdown(report: dict[str, Any]) -> str:
    """report.md: the summary line and one table row per check."""
    s = report["summary"]
    lines = [
        f"# Acceptance report: {report['cluster']} ({report['tier']})",
        "",
        f"Result: **{s['result']}**: {s['pass']} pass, {s['fail']} fail, {s['skipped']} skipped of {s['total']} checks."
        + (" Lab run: floors are the tier's, the hardware is containers." if report.get("lab") else ""),
        "",
        "| check | nodes | measured | floor | unit | status | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    ar_nodes = report.get("all_reduce_nodes") or {}
    if ar_nodes.get("excluded"):
        tested = ar_nodes.get("tested") or []
        lines[-2:-2] = [
            f"all_reduce (whole GPUs) tested on {len(tested)} node(s): "
            f"{hostlist.compress(tested) if tested else 'none'}. Left out:",
            "",
            *(f"- {node}: {why}" for node, why in sorted(ar_nodes["excluded"].items())),
            "",
        ]
    for c in report["checks"]:
        nodes = c["nodes"] if len(c["nodes"]) <= 4 else [f"{len(c['nodes'])} nodes"]
        lines.append(
            "| "
            + " | ".join(
                _cell(v) for v in (c["name"], nodes, c["measured"], c["floor"], c["unit"], c["status"], c["reason"])
            )
            + " |"
        )
    if report["drain"]:
        lines += ["", "## Nodes failing a node-level check (drained with validate_drain_failed=true)", ""]
        lines += [f"- {d['node']}: {d['reason']}" for d in report["drain"]]
    return "\n".join(lines) + "\n"
