"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

Placeholders until each becomes a TypedDict of its keys; the names are fixed (plan/model.py imports them)."""

from __future__ import annotations

from typing import Any

GpuSection = dict[str, Any]
PowerSection = dict[str, Any]
CoolingSection = dict[str, Any]
ParallelismSection = dict[str, Any]
UpsSection = dict[str, Any]
HealthSection = dict[str, Any]
DcgmSection = dict[str, Any]
HealingSection = dict[str, Any]
ContainersSection = dict[str, Any]
NcclSection = dict[str, Any]
