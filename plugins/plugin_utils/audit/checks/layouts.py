"""The planned directories' layouts, read on one client: Lustre PFL layouts (``lfs getstripe``) and
BeeGFS stripe patterns (``beegfs-ctl --getentryinfo``) against the plan's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import lustre_yaml
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.finding import (
    Finding,
    Unchecked,
    not_read,
    site_fix,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.audit.request import planned_layouts


def _layout_diff(kind: str, got: Any, want: Any) -> list[str]:
    if kind == "lustre":
        return lustre_yaml.differences(got, want)
    got = got or {}
    keys = ("chunksize", "numtargets")
    return [f"{key} {got.get(key)}, the plan has {want[key]}" for key in keys if got.get(key) != want[key]]


def layout_findings(
    plan: Mapping[str, Any], client: str | None, layouts: Mapping[str, Any] | None, unchecked: Unchecked
) -> list[Finding]:
    """The planned directories' Lustre layouts or BeeGFS stripe patterns, read on one client.

    A layout off the plan affects only the files created after it changed (both file systems keep a
    file's layout), so it is a warning. Lustre: the storage role's lustre_layout task sets it again
    (site.yml); BeeGFS: the compute role applies the patterns only when the plan's change (it records
    the last applied), so the fix is the plan's beegfs-ctl command."""
    planned = planned_layouts(plan)
    if planned is None or client is None or not_read(layouts, client, "layout", unchecked):
        return []
    kind = planned["kind"]
    out: list[Finding] = []
    for path, item in sorted(planned["dirs"].items()):
        got = ((layouts or {}).get("dirs") or {}).get(path) or {"state": "error", "reason": "not read"}
        if got.get("state") == "missing":
            out.append(
                Finding(
                    client,
                    "drift",
                    "layout",
                    path,
                    "a directory",
                    "missing",
                    "warning",
                    site_fix(client) + (" (creates it with its layout)" if kind == "lustre" else ""),
                    f"the planned {item['role']} directory does not exist",
                )
            )
            continue
        if not_read(got, client, f"layout {path}", unchecked):
            continue
        why = _layout_diff(kind, got.get("layout"), item["want"])
        if not why:
            continue
        fix = (
            f"{site_fix(client)} (lustre_layout sets: {item['command']})"
            if kind == "lustre"
            else f"on {client}: {item['command']}"
        )
        out.append(
            Finding(
                client,
                "drift",
                "layout",
                path,
                item["command"],
                "; ".join(why),
                "warning",
                fix,
                f"new files in the {item['role']} directory get another striping than planned "
                "(existing files keep theirs)",
            )
        )
    return out


__all__ = ["layout_findings"]
