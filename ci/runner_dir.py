#!/usr/bin/env python3
"""Build an ansible-runner private data dir from ci/runner/ and read a run's artifacts.

    python ci/runner_dir.py prepare --inventory inventories/tier3 --dest build/runner/tier3 [--lab tier3]
    python ci/runner_dir.py stats build/runner/tier3/artifacts/<ident> [--expect-unchanged]

``prepare`` copies env/ from the template (adding ANSIBLE_CONFIG), copies the inventory
(and, with ``--lab``, the lab's overlay and connection files) and links project/ to this
repository; earlier artifacts stay. ``stats`` prints a run's status, rc and per-host
recap from its job events; with ``--expect-unchanged`` it fails when a host changed
(the idempotence check of a second converge). The layout: ci/runner/README.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "ci" / "runner"


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
        "---\n# built by ci/runner_dir.py from ci/runner/env/envvars\n"
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


def stats(artifact_dir: str | Path) -> dict[str, Any]:
    """status, rc and the playbook_on_stats recap of one run (from its artifacts)."""
    art = Path(artifact_dir)
    out: dict[str, Any] = {
        "artifact_dir": str(art),
        "status": (art / "status").read_text().strip() if (art / "status").exists() else "unknown",
        "rc": int((art / "rc").read_text().strip()) if (art / "rc").exists() else None,
        "stats": {},
        "failed_tasks": [],
    }
    for f in sorted((art / "job_events").glob("*.json"), key=lambda p: int(p.name.split("-")[0])):
        event = json.loads(f.read_text())
        data = event.get("event_data") or {}
        if event.get("event") == "playbook_on_stats":
            keys = ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")
            out["stats"] = {k: dict(data.get(k) or {}) for k in keys}
        elif event.get("event") == "runner_on_failed" and not data.get("ignore_errors"):
            out["failed_tasks"].append({"host": data.get("host"), "task": data.get("task")})
    return out


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
        print(f"not idempotent: changed tasks per host {changed}", file=sys.stderr)
        return 1
    return 0 if result["status"] == "successful" else 1


if __name__ == "__main__":
    sys.exit(main())
