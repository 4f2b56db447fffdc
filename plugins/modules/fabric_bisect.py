#!/usr/bin/python
"""Find the one slow node or cable behind a slow multi-node all_reduce by bisection, through Slurm."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_bisect
short_description: Find the one slow node and its cable behind a slow multi-node all_reduce, by bisection
version_added: 0.1.0
description:
  - Runs on the Slurm head. Splits O(nodes) into two halves along the planned leaves (nodes cabled to the
    same leaves stay together while that keeps the rounds within ceil(log2 n)), runs nccl-tests
    C(all_reduce_perf) on both halves at once through C(srun --exclusive --nodelist), keeps the half
    below O(floor), and repeats until two nodes are left.
  - "The last round (the pair round) runs C(ib_write_bw) on every rail from each remaining node to a node
    measured good, one C(srun) job per pair; the rail below O(nic_floor) names the node, its HCA and the
    cable from the cabling plan (for example C(compute06 mlx5_2 port 1 <-> leaf03 port 6))."
  - 8 nodes take 3 rounds (8, 4, 2, then the pair round). Two halves below the floor give the verdict
    C(multiple) (more than one suspect); no half below the floor gives C(none) (the slowness is not one
    node's); a slow pair whose rails all meet the NIC floor gives C(no_link) (inside a node, not a cable).
  - Each C(srun) runs in the foreground under C(timeout) and the module waits on the processes themselves
    (no polling); the jobs carry O(job_name) and are in C(sacct).
  - In check mode nothing runs; the result holds the first round's tests and their command lines.
  - The search itself is C(plugins/module_utils/bisect.py), pure and unit-tested.
options:
  nodes:
    description: The suspect nodes (names or Slurm hostlist expressions such as C(compute[01-08])); at least two.
    type: list
    elements: str
    required: true
  cabling:
    description: >-
      The plan's cabling (C(plan.fabric.cabling), the fabric's design); only its links of kind C(host),
      generated from it, are read.
    type: dict
    required: true
  floor:
    description: The inter-node all_reduce floor, busbw in GB/s (C(plan.healing.bisect.floor)).
    type: float
    required: true
  nic_floor:
    description: The per-NIC C(ib_write_bw) floor in Gb/s (C(plan.validation.nic_write_bw_gbps)).
    type: float
    required: true
  addresses:
    description:
      - Per node, the address the C(ib_write_bw) client connects to on the peer, C(management) and per-rail
        C(rails) (C(plan.hosts[node].addresses)).
    type: dict
    required: true
  rdma_cm:
    description: Connect over rdma_cm (C(-R)) to the rail's address (RoCE fabrics) instead of the management address.
    type: bool
    default: false
  reference:
    description:
      - Nodes outside O(nodes) taken as good, to pair a lone node with (three suspects) or to measure two
        suspects against; nodes measured good in a round are preferred.
    type: list
    elements: str
    default: []
  all_reduce:
    description: The plan's all_reduce test (C(plan.validation.tests.all_reduce)).
    type: dict
    required: true
    suboptions:
      min_bytes:
        description: C(all_reduce_perf -b).
        type: int
        required: true
      max_bytes:
        description: C(all_reduce_perf -e).
        type: int
        required: true
      step_factor:
        description: C(all_reduce_perf -f).
        type: int
        required: true
      gpus_per_node:
        description: Ranks (and GPUs) per node.
        type: int
        required: true
  gate_bytes:
    description: The message size whose rows (and larger) are gated (C(plan.validation.gate_message_bytes)).
    type: int
    required: true
  max_rounds:
    description: Stop after this many rounds (C(plan.healing.bisect.max_rounds)); none by default.
    type: int
  all_reduce_perf:
    description: nccl-tests' C(all_reduce_perf) on the compute nodes (name or path).
    type: str
    default: all_reduce_perf
  ib_write_bw:
    description: perftest's C(ib_write_bw) on the compute nodes (name or path).
    type: str
    default: ib_write_bw
  srun:
    description: Slurm's C(srun) on the head.
    type: str
    default: srun
  srun_mpi:
    description: C(srun --mpi) for all_reduce_perf.
    type: str
    default: pmix
  ib_port:
    description: The first TCP port of C(ib_write_bw); rail r uses O(ib_port) + r.
    type: int
    default: 18515
  ib_args:
    description: Extra C(ib_write_bw) arguments, on both sides.
    type: list
    elements: str
    default: ["-F", "--report_gbits", "-D", "10", "-s", "1048576"]
  timeout:
    description: Seconds each test (one C(srun)) may take; it is killed after that and the verdict is C(error).
    type: int
    default: 1800
  job_name:
    description: Slurm job name of the tests.
    type: str
    default: gpucluster-bisect
  cluster:
    description: The cluster's name (C(plan.cluster.name)), in the history lines and report.md.
    type: str
    default: cluster
  history:
    description:
      - The healing history file (C(plan.healing.history)); one JSON line per round is appended. None writes nothing.
    type: path
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
requirements:
  - Slurm's C(srun) on the head; nccl-tests and perftest on the compute nodes
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Find the slow node among compute[01-08]
  gpucluster.tiers.fabric_bisect:
    nodes: ["compute[01-08]"]
    cabling: "{{ gpucluster_plan.fabric.cabling }}"
    floor: "{{ gpucluster_plan.validation.allreduce_inter_node_busbw_gbs }}"
    nic_floor: "{{ gpucluster_plan.validation.nic_write_bw_gbps }}"
    addresses: >-
      {{ dict(gpucluster_plan.hosts.keys() | zip(gpucluster_plan.hosts.values() | map(attribute='addresses'))) }}
    all_reduce: "{{ gpucluster_plan.validation.tests.all_reduce }}"
    gate_bytes: "{{ gpucluster_plan.validation.gate_message_bytes }}"
  register: bisect
"""

