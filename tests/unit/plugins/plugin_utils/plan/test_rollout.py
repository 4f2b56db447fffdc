"""gpucluster_rollout: the compute play's batches, failure limit and drain settings."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.rollout import DEFAULTS, rollout_plan


def test_defaults() -> None:
    expected = {"batch_size": "25%", "max_fail_percentage": 0, "drain_timeout_s": 3600, "drain_policy": "wait"}
    assert rollout_plan(None) == expected == DEFAULTS
    assert rollout_plan({}) == expected


@pytest.mark.parametrize(
    ("given", "batch"),
    [(1, 1), (16, 16), ("8", 8), ("25%", "25%"), (" 10 % ", "10%"), ("100%", "100%"), ("007%", "7%")],
)
def test_batch_size_is_a_count_or_a_percentage(given: Any, batch: Any) -> None:
    assert rollout_plan({"batch_size": given})["batch_size"] == batch


@pytest.mark.parametrize("bad", [0, -1, "0%", "101%", "12.5%", "a quarter", True, [1, "25%"], 2.5, None])
def test_bad_batch_size_names_the_field(bad: Any) -> None:
    with pytest.raises(PlanError, match=r"inventory field 'gpucluster_rollout.batch_size'.*allowed: a node count"):
        rollout_plan({"batch_size": bad})


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"max_fail_percentage": -1}, "gpucluster_rollout.max_fail_percentage"),
        ({"max_fail_percentage": 101}, "gpucluster_rollout.max_fail_percentage"),
        ({"max_fail_percentage": "10%"}, "gpucluster_rollout.max_fail_percentage"),
        ({"drain_timeout_s": -5}, "gpucluster_rollout.drain_timeout_s"),
        ({"drain_timeout_s": 1.5}, "gpucluster_rollout.drain_timeout_s"),
        ({"drain_policy": "force"}, "gpucluster_rollout.drain_policy"),
        ({"batch": 4}, "gpucluster_rollout.batch"),
        (["25%"], "gpucluster_rollout"),
    ],
)
def test_bad_rollout_fields(raw: Any, field: str) -> None:
    with pytest.raises(PlanError) as err:
        rollout_plan(raw)
    assert err.value.field == field


def test_valid_settings_pass_through() -> None:
    got = rollout_plan({"batch_size": 32, "max_fail_percentage": 10, "drain_timeout_s": 0, "drain_policy": "skip"})
    assert got == {"batch_size": 32, "max_fail_percentage": 10, "drain_timeout_s": 0, "drain_policy": "skip"}


def test_the_plan_carries_the_rollout() -> None:
    site, groups = load_inventory("tier3")
    assert cluster_plan(copy.deepcopy(site), groups)["rollout"] == DEFAULTS
    site = {**copy.deepcopy(site), "gpucluster_rollout": {"batch_size": 2, "drain_policy": "skip"}}
    assert cluster_plan(site, groups)["rollout"]["batch_size"] == 2
    site["gpucluster_rollout"] = {"drain_policy": "later"}
    with pytest.raises(PlanError, match=r"gpucluster_rollout\.drain_policy"):
        cluster_plan(site, groups)
