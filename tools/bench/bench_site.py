"""make bench-site: the controller-side stage of site.yml for generated sites of 64..16384 compute nodes.

For each size, tier4's inventory grown to N compute nodes (tools/bench/bench_plan.py's generator)
is WRITTEN as a real inventory (hosts.yml + group_vars/all/*.yml) in a temporary folder, and two
playbooks run against it with ansible-playbook, contacting no host (connection local):

- ``plan``: site.yml's first play as it is (playbooks/tasks/plan.yml, run once on the controller: on
  ``localhost``, or ``localhost:all`` under a ``--limit``; the registered plan is one shared object);
- ``hand-over``: the same, then one play over every host that reads the host's ``gpucluster_host_plan``
  exactly as site.yml defines it (the play variable is copied from playbooks/site.yml) and records
  the JSON bytes unique to the host (host_plan.view_sizes: the view without the shared tables),
  then localhost sizes the shared tables once.

Above ``--views-max`` nodes (default 4096) only the plan stage runs: the hand-over is one Ansible task
per host (a fork each), linear in hosts like any play, and takes most of an hour at 16,384 nodes.

Wall time, CPU time (user + system of ansible-playbook and its forks: steadier than wall time on a
busy machine) and peak RSS (the largest of them), from a fresh process's RUSAGE_CHILDREN, per run.
``--before N,..`` also runs the old hand-over (git HEAD's playbooks/tasks/plan.yml: set_fact of the
whole plan delegated to every host) on a ``git archive`` of HEAD, where the per-host size is the
whole plan's JSON.
A benchmark, not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from bench_plan import generated_site  # noqa: E402

SIZES = (64, 256, 1024, 4096, 16384)
# the goals (benchmarks, not timed tests): the plan stage per size (issue 14: 4,096 nodes; issue 41: 16,384,
# tightened from issue 26's 60 s and 2 GiB)
GOAL_PLAN = {4096: (30.0, 1024.0), 16384: (15.0, 1024.0)}  # nodes: (seconds, peak RSS MiB)
GOAL_SIZE_SPREAD = 0.10


def write_inventory(nodes: int, dest: Path) -> None:
    """hosts.yml and group_vars/all/<section>.yml, laid out like inventories/tier4."""
    site, groups = generated_site(nodes)
    gv = dest / "group_vars" / "all"
    gv.mkdir(parents=True, exist_ok=True)
    for key, value in site.items():
        (gv / f"{key.removeprefix('gpucluster_')}.yml").write_text(yaml.safe_dump({key: value}, sort_keys=False))

    def hosts(names: list[str]) -> dict[str, Any]:
        return {"hosts": dict.fromkeys(names)}

    tree = {
        "all": {
            "children": {
                "head": hosts(groups["head"]),
                "storage": {
                    "children": {"lustre_mds": hosts(groups["lustre_mds"]), "lustre_oss": hosts(groups["lustre_oss"])}
                },
                "compute": hosts(groups["compute"]),
            }
        }
    }
    (dest / "hosts.yml").write_text(yaml.safe_dump(tree, sort_keys=False))


#: The play variable of a host's slice of the plan (playbooks/site.yml); the old hand-over (--before)
#: gave every host the whole plan as gpucluster_plan.
VIEW_VAR = "gpucluster_host_plan"


def site_view_var() -> str:
    """The play variable gpucluster_host_plan exactly as playbooks/site.yml sets it."""
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    return next(p["vars"][VIEW_VAR] for p in plays if VIEW_VAR in p.get("vars", {}))


def playbooks(tree: Path, dest: Path, *, before: bool) -> tuple[Path, Path]:
    """(plan-stage playbook, hand-over playbook) in ``dest``, using ``tree``'s tasks/plan.yml."""
    # site.yml's own plan play (hosts, run_once, delegate_to), its tasks file taken from ``tree``
    plan_play = yaml.safe_load((tree / "playbooks" / "site.yml").read_text())[0]
    plan_play["connection"] = "local"
    for task in plan_play["tasks"]:
        if "ansible.builtin.import_tasks" in task:
            task["ansible.builtin.import_tasks"] = str(tree / "playbooks/tasks/plan.yml")
    views: dict[str, Any] = {
        "name": "Every host reads its slice of the plan",
        "hosts": "all",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Record the bytes of the host's own part",
                "ansible.builtin.set_fact": {
                    # the whole plan per host (site.yml registers it on localhost: on every host while its
                    # plan play ran on localhost:all)
                    "bench_bytes": "{{ hostvars['localhost'].gpucluster_plan | bench_json_size }}"
                    if before
                    else "{{ gpucluster_host_plan | bench_view_sizes }}"
                },
            }
        ],
    }
    if not before:
        views["vars"] = {VIEW_VAR: site_view_var()}
    summary = {
        "name": "Write the sizes",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Per host bytes and the shared tables",
                "ansible.builtin.copy": {
                    "dest": str(dest / "sizes.json"),
                    "mode": "0644",
                    "content": "{{ {'hosts': dict(groups['all'] | zip(groups['all'] | map('extract', hostvars, "
                    "'bench_bytes'))), 'shared': ({} if "
                    + ("true" if before else "false")
                    + " else gpucluster_plan | bench_shared_sizes)} | to_json }}",
                },
            }
        ],
    }
    shutil.copytree(ROOT / "tools" / "bench" / "filter_plugins", dest / "filter_plugins", dirs_exist_ok=True)
    first, second = dest / "plan_stage.yml", dest / "handover.yml"
    first.write_text(yaml.safe_dump([plan_play], sort_keys=False))
    second.write_text(yaml.safe_dump([plan_play, views, summary], sort_keys=False))
    return first, second


