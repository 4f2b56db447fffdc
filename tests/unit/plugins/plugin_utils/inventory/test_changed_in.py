"""A field an older inventory lacks (or still sets): the plan's error names the release that changed it,
and docs/inventory.md "Upgrading" and the changelog's breaking changes describe the migration."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import CHANGED_IN, PlanError

GALAXY_VERSION = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def test_a_missing_required_field_names_its_release() -> None:
    site, groups = load_inventory("tier3")
    site = copy.deepcopy(site)
    del site["gpucluster_fabric"]["infiniband"]["sm_hcas"]
    with pytest.raises(PlanError) as caught:
        cluster_plan(site, groups)
    assert caught.value.field == "gpucluster_fabric.infiniband.sm_hcas"
    assert str(caught.value).endswith('(required since gpucluster.tiers 0.1.0; docs/inventory.md, "Upgrading")')


def test_a_removed_field_names_its_release_and_a_wrong_given_value_does_not() -> None:
    site, groups = load_inventory("tier2")
    site = copy.deepcopy(site)
    site["gpucluster_storage"]["nfs"]["server_nics"] = 2
    with pytest.raises(PlanError) as caught:
        cluster_plan(site, groups)
    assert "(removed in gpucluster.tiers 0.1.0;" in str(caught.value)
    wrong = PlanError("gpucluster_fabric.infiniband.sm_hcas", ["mlx5_9"], "the head's HCAs")
    assert "required since" not in str(wrong)


def test_every_changed_field_has_its_migration_and_a_released_version() -> None:
    upgrading = (ROOT / "docs" / "inventory.md").read_text().split("\n## Upgrading\n", 1)[1]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_.]+)` \| ([0-9.]+)", upgrading, re.M)}
    for field, (kind, release) in CHANGED_IN.items():
        assert kind in ("required", "removed")
        assert _version(release) <= _version(GALAXY_VERSION), (field, release)
        documented = next(
            (f for f in rows if field == f or field.startswith(f + ".") or f.endswith(field.split(".")[-1])), None
        )
        assert documented, f"{field}: no row in docs/inventory.md 'Upgrading'"
        assert rows[documented] == release, (field, rows[documented], release)
