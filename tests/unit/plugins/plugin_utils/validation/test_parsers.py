"""Parsers of the acceptance tools on recorded outputs (tests/data/acceptance/README.md says where each came from)."""

from __future__ import annotations

import pytest
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import parsers
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.floors import GATE_MESSAGE_BYTES, busbw_factor

DATA = ROOT / "tests" / "data" / "acceptance"


def _read(name: str) -> str:
    return (DATA / name).read_text()


# ---------------------------------------------------------------- all_reduce_perf


def test_all_reduce_dossier_sample_verbatim() -> None:
    """Dossier 3.4: 8x H200, one 8 GiB row, avg 477.416."""
    r = parsers.parse_all_reduce(_read("all_reduce_h200_1node_dossier.txt"))
    assert len(r["rows"]) == 1
    row = r["rows"][0]
    assert row["size"] == 8589934592 and row["count"] == 2147483648
    assert (row["type"], row["redop"], row["root"]) == ("float", "sum", -1)
    assert row["out_of_place"] == {"time_us": 31533.0, "algbw": 272.41, "busbw": 476.72, "wrong": 0}
    assert row["in_place"] == {"time_us": 31441.0, "algbw": 273.20, "busbw": 478.11, "wrong": 0}
    assert r["avg_busbw"] == 477.416
    assert r["out_of_bounds"] == 0 and r["errors"] == []
    # busbw = algbw x 2(n-1)/n (dossier 3.2)
    assert row["out_of_place"]["algbw"] * busbw_factor("all_reduce", 8) == pytest.approx(476.72, abs=0.01)


def test_all_reduce_multisize_average_is_not_the_peak() -> None:
    """2x8 H100, 8 B..8 GiB: avg 50.906 while the 8 GiB row is ~220 GB/s (why the gate ignores the average)."""
    r = parsers.parse_all_reduce(_read("all_reduce_h100_2x8_multisize.txt"))
    assert len(r["rows"]) == 31
    assert r["rows"][0]["size"] == 8 and r["rows"][-1]["size"] == 8 * 2**30
    assert r["avg_busbw"] == 50.906
    assert r["ranks"] == 16
    assert r["rank_hosts"] == ["alpha-test-16way-node-001", "alpha-test-16way-node-002"]
    gate = parsers.gate_rows(r, GATE_MESSAGE_BYTES)
    assert [g["size"] for g in gate] == [8589934592]
    assert gate[0]["out_of_place"]["busbw"] == 219.51 and gate[0]["in_place"]["busbw"] == 220.61
    assert parsers.wrong_total(r) == 0


def test_all_reduce_gate_rows_fall_back_to_the_largest_row() -> None:
    r = parsers.parse_all_reduce(_read("all_reduce_h100_2x8_multisize.txt"))
    r["rows"] = [row for row in r["rows"] if row["size"] <= 2**30]
    assert [g["size"] for g in parsers.gate_rows(r, GATE_MESSAGE_BYTES)] == [2**30]
    # and several rows at or above the gate size are all kept
    r = parsers.parse_all_reduce(_read("all_reduce_h100_1node_low_busbw.txt"))
    assert [g["size"] for g in parsers.gate_rows(r, 2 * 2**30)] == [2 * 2**30, 4 * 2**30, 8 * 2**30]


def test_all_reduce_wrong_values_and_failed_footer() -> None:
    r = parsers.parse_all_reduce(_read("all_reduce_h100_1node_wrong.txt"))
    assert parsers.wrong_total(r) == 12
    assert r["rows"][-1]["out_of_place"]["wrong"] == 12
    assert r["out_of_bounds"] == 12
    assert r["errors"] == ["# Out of bounds values : 12 FAILED"]


