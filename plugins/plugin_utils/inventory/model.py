"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``),
and :data:`JsonValue`, the type of inventory data a domain module checks as written."""

from __future__ import annotations

from typing import TypedDict

#: Free JSON: what YAML's plain values (mappings, lists, strings, numbers, true/false, null) read as; the type
#: of the inventory sections the Site keeps as written for the domain module that checks them, and of any plan
#: data without a fixed shape (a catalog table, a rendered manifest or dashboard). The one definition: every
#: package's model imports it from here.
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


class TierSection(TypedDict):
    """``plan["tier"]``: the tier's profile (inventory/tiers.py :func:`tier_as_dict`)."""

    name: str
    nodes: int
    gpus: int
    fabric: str
    topology: str
    storage_type: str
    storage_read_gbps: list[float]  # [floor, upper end of the reference range], GB/s
    storage_write_gbps: list[float]
    scheduler: str
    training_fit: str
    capex: str


class TenantRow(TypedDict):
    """One team of ``plan["tenants"]`` (inventory/tenants.py :class:`Tenant`)."""

    name: str
    gpu_share_percent: float
    gpus: int
    borrowing_limit_percent: float
    borrowing_limit_gpus: int
    fairshare: int
    users: list[str]


#: ``plan["tenants"]``: the checked teams in inventory order (inventory/tenants.py :func:`tenants_plan`).
TenantsSection = list[TenantRow]
