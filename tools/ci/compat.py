#!/usr/bin/env python3
"""make compat: the collection on each older ansible-core release line that meta/runtime.yml claims.

    python tools/ci/compat.py --venvs .cache/compat 2.18

For each line (a venv ``<venvs>/<line>`` that ``make compat`` builds from the pinned
tests/compat/ansible-core-<line>.txt), two checks:

1. the unit tests that drive Ansible's own APIs (tests/unit/plugins/filter, action, modules and
   inventory: filters, action plugins, modules through AnsibleModule, the inventory plugin; and
   plugin_utils/ansible_compat.py, the private interfaces), with the
   pytest plugin tests/compat/compat_shim.py (2.19's test helper on older lines);
2. ``ansible-playbook playbooks/plan.yml`` of every reference inventory (inventories/tier*): its
   plan.sha256 must be the plan this toolchain's engine computes, and every host file it renders must
   match tests/unit/repo/golden/host-files.txt byte for byte (what 2.19's make plan renders).

The toolchain's own line (pyproject.toml, 2.19) is tested by make unit and make integration. Runs the
plans two at a time; prints one line per check and exits non-zero when any fails.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import read_inventory  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.from_inventory import cluster_plan  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import (  # noqa: E402
    plan_data,
    plan_sha256,
)

UNIT_TESTS = ("tests/unit/plugins/filter", "tests/unit/plugins/action", "tests/unit/plugins/modules",
              "tests/unit/plugins/inventory", "tests/unit/plugins/plugin_utils/test_ansible_compat.py")  # fmt: skip
GOLDEN = ROOT / "tests" / "unit" / "repo" / "golden" / "host-files.txt"
PARALLEL = 2


def reference_inventories() -> list[str]:
    return sorted(p.name for p in (ROOT / "inventories").glob("tier*") if (p / "hosts.yml").is_file())


def golden(inventory: str) -> dict[str, str]:
    """``<host> <path>`` -> sha256 (16 hex digits) of the inventory's rendered files, from the golden list."""
    out = {}
    for line in GOLDEN.read_text().splitlines():
        name, host, path, digest = line.split(" ")
        if name == inventory:
            out[f"{host} {path}"] = digest
    return out


def digests(hosts: Path) -> dict[str, str]:
    return {
        f"{p.relative_to(hosts).parts[0]} /{Path(*p.relative_to(hosts).parts[1:])}": hashlib.sha256(
            p.read_bytes()
        ).hexdigest()[:16]
        for p in sorted(hosts.rglob("*"))
        if p.is_file()
    }


def _env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON"))}
    return {
        **env,
        "PATH": os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
    }


def unit_tests(venv: Path) -> tuple[bool, str]:
    env = {**_env(venv), "PYTHONPATH": str(ROOT / "tests" / "compat")}
    cmd = [
        str(venv / "bin" / "python"),
        "-m",
        "pytest",
        "-p",
        "compat_shim",
        "-p",
        "no:cacheprovider",
        *UNIT_TESTS,
    ]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200, check=False)
    last = (run.stdout.strip().splitlines() or [""])[-1]
    return run.returncode == 0, last if run.returncode == 0 else run.stdout[-4000:] + run.stderr[-2000:]


def plan(venv: Path, inventory: str, out: Path) -> tuple[bool, str]:
    cmd = [str(venv / "bin" / "ansible-playbook"), "-i", f"inventories/{inventory}", "playbooks/plan.yml",
           "-e", f"gpucluster_plan_root={out}"]  # fmt: skip
    run = subprocess.run(cmd, cwd=ROOT, env=_env(venv), capture_output=True, text=True, timeout=1200, check=False)
    if run.returncode != 0:
        return False, f"ansible-playbook failed (rc {run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
    folder = next(p for p in out.iterdir() if (p / "plan.sha256").is_file())
    want = plan_sha256(plan_data(cluster_plan(*read_inventory(ROOT / "inventories" / inventory))))
    got = (folder / "plan.sha256").read_text().strip()
    if got != want:
        return False, f"plan.sha256 {got}, the engine computes {want}"
    expected, rendered = golden(inventory), digests(folder / "hosts")
    differ = sorted(k for k in expected.keys() | rendered.keys() if expected.get(k) != rendered.get(k))
    if not expected or differ:
        return False, f"host files differ from {GOLDEN.name}: {differ[:10] or 'no golden entry'}"
    return True, f"plan {got[:12]}, {len(rendered)} host files as golden"


def check_line(venv: Path, line: str) -> bool:
    version = subprocess.run([str(venv / "bin" / "ansible"), "--version"], capture_output=True, text=True, check=False)
    print(f"== ansible-core {line}: {version.stdout.splitlines()[0] if version.stdout else venv}", flush=True)
    ok, detail = unit_tests(venv)
    print(f"{'ok  ' if ok else 'FAIL'} {line} unit tests: {detail}", flush=True)
    results = [ok]
    with tempfile.TemporaryDirectory(prefix=f"compat-{line}-") as tmp, ThreadPoolExecutor(PARALLEL) as pool:
        outs = {inv: Path(tmp) / inv for inv in reference_inventories()}
        for out in outs.values():
            out.mkdir()
        for inv, (ok, detail) in zip(outs, pool.map(lambda i: plan(venv, i, outs[i]), outs), strict=True):
            print(f"{'ok  ' if ok else 'FAIL'} {line} plan {inv}: {detail}", flush=True)
            results.append(ok)
    return all(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lines", nargs="+", help="release lines, e.g. 2.18 (a venv <venvs>/<line> each)")
    parser.add_argument("--venvs", default=str(ROOT / ".cache" / "compat"), help="where the venvs are")
    args = parser.parse_args(argv)
    failed = []
    for line in args.lines:
        venv = Path(args.venvs) / line
        if not (venv / "bin" / "ansible-playbook").exists():
            print(f"FAIL {line}: no venv at {venv} (make compat builds it from tests/compat/ansible-core-{line}.txt)")
            failed.append(line)
        elif not check_line(venv, line):
            failed.append(line)
    print(f"compat: {'failed on ' + ', '.join(failed) if failed else 'every line passed'} ({', '.join(args.lines)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
