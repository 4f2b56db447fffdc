"""Acceptance gates: the tools' measured results against the tier's floors.

Two halves, both pure:

- what to run, from the plan (:func:`acceptance_tests`, stored as ``plan.validation.tests``):
  the all_reduce sizes, the ib_write_bw rail ring, the fio targets (:func:`fio_jobs`);
- what the results mean (:func:`acceptance_checks`): every check as a dict ``{name, nodes,
  measured, floor, unit, status: pass|fail|skipped, reason, drain}`` and the report built
  from them (:func:`acceptance_report`, :func:`report_markdown`, :func:`drain_list`).

Rules (issue "acceptance validation"):
- all_reduce is gated on the large-message rows (>= ``gate_message_bytes``, or the largest
  row present), never on ``# Avg bus bandwidth`` (it averages every size, dossier 3.1); the
  lower of out-of-place and in-place busbw counts. Any ``#wrong`` is a failure.
- A tool that is absent gives ``skipped`` with reason ``not installed``; a floor the plan
  does not have gives ``skipped`` with the plan's reason; neither is ever a pass.
- A host that sent no results, a timeout, or output that cannot be read is a failure.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import parsers
from ansible_collections.gpucluster.tiers.plugins.module_utils.validation import GATE_MESSAGE_BYTES

PASS, FAIL, SKIPPED = "pass", "fail", "skipped"
IB_BASE_PORT = 18515  # perftest DEF_PORT; rail r listens on DEF_PORT + r
FIO_SUBDIR = ".gpucluster-validate"
TOOLS = {
    "all_reduce_intra_node": "all_reduce_perf",
    "all_reduce_inter_node": "all_reduce_perf",
    "ib_write_bw": "ib_write_bw",
    "fio": "fio",
    "dcgm_diag": "dcgmi",
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
    if fab["type"] not in ("infiniband", "roce"):
        return []
    hosts: list[str] = []
    hcas: dict[tuple[str, int], str] = {}
    for h in fab["cabling"].get("hcas") or []:
        if h["host"] not in hosts:
            hosts.append(h["host"])
        hcas[(h["host"], h["rail"])] = h["hca"]
    if len(hosts) < 2:
        return []
    roce = fab["type"] == "roce"
    pairs = []
    rails = sorted({rail for _, rail in hcas})
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


def acceptance_tests(plan: dict[str, Any]) -> dict[str, Any]:
    """What the validate play runs, from the plan."""
    cl = plan["cluster"]
    gate = plan["validation"]["gate_message_bytes"]
    nodes = cl["compute_nodes"]
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
            "hostlist": cl["compute_hostlist"],
        },
        "ib_write_bw": ib_write_bw_pairs(plan),
        "fio": fio_jobs(plan),
    }


# ---------------------------------------------------------------- results in


def loop_results(registered: Any, key: str) -> dict[str, Any]:
    """An Ansible loop registration ({results: [{item: {...}, ...}]}) as {str(item[key]): result}.

    A plain mapping of name -> result is returned unchanged.
    """
    if not isinstance(registered, dict):
        return {}
    if isinstance(registered.get("results"), list):
        out = {}
        for r in registered["results"]:
            item = r.get("item") if isinstance(r, dict) else None
            if isinstance(item, dict) and key in item:
                out[str(item[key])] = r
        return out
    return registered


def _installed(entry: dict[str, Any], tool: str) -> bool:
    tools = entry.get("tools") or {}
    if isinstance(tools, list):
        return tool in tools
    return bool(tools.get(tool))


def _tail(text: str, n: int = 160) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:n] if lines else ""


def _outcome(run: Any, installed: bool, tool: str) -> tuple[str | None, str]:
    """(status, reason) when a run cannot be gated; (None, "") when its stdout should be parsed."""
    if not installed:
        return SKIPPED, f"not installed: {tool}"
    if not isinstance(run, dict) or not run:
        return FAIL, f"no result for {tool} (host unreachable or the run missing)"
    if run.get("skipped"):
        return SKIPPED, f"not run: {run.get('skip_reason') or run.get('msg') or 'skipped'}"
    rc = run.get("rc")
    if rc == 124:
        return FAIL, f"timed out ({tool} killed by timeout)"
    if rc in (125, 126, 127):
        return FAIL, f"could not run {tool} (rc {rc}): {_tail(run.get('stderr', '')) or run.get('msg', '')}"
    if rc is None and run.get("failed"):
        return FAIL, f"{tool} failed: {run.get('msg', '')}"[:300]
    return None, ""


def _check(
    name: str,
    nodes: list[str],
    measured: Any,
    floor: Any,
    unit: str,
    status: str,
    reason: str,
    drain: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "nodes": nodes,
        "measured": measured,
        "floor": floor,
        "unit": unit,
        "status": status,
        "reason": reason,
        "drain": (drain or []) if status == FAIL else [],
    }


def _compare(measured: float, floor: float | None, no_floor: str) -> tuple[str, str]:
    if floor is None:
        return SKIPPED, f"no floor: {no_floor}"
    if measured >= floor:
        return PASS, ""
    return FAIL, f"{measured:g} < {floor:g}"


def _size(n: int) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------- gates


def gate_all_reduce(
    name: str,
    nodes: list[str],
    run: Any,
    *,
    installed: bool,
    floor: float | None,
    no_floor: str,
    gate_bytes: int = GATE_MESSAGE_BYTES,
    expected_ranks: int | None = None,
    drain: list[str] | None = None,
) -> dict[str, Any]:
    """all_reduce busbw on the large-message rows against ``floor`` (GB/s); #wrong fails."""
    status, reason = _outcome(run, installed, "all_reduce_perf")
    if status:
        return _check(name, nodes, None, floor, "GB/s", status, reason, drain)
    try:
        parsed = parsers.parse_all_reduce(run.get("stdout", ""))
    except parsers.ParseError as exc:
        detail = _tail(run.get("stderr", "")) or str(exc)
        return _check(name, nodes, None, floor, "GB/s", FAIL, f"rc {run.get('rc')}: {detail}", drain)
    rows = parsers.gate_rows(parsed, gate_bytes)
    if not rows:
        why = "; ".join(parsed["errors"][:2]) or "no result rows"
        return _check(name, nodes, None, floor, "GB/s", FAIL, why, drain)
    measured = min(min(r["out_of_place"]["busbw"], r["in_place"]["busbw"]) for r in rows)
    sizes = f"{_size(rows[0]['size'])}" + (f"..{_size(rows[-1]['size'])}" if len(rows) > 1 else "")
    basis = f"lowest busbw at {sizes}" + (
        "" if rows[-1]["size"] >= gate_bytes else f" (below the {_size(gate_bytes)} gate size)"
    )
    wrong = parsers.wrong_total(parsed)
    problems = []
    if wrong:
        problems.append(f"#wrong {wrong}")
    if parsed["out_of_bounds"]:
        problems.append(f"out of bounds values {parsed['out_of_bounds']}")
    if expected_ranks and parsed["ranks"] and parsed["ranks"] != expected_ranks:
        problems.append(f"{parsed['ranks']} ranks, expected {expected_ranks} (nccl-tests built without MPI?)")
    if run.get("rc") not in (0, None):
        problems.append(f"rc {run.get('rc')}")
    status, why = _compare(measured, floor, no_floor)
    if problems:
        status, why = FAIL, "; ".join(problems + ([why] if why and status == FAIL else []))
    reason = f"{why}; {basis}" if why else basis
    if parsed["avg_busbw"] is not None:
        reason += f"; '# Avg bus bandwidth' {parsed['avg_busbw']:g} (not gated)"
    return _check(name, nodes, measured, floor, "GB/s", status, reason, drain)


