#!/usr/bin/env python3
"""Run site.yml as N parallel ansible-runner processes, each limited to a slice of the
compute nodes, after one run for the head and storage hosts; every run uses one plan.

    python tools/ci/run_slices.py --inventory inventories/tier4 --dest build/runner/tier4 --slices 2 [--lab tier4]
    make runner TIER=tier4 PLAYBOOK=site SLICES=2 LAB=1          # the same through make

The order (tools/ci/runner/README.md, "Sliced runs"):

1. ``<ident>-plan``: playbooks/plan.yml once, into ``<dest>/plan/<ident>/<cluster>/plan.json``
   (no host is contacted). Its sha256 is the canonical form's (:func:`plan_sha256`);
   ``--plan-file`` skips this step and uses a plan.json written earlier (``make plan``).
2. ``<ident>-slice0``: the playbook limited to localhost and every host that is not in
   ``compute`` (head, storage, ...): the controller-side step and the services the compute
   nodes need first. The compute slices start only when it succeeded.
3. ``<ident>-slice1`` .. ``<ident>-sliceN``: in parallel, each limited to localhost and its
   share of ``compute`` (round robin over the hosts in natural order, so the shares differ
   by at most one host; AWX too distributes an inventory evenly among its slice jobs).

The converge lock (docs/runbook.md, "The converge lock"): before slice0 the script takes the lock
on the head itself (``<ident>-lock``: playbooks/lock.yml, run id = the ident, pid = this script's),
every slice joins it (same run id, ``gpucluster_lock_release: false``) and the script releases it
when the last slice ended (``<ident>-unlock``), whatever the slices' outcome. While this script
runs, another site.yml is refused; when it dies, a run from this controller takes the lock over.

Every run gets ``gpucluster_plan_file`` (that plan.json) and ``gpucluster_plan_sha256_expected``
(its hash) as extra vars, so each run's plan play loads the same plan and stops when it is
not the one hashed here. Each run keeps its artifacts in ``<dest>/artifacts/<ident>-sliceK/``;
the script prints one summary line per run (status, rc, changed and failed counts from its
job events), writes them to ``<dest>/artifacts/<ident>-slices.json`` and exits 0 only when
every run succeeded (and, with ``--expect-unchanged``, changed nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runner_dir import ROOT, prepare, runner_env, stats

sys.path.insert(0, str(ROOT / "collections"))  # the engine, in place (collections/ links to the repo)
# the plan's canonical-JSON hash, the plan play's own (gpucluster_plan_sha256): one definition
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import plan_sha256

#: Playbooks that can be sliced: site.yml converges each host on its own. validate.yml
#: measures across nodes (ib_write_bw from node i to node i+1, fio on the shared path at
#: once), so it runs as one process (make runner PLAYBOOK=validate).
SLICEABLE = ("site",)
#: Longest --limit passed inline; longer lists go to a file (--limit @file). Linux caps one
#: argument at MAX_ARG_STRLEN = 32 pages = 128 KiB (execve(2), "Limits on size of arguments").
INLINE_LIMIT_MAX = 32 * 1024


def natural_key(name: str) -> list[Any]:
    """compute2 before compute10: digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def slice_hosts(hosts: Iterable[str], count: int) -> list[list[str]]:
    """Split ``hosts`` into ``count`` shares, round robin over their natural order.

    Deterministic (the input order does not matter), balanced (sizes differ by at most one)
    and never empty: ``count`` above the number of hosts gives one share per host.
    """
    if count < 1:
        raise ValueError(f"slices must be 1 or more, got {count}")
    ordered = sorted(set(hosts), key=natural_key)
    if not ordered:
        return []
    count = min(count, len(ordered))
    return [ordered[i::count] for i in range(count)]


@dataclass(frozen=True)
class Slice:
    """One ansible-runner run: its index (0: the non-compute hosts), ident and hosts."""

    index: int
    ident: str
    hosts: tuple[str, ...]

    @property
    def limit_hosts(self) -> list[str]:
        # localhost by name: an implicit localhost is not matched by --limit otherwise,
        # and the plan play (hosts: localhost) would be skipped.
        return ["localhost", *self.hosts]


