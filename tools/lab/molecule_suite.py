"""Run the molecule scenarios stage by stage, time each stage, always destroy.

A scenario's clean (its first destroy) runs while the previous scenario verifies, and its last
destroy while the next scenario runs: each lab has its own names and pools. MOLECULE_OVERLAP=1
also creates, converges and re-runs the next scenario while one verifies (two labs at once).

make molecule [TIERS="tier1 tier2"] -> build/testing/molecule-times.md (a table kept
current in docs/testing.md). Exits non-zero on the first failing stage (after destroy).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("destroy", "create", "converge", "idempotence", "verify", "destroy")
#: one per reference tier, and tier4-k8s's compute node set (the Kubernetes path); also make's TIERS
DEFAULT_SCENARIOS = ("tier1", "tier2", "tier3", "tier4", "tier4-k8s")


def run(tier: str, stage: str) -> tuple[int, float]:
    start = time.monotonic()
    proc = subprocess.run(["molecule", stage, "-s", tier], cwd=ROOT, env=os.environ, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    # every stage's output, for the slowest tasks (ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks)
    log = ROOT / "build" / "testing" / f"molecule-{tier}-{stage}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        sys.stdout.write(proc.stdout[-12000:] + proc.stderr[-4000:])
    return proc.returncode, elapsed


def verify_summary(junit: Path, slowest: int = 5) -> str:
    """Outcomes of a verify's checks from its JUnit file: counts, every xfail with its reason, the slowest."""
    if not junit.is_file():
        return "no JUnit file"
    cases = ElementTree.parse(junit).getroot().iter("testcase")
    counts: dict[str, int] = {}
    xfails, times = [], []
    for case in cases:
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        times.append((float(case.get("time", 0)), name))
        outcome = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        kind = "passed" if outcome is None else outcome.tag
        if outcome is not None and outcome.tag == "skipped" and outcome.get("type") == "pytest.xfail":
            kind = "xfailed"
            xfails.append(f"  xfailed {name}: {outcome.get('message', '')}")
        counts[kind] = counts.get(kind, 0) + 1
    top = ", ".join(f"{n} {t:.0f} s" for t, n in sorted(times, reverse=True)[:slowest])
    line = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return "\n".join([f"  {line}; slowest: {top}", *xfails])


class Scenario:
    """One scenario's progress, shared between the scenarios' threads."""

    def __init__(self, tier: str) -> None:
        self.tier = tier
        self.times: dict[str, float] = {}
        self.verifying = threading.Event()  # its verify started (or never will)
        self.verified = threading.Event()  # its verify ended (or never will)


def scenario(
    runs: list[Scenario], i: int, overlap: bool, failed: list[str], cleans: dict[str, Future[tuple[int, float]]]
) -> None:
    """The stages of runs[i]: its clean started while runs[i-1] verified; its create waits for runs[i-1]'s
    verify to start (overlap) or to end; its verify for runs[i-1]'s verify to end (one verify at a time)."""
    me, prev = runs[i], runs[i - 1] if i else None
    try:
        if prev is not None:
            (prev.verifying if overlap else prev.verified).wait()
            if failed:
                return
        rc, me.times["clean"] = cleans[me.tier].result()
        report(me.tier, "destroy", rc, me.times["clean"])
        if rc:
            failed.append(f"{me.tier} destroy")
            return
        for stage in STAGES[1:-1]:
            if stage == "verify":
                if prev is not None:
                    prev.verified.wait()
                if failed:
                    break
                (ROOT / "build" / "testing" / f"verify-{me.tier}.xml").unlink(missing_ok=True)
                me.verifying.set()
            rc, me.times[stage] = run(me.tier, stage)
            report(me.tier, stage, rc, me.times[stage])
            if stage == "verify":
                print(verify_summary(ROOT / "build" / "testing" / f"verify-{me.tier}.xml"), flush=True)
            if rc:
                failed.append(f"{me.tier} {stage}")
                break
    finally:
        me.verifying.set()
        me.verified.set()
    # the final destroy (also after a failed stage) overlaps the next scenario's stages
    rc, me.times["destroy"] = run(me.tier, "destroy")
    report(me.tier, "destroy", rc, me.times["destroy"])
    if rc:
        failed.append(f"{me.tier} destroy")


def clean_after(prev: Scenario, tier: str) -> tuple[int, float]:
    prev.verifying.wait()
    return run(tier, "destroy")


def report(tier: str, stage: str, rc: int, seconds: float) -> None:
    print(f"{tier} {stage}: {'ok' if rc == 0 else 'FAILED'} in {seconds:.0f} s", flush=True)


def main(tiers: list[str], overlap: bool = False) -> int:
    """The scenarios in order; neighbouring labs overlap (each lab has its own containers, networks on its
    own address pools (tier4-k8s's overlay moves its pools off tier4's), volume and .lab/<name> folder):
    a scenario's clean runs while the previous one verifies and its final destroy while the next one runs.
    With ``overlap`` (MOLECULE_OVERLAP=1) a scenario is also created, converged and re-run while the
    previous one verifies: two labs at once, one verify at a time."""
    suite_start = time.monotonic()
    runs = [Scenario(tier) for tier in tiers]
    failed: list[str] = []
    with ThreadPoolExecutor(max_workers=2 * len(runs) + 1) as pool:
        cleans: dict[str, Future[tuple[int, float]]] = {}
        if runs:
            cleans[runs[0].tier] = pool.submit(run, runs[0].tier, "destroy")
        for i, this in enumerate(runs[1:], start=1):
            # the clean starts with the previous scenario's verify (or when that scenario failed before it)
            cleans[this.tier] = pool.submit(clean_after, runs[i - 1], this.tier)
        threads = [pool.submit(scenario, runs, i, overlap, failed, cleans) for i in range(len(runs))]
        for thread in threads:
            thread.result()
    wall = time.monotonic() - suite_start
    out = ROOT / "build" / "testing"
    out.mkdir(parents=True, exist_ok=True)
    cols = ("clean", "create", "converge", "idempotence", "verify", "destroy")
    lines = ["| scenario | " + " | ".join(cols) + " | total |", "|---" * (len(cols) + 2) + "|"]
    for this in runs:
        if not this.times:
            continue
        cells = [f"{this.times[c]:.0f} s" if c in this.times else "-" for c in cols]
        lines.append(f"| {this.tier} | " + " | ".join(cells) + f" | {sum(this.times.values()):.0f} s |")
    mode = "the next scenario runs while one verifies" if overlap else "a clean and a destroy overlap the neighbours"
    lines += ["", f"{wall:.0f} s for the suite ({mode})."]
    (out / "molecule-times.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if failed:
        print(f"molecule: {', '.join(failed)} failed")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or list(DEFAULT_SCENARIOS), overlap=os.environ.get("MOLECULE_OVERLAP") == "1"))
