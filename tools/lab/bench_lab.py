"""make bench-lab TIER=tier4: converge + idempotent re-run, side by side per setting.

Settings: (1) the project's ansible.cfg (pipelining, 25 forks, fact cache, SSH
ControlPersist); (2) the same with mitogen's ``mitogen_linear`` strategy, when mitogen is
importable by this Python or GPUCLUSTER_MITOGEN names the folder that holds ansible_mitogen
(docs/performance.md, "mitogen"); (3) Ansible's stock settings (no pipelining, 5 forks, no fact
cache; only the collection path set so gpucluster.tiers resolves).

Default: a fresh lab per setting, first converge and re-run. ``--rerun-only`` (make bench-lab
BENCH_ARGS=--rerun-only): on the running, converged lab of the tier, one idempotent re-run per
setting, each checked for changed=0 (minutes instead of a fresh lab each). A benchmark, not a
test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def mitogen_env() -> dict[str, str] | None:
    """The environment that turns mitogen_linear on, or None when mitogen is not installed."""
    folder = os.environ.get("GPUCLUSTER_MITOGEN")
    if not folder:
        spec = importlib.util.find_spec("ansible_mitogen")
        if spec is None or not spec.origin:
            return None
        folder = str(Path(spec.origin).parents[1])
    strategy = Path(folder) / "ansible_mitogen" / "plugins" / "strategy"
    if not strategy.is_dir():
        raise SystemExit(f"GPUCLUSTER_MITOGEN={folder}: no ansible_mitogen/plugins/strategy there")
    path = os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)
    return {"ANSIBLE_STRATEGY_PLUGINS": str(strategy), "ANSIBLE_STRATEGY": "mitogen_linear", "PYTHONPATH": path}


def load() -> str:
    """The 1-minute load average now: the machine is shared, so every timing carries it."""
    return f"{os.getloadavg()[0]:.1f}"


def controller_cpu() -> float:
    """User + system seconds of the finished children (ansible-playbook and its forks) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def playbook(tier: str, name: str, config: str, extra: dict[str, str] | None = None, connect: bool = True) -> float:
    args = [str(BIN / "ansible-playbook"), "-i", f"inventories/{tier}", "-i", "lab/overlay"]
    if connect:
        args += ["-i", f".lab/{tier}/inventory.yml"]
    env = {**os.environ, "ANSIBLE_CONFIG": config, **(extra or {})}
    start = time.monotonic()
    proc = subprocess.run([*args, name], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.stdout.write(proc.stdout[-6000:])
        raise SystemExit(f"{name} failed with {config} {extra or ''}")
    if extra is not None and "idempotent" in extra.get("GPUCLUSTER_BENCH_RUN", ""):
        changed = [int(n) for n in re.findall(r"changed=(\d+)", proc.stdout)]
        if any(changed):
            raise SystemExit(f"{name}: the re-run changed something ({sum(changed)} tasks): not idempotent")
    return time.monotonic() - start


def measure(tier: str, config: str, extra: dict[str, str]) -> tuple[float, float]:
    project = str(ROOT / "ansible.cfg")
    playbook(tier, "lab/destroy.yml", project, connect=False)
    playbook(tier, "lab/create.yml", project, connect=False)
    try:
        first = playbook(tier, "site.yml", config, extra)
        return first, playbook(tier, "site.yml", config, {**extra, "GPUCLUSTER_BENCH_RUN": "idempotent"})
    finally:
        playbook(tier, "lab/destroy.yml", project, connect=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tier", nargs="?", default="tier4")
    parser.add_argument("--rerun-only", action="store_true", help="re-runs on the running, converged lab")
    opts = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as stock:
        # stock settings but the same collections: the in-place link and what make setup installed
        paths = ":".join(str(ROOT / p) for p in ("collections", ".collections/runtime", ".collections/lab"))
        stock.write(f"[defaults]\ncollections_path = {paths}\n")
    project = str(ROOT / "ansible.cfg")
    settings: dict[str, tuple[str, dict[str, str]]] = {"project ansible.cfg": (project, {})}
    mitogen = mitogen_env()
    if mitogen is not None:
        settings["project ansible.cfg + mitogen_linear"] = (project, mitogen)
    settings["stock settings"] = (stock.name, {})
    if opts.rerun_only:
        # load average before/after each run, and the controller's CPU seconds: the steadier figure
        print(
            f"| {opts.tier}, converged lab | idempotent re-run (changed=0) | controller CPU | load before / after |\n"
            "|---|---:|---:|---:|"
        )
        for name, (config, extra) in settings.items():
            before, cpu = load(), controller_cpu()
            again = playbook(opts.tier, "site.yml", config, {**extra, "GPUCLUSTER_BENCH_RUN": "idempotent"})
            print(f"| {name} | {again:.0f} s | {controller_cpu() - cpu:.0f} s | {before} / {load()} |", flush=True)
        return 0
    rows, loads = {}, {}
    for name, (config, extra) in settings.items():
        before = load()
        rows[name] = measure(opts.tier, config, extra)
        loads[name] = f"{before} / {load()}"
    print(f"| {opts.tier} | first converge | idempotent re-run | load before / after |\n|---|---:|---:|---:|")
    for name, (first, again) in rows.items():
        print(f"| {name} | {first:.0f} s | {again:.0f} s | {loads[name]} |")
    p1, p2 = rows["project ansible.cfg"]
    for name, (first, again) in rows.items():
        if name != "project ansible.cfg":
            print(f"{name} / project: first converge x{first / p1:.2f}, re-run x{again / p2:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
