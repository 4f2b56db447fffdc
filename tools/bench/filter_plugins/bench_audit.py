"""make bench-audit only: a stand-in for audit_facts' result on a host exactly as planned.

The playbook bench (tools/bench/bench_audit.py --playbook) replaces the audit_facts task of a copy of
playbooks/audit.yml with a set_fact of this, so the controller's side runs without any host: the
files read are the checksums the controller rendered, the units active and enabled, the firewall
table loaded; GPU, HCA, Fabric Manager, Slurm, the job environment and the layouts are "absent" (the
classification of those is timed by the engine bench, with synthetic data)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def bench_audit_facts(request: Mapping[str, Any], checksums: Mapping[str, str]) -> dict[str, Any]:
    absent = {"state": "absent", "reason": "bench: no host"}
    return {
        "changed": False,
        "audit": {
            "files": {dest: checksums.get(dest) for dest in request["files"]},
            "services": {u: {"active": "active", "enabled": "enabled"} for u in request["services"]},
            "gpu": dict(absent) if request["gpu"] else {"state": "skipped", "reason": None},
            "hca": dict(absent) if request["hca"] else {"state": "skipped", "reason": None},
            "fabric_manager": dict(absent) if request["fabric_manager"] else {"state": "skipped", "reason": None},
            "firewall": {"state": "ok", "reason": None, "table_loaded": True},
            "slurm": dict(absent) if request["slurm_nodes"] else {"state": "skipped", "reason": None},
            "job_env": dict(absent) if request["job_env_nodes"] else {"state": "skipped", "reason": None},
            "layouts": dict(absent) if request["layouts"] else {"state": "skipped", "reason": None},
        },
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"bench_audit_facts": bench_audit_facts}