def plan_slices(ident: str, groups: dict[str, list[str]], count: int) -> list[Slice]:
    """slice0 for every host outside ``compute``, then ``count`` compute slices."""
    compute = set(groups.get("compute") or [])
    others = sorted({h for h in groups.get("all") or [] if h not in compute}, key=natural_key)
    shares = slice_hosts(compute, count)
    return [Slice(0, f"{ident}-slice0", tuple(others))] + [
        Slice(i, f"{ident}-slice{i}", tuple(share)) for i, share in enumerate(shares, start=1)
    ]


def inventory_groups(inventory: Path, ansible_inventory: str = "ansible-inventory") -> dict[str, list[str]]:
    """Every group of ``inventory`` with all its hosts (children included), from ansible-inventory."""
    run = subprocess.run(
        [ansible_inventory, "-i", str(inventory), "--list"], capture_output=True, text=True, check=False
    )
    if run.returncode != 0:
        raise SystemExit(f"run_slices: ansible-inventory -i {inventory} failed: {run.stderr.strip()}")
    data = json.loads(run.stdout)

    def members(group: str, seen: frozenset[str] = frozenset()) -> set[str]:
        node = data.get(group) or {}
        hosts = set(node.get("hosts") or [])
        for child in node.get("children") or []:
            if child not in seen:
                hosts |= members(child, seen | {group})
        return hosts

    names = {g for g in data if g != "_meta"}
    return {g: sorted(members(g), key=natural_key) for g in names}


def limit_argument(hosts: Sequence[str], limit_file: Path) -> str:
    """``--limit``'s value: the hosts inline, or ``@file`` (one host a line) when too long."""
    inline = ",".join(hosts)
    if len(inline) <= INLINE_LIMIT_MAX:
        return inline
    limit_file.parent.mkdir(parents=True, exist_ok=True)
    limit_file.write_text("\n".join(hosts) + "\n")
    return f"@{limit_file}"


