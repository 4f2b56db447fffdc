"""Every file the plan lists for a host is on that host, byte for byte as make plan renders it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_installed_files_match_the_plan(hosts: dict[str, Any], plan: dict[str, Any], lab: Path) -> None:
    checked = 0
    for name, host in hosts.items():
        for item in plan["files"][name]:
            dest = item["dest"]
            planned = (lab / "planned" / name / dest.lstrip("/")).read_bytes()
            installed = host.file(dest)
            assert installed.exists, (name, dest)
            assert installed.content == planned, (name, dest)
            checked += 1
    assert checked >= len(hosts) * 4