def test_all_reduce_na_wrong_and_old_footer_without_hash() -> None:
    text = (
        "        1024           256     float     sum      -1    60.24    0.02    0.03    N/A"
        "    62.06    0.02    0.03    N/A\n"
        " Out of bounds values : 0 OK\n"
        " Avg bus bandwidth    : 0.03 \n"
    )
    r = parsers.parse_all_reduce(text)
    assert r["rows"][0]["out_of_place"]["wrong"] is None
    assert parsers.wrong_total(r) == 0
    assert r["avg_busbw"] == 0.03 and r["out_of_bounds"] == 0


def test_all_reduce_min_bw_failed_average_is_an_error() -> None:
    text = _read("all_reduce_h200_1node_dossier.txt").replace(
        "# Avg bus bandwidth    : 477.416", "# Avg bus bandwidth    : 477.416 FAILED"
    )
    assert parsers.parse_all_reduce(text)["errors"] == ["# Avg bus bandwidth    : 477.416 FAILED"]


@pytest.mark.parametrize("text", ["", "srun: error: compute02: task 8: Exited with exit code 1\n", "# nThread 1\n"])
def test_all_reduce_without_a_table_is_a_parse_error(text: str) -> None:
    with pytest.raises(parsers.ParseError):
        parsers.parse_all_reduce(text)


def test_all_reduce_error_lines_are_kept() -> None:
    error = "compute01: Test NCCL failure common.cu:1005 'unhandled system error'"
    text = _read("all_reduce_h200_1node_dossier.txt") + error + "\n"
    assert parsers.parse_all_reduce(text)["errors"] == [error]


# ---------------------------------------------------------------- ib_write_bw


def test_ib_write_bw_healthy_ndr_link() -> None:
    r = parsers.parse_ib_write_bw(_read("ib_write_bw_ndr_rail0_ok.txt"))
    assert (r["device"], r["link_type"], r["transport"], r["qps"]) == ("mlx5_0", "IB", "IB", 1)
    assert r["unit"] == "Gb/sec"
    assert r["rows"] == [
        {"bytes": 1048576, "iterations": 466859, "bw_peak_gbps": 0.0, "bw_avg_gbps": 391.63, "msg_rate_mpps": 0.046686}
    ]
    assert r["bw_avg_gbps"] == 391.63 and r["msg_bytes"] == 1048576


def test_ib_write_bw_degraded_link() -> None:
    r = parsers.parse_ib_write_bw(_read("ib_write_bw_ndr_rail3_degraded.txt"))
    assert r["device"] == "mlx5_3" and r["bw_avg_gbps"] == 196.41


def test_ib_write_bw_mb_per_s_is_mib_per_s() -> None:
    """Without --report_gbits perftest reports MB/sec = 2^20 B/s (format_factor 0x100000)."""
    text = (
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
        " 65536      5000             11728.47            11728.47\t\t   0.187655\n"
    )
    r = parsers.parse_ib_write_bw(text)
    assert r["unit"] == "MB/sec"
    assert r["bw_avg_gbps"] == pytest.approx(11728.47 * 2**20 * 8 / 1e9, abs=0.01)  # 98.39 Gb/s on a 100G link


def test_ib_write_bw_all_sizes_uses_the_largest_message() -> None:
    """-a prints one row per size: the gate reads the largest (issue #132 format)."""
    text = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 2          5000           0.042350            0.042185            2.636533\n"
        " 65536      5000             196.10             195.87\t\t   0.373585\n"
        " 8388608    5000             197.02             196.99\t\t   0.002935\n"
    )
    r = parsers.parse_ib_write_bw(text)
    assert len(r["rows"]) == 3 and r["msg_bytes"] == 8388608 and r["bw_avg_gbps"] == 196.99


def test_ib_write_bw_connection_failure_is_a_parse_error() -> None:
    text = (
        "Couldn't connect to 10.30.0.15:18518\n"
        "Unable to open file descriptor for socket connection Unable to init the socket connection\n"
    )
    with pytest.raises(parsers.ParseError):
        parsers.parse_ib_write_bw(text)


# ---------------------------------------------------------------- fio


