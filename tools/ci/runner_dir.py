#!/usr/bin/env python3
"""Build an ansible-runner private data dir from tools/ci/runner/ and read a run's artifacts.

    python tools/ci/runner_dir.py prepare --inventory inventories/tier3 --dest build/runner/tier3 [--lab tier3]
    python tools/ci/runner_dir.py stats build/runner/tier3/artifacts/<ident> [--expect-unchanged]

``prepare`` copies env/ from the template (adding ANSIBLE_CONFIG), copies the inventory
(and, with ``--lab``, the lab's overlay and connection files) and links project/ to this
repository; earlier artifacts stay. ``stats`` prints a run's status, rc and per-host
recap from its job events; with ``--expect-unchanged`` it fails when a host changed
(the idempotence check of a second converge). The layout: tools/ci/runner/README.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import jmespath
import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "tools" / "ci" / "runner"


def prepare(inventory: str | Path, dest: str | Path, *, lab: str | None = None, root: Path = ROOT) -> Path:
    """Make ``dest`` a private data dir for ``inventory``; return its absolute path."""
    inventory, dest = Path(inventory), Path(dest).resolve()
    if not inventory.is_absolute():
        inventory = root / inventory
    if not (inventory / "hosts.yml").is_file():
        raise SystemExit(f"runner_dir: {inventory} is not an inventory folder (no hosts.yml)")
    dest.mkdir(parents=True, exist_ok=True)
    for sub in ("env", "inventory"):
        shutil.rmtree(dest / sub, ignore_errors=True)
    shutil.copytree(TEMPLATE / "env", dest / "env")
    envvars = yaml.safe_load((dest / "env" / "envvars").read_text()) or {}
    envvars["ANSIBLE_CONFIG"] = str(root / "ansible.cfg")
    (dest / "env" / "envvars").write_text(
        "---\n# built by tools/ci/runner_dir.py from tools/ci/runner/env/envvars\n"
        + yaml.safe_dump({k: str(v) for k, v in envvars.items()}, sort_keys=True)
    )
    shutil.copytree(inventory, dest / "inventory")
    if lab:
        connection = root / ".lab" / lab / "inventory.yml"
        if not connection.is_file():
            raise SystemExit(f"runner_dir: {connection} is missing; start the lab first (make lab-up TIER={lab})")
        shutil.copy(root / "lab" / "overlay" / "lab.yml", dest / "inventory" / "zz-lab-overlay.yml")
        shutil.copy(connection, dest / "inventory" / "zz-lab-connection.yml")
    project = dest / "project"
    if project.is_symlink() or project.is_file():
        project.unlink()
    elif project.is_dir():
        shutil.rmtree(project)
    project.symlink_to(root, target_is_directory=True)
    return dest


#: JMESPath queries over a run's job events (ansible-runner writes one JSON document per event
#: to artifacts/<ident>/job_events/; the fields are ansible-runner's event schema,
#: https://ansible-runner.readthedocs.io/en/stable/intro/#runner-artifact-job-events-host-and-playbook-events).
EVENT_QUERIES = {
    # the recap: the last playbook_on_stats event's per-host counters
    "stats": "[?event=='playbook_on_stats'] | [-1].event_data",
    # tasks that failed a host, not counting failures the play ignores (ignore_errors: true);
    # the parentheses matter: `!` binds tighter than `.` in JMESPath
    "failed_tasks": (
        "[?event=='runner_on_failed' && !(event_data.ignore_errors)].{host: event_data.host, task: event_data.task}"
    ),
    # tasks that changed a host: on a second converge, each one breaks idempotence
    "changed_tasks": (
        "[?event=='runner_on_ok' && event_data.res.changed].{host: event_data.host, task: event_data.task}"
    ),
}
_COMPILED = {name: jmespath.compile(query) for name, query in EVENT_QUERIES.items()}
RECAP_KEYS = ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")


def job_events(artifact_dir: str | Path) -> list[dict[str, Any]]:
    """A run's job events in the order they happened (file names start with the event counter)."""
    files = sorted((Path(artifact_dir) / "job_events").glob("*.json"), key=lambda p: int(p.name.split("-")[0]))
    return [json.loads(f.read_text()) for f in files]


def stats(artifact_dir: str | Path) -> dict[str, Any]:
    """status, rc, the playbook_on_stats recap, and the failed and changed tasks of one run (from its artifacts)."""
    art = Path(artifact_dir)
    events = job_events(art)
    recap = _COMPILED["stats"].search(events) or {}
    return {
        "artifact_dir": str(art),
        "status": (art / "status").read_text().strip() if (art / "status").exists() else "unknown",
        "rc": int((art / "rc").read_text().strip()) if (art / "rc").exists() else None,
        "stats": {k: dict(recap.get(k) or {}) for k in RECAP_KEYS} if recap else {},
        "failed_tasks": _COMPILED["failed_tasks"].search(events) or [],
        "changed_tasks": _COMPILED["changed_tasks"].search(events) or [],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="build a private data dir")
    p.add_argument("--inventory", required=True, help="inventory folder, e.g. inventories/tier3")
    p.add_argument("--dest", required=True, help="the private data dir, e.g. build/runner/tier3")
    p.add_argument("--lab", metavar="TIER", help="add the lab overlay and .lab/TIER/inventory.yml")
    s = sub.add_parser("stats", help="summarise a run's artifacts")
    s.add_argument("artifact_dir")
    s.add_argument("--expect-unchanged", action="store_true", help="fail when any host reports changed")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(prepare(args.inventory, args.dest, lab=args.lab))
        return 0
    result = stats(args.artifact_dir)
    print(json.dumps(result, indent=2, sort_keys=True))
    changed = {h: n for h, n in result["stats"].get("changed", {}).items() if n}
    if args.expect_unchanged and changed:
        tasks = "; ".join(f"{t['host']}: {t['task']}" for t in result["changed_tasks"])
        print(f"not idempotent: changed tasks per host {changed} ({tasks})", file=sys.stderr)
        return 1
    return 0 if result["status"] == "successful" else 1


if __name__ == "__main__":
    sys.exit(main())
