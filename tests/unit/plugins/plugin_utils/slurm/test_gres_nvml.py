"""MIG nodes' gres.conf autodetects with NVML, and the slurm role installs Debian's NVML plugin on them only.

Why autodetect and not ``File=``/``MultipleFiles=`` lines: compute/mig.py NVML_REASON (a MIG device's
/dev/nvidia-caps files follow the instance IDs the driver assigns). Why a package: Debian 12 ships
gpu_nvml.so in contrib's slurm-wlm-nvml-plugin, not in slurm-wlm-basic-plugins (docs/sources.md [G9]).
"""

from __future__ import annotations

from typing import Any

import jinja2
import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import mig

VARS = yaml.safe_load((ROOT / "roles" / "slurm" / "vars" / "main.yml").read_text())


@pytest.fixture(scope="module")
def mig_plan() -> dict[str, Any]:
    return cluster_plan(*load_inventory("examples/tier2-mig"))


def _nvml_packages(plan: dict[str, Any], host: str) -> str:
    """The role's slurm_nvml_packages for ``host`` (vars/main.yml), rendered against the plan."""
    return (
        jinja2.Environment()
        .from_string(VARS["slurm_nvml_packages"])
        .render(gpucluster_host_plan=plan, inventory_hostname=host)
    )


def test_the_mig_example_autodetects_and_installs_the_plugin_on_its_mig_nodes(mig_plan: dict[str, Any]) -> None:
    hosts = mig.mig_hosts(mig_plan["gpu"]["mig"])
    assert hosts, "the MIG example plans MIG nodes"
    nvml = mig_plan["slurm"]["gres_nvml"]
    assert nvml["hosts"] == hosts and nvml["packages"] == ["slurm-wlm-nvml-plugin"]
    assert "nvidia-caps" in nvml["reason"] and "contrib" in nvml["reason"]
    assert any(line.endswith("AutoDetect=nvml") for line in mig_plan["slurm"]["gres_conf_lines"])
    assert _nvml_packages(mig_plan, hosts[0]) == "['slurm-wlm-nvml-plugin']"
    assert _nvml_packages(mig_plan, mig_plan["cluster"]["head"]) == "[]"


def test_a_plan_without_mig_installs_no_plugin() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    assert plan["slurm"]["gres_nvml"] == {"hosts": [], "packages": [], "reason": None}
    assert not any("AutoDetect=nvml" in line for line in plan["slurm"]["gres_conf_lines"])
    assert _nvml_packages(plan, "compute01") == "[]"


def test_the_role_installs_the_plugin_apart_and_never_with_the_other_packages() -> None:
    """The plugin pins slurm-wlm-basic-plugins to its own version: its own apt task after slurmd's, a clear
    stop when the sources lack it (never a downgrade of slurmd)."""
    tasks = yaml.safe_load((ROOT / "roles" / "slurm" / "tasks" / "main.yml").read_text())
    by_name = {t["name"]: t for t in tasks}
    main = by_name["Install Slurm's missing packages"]
    assert "difference(slurm_nvml_packages)" in main["ansible.builtin.apt"]["name"]
    plugin = by_name["Install Slurm's NVML GPU plugin (MIG nodes, gres.conf AutoDetect=nvml)"]
    assert list(by_name).index(plugin["name"]) > list(by_name).index(main["name"])
    assert "intersect(slurm_nvml_packages)" in plugin["block"][0]["ansible.builtin.apt"]["name"]
    assert "contrib" in plugin["rescue"][0]["ansible.builtin.fail"]["msg"]
