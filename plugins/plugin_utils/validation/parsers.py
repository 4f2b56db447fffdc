"""Parsers of the acceptance tools' output: plain text or JSON in, plain dicts out.

Pure functions (no I/O): the validate play collects each tool's stdout on the hosts and
the acceptance gates (:mod:`acceptance`) read it through these parsers.

Formats, with where each was taken from:

- nccl-tests ``all_reduce_perf``: the result table of ``src/util.cu`` (NVIDIA/nccl-tests,
  docs/sources.md §3.1): ``size count type redop root`` then, out-of-place and in-place, ``time algbw
  busbw #wrong``; ``# Out of bounds values : N OK|FAILED`` and ``# Avg bus bandwidth : X``.
  GB/s there is 1e9 B/s. ``#wrong`` is ``N/A`` where a check does not apply.
- perftest ``ib_write_bw``: ``RESULT_FMT_G``/``RESULT_FMT`` and ``REPORT_FMT`` of
  ``src/perftest_parameters.h`` (linux-rdma/perftest); ``--report_gbits`` reports Gb/s
  (1e9 bit/s, ``format_factor = 125000000``), otherwise MB/s (``0x100000`` B/s).
- perftest ``ib_write_lat``/``ib_send_lat``: the header ``#bytes #iterations t_min[usec] t_max[usec]
  t_typical[usec] t_avg[usec] t_stdev[usec] 99% percentile[usec] 99.9% percentile[usec]`` and one
  row per size (``REPORT_FMT_LAT`` of ``src/perftest_parameters.h``, perftest >= 4.x; older builds
  print the first five columns only). Lines such as ``Conflicting CPU frequency values detected``
  may sit between the header and a row. Real samples: tests/data/acceptance/README.md.
- infiniband-diags ``perfquery [-C <ca> -P <port>]``: ``# Port counters: Lid N port P (CapMask: ...)``
  then ``Name:....value`` lines (infiniband-diags 44.0, recorded on ibsim: tests/data/perfquery/).
- fio ``--output-format=json``: ``jobs[].read|write.bw`` in KiB/s and ``bw_bytes`` in B/s
  (fio >= 3.x); one entry per job, or per group with ``--group_reporting``.
- ``dcgmi diag -r N -j``: DCGM 4.x ``{"DCGM Diagnostic": {"test_categories": [{"category",
  "tests": [{"name", "results": [{"entity_group", "entity_id", "status", "warnings"}],
  "test_summary": {"status"}}]}]}}`` (NVIDIA/DCGM ``testing/python3/dcgm_diag_schema.json``);
  DCGM 2.x/3.x ``{"DCGM GPU Diagnostic": ...}`` with ``gpu_ids`` and no ``test_summary``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import (
    AllReduceResult,
    AllReduceRow,
    DcgmResult,
    DcgmTest,
    FioResult,
    IbBwRow,
    IbLatResult,
    IbWriteBwResult,
    LatRow,
    PerfqueryResult,
)

GB = 1e9
PERFTEST_MB = 2**20  # perftest "MB/sec" is MiB/s (format_factor 0x100000)


class ParseError(ValueError):
    """A tool's output could not be read (empty, truncated, another tool's output)."""


# ---------------------------------------------------------------- nccl-tests

_NCCL_ROW = re.compile(
    r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\S+)\s+(?P<redop>\S+)\s+(?P<root>-?\d+)\s+"
    r"(?P<oop_time>[\d.]+)\s+(?P<oop_algbw>[\d.]+)\s+(?P<oop_busbw>[\d.]+)\s+(?P<oop_wrong>\S+)\s+"
    r"(?P<ip_time>[\d.]+)\s+(?P<ip_algbw>[\d.]+)\s+(?P<ip_busbw>[\d.]+)\s+(?P<ip_wrong>\S+)"
)
# Older nccl-tests print the footer without the leading "#".
_NCCL_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)\s*(\S+)?")
_NCCL_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\S+)?")
_NCCL_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_NCCL_ERROR = re.compile(r"(NCCL failure|CUDA failure|Test failure|FAILED|\berror\b)", re.IGNORECASE)


def _wrong(value: str) -> int | None:
    """``#wrong`` as a count; None for ``N/A`` (no check applies)."""
    return int(value) if value.isdigit() else None


