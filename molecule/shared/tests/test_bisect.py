"""playbooks/bisect.yml finds the one slow node among the lab's eight and names its cable (issue 42).

The lab has no GPU and no HCA, so nccl-tests and perftest are absent; this test (a fixture, never
product code) installs stand-ins for ``all_reduce_perf`` and ``ib_write_bw`` on every compute node, at
the names the plan's acceptance runs (playbooks/validate.yml: found on PATH), that print recorded real
output (tests/data/acceptance): the 2-node H100 run at 219.51 GB/s busbw (below the inter-node floor)
when the slow node is among the job's nodes (``SLURM_JOB_NODELIST``, from srun), the 476.72 GB/s run
otherwise; ``ib_write_bw`` prints the degraded 196.41 Gb/s link on the slow node's slow HCA and the
391.63 Gb/s one elsewhere. Everything else is real: the playbook, the module on the head, srun with
--exclusive through the lab's slurmctld, the pair round's script on two nodes, and the parsing.
Only tier4 has eight compute nodes (the acceptance's "among 8"): elsewhere the test skips.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import hosts_with

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "acceptance"
SLOW = "compute06"
SLOW_RAIL = 2
SHARE = "/usr/local/share/gpucluster-bisect-test"
STANDINS = ("/usr/local/bin/all_reduce_perf", "/usr/local/bin/ib_write_bw")

ALL_REDUCE = f"""#!/bin/bash
# test stand-in (molecule/shared/tests/test_bisect.py): recorded nccl-tests output, rank 0 only
[ "${{SLURM_PROCID:-0}}" = 0 ] || exit 0
if scontrol show hostnames "$SLURM_JOB_NODELIST" | grep -qx {SLOW}; then
  cat {SHARE}/slow.txt
else
  cat {SHARE}/ok.txt
fi
"""
IB_WRITE_BW = f"""#!/bin/bash
# test stand-in (molecule/shared/tests/test_bisect.py): recorded perftest output on the client side
last=${{!#}}
case "$last" in *.*|*[[:lower:]]*) ;; *) exit 0;; esac
hca=
while [ $# -gt 0 ]; do [ "$1" = -d ] && hca=$2; shift; done
if [ "$(hostname -s)" = {SLOW} ] && [ "$hca" = "$(cat {SHARE}/slow_hca)" ]; then
  cat {SHARE}/ib_slow.txt
else
  cat {SHARE}/ib_ok.txt
fi
"""


def _links(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's cables, generated from its fabric design (module_utils/fabric_links.py)."""
    if str(ROOT / "collections") not in sys.path:
        sys.path.insert(0, str(ROOT / "collections"))
    from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links

    return list(fabric_links.links(plan["fabric"].get("cabling", {})))


def _enabled(plan: dict[str, Any]) -> bool:
    links = _links(plan)
    return plan["cluster"]["scheduler"] == "slurm" and len(hosts_with(plan, "compute")) >= 8 and bool(links)


def _put(host: Any, path: str, text: str, mode: str = "0644") -> None:
    out = host.run(f"install -D -m {mode} /dev/null {path} && printf %s {shlex.quote(text)} > {path}")
    assert out.rc == 0, out.stderr


def _playbook(lab: Path) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "playbooks" / "bisect.yml")]
    for inv in (ROOT / "inventories" / lab.name, ROOT / "lab" / "overlay", lab / "inventory.yml"):
        argv += ["-i", str(inv)]
    argv += [
        "-e",
        "bisect_nodes=compute[01-08]",
        "-e",
        f"bisect_report_root={lab / 'bisect'}",
        "-e",
        "bisect_timeout_s=120",
    ]
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}
    env.update({"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def bisected(hosts: dict[str, Any], plan: dict[str, Any], lab: Path) -> dict[str, Any]:
    if not _enabled(plan):
        pytest.skip("bisection among 8 needs eight Slurm compute nodes with a cabling plan (tier4)")
    nodes = hosts_with(plan, "compute")
    slow_hca = next(
        x["a"]["hca"] for x in _links(plan) if x["kind"] == "host" and x["a"]["node"] == SLOW and x["rail"] == SLOW_RAIL
    )
    files = {
        "slow.txt": (DATA / "all_reduce_h100_2x8_multisize.txt").read_text(),
        "ok.txt": (DATA / "all_reduce_h200_1node_dossier.txt").read_text(),
        "ib_slow.txt": (DATA / "ib_write_bw_ndr_rail3_degraded.txt").read_text(),
        "ib_ok.txt": (DATA / "ib_write_bw_ndr_rail0_ok.txt").read_text(),
        "slow_hca": slow_hca,
    }
    try:
        for node in nodes:
            for name, text in files.items():
                _put(hosts[node], f"{SHARE}/{name}", text)
            _put(hosts[node], STANDINS[0], ALL_REDUCE, "0755")
            _put(hosts[node], STANDINS[1], IB_WRITE_BW, "0755")
        run = _playbook(lab)
    finally:
        for node in nodes:
            hosts[node].run(f"rm -rf {SHARE} {' '.join(STANDINS)}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    report = json.loads((lab / "bisect" / plan["cluster"]["name"] / "report.json").read_text())
    return {"run": run, "report": report, "slow_hca": slow_hca}


def test_bisection_names_the_slow_node_and_its_cable_in_three_rounds(
    bisected: dict[str, Any], plan: dict[str, Any]
) -> None:
    result = bisected["report"]["result"]
    link = next(x for x in _links(plan) if x["kind"] == "host" and x["a"]["node"] == SLOW and x["rail"] == SLOW_RAIL)
    cable = f"{SLOW} {link['a']['hca']} port {link['a']['port']} <-> {link['b']['node']} port {link['b']['port']}"
    assert result["kind"] == "found" and result["node"] == SLOW and result["rail"] == SLOW_RAIL, result
    assert result["cable"] == cable and result["rounds"] <= 3, result
    assert cable in bisected["run"].stdout  # the verdict the playbook prints
    # rounds 1 and 2 halve the suspects with all_reduce jobs; round 3 measures each rail against good nodes
    rounds = bisected["report"]["rounds"]
    assert [len(r["suspects"]) for r in rounds] == [8, 4, 2]
    assert {t["kind"] for r in rounds[:2] for t in r["tests"]} == {"all_reduce"}
    assert all(t["rc"] == 0 and "--exclusive" in t["command"] for r in rounds for t in r["tests"])
    assert {t["peer"] for t in rounds[2]["tests"]} <= set(bisected["report"]["good"])


def test_the_report_md_names_the_cable(bisected: dict[str, Any], plan: dict[str, Any], lab: Path) -> None:
    md = (lab / "bisect" / plan["cluster"]["name"] / "report.md").read_text()
    assert bisected["report"]["result"]["cable"] in md and "| 3 | ib_write_bw rail" in md


def test_each_round_is_a_line_in_the_healing_history(
    bisected: dict[str, Any], hosts: dict[str, Any], plan: dict[str, Any]
) -> None:
    history = (plan.get("healing") or {}).get("history")
    if not history:
        pytest.skip("the plan has no healing section: no history file to write")
    head = hosts[plan["cluster"]["head"]]
    lines = [json.loads(x) for x in head.check_output(f"tail -n 3 {history}").splitlines()]
    assert [x["event"] for x in lines] == ["bisect"] * 3 and lines[-1]["node"] == SLOW
