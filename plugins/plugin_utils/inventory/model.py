"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

Placeholders until each becomes a TypedDict of its keys; the names are fixed (plan/model.py imports them)."""

from __future__ import annotations

from typing import Any

TierSection = dict[str, Any]
TenantsSection = dict[str, Any]
