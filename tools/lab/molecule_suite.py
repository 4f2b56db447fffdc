"""Run the molecule scenarios stage by stage, time each stage, always destroy.

make molecule [TIERS="tier1 tier2"] -> build/testing/molecule-times.md (a table kept
current in docs/testing.md). Exits non-zero on the first failing stage (after destroy).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


def main(tiers: list[str]) -> int:
    rows = []
    failed = None
    for tier in tiers:
        times: dict[str, float] = {}
        for i, stage in enumerate(STAGES):
            key = "destroy" if i == len(STAGES) - 1 else ("clean" if i == 0 else stage)
            junit = ROOT / "build" / "testing" / f"verify-{tier}.xml"
            if stage == "verify":
                junit.unlink(missing_ok=True)
            rc, seconds = run(tier, stage)
            times[key] = seconds
            print(f"{tier} {stage}: {'ok' if rc == 0 else 'FAILED'} in {seconds:.0f} s", flush=True)
            if stage == "verify":
                print(verify_summary(junit), flush=True)
            if rc:
                failed = f"{tier} {stage}"
                run(tier, "destroy")
                break
        rows.append((tier, times))
        if failed:
            break
    out = ROOT / "build" / "testing"
    out.mkdir(parents=True, exist_ok=True)
    cols = ("clean", "create", "converge", "idempotence", "verify", "destroy")
    lines = ["| scenario | " + " | ".join(cols) + " | total |", "|---" * (len(cols) + 2) + "|"]
    for tier, times in rows:
        cells = [f"{times[c]:.0f} s" if c in times else "-" for c in cols]
        lines.append(f"| {tier} | " + " | ".join(cells) + f" | {sum(times.values()):.0f} s |")
    (out / "molecule-times.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if failed:
        print(f"molecule: {failed} failed")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or list(DEFAULT_SCENARIOS)))
