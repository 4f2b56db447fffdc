"""The plan's type (plan/model.py): ``Plan`` names every section cluster_plan returns, and ``PlanView`` (what a
stage is handed) the same sections with the same types."""

from __future__ import annotations

import pytest
from conftest import cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.model import Plan, PlanView


def _written(annotation: object) -> str:
    return str(getattr(annotation, "__forward_arg__", annotation))


def test_a_stage_view_has_the_plans_sections_and_types() -> None:
    # the annotations as written (plan/model.py postpones them): the same names and types, NotRequired aside
    plan = {k: _written(v).removeprefix("NotRequired[").removesuffix("]") for k, v in Plan.__annotations__.items()}
    assert {k: _written(v) for k, v in PlanView.__annotations__.items()} == plan
    assert list(PlanView.__annotations__) == list(plan)
    assert PlanView.__total__ is False and Plan.__total__ is True


@pytest.mark.parametrize("inventory", ["tier1", "tier4-k8s"])
def test_the_plan_has_the_sections_its_type_names_in_that_order(inventory: str) -> None:
    plan = cluster_plan(*load_inventory(inventory))
    # kubernetes: on the Kubernetes path only (NotRequired)
    named = [k for k in Plan.__annotations__ if k != "kubernetes" or plan["cluster"]["scheduler"] == "kubernetes"]
    assert list(plan) == named
