"""The fabric_bisect module end to end on this machine: srun, all_reduce_perf and ib_write_bw are stand-ins
written here (test fixtures) that print recorded real output (tests/data/acceptance), slow where the test
puts its slow node; the module's own commands (the pair round's shell script included) run as written."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.module_utils import bisect

DATA = ROOT / "tests" / "data" / "acceptance"
#: a stand-in srun: runs the command once per node of --nodelist, at once, with Slurm's task variables
SRUN = """#!/bin/bash
nodelist=
while [ $# -gt 0 ]; do
  case "$1" in --nodelist=*) nodelist=${1#--nodelist=};; --*) ;; *) break;; esac
  shift
done
echo "$nodelist" >> "$BISECT_TEST_LOG"
export SLURM_JOB_NODELIST=$nodelist
i=0
for n in ${nodelist//,/ }; do
  SLURMD_NODENAME=$n SLURM_PROCID=$i "$@" &
  i=$((i + 1))
done
wait
"""
ALL_REDUCE = f"""#!/bin/bash
[ "$SLURM_PROCID" = 0 ] || exit 0
case ",$SLURM_JOB_NODELIST," in
  *,$BISECT_TEST_SLOW,*) cat {DATA / "all_reduce_h100_2x8_multisize.txt"};;
  *) cat {DATA / "all_reduce_h200_1node_dossier.txt"};;