def gate_ib_write_bw(pair: dict[str, Any], run: Any, *, installed: bool, floor: float | None, no_floor: str) -> dict:
    """ib_write_bw average Gb/s of one rail pair against the per-NIC floor."""
    name = f"ib_write_bw_rail{pair['rail']}"
    nodes = [pair["client"], pair["server"]]
    drain = list(nodes)
    status, reason = _outcome(run, installed, "ib_write_bw")
    label = f"{pair['client']}:{pair['client_hca']} -> {pair['server']}:{pair['server_hca']}"
    if status:
        return _check(name, nodes, None, floor, "Gb/s", status, f"{reason} ({label})", drain)
    try:
        parsed = parsers.parse_ib_write_bw(run.get("stdout", ""))
    except parsers.ParseError as exc:
        detail = _tail(run.get("stderr", "")) or str(exc)
        return _check(name, nodes, None, floor, "Gb/s", FAIL, f"rc {run.get('rc')}: {detail} ({label})", drain)
    measured = parsed["bw_avg_gbps"]
    status, why = _compare(measured, floor, no_floor)
    if run.get("rc") not in (0, None):
        status, why = FAIL, f"rc {run.get('rc')}" + (f"; {why}" if why else "")
    basis = f"BW average at {_size(parsed['msg_bytes'])}, {label}"
    return _check(name, nodes, measured, floor, "Gb/s", status, f"{why}; {basis}" if why else basis, drain)


