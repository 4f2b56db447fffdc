#!/usr/bin/env python3
"""Run the plan through ansible-runner's Python API, as a CI job or an AWX-style
controller would, and read the run back from its events and stats.

    python3 tools/ci/run_plan.py --tier tier1     # any python3: re-runs itself with .venv/bin/python
    python tools/ci/run_plan.py --inventory path/to/inventory --dest build/runner/site --plan-root /tmp/plan

Prints a JSON summary (status, rc, per-host stats, the tasks that ran, where plan.json
and the artifacts are) and exits with the playbook's rc. ``run_plan(...)`` is the same
as a function (tests/unit/repo/test_runner.py calls it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
if __name__ == "__main__":  # the system python3 has no ansible-runner: re-run with .venv/bin/python
    from venv_python import require

    require(__file__, ("ansible_runner", "ansible", "jmespath", "yaml"))

import ansible_runner
from runner_dir import ROOT, filtered_environ, prepare

PLAN_TASK = "Compute the cluster plan"


def run_plan(
    inventory: str | Path,
    private_data_dir: str | Path,
    *,
    plan_root: str | Path | None = None,
    ident: str | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run playbooks/plan.yml for ``inventory`` in ``private_data_dir``; summarise the run."""
    pdd = prepare(inventory, private_data_dir)
    extravars = {"gpucluster_plan_root": str(Path(plan_root).resolve())} if plan_root else {}
    tasks: list[dict[str, Any]] = []
    written: dict[str, str] = {}

    def on_event(event: dict[str, Any]) -> bool:
        # called for every event as it happens; keep a small summary, not the payload
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            tasks.append(
                {
                    "event": event["event"],
                    "task": data.get("task"),
                    "host": data.get("host"),
                    "changed": bool((data.get("res") or {}).get("changed")),
                }
            )
            dest = (data.get("res") or {}).get("dest")
            if event["event"] == "runner_on_ok" and isinstance(dest, str):
                written[Path(dest).name] = dest
        return True  # keep the event in artifacts/<ident>/job_events too

    # the ansible-playbook beside this Python (a venv's) first, whatever the caller's PATH
    bindir = Path(sys.executable).parent
    path = None
    if (bindir / "ansible-playbook").exists():
        path = os.pathsep.join([str(bindir), os.environ.get("PATH", "")])
    # ansible_runner.run() copies os.environ into the run and its artifacts/<ident>/command:
    # only the filtered environment (runner_dir.runner_env), no caller secret
    with filtered_environ():
        runner = ansible_runner.run(
            private_data_dir=str(pdd),
            playbook="playbooks/plan.yml",
            extravars=extravars,
            envvars={"PATH": path} if path else None,
            ident=ident,
            quiet=quiet,
            event_handler=on_event,
        )
    return {
        "status": runner.status,
        "rc": runner.rc,
        "stats": runner.stats,
        "tasks": tasks,
        "plan_json": written.get("plan.json"),
        "report_md": written.get("report.md"),
        "artifact_dir": runner.config.artifact_dir,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--tier", help="a reference tier: inventories/TIER")
    where.add_argument("--inventory", help="an inventory folder")
    parser.add_argument("--dest", help="private data dir (default build/runner/<tier or inventory name>)")
    parser.add_argument("--plan-root", help="where plan/<name>/ goes (default build/plan)")
    parser.add_argument("--ident", help="artifact folder name (default a UUID)")
    args = parser.parse_args(argv)
    inventory = Path(args.inventory) if args.inventory else ROOT / "inventories" / args.tier
    dest = Path(args.dest) if args.dest else ROOT / "build" / "runner" / (args.tier or inventory.name)
    result = run_plan(inventory, dest, plan_root=args.plan_root, ident=args.ident)
    ran = [t["task"] for t in result["tasks"] if t["event"] == "runner_on_ok"]
    print(json.dumps({**result, "tasks": sorted(set(ran))}, indent=2, sort_keys=True))
    return int(result["rc"] or 0) if result["status"] == "successful" else int(result["rc"] or 1)


if __name__ == "__main__":
    sys.exit(main())
