"""Build the acceptance report on the controller from the results the validate play collected.

The gates themselves are pure (plugin_utils/validation/acceptance.py); this action only turns Ansible's
containers into plain data, calls them, and writes report.json, report.md and the raw tool
outputs under ``dest``. No host is contacted.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from typing import Any, cast

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.plain import plain
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import acceptance
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation import report as acceptance_report
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.gates import FAIL
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.validation.model import PlanView


def _raw_files(hosts: dict[str, Any], cluster: dict[str, Any]) -> dict[str, str]:
    """relative path -> text of every tool run's stdout and stderr (raw/<host>/<run>.out)."""
    out: dict[str, str] = {}

    def add(host: str, name: str, run: Any) -> None:
        if not isinstance(run, dict) or run.get("skipped") or "rc" not in run:
            return
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        text = f"# rc {run.get('rc')}\n{run.get('stdout', '')}\n"
        if run.get("stderr"):
            text += f"# stderr\n{run['stderr']}\n"
        out[f"raw/{host}/{safe}.out"] = text

    for host, entry in [*hosts.items(), ("head", cluster)]:
        for key, run in ((entry or {}).get("runs") or {}).items():
            if isinstance(run, dict) and isinstance(run.get("results"), list):
                for r in run["results"]:
                    item = r.get("item") if isinstance(r, dict) else None
                    ident = item.get("name", item.get("rail")) if isinstance(item, dict) else item
                    label = f"rail{ident}" if isinstance(item, dict) and "rail" in item else ident
                    add(host, f"{key}-{label}", r)
            else:
                add(host, key, run)
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars or {})
        args = plain(dict(self._task.args))
        plan = args.get("plan")
        dest = args.get("dest")
        if not isinstance(plan, dict) or "validation" not in plan:
            raise AnsibleActionFail("plan is required: the cluster plan (gpucluster_plan)")
        if not dest:
            raise AnsibleActionFail("dest is required: the folder for report.json and report.md")
        hosts = args.get("hosts") or {}
        cluster = args.get("cluster") or {}
        if not isinstance(hosts, dict) or not isinstance(cluster, dict):
            raise AnsibleActionFail("hosts and cluster must be mappings")
        level = args.get("dcgm_level")
        view = cast(PlanView, plan)  # the registered plan the engine built (cluster_plan), as its typed view
        checks = acceptance.acceptance_checks(view, hosts, cluster, dcgm_level=int(level) if level else None)
        report = acceptance_report.acceptance_report(view, checks)
        report["generated_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        files = {
            "report.json": json.dumps(report, indent=2, sort_keys=True) + "\n",
            "report.md": acceptance_report.report_markdown(report),
        }
        if args.get("write_raw", True):
            files.update(_raw_files(hosts, cluster))
        written = []
        for rel, text in files.items():
            path = os.path.join(dest, rel)
            try:
                with open(path, encoding="utf-8") as handle:
                    if handle.read() == text:
                        continue
            except FileNotFoundError:
                pass
            written.append(path)
            if not self._task.check_mode:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(text)
        result.update(
            changed=bool(written),
            written=written,
            report=report,
            summary=report["summary"],
            drain=report["drain"],
            failed_checks=[c for c in checks if c["status"] == FAIL],
        )
        return result