def parse_all_reduce(text: str) -> AllReduceResult:
    """The all_reduce_perf table: rows, ``# Avg bus bandwidth``, out-of-bounds count, ranks, errors."""
    rows: list[AllReduceRow] = []
    avg = None
    oob = None
    ranks: dict[int, str] = {}
    errors: list[str] = []
    for line in (text or "").splitlines():
        if m := _NCCL_AVG.match(line.strip()):
            avg = float(m.group(1))
            if m.group(2) == "FAILED":  # NCCL_TESTS_MIN_BW was set and the average missed it
                errors.append(line.strip())
            continue
        if m := _NCCL_OOB.match(line.strip()):
            oob = int(m.group(1))
            if m.group(2) and m.group(2) != "OK":
                errors.append(line.strip())
            continue
        if line.lstrip().startswith("#"):
            if m := _NCCL_RANK.match(line):
                ranks[int(m.group(1))] = m.group(2)
            continue
        if m := _NCCL_ROW.match(line):
            g = m.groupdict()
            rows.append(
                {
                    "size": int(g["size"]),
                    "count": int(g["count"]),
                    "type": g["type"],
                    "redop": g["redop"],
                    "root": int(g["root"]),
                    "out_of_place": {
                        "time_us": float(g["oop_time"]),
                        "algbw": float(g["oop_algbw"]),
                        "busbw": float(g["oop_busbw"]),
                        "wrong": _wrong(g["oop_wrong"]),
                    },
                    "in_place": {
                        "time_us": float(g["ip_time"]),
                        "algbw": float(g["ip_algbw"]),
                        "busbw": float(g["ip_busbw"]),
                        "wrong": _wrong(g["ip_wrong"]),
                    },
                }
            )
        elif line.strip() and _NCCL_ERROR.search(line):
            errors.append(line.strip())
    if not rows and avg is None:
        raise ParseError("no all_reduce_perf result rows and no '# Avg bus bandwidth' line")
    return {
        "rows": rows,
        "avg_busbw": avg,
        "out_of_bounds": oob,
        "ranks": len(ranks) or None,
        "rank_hosts": sorted(set(ranks.values())),
        "errors": errors,
    }


def wrong_total(parsed: AllReduceResult) -> int:
    """Sum of every ``#wrong`` count (out-of-place and in-place) over all rows."""
    return sum((r["out_of_place"]["wrong"] or 0) + (r["in_place"]["wrong"] or 0) for r in parsed["rows"])


def gate_rows(parsed: AllReduceResult, gate_bytes: int) -> list[AllReduceRow]:
    """Rows at or above ``gate_bytes``; if none reaches it, the largest row alone."""
    rows = parsed["rows"]
    if not rows:
        return []
    large = [r for r in rows if r["size"] >= gate_bytes]
    return large or [max(rows, key=lambda r: r["size"])]


# ---------------------------------------------------------------- perftest

_IB_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(Gb|MB)/sec\]")
_IB_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
_IB_FIELD = re.compile(r"(Device|Link type|Number of qps|Transport type|Mtu)\s*:\s*(\S+)")


def _perftest_preamble(line: str, fields: dict[str, str], errors: list[str]) -> None:
    """A perftest line before its table: its ``key : value`` fields (the first wins) and error lines."""
    for key, value in _IB_FIELD.findall(line):
        fields.setdefault(key, value)
    low = line.lower()
    if "couldn't" in low or "unable" in low or "failed" in low or "error" in low:
        errors.append(line.strip())


def parse_ib_write_bw(text: str) -> IbWriteBwResult:
    """ib_write_bw (client side): device, link type, result rows in Gb/s; ``bw_avg_gbps`` of the largest message."""
    fields: dict[str, str] = {}
    rows: list[IbBwRow] = []
    unit = None
    errors: list[str] = []
    for line in (text or "").splitlines():
        if unit is None:
            if m := _IB_HEADER.search(line):
                unit = m.group(2)
                continue
            _perftest_preamble(line, fields, errors)
            continue
        if m := _IB_ROW.match(line):
            factor = 1.0 if unit == "Gb" else PERFTEST_MB * 8 / GB
            rows.append(
                {
                    "bytes": int(m.group(1)),
                    "iterations": int(m.group(2)),
                    "bw_peak_gbps": round(float(m.group(3)) * factor, 2),
                    "bw_avg_gbps": round(float(m.group(4)) * factor, 2),
                    "msg_rate_mpps": float(m.group(5)),
                }
            )
        elif line.strip() and not line.strip().startswith("-"):
            low = line.lower()
            if "couldn't" in low or "unable" in low or "failed" in low or "error" in low:
                errors.append(line.strip())
    if unit is None or not rows:
        raise ParseError("no ib_write_bw result line (#bytes #iterations BW peak BW average MsgRate)")
    largest = max(rows, key=lambda r: r["bytes"])
    return {
        "device": fields.get("Device"),
        "link_type": fields.get("Link type"),
        "transport": fields.get("Transport type"),
        "qps": int(fields["Number of qps"]) if fields.get("Number of qps", "").isdigit() else None,
        "unit": f"{unit}/sec",
        "rows": rows,
        "msg_bytes": largest["bytes"],
        "bw_avg_gbps": largest["bw_avg_gbps"],
        "errors": errors,
    }