def _fio_measure(run: Any, installed: bool, rw: str) -> tuple[float | None, str | None, str]:
    status, reason = _outcome(run, installed, "fio")
    if status:
        return None, status, reason
    try:
        parsed = parsers.parse_fio_json(run.get("stdout", ""))
    except parsers.ParseError as exc:
        return None, FAIL, f"rc {run.get('rc')}: {_tail(run.get('stderr', '')) or exc}"
    if parsed["errors"] or run.get("rc") not in (0, None):
        return None, FAIL, "; ".join(parsed["errors"]) or f"rc {run.get('rc')}: {_tail(run.get('stderr', ''))}"
    return parsed[f"{rw}_gbps"], None, ""


def gate_fio(
    target: dict[str, Any],
    rw: str,
    runs: dict[str, tuple[Any, bool]],
    *,
    floor: float | None,
) -> list[dict[str, Any]]:
    """fio sequential ``rw`` GB/s; ``runs``: host -> (run, installed). Shared: one sum over hosts; local: per node."""
    name = f"fio_{rw}_{target['name']}"
    no_floor = "local scratch is not gated (the tier's storage floors apply to the checkpoint path)"
    floor = floor if target["gated"] else None
    results = {h: _fio_measure(run, inst, rw) for h, (run, inst) in runs.items()}
    if target["scope"] == "local":
        out = []
        for host, (value, status, reason) in results.items():
            if status:
                out.append(_check(name, [host], None, floor, "GB/s", status, reason, [host]))
                continue
            st, why = _compare(value, floor, no_floor)
            out.append(_check(name, [host], value, floor, "GB/s", st, why or target["path"], [host]))
        return out
    hosts = sorted(results)
    if results and all(status == SKIPPED for _, status, _ in results.values()):
        reasons = sorted({reason for _, _, reason in results.values()})
        return [_check(name, hosts, None, floor, "GB/s", SKIPPED, "; ".join(reasons))]
    missing = {h: reason for h, (_, status, reason) in results.items() if status}
    total = round(sum(v for v, status, _ in results.values() if not status and v is not None), 3)
    basis = f"sum of {len(results) - len(missing)} concurrent clients on {target['path']}"
    if missing or not results:
        detail = "; ".join(f"{h}: {r}" for h, r in sorted(missing.items())) or "no compute node results"
        return [_check(name, hosts, total, floor, "GB/s", FAIL, f"incomplete: {detail}; {basis}")]
    st, why = _compare(total, floor, no_floor)
    # cluster-wide storage: a shortfall is the storage system's, no node is drained for it
    return [_check(name, hosts, total, floor, "GB/s", st, f"{why}; {basis}" if why else basis)]