RETURN = r"""
verdict:
  description:
    - The answer. C(kind) is C(found), C(multiple), C(none), C(no_link) or C(error); C(text) says it in a
      sentence; C(rounds) counts the rounds. With C(found), C(node), C(rail), C(hca), C(cable) and C(links)
      (every rail of the node below the floor).
  returned: success
  type: dict
  sample:
    kind: found
    node: compute06
    rail: 2
    hca: mlx5_2
    cable: compute06 mlx5_2 port 1 <-> leaf03 port 6
    rounds: 3
    text: >-
      compute06: rail 2 writes 196.41 Gb/s to compute01, below 375 Gb/s;
      cable compute06 mlx5_2 port 1 <-> leaf03 port 6 (196.41 Gb/s)
rounds:
  description: Each round's suspects, tests (nodes, command, figure, error) and the suspects after it.
  returned: success
  type: list
  elements: dict
state:
  description: The whole search (nodes, floors, good and reference nodes, rounds, verdict), as report.json holds it.
  returned: success
  type: dict
markdown:
  description: report.md of the search.
  returned: success
  type: str
tests:
  description: In check mode, the first round's tests with their command lines (nothing is run).
  returned: check mode
  type: list
  elements: dict
"""

import concurrent.futures  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils import bisect, hostlist  # noqa: E402

#: the pair round's job: on the peer, one ib_write_bw server per rail in the background; on the node, one
#: client per rail after the other (retried while the server is not yet listening), each after a marker line
PAIR_SCRIPT = r"""
set -u
me=${SLURMD_NODENAME:-$(hostname -s)}
if [ "$me" = "$BISECT_PEER" ]; then
  for r in $BISECT_RAILS; do
    IFS=: read -r rail hca peer_hca addr <<EOF
$r
EOF
    timeout "$BISECT_TIMEOUT" "$BISECT_TOOL" -d "$peer_hca" -p $((BISECT_PORT + rail)) $BISECT_ARGS >/dev/null 2>&1 &
  done
  wait
  exit 0
fi
for r in $BISECT_RAILS; do
  IFS=: read -r rail hca peer_hca addr <<EOF
$r
EOF
  try=0
  while :; do
    out=$(timeout "$BISECT_TIMEOUT" "$BISECT_TOOL" -d "$hca" -p $((BISECT_PORT + rail)) $BISECT_ARGS "$addr" 2>&1)
    rc=$?
    try=$((try + 1))
    if [ $rc -eq 0 ] || [ $try -ge 40 ]; then break; fi
    sleep 0.5
  done
  echo "@@gpucluster-bisect rail $rail rc $rc"
  printf '%s\n' "$out"
done
"""
MARKER = "@@gpucluster-bisect rail "