# ---------------------------------------------------------------- perftest latency

_LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]\s+t_max\[usec\]\s+t_typical\[usec\]")
_LAT_COLUMNS = ("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9")
_LAT_ROW = re.compile(r"^\s*(\d+)\s+(\d+)((?:\s+[\d.]+){3,7})\s*$")
_LAT_TOOLS = {"RDMA_Write Latency Test": "ib_write_lat", "Send Latency Test": "ib_send_lat"}


def parse_ib_lat(text: str) -> IbLatResult:
    """ib_write_lat/ib_send_lat (client side): result rows in usec; ``typical_us`` of the smallest message.

    Rows carry ``t_min``, ``t_max``, ``t_typical`` and, where perftest prints them, ``t_avg``,
    ``t_stdev``, ``p99`` and ``p99_9`` (usec). Lines between rows that are not rows (CPU frequency
    warnings) are skipped; an error line before the header is kept in ``errors``.
    """
    fields: dict[str, str] = {}
    rows: list[LatRow] = []
    errors: list[str] = []
    tool = None
    header = False
    for line in (text or "").splitlines():
        for title, name in _LAT_TOOLS.items():
            if title in line:
                tool = name
        if not header:
            if _LAT_HEADER.search(line):
                header = True
                continue
            _perftest_preamble(line, fields, errors)
            continue
        if m := _LAT_ROW.match(line):
            rows.append(_lat_row(int(m.group(1)), int(m.group(2)), [float(v) for v in m.group(3).split()]))
    if not header or not rows:
        raise ParseError("no perftest latency result line (#bytes #iterations t_min t_max t_typical ...)")
    smallest = min(rows, key=lambda r: r["bytes"])
    return {
        "tool": tool,
        "device": fields.get("Device"),
        "link_type": fields.get("Link type"),
        "rows": rows,
        "msg_bytes": smallest["bytes"],
        "typical_us": smallest["t_typical"],
        "p99_us": smallest.get("p99"),
        "max_us": smallest["t_max"],
        "errors": errors,
    }


def _lat_row(size: int, iterations: int, values: list[float]) -> LatRow:
    """A latency row of 3 to 7 values, in :data:`_LAT_COLUMNS` order (the optional columns only when printed)."""
    row: LatRow = {
        "bytes": size,
        "iterations": iterations,
        "t_min": values[0],
        "t_max": values[1],
        "t_typical": values[2],
    }
    if len(values) > 3:
        row["t_avg"] = values[3]
    if len(values) > 4:
        row["t_stdev"] = values[4]
    if len(values) > 5:
        row["p99"] = values[5]
    if len(values) > 6:
        row["p99_9"] = values[6]
    return row


# ---------------------------------------------------------------- perfquery (port counters)

_PQ_HEADER = re.compile(r"^# Port (?:extended )?counters: Lid (\d+) port (\d+)")
_PQ_FIELD = re.compile(r"^(\w+):\.+(\S+)\s*$")


def parse_perfquery(text: str) -> PerfqueryResult:
    """perfquery's PortCounters: ``{"lid", "port", "counters": {name: int}}`` (hex selects as ints)."""
    lid = port = None
    counters: dict[str, int] = {}
    for line in (text or "").splitlines():
        if m := _PQ_HEADER.match(line):
            lid, port = int(m.group(1)), int(m.group(2))
            continue
        if lid is not None and (m := _PQ_FIELD.match(line)):
            name, value = m.groups()
            try:
                counters[name] = int(value, 0)
            except ValueError:
                continue
    if lid is None or not counters:
        raise ParseError("no perfquery port counters (# Port counters: Lid N port P, then Name:....value)")
    return {"lid": lid, "port": port, "counters": counters, "extended": "extended" in text.split("\n", 1)[0]}


# ---------------------------------------------------------------- fio and dcgmi (JSON)