def test_fio_group_reporting_write_recorded_here() -> None:
    r = parsers.parse_fio_json(_read("fio_write_4jobs_group.json"))
    assert r["version"] == "fio-3.33" and r["jobs"] == 1
    assert r["write_gbps"] == round(1720740102 / 1e9, 3)
    assert r["write_bytes"] == 4 * 64 * 2**20
    assert r["read_gbps"] == 0 and r["errors"] == []


def test_fio_read_per_job_entries_are_summed() -> None:
    grouped = parsers.parse_fio_json(_read("fio_read_4jobs_group.json"))
    per_job = parsers.parse_fio_json(_read("fio_read_4jobs_perjob.json"))
    assert grouped["read_gbps"] == round(1109237421 / 1e9, 3)
    assert per_job["jobs"] == 4
    assert per_job["read_gbps"] == round((222214781 + 762600727 + 444429562 + 299593142) / 1e9, 3)
    assert per_job["read_bytes"] == grouped["read_bytes"] == 4 * 64 * 2**20


def test_fio_notes_before_the_json_are_skipped() -> None:
    text = _read("fio_write_psync_lab_stdout.txt")
    assert text.startswith("note: ")
    r = parsers.parse_fio_json(text)
    assert r["write_gbps"] > 0 and r["write_bytes"] == 2 * 64 * 2**20


def test_fio_kib_per_s_without_bw_bytes() -> None:
    r = parsers.parse_fio_json('{"jobs": [{"jobname": "x", "error": 0, "read": {"bw": 1000000}, "write": {"bw": 0}}]}')
    assert r["read_gbps"] == round(1000000 * 1024 / 1e9, 3)


def test_fio_job_error_is_reported() -> None:
    r = parsers.parse_fio_json(
        '{"jobs": [{"jobname": "x", "error": 5, "read": {"bw_bytes": 0}, "write": {"bw_bytes": 0}}]}'
    )
    assert r["errors"] == ["job x: error 5"]


@pytest.mark.parametrize("text", ["", "fio: /lustre is not a directory\n", '{"jobs": []}', '{"jobs": [ {'])
def test_fio_unusable_output_is_a_parse_error(text: str) -> None:
    with pytest.raises(parsers.ParseError):
        parsers.parse_fio_json(text)


# ---------------------------------------------------------------- dcgmi diag


def test_dcgm_v4_failing_memory_test() -> None:
    r = parsers.parse_dcgm_diag(_read("dcgm_diag_r3_h100_memory_fail.json"))
    assert r["version"] == "4.2.3" and r["driver"] == "570.133.20" and r["runtime_error"] is None
    by_name = {t["name"]: t for t in r["tests"]}
    assert list(by_name) == ["software", "pcie", "memory", "diagnostic", "targeted_power", "memory_bandwidth"]
    assert by_name["memory"]["status"] == "fail" and by_name["memory"]["failed_entities"] == ["5"]
    assert "memory mismatch" in by_name["memory"]["warnings"][0]
    assert by_name["targeted_power"]["status"] == "warn"
    assert by_name["diagnostic"]["status"] == "pass"  # a skipped GPU does not fail the test
    assert {t["category"] for t in r["tests"]} == {"Deployment", "Integration", "Hardware", "Stress"}


def test_dcgm_v3_real_output_with_warning_line_and_nulls() -> None:
    r = parsers.parse_dcgm_diag(_read("dcgm_diag_v3_real_pass.txt"))
    assert r["version"] == "3.1.0"
    assert len(r["tests"]) == 10
    assert {t["status"] for t in r["tests"]} == {"pass"}


def test_dcgm_status_spellings() -> None:
    assert [parsers.dcgm_status(s) for s in ("PASS", "Fail", "SKIPPED", "Warn", "Not Run", None)] == [
        "pass",
        "fail",
        "skip",
        "warn",
        "not_run",
        "not_run",
    ]


def test_dcgm_without_summary_takes_the_worst_result() -> None:
    text = (
        '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "GPU Memory",'
        ' "results": [{"gpu_ids": "0", "status": "PASS"}, {"gpu_ids": "1", "status": "FAIL"}]}]}]}}'
    )
    t = parsers.parse_dcgm_diag(text)["tests"][0]
    assert t["status"] == "fail" and t["failed_entities"] == ["1"]