def gate_dcgm(host: str, run: Any, *, installed: bool, level: int | None = None) -> dict[str, Any]:
    """dcgmi diag: any test with status Fail fails the node; Warn is reported, not failed."""
    name = "dcgm_diag" + (f"_r{level}" if level else "")
    status, reason = _outcome(run, installed, "dcgmi")
    if status:
        return _check(name, [host], None, "all tests pass", "", status, reason, [host])
    try:
        parsed = parsers.parse_dcgm_diag(run.get("stdout", ""))
    except parsers.ParseError as exc:
        detail = _tail(run.get("stderr", "")) or _tail(run.get("stdout", "")) or str(exc)
        return _check(name, [host], None, "all tests pass", "", FAIL, f"rc {run.get('rc')}: {detail}", [host])
    tests = parsed["tests"]
    failed = [t for t in tests if t["status"] == "fail"]
    warned = [t for t in tests if t["status"] == "warn"]
    ran = [t for t in tests if t["status"] in ("pass", "fail", "warn")]
    measured = f"{len(ran) - len(failed)}/{len(ran)} passed" if ran else "0 tests ran"
    notes = [f"warn: {t['name']}" for t in warned]
    if parsed["runtime_error"]:
        return _check(name, [host], measured, "all tests pass", "", FAIL, parsed["runtime_error"], [host])
    if failed:
        why = ", ".join(
            t["name"] + (f" (GPU {','.join(t['failed_entities'])})" if t["failed_entities"] else "") for t in failed
        )
        return _check(name, [host], measured, "all tests pass", "", FAIL, "; ".join([f"failed: {why}", *notes]), [host])
    if not ran:
        return _check(name, [host], measured, "all tests pass", "", SKIPPED, "every test skipped", [host])
    return _check(name, [host], measured, "all tests pass", "", PASS, "; ".join(notes), [host])


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
    client result, or the loop registration). ``cluster``: the head's ``{"tools", "runs":
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
    if ar["intra_node"]:
        for h in compute:
            checks.append(
                gate_all_reduce(
                    "all_reduce_intra_node",
                    [h],
                    run(h, "all_reduce_intra_node"),
                    installed=_installed(entry(h), "all_reduce_perf") or not entry(h),
                    floor=val.get("allreduce_intra_node_busbw_gbs"),
                    no_floor=reasons.get("allreduce_intra_node_busbw_gbs", "none in the plan"),
                    gate_bytes=gate,
                    expected_ranks=ar["gpus_per_node"],
                    drain=[h],
                )
            )
    if ar["inter_node"]:
        missing = [h for h in compute if entry(h) and not _installed(entry(h), "all_reduce_perf")]
        on_head = _installed(cluster, "srun") if cluster else False
        inter = (cluster.get("runs") or {}).get("all_reduce_inter_node")
        check = gate_all_reduce(
            "all_reduce_inter_node",
            compute,
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
            lacking = [h for h in (c, s) if entry(h) and not _installed(entry(h), "ib_write_bw")]
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
        checks.append(_check("ib_write_bw", compute, None, nic_floor, "Gb/s", SKIPPED, f"no pairs: {why}"))

    floors = {"write": val.get("storage_write_gbps"), "read": val.get("storage_read_gbps")}
    for target in tests["fio"]:
        for rw in ("write", "read"):
            runs = {}
            for h in compute:
                results = loop_results(run(h, f"fio_{rw}"), "name")
                runs[h] = (results.get(target["name"]), _installed(entry(h), "fio") or not entry(h))
            checks += gate_fio(target, rw, runs, floor=floors[rw])

    for h in compute:
        checks.append(
            gate_dcgm(h, run(h, "dcgm_diag"), installed=_installed(entry(h), "dcgmi") or not entry(h), level=dcgm_level)
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
    return {
        "schema": 1,
        "cluster": plan["cluster"]["name"],
        "tier": plan["cluster"]["tier"],
        "lab": plan["cluster"]["lab"],
        "summary": {**counts, "total": len(checks), "result": result},
        "floors": floors,
        "checks": checks,
        "drain": drain_list(checks),
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
