"""make bench-plan: plan generated clusters of 64, 256, 1024, 4096 and 16384 nodes.

Prints wall time (best of a few runs) and peak Python memory (tracemalloc) per size.
A benchmark, not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import read_inventory  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan  # noqa: E402

SIZES = (64, 256, 1024, 4096, 16384)


def generated_site(nodes: int) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """tier4's inventory grown to ``nodes`` compute nodes: a non-blocking fat tree of 128-port switches with
    spines per rail plane (two tiers up to 8,192 nodes, three tiers above: 16,384 nodes make 32 pods)."""
    site, _ = read_inventory(ROOT / "inventories" / "tier4")
    site = copy.deepcopy(site)
    width = len(str(nodes))
    compute = [f"compute{i:0{width}d}" for i in range(1, nodes + 1)]
    oss = [f"oss{i:02d}" for i in range(1, max(2, nodes // 16) + 1)]
    groups = {"head": ["head01"], "lustre_mds": ["mds01"], "lustre_oss": oss, "compute": compute}
    site["gpucluster_cluster"] = {**site["gpucluster_cluster"], "name": f"bench{nodes}"}
    fabric = {k: v for k, v in site["gpucluster_fabric"].items() if k != "spines"}
    # a full-size fabric has no free leaf port for a host SM: the fabric's own SM (UFM) runs it
    site["gpucluster_fabric"] = {**fabric, "switch_radix": 128, "spine_scope": "rail", "subnet_manager": "external"}
    site["gpucluster_facility"] = {**site["gpucluster_facility"], "racks": nodes // 4}
    site["gpucluster_network"] = {
        "management": {"cidr": "10.0.0.0/17", "first_offset": 10, "interface": "eno1"},
        "bmc": {"cidr": "10.0.128.0/17", "first_offset": 10},
        "storage": {"cidr": "10.2.0.0/16", "first_offset": 10},  # two storage NICs per node, one address each
        "fabric": {"cidr": "10.64.0.0/13", "rail_prefix": 17, "first_offset": 10},
    }
    return site, groups


def measure(nodes: int, repeat: int = 3) -> tuple[float, float, int]:
    site, groups = generated_site(nodes)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        plan = cluster_plan(site, groups)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    plan = cluster_plan(site, groups)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak / 2**20, len(json.dumps(plan))


def main() -> int:
    sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else list(SIZES)
    print(f"{'nodes':>6} {'seconds':>8} {'peak MiB':>9} {'plan.json MiB':>14} {'s/node (ms)':>12}")
    rows = []
    for n in sizes:
        seconds, peak, size = measure(n)
        rows.append((n, seconds))
        print(f"{n:>6} {seconds:>8.3f} {peak:>9.1f} {size / 2**20:>14.1f} {1000 * seconds / n:>12.3f}")
    (n0, t0), (n1, t1) = rows[0], rows[-1]
    print(f"growth {n0}->{n1} nodes: x{t1 / t0:.1f} time for x{n1 / n0:.0f} nodes (linear = x{n1 / n0:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