def _minutes(seconds: int) -> str:
    return str(max(1, -(-seconds // 60)))


def command(test: dict[str, Any], p: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The argv and extra environment of one test (one srun job)."""
    name = f"--job-name={p['job_name']}-{test['id']}"
    common = ["timeout", str(p["timeout"] + 30), p["srun"], name, "--exclusive", f"--time={_minutes(p['timeout'])}"]
    if test["kind"] == "all_reduce":
        ar = p["all_reduce"]
        argv = [
            *common,
            f"--nodes={len(test['nodes'])}",
            f"--nodelist={','.join(test['nodes'])}",
            f"--ntasks-per-node={ar['gpus_per_node']}",
            f"--gres=gpu:{ar['gpus_per_node']}",
            f"--mpi={p['srun_mpi']}",
            p["all_reduce_perf"],
            "-b",
            str(ar["min_bytes"]),
            "-e",
            str(ar["max_bytes"]),
            "-f",
            str(ar["step_factor"]),
            "-g",
            "1",
        ]
        # two nodes: Tree/NVLSTree can exceed the NIC line rate; gate the network on Ring (playbooks/validate.yml)
        return argv, ({"NCCL_ALGO": "Ring"} if len(test["nodes"]) == 2 else {})
    peer = p["addresses"].get(test["peer"]) or {}
    rails = []
    for rail in test["rails"]:
        addr = (peer.get("rails") or {}).get(str(rail["rail"])) if p["rdma_cm"] else peer.get("management")
        rails.append(f"{rail['rail']}:{rail['hca']}:{rail['peer_hca']}:{addr or test['peer']}")
    argv = [
        *common,
        "--nodes=2",
        f"--nodelist={test['node']},{test['peer']}",
        "--ntasks-per-node=1",
        "bash",
        "-c",
        PAIR_SCRIPT,
        "gpucluster-bisect",
    ]
    env = {
        "BISECT_PEER": test["peer"],
        "BISECT_RAILS": " ".join(rails),
        "BISECT_TOOL": p["ib_write_bw"],
        "BISECT_PORT": str(p["ib_port"]),
        "BISECT_ARGS": " ".join(p["ib_args"] + (["-R"] if p["rdma_cm"] else [])),
        "BISECT_TIMEOUT": str(p["timeout"]),
    }
    return argv, env


def pair_figures(text: str) -> tuple[dict[int, float], dict[int, str]]:
    """Per rail, the client's Gb/s from the pair job's output; per rail without a figure, why."""
    figures: dict[int, float] = {}
    errors: dict[int, str] = {}
    sections: dict[int, tuple[str, list[str]]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(MARKER):
            fields = line[len(MARKER) :].split()
            current = []
            sections[int(fields[0])] = (fields[2] if len(fields) > 2 else "?", current)
        elif current is not None:
            current.append(line)
    for rail, (rc, lines) in sections.items():
        value = bisect.ib_write_bw_gbps("\n".join(lines))
        if value is None:
            tail = " | ".join(x.strip() for x in lines if x.strip())[-300:]
            errors[rail] = f"ib_write_bw rc {rc}, no result: {tail or 'no output'}"
        else:
            figures[rail] = value
    return figures, errors


def waves(tests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Tests in groups whose node sets are disjoint (run together; --exclusive would queue the others)."""
    out: list[list[dict[str, Any]]] = []
    for test in tests:
        for wave in out:
            if not any(set(test["nodes"]) & set(t["nodes"]) for t in wave):
                wave.append(test)
                break
        else:
            out.append([test])
    return out


def measure(module: AnsibleModule, tests: list[dict[str, Any]]) -> dict[str, Any]:
    """Run a round's tests through srun (disjoint ones at once) and read their figures."""
    p = module.params
    results: dict[str, Any] = {}
    for wave in waves([t for t in tests if t["kind"] != "inferred"]):
        jobs = []
        for test in wave:
            argv, extra = command(test, p)
            test["command"] = [*argv[:-2], "<pair script>", argv[-1]] if test["kind"] == "ib_write_bw" else argv
            jobs.append((test, argv, extra))
        # one thread per srun of the wave: each returns when its job ends (timeout kills it after p["timeout"] + 30 s)
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            done = list(pool.map(lambda job: module.run_command(job[1], environ_update=job[2], check_rc=False), jobs))
        for (test, _argv, _extra), (rc, stdout, stderr) in zip(jobs, done, strict=True):
            text = stdout + ("\n" + stderr if stderr else "")
            test["rc"] = rc
            if test["kind"] == "all_reduce":
                value = bisect.all_reduce_busbw(text, p["gate_bytes"])
                results[test["id"]] = value
                if value is None:
                    test["output_tail"] = text[-2000:]
                    tail = " | ".join(x.strip() for x in text.splitlines() if x.strip())[-300:]
                    results[f"error:{test['id']}"] = f"srun rc {rc}, no all_reduce_perf result: {tail or 'no output'}"
            else:
                figures, errors = pair_figures(text)
                results[test["id"]] = figures
                missing = [r["rail"] for r in test["rails"] if r["rail"] not in figures]
                if missing:
                    test["output_tail"] = text[-2000:]
                    why = errors.get(missing[0]) or f"srun rc {rc}: {text.strip()[-300:] or 'no output'}"
                    results[f"error:{test['id']}"] = why
    return results


def history_line(cluster: str, rnd: dict[str, Any], state: bisect.State) -> dict[str, Any]:
    """One healing history line (docs: the plan's healing.history) for a round."""
    parts = []
    for test in rnd["tests"]:
        fig = test.get("figure")
        if test["kind"] == "all_reduce":
            parts.append(f"all_reduce {','.join(test['nodes'])} " + ("not run" if fig is None else f"{fig:g} GB/s"))
        elif test["kind"] == "ib_write_bw":
            low = {r: v for r, v in (fig or {}).items() if v < state.nic_floor}
            parts.append(f"ib_write_bw {test['node']}->{test['peer']} rails below: {low or 'none'}")
    result = state.result if rnd is state.rounds[-1] else None
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "node": (result or {}).get("node"),
        "event": "bisect",
        "class": "bisect",
        "detail": f"{cluster} round {rnd['round']}: "
        + "; ".join(parts)
        + f"; suspects after: {','.join(rnd['after'])}",
        "round": rnd["round"],
        "verdict": (result or {}).get("kind"),
        "cable": (result or {}).get("cable"),
        "dry_run": False,
        "by": "gpucluster.tiers.fabric_bisect",
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "str", "required": True},
            "cabling": {"type": "dict", "required": True},
            "floor": {"type": "float", "required": True},
            "nic_floor": {"type": "float", "required": True},
            "addresses": {"type": "dict", "required": True},
            "rdma_cm": {"type": "bool", "default": False},
            "reference": {"type": "list", "elements": "str", "default": []},
            "all_reduce": {
                "type": "dict",
                "required": True,
                "options": {
                    "min_bytes": {"type": "int", "required": True},
                    "max_bytes": {"type": "int", "required": True},
                    "step_factor": {"type": "int", "required": True},
                    "gpus_per_node": {"type": "int", "required": True},
                },
            },
            "gate_bytes": {"type": "int", "required": True},
            "max_rounds": {"type": "int"},
            "all_reduce_perf": {"type": "str", "default": "all_reduce_perf"},
            "ib_write_bw": {"type": "str", "default": "ib_write_bw"},
            "srun": {"type": "str", "default": "srun"},
            "srun_mpi": {"type": "str", "default": "pmix"},
            "ib_port": {"type": "int", "default": 18515},
            "ib_args": {
                "type": "list",
                "elements": "str",
                "default": ["-F", "--report_gbits", "-D", "10", "-s", "1048576"],
            },
            "timeout": {"type": "int", "default": 1800},
            "job_name": {"type": "str", "default": "gpucluster-bisect"},
            "history": {"type": "path"},
            "cluster": {"type": "str", "default": "cluster"},
        },
        supports_check_mode=True,
    )
    p = module.params
    nodes = [n for expr in p["nodes"] for n in hostlist.expand(expr)]
    reference = [n for expr in p["reference"] for n in hostlist.expand(expr)]
    try:
        state = bisect.new_state(nodes, p["cabling"], p["floor"], p["nic_floor"], reference, p["max_rounds"])
    except bisect.BisectError as exc:
        module.fail_json(msg=f"nodes {', '.join(nodes)}: {exc}")
    if module.check_mode:
        tests = bisect.next_round(state)
        for test in tests:
            if test["kind"] != "inferred":
                test["command"] = command(test, p)[0]
        module.exit_json(changed=False, tests=tests, state=state.to_dict(), rounds=[], verdict=None, markdown="")
    while bisect.verdict(state) is None:
        tests = bisect.next_round(state)
        bisect.record(state, tests, measure(module, tests))
    lines = [history_line(p["cluster"], rnd, state) for rnd in state.rounds]
    changed = False
    if p["history"]:
        os.makedirs(os.path.dirname(p["history"]), mode=0o755, exist_ok=True)
        with open(p["history"], "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)
        changed = True
    data = state.to_dict()
    module.exit_json(
        changed=changed,
        verdict=bisect.verdict(state),
        rounds=data["rounds"],
        state=data,
        markdown=bisect.report_markdown(p["cluster"], data),
        history_lines=lines,
    )


if __name__ == "__main__":
    main()
