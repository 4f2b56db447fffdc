"""make bench-site only: JSON sizes of a host's view of the plan (unique part, shared tables)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def bench_view_sizes(view: Mapping[str, Any]) -> int:
    """Bytes only this host's view holds (the shared tables are sized once, on the controller)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import view_sizes

    return view_sizes(view, shared=False)[0]


def bench_shared_sizes(plan: Mapping[str, Any]) -> dict[str, int]:
    """Bytes of each shared table of the whole plan (host_plan.SHARED), sized once."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import SHARED, canonical_json

    sizes = {}
    for path in SHARED:
        value: Any = plan
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value:
            sizes[path] = len(canonical_json(value))
    return sizes


def bench_json_size(value: Any) -> int:
    """Bytes of a whole value as compact JSON (the old hand-over: the whole plan per host)."""
    return len(json.dumps(value, sort_keys=True, separators=(",", ":"), default=dict))  # dict: a PlanSection


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "bench_view_sizes": bench_view_sizes,
            "bench_shared_sizes": bench_shared_sizes,
            "bench_json_size": bench_json_size,
        }