def runner_command(
    runner: str,
    private_data_dir: Path,
    playbook: str,
    ident: str,
    *,
    extravars: dict[str, str],
    limit: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The ansible-runner command line of one run (quiet: the output is in artifacts/<ident>/stdout)."""
    cmd = [runner, "run", str(private_data_dir), "-p", f"playbooks/{playbook}.yml", "--ident", ident, "-q"]
    if limit is not None:
        cmd += ["--limit", limit]
    # ansible-runner splits --cmdline with shlex; one -e with JSON keeps paths with spaces whole
    cmd += ["--cmdline", shlex.join(["-e", json.dumps(extravars, sort_keys=True)])]
    return [*cmd, *extra_args]


@dataclass
class RunSummary:
    """What one run left in its artifacts: status, rc and the recap summed over hosts."""

    name: str
    ident: str
    hosts: int
    status: str
    rc: int | None
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    failed_tasks: list[dict[str, Any]] = field(default_factory=list)
    artifact_dir: str = ""

    def line(self) -> str:
        return (
            f"{self.name:<7} {self.status:<10} rc={self.rc} hosts={self.hosts} ok={self.ok} "
            f"changed={self.changed} failed={self.failed} unreachable={self.unreachable}  {self.artifact_dir}"
        )


def summarise(name: str, artifact_dir: Path, hosts: int | None = None) -> RunSummary:
    """A run's summary from its artifacts (status, rc, job_events/ playbook_on_stats).

    ``hosts``: the slice's size; by default the number of hosts in the recap.
    """
    if not artifact_dir.is_dir():
        return RunSummary(name, artifact_dir.name, hosts or 0, "not run", None, artifact_dir=str(artifact_dir))
    result = stats(artifact_dir)
    recap = result["stats"]

    def total(key: str) -> int:
        return sum(int(n) for n in (recap.get(key) or {}).values())

    return RunSummary(
        name=name,
        ident=artifact_dir.name,
        hosts=len({h for counts in recap.values() for h in counts}) if hosts is None else hosts,
        status=result["status"],
        rc=result["rc"],
        ok=total("ok"),
        changed=total("changed"),
        failed=total("failures"),
        unreachable=total("dark"),
        failed_tasks=result["failed_tasks"],
        artifact_dir=str(artifact_dir),
    )


def _tools() -> tuple[str, str, dict[str, str]]:
    """ansible-runner and ansible-inventory beside this Python (a venv's) first, and the env for them:
    the caller's, filtered (runner_dir.runner_env), since each run's artifacts/<ident>/command records it."""
    bindir = Path(os.path.abspath(sys.executable)).parent  # not resolve(): a venv's python is a symlink
    env = runner_env()
    if (bindir / "ansible-runner").exists():
        env["PATH"] = os.pathsep.join([str(bindir), env.get("PATH", "")])
        return str(bindir / "ansible-runner"), str(bindir / "ansible-inventory"), env
    return "ansible-runner", "ansible-inventory", env


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)


def compute_plan(
    runner: str, pdd: Path, ident: str, env: dict[str, str], extra_args: Sequence[str]
) -> tuple[RunSummary, Path | None]:
    """playbooks/plan.yml once into <pdd>/plan/<ident>/; the summary and plan.json's path."""
    plan_root = pdd / "plan" / ident
    cmd = runner_command(
        runner, pdd, "plan", f"{ident}-plan", extravars={"gpucluster_plan_root": str(plan_root)}, extra_args=extra_args
    )
    print(f"plan    {shlex.join(cmd)}", flush=True)
    _run(cmd, env).wait()
    summary = summarise("plan", pdd / "artifacts" / f"{ident}-plan")
    found = sorted(plan_root.glob("*/plan.json"))
    return summary, (found[0] if summary.status == "successful" and len(found) == 1 else None)


def lock_extravars(ident: str, pid: int) -> dict[str, str]:
    """The converge lock's extra vars shared by the lock runs and every slice (one holder: this script)."""
    return {"gpucluster_lock_run_id": ident, "gpucluster_lock_pid": str(pid)}


def lock_run(
    runner: str, pdd: Path, ident: str, state: str, env: dict[str, str], extra_args: Sequence[str]
) -> RunSummary:
    """playbooks/lock.yml (take: state present, release: absent) for the whole sliced run."""
    name = "lock" if state == "present" else "unlock"
    cmd = runner_command(
        runner,
        pdd,
        "lock",
        f"{ident}-{name}",
        extravars={**lock_extravars(ident, os.getpid()), "gpucluster_lock_state": state},
        extra_args=extra_args,
    )
    print(f"{name:<7} {shlex.join(cmd)}", flush=True)
    _run(cmd, env).wait()
    summary = summarise(name, pdd / "artifacts" / f"{ident}-{name}")
    print(summary.line(), flush=True)
    return summary


def read_plan_hash(plan_file: Path) -> str:
    """The plan file's canonical sha256; checked against plan.sha256 beside it when there is one."""
    digest = plan_sha256(json.loads(plan_file.read_text()))
    recorded = plan_file.with_name("plan.sha256")
    if recorded.is_file():
        words = recorded.read_text().split()
        if words and words[0] != digest:
            raise SystemExit(
                f"run_slices: {recorded} says {words[0]} but {plan_file} hashes to {digest} "
                "(canonical JSON: sort_keys, separators (',', ':')); rewrite the plan (make plan)"
            )
    return digest


def run_slices(
    inventory: str | Path,
    dest: str | Path,
    *,
    count: int,
    ident: str,
    playbook: str = "site",
    lab: str | None = None,
    plan_file: str | Path | None = None,
    extra_args: Sequence[str] = (),
) -> tuple[list[RunSummary], dict[str, Any]]:
    """Plan, slice0, then the compute slices in parallel; their summaries and the run's record."""
    if playbook not in SLICEABLE:
        raise SystemExit(f"run_slices: playbook {playbook!r} cannot be sliced; allowed: {', '.join(SLICEABLE)}")
    pdd = prepare(inventory, dest, lab=lab)
    runner, ansible_inventory, env = _tools()
    summaries: list[RunSummary] = []
    record: dict[str, Any] = {"ident": ident, "playbook": playbook, "slices": count}

    if plan_file is None:
        plan_run, found = compute_plan(runner, pdd, ident, env, extra_args)
        summaries.append(plan_run)
        print(plan_run.line(), flush=True)
        if found is None:
            return summaries, record
        plan_path = found
    else:
        plan_path = Path(plan_file).resolve()
    digest = read_plan_hash(plan_path)
    record.update(plan_file=str(plan_path), plan_sha256=digest)
    print(f"plan    {plan_path} sha256 {digest}", flush=True)
    extravars = {
        "gpucluster_plan_file": str(plan_path),
        "gpucluster_plan_sha256_expected": digest,
        **lock_extravars(ident, os.getpid()),
        "gpucluster_lock_release": "false",  # the script releases it after the last slice
    }

    slices = plan_slices(ident, inventory_groups(pdd / "inventory", ansible_inventory), count)
    record["hosts"] = {s.ident: list(s.hosts) for s in slices}
    commands = {
        s.index: runner_command(
            runner,
            pdd,
            playbook,
            s.ident,
            extravars=extravars,
            limit=limit_argument(s.limit_hosts, pdd / "slices" / f"{s.ident}.limit"),
            extra_args=extra_args,
        )
        for s in slices
    }
    record["commands"] = {s.ident: shlex.join(commands[s.index]) for s in slices}

    def done(s: Slice) -> RunSummary:
        return summarise(f"slice{s.index}", pdd / "artifacts" / s.ident, len(s.hosts))

    head, rest = slices[0], slices[1:]
    taken = lock_run(runner, pdd, ident, "present", env, extra_args)
    summaries.append(taken)
    if taken.status != "successful":
        print(f"lock    not taken: see {taken.artifact_dir}/stdout (another converge runs?)", flush=True)
        return summaries, record
    try:
        _run_slices(commands, head, rest, summaries, record, env, done)
    finally:
        summaries.append(lock_run(runner, pdd, ident, "absent", env, extra_args))
    return summaries, record


def _run_slices(
    commands: dict[int, list[str]],
    head: Slice,
    rest: Sequence[Slice],
    summaries: list[RunSummary],
    record: dict[str, Any],
    env: dict[str, str],
    done: Any,
) -> None:
    """slice0, then (when it succeeded) the compute slices in parallel, under the lock."""
    started = time.monotonic()
    print(f"slice0  {len(head.hosts)} hosts: {','.join(head.hosts)}", flush=True)
    _run(commands[0], env).wait()
    first = done(head)
    summaries.append(first)
    print(first.line(), flush=True)
    if first.status != "successful":
        summaries += [done(s) for s in rest]
        return
    procs = []
    for s in rest:
        print(f"slice{s.index}  {len(s.hosts)} hosts: {','.join(s.hosts)}", flush=True)
        procs.append((s, _run(commands[s.index], env)))
    for s, proc in procs:
        proc.wait()
        summaries.append(done(s))
        print(summaries[-1].line(), flush=True)
    record["seconds"] = round(time.monotonic() - started, 1)


def exit_code(summaries: Sequence[RunSummary], *, expect_unchanged: bool = False) -> int:
    """0 when every run succeeded (and changed nothing, if asked); else the first failed run's rc (or 1)."""
    for s in summaries:
        if s.status != "successful":
            return s.rc or 1
    if expect_unchanged and any(s.changed for s in summaries if s.name != "plan"):
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inventory", required=True, help="inventory folder, e.g. inventories/tier4")
    parser.add_argument("--dest", required=True, help="the private data dir, e.g. build/runner/tier4")
    parser.add_argument("--slices", type=int, required=True, help="number of compute slices (runs in parallel)")
    parser.add_argument("--playbook", default="site", choices=SLICEABLE, help="playbooks/PLAYBOOK.yml")
    parser.add_argument("--ident", default=f"site-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    parser.add_argument("--lab", metavar="TIER", help="add the lab overlay and .lab/TIER/inventory.yml")
    parser.add_argument("--plan-file", help="use this plan.json (make plan) instead of computing the plan")
    parser.add_argument("--runner-args", default="", help="more ansible-runner arguments for every run")
    parser.add_argument(
        "--expect-unchanged", action="store_true", help="fail when a slice changed anything (idempotence)"
    )
    args = parser.parse_args(argv)
    if args.slices < 1:
        parser.error("--slices must be 1 or more")
    summaries, record = run_slices(
        args.inventory,
        args.dest,
        count=args.slices,
        ident=args.ident,
        playbook=args.playbook,
        lab=args.lab,
        plan_file=args.plan_file,
        extra_args=shlex.split(args.runner_args),
    )
    rc = exit_code(summaries, expect_unchanged=args.expect_unchanged)
    record.update(rc=rc, runs=[asdict(s) for s in summaries])
    out = Path(args.dest).resolve() / "artifacts" / f"{args.ident}-slices.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"summary {out}")
    for s in summaries:
        print(s.line())
    changed = [s.name for s in summaries if s.changed and s.name != "plan"]
    if args.expect_unchanged and changed:
        print(f"not idempotent: {', '.join(changed)} changed", file=sys.stderr)
    print(f"overall rc={rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