def _json_document(text: str, tool: str) -> Any:
    """The first JSON object in ``text`` (tools may print a warning line before it). Free JSON of another tool,
    read key by key as fio and dcgmi document it (Any: each read below is the tool's documented shape)."""
    start = (text or "").find("{")
    if start < 0:
        raise ParseError(f"no JSON object in the {tool} output")
    try:
        doc, _end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ParseError(f"{tool} output is not valid JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(doc, dict):
        raise ParseError(f"{tool} output is not a JSON object")
    return doc


def _fio_bytes_per_s(side: Any) -> float:
    if "bw_bytes" in side:
        return float(side["bw_bytes"])
    return float(side.get("bw", 0)) * 1024  # KiB/s


def parse_fio_json(text: str) -> FioResult:
    """fio JSON: aggregate read and write GB/s over every job (or group), bytes moved, job errors."""
    doc = _json_document(text, "fio")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ParseError("fio JSON has no jobs")
    return {
        "version": doc.get("fio version"),
        "jobs": len(jobs),
        "errors": [f"job {j.get('jobname')}: error {j['error']}" for j in jobs if j.get("error")],
        "read_gbps": round(sum(_fio_bytes_per_s(j.get("read") or {}) for j in jobs) / GB, 3),
        "read_bytes": sum(int((j.get("read") or {}).get("io_bytes", 0)) for j in jobs),
        "write_gbps": round(sum(_fio_bytes_per_s(j.get("write") or {}) for j in jobs) / GB, 3),
        "write_bytes": sum(int((j.get("write") or {}).get("io_bytes", 0)) for j in jobs),
    }


_DCGM_STATUS = {
    "pass": "pass",
    "passed": "pass",
    "fail": "fail",
    "failed": "fail",
    "warn": "warn",
    "warning": "warn",
    "skip": "skip",
    "skipped": "skip",
    "not run": "not_run",
    "not_run": "not_run",
}
_DCGM_RANK = {"fail": 4, "warn": 3, "pass": 2, "not_run": 1, "skip": 0}


def dcgm_status(value: object) -> str:
    """A DCGM result status (PASS, Pass, Fail, SKIPPED, ...) as pass|fail|warn|skip|not_run."""
    return _DCGM_STATUS.get(str(value or "").strip().lower(), "not_run")


def _dcgm_warnings(result: Any) -> list[str]:
    out = []
    for w in result.get("warnings") or []:
        out.append(str(w.get("warning", "")) if isinstance(w, dict) else str(w))
    return [w for w in out if w]


def parse_dcgm_diag(text: str) -> DcgmResult:
    """``dcgmi diag -j``: per test its category, status and the GPUs that failed, for DCGM 2.x to 4.x."""
    doc = _json_document(text, "dcgmi diag")
    root = doc.get("DCGM Diagnostic") or doc.get("DCGM GPU Diagnostic")
    if not isinstance(root, dict):
        raise ParseError("dcgmi diag JSON has no 'DCGM Diagnostic' (or 'DCGM GPU Diagnostic') object")
    meta = doc.get("metadata") or {}
    tests: list[DcgmTest] = []
    for cat in root.get("test_categories") or []:
        if not isinstance(cat, dict):
            continue
        for test in cat.get("tests") or []:
            if not isinstance(test, dict):
                continue  # DCGM 3.x writes null between tests
            results = [r for r in test.get("results") or [] if isinstance(r, dict)]
            statuses = [dcgm_status(r.get("status")) for r in results]
            summary = (test.get("test_summary") or {}).get("status")
            if summary is not None:
                status = dcgm_status(summary)
            elif statuses:
                status = max(statuses, key=_DCGM_RANK.__getitem__)
            else:
                status = "not_run"
            failed = [
                str(r.get("entity_id", r.get("gpu_ids", r.get("gpu_id", "?"))))
                for r in results
                if dcgm_status(r.get("status")) == "fail"
            ]
            warnings = [w for r in results for w in _dcgm_warnings(r)]
            tests.append(
                {
                    "category": cat.get("category"),
                    "name": test.get("name"),
                    "status": status,
                    "failed_entities": failed,
                    "warnings": warnings,
                }
            )
    return {
        "version": meta.get("version") or root.get("version"),
        "driver": meta.get("Driver Version Detected") or root.get("Driver Version Detected"),
        "runtime_error": root.get("runtime_error") or doc.get("runtime_error"),
        "tests": tests,
    }