@pytest.mark.parametrize("text", ["Error: unable to connect to host engine\n", '{"metadata": {"version": "4.2.3"}}'])
def test_dcgm_unusable_output_is_a_parse_error(text: str) -> None:
    with pytest.raises(parsers.ParseError):
        parsers.parse_dcgm_diag(text)


# ---------------------------------------------------------------- ib_write_lat (real runs)


def test_ib_write_lat_real_hdr_run_with_cpu_warnings_between_rows() -> None:
    r = parsers.parse_ib_lat(_read("ib_write_lat_hdr_mlx5_sizes.txt"))
    assert r["tool"] == "ib_write_lat" and r["device"] == "mlx5_0" and r["link_type"] == "IB"
    assert [row["bytes"] for row in r["rows"]] == [2, 4, 8, 16, 32, 64, 128]
    assert r["rows"][0] == {
        "bytes": 2,
        "iterations": 1000,
        "t_min": 1.79,
        "t_max": 5.41,
        "t_typical": 1.87,
        "t_avg": 1.88,
        "t_stdev": 0.18,
        "p99": 2.03,
        "p99_9": 5.41,
    }
    assert (r["msg_bytes"], r["typical_us"], r["p99_us"], r["max_us"]) == (2, 1.87, 2.03, 5.41)
    assert r["errors"] == []  # "Conflicting CPU frequency values detected" is no error and no row


def test_ib_write_lat_real_rdma_cm_run() -> None:
    r = parsers.parse_ib_lat(_read("ib_write_lat_rdma_cm_2b.txt"))
    assert (r["device"], r["msg_bytes"], r["typical_us"], r["p99_us"]) == ("rocep1s0f1", 2, 1.47, 1.57)


def test_ib_write_lat_old_five_columns_and_garbage() -> None:
    old = (
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n 2       1000          0.87  4.70  0.89\n"
    )
    r = parsers.parse_ib_lat(old)
    assert r["typical_us"] == 0.89 and r["p99_us"] is None
    with pytest.raises(parsers.ParseError, match="latency result"):
        parsers.parse_ib_lat(_read("ib_write_bw_ndr_rail0_ok.txt"))
    with pytest.raises(parsers.ParseError):
        parsers.parse_ib_lat(" Couldn't connect to 10.0.0.2:18615\nUnable to init the socket connection\n")


# ---------------------------------------------------------------- perfquery (recorded on ibsim)

PERFQUERY = ROOT / "tests" / "data" / "perfquery"


def test_perfquery_clean_port_from_ibsim() -> None:
    r = parsers.parse_perfquery((PERFQUERY / "ibsim-clean.txt").read_text())
    assert (r["lid"], r["port"], r["extended"]) == (2, 1, False)
    c = r["counters"]
    assert c["SymbolErrorCounter"] == 0 and c["LinkDownedCounter"] == 0 and c["PortXmitDiscards"] == 0
    assert c["CounterSelect"] == 0 and c["PortSelect"] == 1  # 0x0000 read as hex
    assert len(c) == 21


def test_perfquery_port_with_errors_set_in_ibsim() -> None:
    c = parsers.parse_perfquery((PERFQUERY / "ibsim-errors.txt").read_text())["counters"]
    assert (c["SymbolErrorCounter"], c["LinkDownedCounter"], c["PortRcvErrors"], c["PortXmitDiscards"]) == (
        1234,
        3,
        57,
        12,
    )


def test_perfquery_extended_and_failed_outputs() -> None:
    ext = parsers.parse_perfquery((PERFQUERY / "ibsim-extended.txt").read_text())
    assert ext["extended"] and "SymbolErrorCounter" not in ext["counters"]
    with pytest.raises(parsers.ParseError, match="perfquery"):
        parsers.parse_perfquery((PERFQUERY / "ibsim-no-such-ca.txt").read_text())
