"""The support matrix (inventory/support.py): what it says, that its sources are listed, that the plan carries it."""

from __future__ import annotations

import re
from typing import Any

from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup, containers
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import support
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly

SOURCES = (ROOT / "docs" / "sources.md").read_text()


def test_debian_12_on_x86_64_is_the_one_supported_system() -> None:
    matrix = support.support_matrix()
    assert [(s["distribution"], s["major_version"], s["codename"]) for s in matrix["systems"]] == [
        ("Debian", "12", "bookworm")
    ]
    assert matrix["systems"][0]["architectures"] == ["x86_64"]
    assert matrix["summary"] == "Debian 12 (bookworm) x86_64; kernel >= 5.12, systemd >= 249, Python >= 3.10"


def test_the_supported_release_meets_its_own_floors() -> None:
    req = support.REQUIREMENTS
    for system in support.SYSTEMS:
        assert tuple(int(n) for n in system.kernel.split(".")) >= req.kernel_min
        assert system.systemd >= req.systemd_min
        assert tuple(int(n) for n in system.python.split(".")) >= req.python_min


def test_floors_follow_what_the_engine_and_roles_rely_on() -> None:
    assert support.REQUIREMENTS.kernel_min == bringup.DMABUF_MIN_KERNEL  # GPUDirect RDMA over DMA-BUF [F8]
    assert support.SYSTEMS[0].kernel == bringup.TARGET_KERNEL  # Debian 12's kernel [F12]
    assert "x86_64" in containers.PYXIS_PLUGIN  # the plan's multiarch path: x86_64 only
    networkd = (ROOT / "roles" / "common" / "templates" / "networkd-gpucluster.conf.j2").read_text()
    assert "ManageForeignRoutingPolicyRules=no" in networkd  # systemd 249 [OS2]


def test_every_source_it_cites_is_listed() -> None:
    text = (ROOT / "plugins" / "plugin_utils" / "inventory" / "support.py").read_text()
    cited = set(re.findall(r"\[((?:OS|F)\d+)\]", text))
    assert {"OS1", "OS2", "F8", "F12"} <= cited
    assert all(f"### [{tag}]" in SOURCES for tag in cited), cited


def test_the_plan_carries_the_matrix(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    site, groups = tier3
    plan = assembly.cluster_plan(site, groups)
    assert plan["support"] == support.support_matrix()
