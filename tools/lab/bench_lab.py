"""make bench-lab TIER=tier4: converge + idempotent re-run, project settings vs stock.

Runs in one go: (1) fresh lab, first converge and re-run with the project's ansible.cfg
(pipelining, 25 forks, fact cache, SSH ControlPersist); (2) fresh lab, the same with
Ansible's stock settings (no pipelining, 5 forks, no fact cache; only the collection
path set so gpucluster.tiers resolves). Prints both and the ratio. A benchmark, not a
test: figures go to docs/performance.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def playbook(tier: str, name: str, config: str, connect: bool = True) -> float:
    args = [str(BIN / "ansible-playbook"), "-i", f"inventories/{tier}", "-i", "lab/overlay"]
    if connect:
        args += ["-i", f".lab/{tier}/inventory.yml"]
    env = {**os.environ, "ANSIBLE_CONFIG": config}
    start = time.monotonic()
    proc = subprocess.run([*args, name], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.stdout.write(proc.stdout[-6000:])
        raise SystemExit(f"{name} failed with {config}")
    return time.monotonic() - start


def measure(tier: str, config: str) -> tuple[float, float]:
    project = str(ROOT / "ansible.cfg")
    playbook(tier, "lab/destroy.yml", project, connect=False)
    playbook(tier, "lab/create.yml", project, connect=False)
    try:
        return playbook(tier, "site.yml", config), playbook(tier, "site.yml", config)
    finally:
        playbook(tier, "lab/destroy.yml", project, connect=False)


def main(tier: str) -> int:
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as stock:
        # stock settings but the same collections: the in-place link and what make setup installed
        paths = ":".join(str(ROOT / p) for p in ("collections", ".collections/runtime", ".collections/lab"))
        stock.write(f"[defaults]\ncollections_path = {paths}\n")
    rows = {
        "project ansible.cfg": measure(tier, str(ROOT / "ansible.cfg")),
        "stock settings": measure(tier, stock.name),
    }
    print(f"| {tier} | first converge | idempotent re-run |\n|---|---:|---:|")
    for name, (first, again) in rows.items():
        print(f"| {name} | {first:.0f} s | {again:.0f} s |")
    (p1, p2), (s1, s2) = rows.values()
    print(f"stock / project: first converge x{s1 / p1:.2f}, re-run x{s2 / p2:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "tier4"))