def measured(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run ``cmd`` from a fresh process: wall and CPU seconds, peak RSS (MiB) of it and its children, rc."""
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(log), "--", *cmd], env=env, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _measure(log: str, cmd: list[str]) -> int:
    start = time.perf_counter()
    with open(log, "w") as handle:
        rc = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT).returncode
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # ru_maxrss in KiB on Linux
    cpu = usage.ru_utime + usage.ru_stime  # less sensitive than wall time to a busy machine
    print(
        json.dumps({"seconds": time.perf_counter() - start, "cpu_s": cpu, "rss_mib": usage.ru_maxrss / 1024, "rc": rc})
    )
    return 0


def bench(nodes: int, tree: Path, work: Path, *, before: bool, views: bool = True) -> dict[str, Any]:
    inv = work / "inventory"
    write_inventory(nodes, inv)
    plan_pb, handover_pb = playbooks(tree, work, before=before)
    env = {**os.environ, "ANSIBLE_CONFIG": str(tree / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    row: dict[str, Any] = {"nodes": nodes, "mode": "before" if before else "after"}
    for stage, pb in (("plan", plan_pb), ("handover", handover_pb))[: 2 if views else 1]:
        got = measured([playbook, "-i", str(inv), str(pb)], env, work / f"{stage}.log")
        if got["rc"] != 0:
            raise SystemExit(f"{stage} failed for {nodes} nodes; see {work / (stage + '.log')}")
        row[stage] = got
    if not views:
        return row
    sizes = json.loads((work / "sizes.json").read_text())
    compute = [v for h, v in sizes["hosts"].items() if h.startswith("compute")]
    row["compute_bytes"] = [min(compute), max(compute)]
    row["head_bytes"] = sizes["hosts"]["head01"]
    row["shared"] = sizes["shared"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--before", default="64,256", help="sizes to run with git HEAD's hand-over ('' for none)")
    parser.add_argument("--json", default=str(ROOT / "build" / "bench" / "site.json"))
    parser.add_argument("--views-max", type=int, default=4096, help="above this many nodes: the plan stage only")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-site-") as tmp:
        old = Path(tmp) / "head"
        for n in [int(s) for s in args.before.split(",") if s]:
            if not old.exists():
                old.mkdir()
                archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
                subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            rows.append(bench(n, old, Path(tmp) / f"before{n}", before=True))
            _print(rows[-1])
        for n in [int(s) for s in args.sizes.split(",") if s]:
            rows.append(bench(n, ROOT, Path(tmp) / f"after{n}", before=False, views=n <= args.views_max))
            _print(rows[-1])
    after = [r for r in rows if r["mode"] == "after"]
    for r in after:
        if r["nodes"] in GOAL_PLAN:
            seconds, mib = GOAL_PLAN[r["nodes"]]
            print(
                f"goal: plan stage at {r['nodes']} nodes {r['plan']['seconds']:.1f} s (< {seconds:.0f}), "
                f"{r['plan']['rss_mib']:.0f} MiB (< {mib:.0f})"
            )
    viewed = [r for r in after if "compute_bytes" in r]
    if len(viewed) > 1:
        small, large = viewed[0], viewed[-1]
        spread = max(large["compute_bytes"]) / min(small["compute_bytes"]) - 1
        print(
            f"goal: compute view {small['nodes']} -> {large['nodes']} nodes {spread:+.1%}"
            f" (within {GOAL_SIZE_SPREAD:.0%})"
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"written {args.json}")
    return 0


def _print(r: dict[str, Any]) -> None:
    if "handover" not in r:
        print(
            f"{r['mode']:>6} {r['nodes']:>5} nodes | plan {r['plan']['seconds']:6.1f} s"
            f" (cpu {r['plan']['cpu_s']:6.1f} s) {r['plan']['rss_mib']:6.0f} MiB"
            " | hand-over not run (more than --views-max nodes)",
            flush=True,
        )
        return
    shared = sum(r["shared"].values()) if r["shared"] else 0
    print(
        f"{r['mode']:>6} {r['nodes']:>5} nodes | plan {r['plan']['seconds']:6.1f} s (cpu {r['plan']['cpu_s']:6.1f} s)"
        f" {r['plan']['rss_mib']:6.0f} MiB | hand-over {r['handover']['seconds']:6.1f} s"
        f" (cpu {r['handover']['cpu_s']:6.1f} s) {r['handover']['rss_mib']:6.0f} MiB"
        f" | compute host {r['compute_bytes'][0]:>9,}-{r['compute_bytes'][1]:>9,} B, head {r['head_bytes']:>10,} B"
        f" | shared tables {shared:>10,} B",
        flush=True,
    )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        raise SystemExit(_measure(sys.argv[2], sys.argv[sys.argv.index("--") + 1 :]))
    raise SystemExit(main())
