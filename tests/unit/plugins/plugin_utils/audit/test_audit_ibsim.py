"""A cable moved in ibsim: the audit reports exactly that cable, as hardware, with its fix.

The lab's fabric is ibsim's (tools/lab/ibsim_check.py), run on the controller: no container. As
playbooks/audit.yml does with ``-e audit_ibsim=<workdir>/ibsim.json`` (the lab's fabric step, like
molecule/shared/verify.yml's), ``ibsim_check.py start`` leaves ibsim running with a cabling in which one
cable is on the wrong port, gpucluster.tiers.fabric_check discovers it with the rails and environment
that ``start`` wrote (report only: ``fail_on_mismatch: false``), and the audit classifies its report.
Skipped only where ibsim is not installed (ibsim-utils, infiniband-diags)."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args
from conftest import lab_runner, needs_ibsim
from test_engine import collected, plan_of

from ansible_collections.gpucluster.tiers.plugins.modules import fabric_check
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.driver import audit
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.report import report_markdown
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links as fabric_links


def move_cable(cabling: dict[str, Any], host: str, rail: int, leaf: str, port: int) -> dict[str, Any]:
    """The cabling as it is on the floor: the design's cables listed, one of them plugged elsewhere."""
    cabling["links"] = list(fabric_links.links(cabling))
    link = next(x for x in cabling["links"] if x["kind"] == "host" and x["a"]["node"] == host and x["rail"] == rail)
    link["b"] = {"node": leaf, "port": port}
    return cabling


def discover(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        fabric_check.main()
    return json.loads(capsys.readouterr().out)


@needs_ibsim
def test_a_cable_moved_in_ibsim_is_the_audits_only_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start = time.monotonic()
    plan = plan_of("tier3")
    fabric = copy.deepcopy(plan["fabric"])
    # compute02's rail-3 HCA on leaf05 port 6 (rail 4's leaf; port 5 is the subnet manager's) instead of leaf04:2
    actual = move_cable(copy.deepcopy(fabric["cabling"]), "compute02", 3, "leaf05", 6)
    runner = lab_runner()
    state = runner.start(fabric, tmp_path, actual, 10.0)
    try:
        saved = json.loads((tmp_path / "ibsim.json").read_text())  # what audit_ibsim points the playbook at
        out = discover(
            {
                "expected": fabric,
                "ignore": plan["fabric_host"]["check_ignore"],
                "fail_on_mismatch": False,
                "rails": saved["rails"],
                "environment": saved["environment"],
                "expected_rate": saved["lab_rate"]["rate_gbps"],
                "timeout": 10,
            },
            capsys,
        )
    finally:
        assert runner.stop(tmp_path)
    with pytest.raises(ProcessLookupError):  # ibsim stopped by its PID
        os.kill(state["pid"], 0)
    assert out.get("failed") is not True and out["changed"] is False, out.get("msg")
    result = audit(plan, {**collected(plan), "fabric": out["report"]})
    assert [(f["host"], f["cls"], f["check"], f["subject"]) for f in result["findings"]] == [
        ("compute02", "hardware", "cable", "mlx5_3 (rail 3)")
    ]
    (f,) = result["findings"]
    assert (f["planned"], f["found"], f["severity"]) == ("leaf04:2", "leaf05:6", "critical")
    assert f["fix"] == "move the cable at leaf05:6 to leaf04:2"
    assert "off its planned leaf" in f["cost"]
    assert result["failed"] is True
    assert "- **critical** cable `mlx5_3 (rail 3)`" in report_markdown(result)
    elapsed = time.monotonic() - start
    print(f"audit ibsim seconds: {elapsed:.1f}")
    assert elapsed < 30, f"the ibsim audit check took {elapsed:.0f} s (budget 30 s)"