esac
"""
IB_WRITE_BW = f"""#!/bin/bash
last=${{!#}}
case "$last" in *.*|*[[:lower:]]*) ;; *) exit 0;; esac  # the server side: nothing to print
hca=
while [ $# -gt 0 ]; do [ "$1" = -d ] && hca=$2; shift; done
if [ "$SLURMD_NODENAME" = "$BISECT_TEST_SLOW" ] && [ "$hca" = "$BISECT_TEST_SLOW_HCA" ]; then
  cat {DATA / "ib_write_bw_ndr_rail3_degraded.txt"}
else
  cat {DATA / "ib_write_bw_ndr_rail0_ok.txt"}
fi
"""


def tool(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(scope="module")
def plan() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier4"))


def args(plan: dict[str, Any], tmp_path: Path, **extra: Any) -> dict[str, Any]:
    val = plan["validation"]
    return {
        "nodes": ["compute[01-08]"],
        "cabling": plan["fabric"]["cabling"],
        "floor": val["allreduce_inter_node_busbw_gbs"],
        "nic_floor": val["nic_write_bw_gbps"],
        "addresses": {name: host["addresses"] for name, host in plan["hosts"].items()},
        "all_reduce": {
            k: val["tests"]["all_reduce"][k] for k in ("min_bytes", "max_bytes", "step_factor", "gpus_per_node")
        },
        "gate_bytes": val["gate_message_bytes"],
        "srun": tool(tmp_path / "srun", SRUN),
        "all_reduce_perf": tool(tmp_path / "all_reduce_perf", ALL_REDUCE),
        "ib_write_bw": tool(tmp_path / "ib_write_bw", IB_WRITE_BW),
        "timeout": 60,
        "cluster": "tier4",
        **extra,
    }


def run_module(module_args: dict[str, Any], capsys: pytest.CaptureFixture[str], check: bool = False) -> dict[str, Any]:
    from ansible.module_utils.testing import patch_module_args

    from ansible_collections.gpucluster.tiers.plugins.modules import fabric_bisect

    with patch_module_args(module_args | ({"_ansible_check_mode": True} if check else {})), pytest.raises(SystemExit):
        fabric_bisect.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_names_compute06_and_its_cable_in_three_rounds(
    plan: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "srun.log"
    monkeypatch.setenv("BISECT_TEST_LOG", str(log))
    monkeypatch.setenv("BISECT_TEST_SLOW", "compute06")
    monkeypatch.setenv("BISECT_TEST_SLOW_HCA", "mlx5_2")
    history = tmp_path / "log" / "node-history.jsonl"
    out = run_module(args(plan, tmp_path, history=str(history)), capsys)
    verdict = out["verdict"]
    assert not out.get("failed"), out
    assert verdict["kind"] == "found" and verdict["node"] == "compute06" and verdict["rail"] == 2
    assert verdict["cable"] == "compute06 mlx5_2 port 1 <-> leaf03 port 6" and verdict["rounds"] == 3
    # the figures are the recorded ones: 219.51 GB/s busbw (the 2x8 run) below 340, 196.41 Gb/s below 375
    first = out["rounds"][0]["tests"]
    assert [t["figure"] for t in first] == [476.72, 219.51]
    assert out["rounds"][2]["tests"][1]["figure"]["2"] == 196.41
    # one srun job per half (rounds 1 and 2, two at once) and one per pair (round 3): the node lists Slurm got
    assert sorted(log.read_text().split()) == [
        "compute01,compute02,compute03,compute04",
        "compute05,compute01",
        "compute05,compute06",
        "compute05,compute06,compute07,compute08",
        "compute06,compute02",
        "compute07,compute08",
    ]
    lines = [json.loads(x) for x in history.read_text().splitlines()]
    assert [x["round"] for x in lines] == [1, 2, 3] and lines[-1]["cable"] == verdict["cable"]
    assert lines[-1]["event"] == "bisect" and lines[-1]["node"] == "compute06" and out["changed"] is True
    assert "compute06 mlx5_2 port 1 <-> leaf03 port 6" in out["markdown"]


def test_a_tool_that_is_missing_gives_an_error_verdict_with_its_output(
    plan: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BISECT_TEST_LOG", str(tmp_path / "srun.log"))
    out = run_module(args(plan, tmp_path, all_reduce_perf=str(tmp_path / "absent")), capsys)
    assert out["verdict"]["kind"] == "error" and "no all_reduce_perf result" in out["verdict"]["text"]
    assert "absent" in out["verdict"]["text"] and out["changed"] is False


def test_check_mode_prints_the_first_round_and_runs_nothing(
    plan: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "srun.log"
    monkeypatch.setenv("BISECT_TEST_LOG", str(log))
    out = run_module(args(plan, tmp_path), capsys, check=True)
    assert out["changed"] is False and out["verdict"] is None and not log.exists()
    assert [t["nodes"] for t in out["tests"]] == [
        [f"compute0{i}" for i in range(1, 5)],
        [f"compute0{i}" for i in range(5, 9)],
    ]
    argv = out["tests"][0]["command"]
    assert "--exclusive" in argv and "--nodelist=compute01,compute02,compute03,compute04" in argv
    assert argv[argv.index(str(tmp_path / "all_reduce_perf")) :] == [
        str(tmp_path / "all_reduce_perf"),
        "-b",
        "1073741824",
        "-e",
        "8589934592",
        "-f",
        "2",
        "-g",
        "1",
    ]


def test_a_node_outside_the_cabling_is_refused(
    plan: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_module(args(plan, tmp_path, nodes=["compute01", "head01", "compute02"]), capsys)
    assert out["failed"] and "not in the cabling plan (fabric.cabling.scalable_units): head01" in out["msg"]


def test_the_pair_output_is_read_per_rail() -> None:
    from ansible_collections.gpucluster.tiers.plugins.modules import fabric_bisect

    ok = (DATA / "ib_write_bw_ndr_rail0_ok.txt").read_text()
    text = (
        f"@@gpucluster-bisect rail 0 rc 0\n{ok}@@gpucluster-bisect rail 1 rc 1\n Couldn't connect to 10.0.0.1:18516\n"
    )
    figures, errors = fabric_bisect.pair_figures(text)
    assert figures == {0: bisect.ib_write_bw_gbps(ok)} and "rc 1" in errors[1] and "Couldn't connect" in errors[1]
