"""make bench-audit: the audit's controller side on generated clusters (tools/bench/bench_plan.py's generator).

For each size, the plan (with the roles' file lists), then, timed separately:

- ``request``: every host's audit_facts arguments from its own view (host_plan + audit_request), as
  playbooks/audit.yml asks them;
- ``audit``: the classification of every host's facts (synthetic, as planned, in audit_facts' shape:
  files, units, 8 GPUs with NVLink, 8 HCA ports, Slurm's view of every node and the NCCL environment
  of a job on every node on the head, the planned directories' layouts on the first compute node)
  with one injected drift, which must be the only finding.

Reports seconds, microseconds per host, and the JSON bytes each compute node sends (its facts) and
receives (its request): O(1) in the cluster size when they stay the same from 64 to 4,096 nodes.

``--playbook 1024`` (make bench-audit AUDIT_BENCH_PLAYBOOK=1024) also times Ansible's side: the
generated inventory written as bench-site writes it, and ansible-playbook running a copy of
playbooks/audit.yml on the controller without contacting any host (connection local): the plan play,
every host's view and request, its planned files rendered in check mode (render_files, delegated to
the controller), the compute plays in site.yml's batches, the classification and the three reports.
In the copy (bench only; the product playbook is unchanged) the host read, audit_facts, is a set_fact
of the host as planned (filter_plugins/bench_audit.py) and the fabric discovery play is left out (one
task, on real InfiniBand). The plan stage alone is run too, so the audit's own share is the
difference. A benchmark, not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from bench_plan import generated_site  # noqa: E402
from bench_site import measured, write_inventory  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.driver import audit  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.report import report_markdown  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.request import host_request, planned_layouts  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import role_files  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan  # noqa: E402

SIZES = (64, 256, 1024, 4096)


def as_planned(plan: Plan, host: str, req: dict[str, Any]) -> dict[str, Any]:
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
        for line in plan["slurm"]["nodes"]:
            features = ",".join(line["features"])
            for node in hostlist.expand(line["nodes"]):
                nodes[node] = {"gres": line["gres"], "features": features, "state": "IDLE"}
        facts["slurm"] = {"state": "ok", "reason": None, "nodes": nodes}
    if req["job_env_nodes"]:
        # what the head's one srun prints for every node: the plan's NCCL_DEBUG (a value equal to the plan's)
        env = {"NCCL_DEBUG": plan["nccl"]["conf"]["NCCL_DEBUG"]} if plan["nccl"]["conf"] else {}
        nodes_env = {n: dict(env) for n in hostlist.expand(req["job_env_nodes"])}
        facts["job_env"] = {"state": "ok", "reason": None, "nodes": nodes_env}
    if req["layouts"]:
        layouts = planned_layouts(plan) or {"kind": None, "dirs": {}}
        dirs = {p: {"state": "ok", "reason": None, "layout": d["want"]} for p, d in layouts["dirs"].items()}
        facts["layouts"] = {"state": "ok", "reason": None, "kind": layouts["kind"], "dirs": dirs}
    return facts


def bench(nodes: int) -> dict[str, Any]:
    site, groups = generated_site(nodes)
    plan = cluster_plan(site, groups, role_files(ROOT))
    hosts = sorted(plan["hosts"])
    start = time.perf_counter()
    client = groups["compute"][0]  # the layout client, as playbooks/audit.yml names it
    requests = {h: host_request(host_view(plan, h), h, client) for h in hosts}
    t_request = time.perf_counter() - start
    facts = {h: as_planned(plan, h, requests[h]) for h in hosts}
    planned = {h: {d: d for d in requests[h]["files"]} for h in hosts}
    victim = groups["compute"][-1]
    path = requests[victim]["files"][0]
    facts[victim]["files"][path] = "edited"
    start = time.perf_counter()
    result = audit(plan, {"hosts": facts, "planned_files": planned})
    t_audit = time.perf_counter() - start
    found = [(f["host"], f["subject"]) for f in result["findings"]]
    assert found == [(victim, path)], found
    start = time.perf_counter()
    report_markdown(result)
    t_report = time.perf_counter() - start
    compute = groups["compute"][1]  # a compute node other than the layout client
    return {
        "nodes": nodes,
        "hosts": len(hosts),
        "request_s": round(t_request, 3),
        "audit_s": round(t_audit, 3),
        "report_s": round(t_report, 4),
        "audit_us_per_host": round(1e6 * t_audit / len(hosts), 1),
        "compute_request_bytes": len(json.dumps(requests[compute])),
        "compute_facts_bytes": len(json.dumps(facts[compute])),
        "client_request_bytes": len(json.dumps(requests[client])),
        "client_facts_bytes": len(json.dumps(facts[client])),
        "head_facts_bytes": len(json.dumps(facts["head01"])),
        "audit_json_bytes": len(json.dumps(result)),
    }


FABRIC_PLAY = "Check the discovered InfiniBand fabric against the cabling"


def bench_playbook(dest: Path) -> tuple[Path, Path]:
    """(plan-stage playbook, audit playbook): copies of playbooks/audit.yml in ``dest``, runnable without hosts."""
    plays = yaml.safe_load((ROOT / "playbooks" / "audit.yml").read_text())
    out = []
    for play in plays:
        if play.get("name") == FABRIC_PLAY:
            continue
        play = json.loads(json.dumps(play).replace("{{ playbook_dir }}/..", str(ROOT)))
        for task in play.get("tasks", []):
            if "import_tasks" in str(task.keys()):
                task["ansible.builtin.import_tasks"] = str(ROOT / "playbooks" / "tasks" / "plan.yml")
                task.pop("import_tasks", None)
            if "gpucluster.tiers.audit_facts" in task:
                del task["gpucluster.tiers.audit_facts"]
                task["name"] = "Stand in for audit_facts (bench only): the host as planned"
                task["ansible.builtin.set_fact"] = {
                    "audit_host": "{{ audit_request | bench_audit_facts(audit_planned.checksums) }}"
                }
                task.pop("register", None)
        out.append(play)
    plan_only = dest / "audit_plan_stage.yml"
    audit = dest / "audit_bench.yml"
    plan_only.write_text(yaml.safe_dump(out[:1], sort_keys=False))
    audit.write_text(yaml.safe_dump(out, sort_keys=False))
    filters = dest / "filter_plugins"
    filters.mkdir(parents=True, exist_ok=True)
    src = ROOT / "tools" / "bench" / "filter_plugins" / "bench_audit.py"
    (filters / src.name).write_text(src.read_text())
    return plan_only, audit


def bench_ansible(nodes: int, work: Path) -> dict[str, Any]:
    """Wall, CPU seconds and peak RSS of the plan stage alone and of the whole audit playbook."""
    inv = work / "inventory"
    write_inventory(nodes, inv)
    plan_pb, audit_pb = bench_playbook(work)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    local = ["-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={sys.executable}"]
    row: dict[str, Any] = {"nodes": nodes}
    report_root = work / "report"
    for stage, pb, extra in (
        ("plan", plan_pb, []),
        ("audit", audit_pb, ["-e", f"audit_report_root={report_root}", "-e", "audit_fail_on=never"]),
    ):
        got = measured([playbook, "-i", str(inv), *local, *extra, str(pb)], env, work / f"{stage}.log")
        if got["rc"] != 0:
            raise SystemExit(f"{stage} failed for {nodes} nodes; see {work / (stage + '.log')}")
        row[stage] = {k: round(v, 1) if isinstance(v, float) else v for k, v in got.items()}
    result = json.loads(next(report_root.glob("*/audit.json")).read_text())
    row["hosts"] = result["hosts_audited"]
    row["findings"] = len(result["findings"])
    row["unreachable"] = len(result["unreachable"])
    row["audit_only_s"] = round(row["audit"]["seconds"] - row["plan"]["seconds"], 1)
    row["audit_only_ms_per_host"] = round(1000 * row["audit_only_s"] / row["hosts"], 1)
    assert row["findings"] == 0 and row["unreachable"] == 0, row
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--playbook", default="", help="sizes to also time with ansible-playbook (e.g. 1024)")
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",") if s):
        print(json.dumps(bench(n)), flush=True)
    for n in (int(s) for s in args.playbook.split(",") if s):
        with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
            print(json.dumps({"playbook": bench_ansible(n, Path(tmp))}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
