"""make bench-audit: the audit's controller side on generated clusters (tools/bench/bench_plan.py's generator).

For each size, the plan (with the roles' file lists), then, timed separately:

- ``request``: every host's audit_facts arguments from its own view (host_plan + audit_request), as
  playbooks/audit.yml asks them;
- ``audit``: the classification of every host's facts (synthetic, as planned, in audit_facts' shape:
  files, units, 8 GPUs with NVLink, 8 HCA ports, Slurm's view of every node on the head) with one
  injected drift, which must be the only finding.

Reports seconds, microseconds per host, and the JSON bytes each compute node sends (its facts) and
receives (its request): O(1) in the cluster size when they stay the same from 64 to 4,096 nodes.
Ansible's own cost per host (a task per host, the facts' transfer) is the same as any play's and is
measured by make bench-site. A benchmark, not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from bench_plan import generated_site  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import role_files  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit import engine  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view  # noqa: E402

SIZES = (64, 256, 1024, 4096)


def as_planned(plan: dict[str, Any], host: str, req: dict[str, Any]) -> dict[str, Any]:
    """A host exactly as planned, in audit_facts' shape (the files' sha256 stand-ins are the paths)."""
    gplan = plan["gpu"]
    n = plan["cluster"]["gpus_per_node"]
    links = gplan["bringup"]["nvlink_links"] or 0
    skipped = {"state": "skipped", "reason": None}
    facts: dict[str, Any] = {
        "files": {d: d for d in req["files"]},
        "services": {u: {"active": "active", "enabled": "enabled"} for u in req["services"]},
        "gpu": dict(skipped),
        "hca": dict(skipped),
        "fabric_manager": dict(skipped),
        "firewall": {"state": "ok", "reason": None, "table_loaded": True},
        "slurm": dict(skipped),
    }
    if req["gpu"]:
        gpu = {
            "name": gplan["model"]["key"],
            "power_limit_w": gplan["clocks"]["power_limit_w"],
            "persistence": gplan["clocks"]["persistence"],
            "mig": bool(gplan.get("mig")),
            "driver_version": "570.172.08",
            "vbios_version": "96.00.89.00.01",
        }
        facts["gpu"] = {
            "state": "ok",
            "reason": None,
            "gpus": [{"index": i, "pci_bus_id": f"0000:{i:02x}:00.0", **gpu} for i in range(n)],
            "nvlink": [{"index": i, "links": links, "active": links} for i in range(n)],
        }
    if req["fabric_manager"]:
        facts["fabric_manager"] = {"state": "ok", "reason": None, "version": "570.172.08"}
    if req["hca"]:
        rate = float(plan["fabric"]["link_rate_gbps"])
        facts["hca"] = {
            "state": "ok",
            "reason": None,
            "ports": [
                {"ca": r["hca"], "port": 1, "state": "Active", "rate_gbps": rate, "firmware": "28.39.1002"}
                for r in plan["fabric_host"]["rails"]
            ],
        }
    if req["slurm_nodes"]:
        nodes = {}
        for line in plan["slurm"]["node_line"].splitlines():
            fields = dict(t.split("=", 1) for t in line.split() if "=" in t)
            for node in hostlist.expand(fields["NodeName"]):
                nodes[node] = {"gres": fields["Gres"], "features": fields["Features"], "state": "IDLE"}
        facts["slurm"] = {"state": "ok", "reason": None, "nodes": nodes}
    return facts


def bench(nodes: int) -> dict[str, Any]:
    site, groups = generated_site(nodes)
    plan = cluster_plan(site, groups, role_files(ROOT))
    hosts = sorted(plan["hosts"])
    start = time.perf_counter()
    requests = {h: engine.host_request(host_view(plan, h), h) for h in hosts}
    t_request = time.perf_counter() - start
    facts = {h: as_planned(plan, h, requests[h]) for h in hosts}
    planned = {h: {d: d for d in requests[h]["files"]} for h in hosts}
    victim = groups["compute"][-1]
    path = requests[victim]["files"][0]
    facts[victim]["files"][path] = "edited"
    start = time.perf_counter()
    result = engine.audit(plan, {"hosts": facts, "planned_files": planned})
    t_audit = time.perf_counter() - start
    found = [(f["host"], f["subject"]) for f in result["findings"]]
    assert found == [(victim, path)], found
    start = time.perf_counter()
    engine.report_markdown(result)
    t_report = time.perf_counter() - start
    compute = groups["compute"][0]
    return {
        "nodes": nodes,
        "hosts": len(hosts),
        "request_s": round(t_request, 3),
        "audit_s": round(t_audit, 3),
        "report_s": round(t_report, 4),
        "audit_us_per_host": round(1e6 * t_audit / len(hosts), 1),
        "compute_request_bytes": len(json.dumps(requests[compute])),
        "compute_facts_bytes": len(json.dumps(facts[compute])),
        "head_facts_bytes": len(json.dumps(facts["head01"])),
        "audit_json_bytes": len(json.dumps(result)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        print(json.dumps(bench(n)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
