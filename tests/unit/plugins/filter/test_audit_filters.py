"""The audit's filters: read each host's registered results raw from hostvars, name the bad setting."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import FilterModule
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view

FILTERS = FilterModule().filters()


class FakeHostVars:
    """What the filters use of ansible's HostVars: raw_get(host)."""

    def __init__(self, data: dict[str, dict[str, Any]]) -> None:
        self.data = data

    def raw_get(self, host: str) -> dict[str, Any]:
        return self.data.get(host, {})


def _tier1() -> tuple[dict[str, Any], FakeHostVars]:
    plan = cluster_plan(*load_inventory("tier1"))
    req = FILTERS["audit_request"](host_view(plan, "dgx01"), "dgx01")
    audit = {
        "files": {d: "sha" for d in req["files"]},
        "services": {u: {"active": "active", "enabled": "enabled"} for u in req["services"]},
        "gpu": {"state": "absent", "reason": "nvidia-smi not found in PATH"},
        "firewall": {"state": "ok", "reason": None, "table_loaded": True},
    }
    hv = FakeHostVars(
        {
            "localhost": {"gpucluster_plan": plan},
            "dgx01": {
                "audit_host": {"changed": False, "audit": audit},
                "audit_planned": {"checksums": dict.fromkeys(req["files"], "sha")},
            },
        }
    )
    return plan, hv


def test_audit_findings_reads_hostvars_raw() -> None:
    _, hv = _tier1()
    result = FILTERS["audit_findings"](hv, ["dgx01"], {"fail_on": "warning"})
    assert result["findings"] == [] and result["failed"] is False
    assert [u["check"] for u in result["unchecked"]] == ["gpu"]
    hv.data["dgx01"]["audit_host"]["audit"]["files"]["/etc/hosts"] = "edited"
    result = FILTERS["audit_findings"](hv, ["dgx01"])
    assert [(f["subject"], f["cls"]) for f in result["findings"]] == [("/etc/hosts", "drift")]
    md = FILTERS["audit_markdown"](result)
    assert "- **warning** file `/etc/hosts`" in md


def test_a_host_without_a_result_is_unreachable() -> None:
    _, hv = _tier1()
    del hv.data["dgx01"]["audit_host"]
    result = FILTERS["audit_findings"](hv, ["dgx01"], {"fail_on": "never"})
    assert result["unreachable"] == ["dgx01"] and result["hosts_audited"] == 0


def test_a_bad_setting_names_the_variable() -> None:
    _, hv = _tier1()
    with pytest.raises(AnsibleFilterError, match=r"audit_fail_on.*'often'.*one of info, warning, critical, never"):
        FILTERS["audit_findings"](hv, ["dgx01"], {"fail_on": "often"})


def test_audit_findings_needs_hostvars_and_a_plan() -> None:
    with pytest.raises(AnsibleFilterError, match="must be hostvars"):
        FILTERS["audit_findings"]({}, ["dgx01"])
    with pytest.raises(AnsibleFilterError, match="no gpucluster_plan"):
        FILTERS["audit_findings"](FakeHostVars({}), ["dgx01"])


def test_audit_request_of_a_host_not_in_the_plan() -> None:
    plan, _ = _tier1()
    with pytest.raises(AnsibleFilterError, match="audit host"):
        FILTERS["audit_request"](host_view(plan, "dgx01"), "nobody")
