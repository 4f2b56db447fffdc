"""Day one on B200/GB200 (issue 43, items 2 and 3): NVLSM with Fabric Manager on NVLink5 boards, its health
check, topology/block for NVL72-class domains (refused on Debian 12's Slurm 22.05), and GPU thermal limits in
every plan.

Sources: docs/sources.md [F20] (NVLSM with Fabric Manager on fourth-generation NVSwitch), [F21] (ib_umad),
[F22] (GB200 NVL72), [SL2] (topology/block since Slurm 23.11), [G20] (the real H100's ``nvidia-smi -q``).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROLE_FILES, ROOT, cluster_plan, load_inventory, load_script, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup, health
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import topology

hc = load_script(ROOT / "roles" / "compute" / "files" / "gpucluster-healthcheck", "gpucluster_healthcheck_nvl5")
DATA = ROOT / "tests" / "data" / "nvidia-smi"
SMI_Q_REAL_H100 = DATA / "h100-580-q.txt"  # [G20]: Fabric State N/A (no NVSwitch behind the VM's GPU)
SMI_Q_COMPLETED = DATA / "h100-560-q-fabric-completed.txt"  # [F9]
B200 = "examples/tier4-b200"
#: every reference and example inventory
INVENTORIES = sorted(
    str(p.relative_to(ROOT / "inventories"))
    for p in [*(ROOT / "inventories").glob("tier*"), *(ROOT / "inventories" / "examples").glob("*")]
    if (p / "hosts.yml").exists()
)


@pytest.fixture(scope="module")
def b200() -> dict[str, Any]:
    return cluster_plan(*load_inventory(B200))


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    return {name: cluster_plan(*load_inventory(name)) for name in INVENTORIES}


# ---------------------------------------------------------------- NVLSM with Fabric Manager


def test_the_catalog_says_which_boards_need_nvlsm() -> None:
    assert {k for k, g in catalog.GPUS.items() if g.nvlsm} == {"b200"}  # [F20]: fourth-generation NVSwitch
    for key, gpu in catalog.GPUS.items():
        assert not gpu.nvlsm or (gpu.nvswitch and gpu.nvlink_gen == 5), key
        if gpu.nvlsm:
            assert "[F20]" in catalog.SOURCE[key]["nvlsm"] and "[F21]" in catalog.SOURCE[key]["nvlsm"]
    assert bringup.nvlsm_plan(catalog.GPUS["h100_sxm"])["required"] is False


def test_b200_plans_nvlsm_and_ib_umad_with_fabric_manager(b200: dict[str, Any]) -> None:
    fm = b200["gpu"]["bringup"]["fabric_manager"]
    assert fm["required"] and fm["nvlsm"]["required"]
    assert fm["nvlsm"]["package"] == "nvlsm" and fm["nvlsm"]["modules"] == ["ib_umad"]
    node = b200["cluster"]["compute_hostlist"].split("[")[0] + "01"
    files = {f["src"]: f for f in files_by_host(b200)[node]}
    assert files["nvlsm-modules.conf.j2"]["dest"] == bringup.NVLSM_MODULES_LOAD_FILE
    assert render_role_template("compute", "nvlsm-modules.conf.j2", b200, node).splitlines()[-1] == "ib_umad"
    dropin = render_role_template("compute", "nvidia-fabricmanager.conf.j2", b200, node)
    lines = dict(line.split("=", 1) for line in dropin.splitlines() if "=" in line and not line.startswith("#"))
    # NVLSM runs in Fabric Manager's unit ([F20]): Fabric Manager after the modules, every GPU user after it
    assert lines["After"] == "systemd-modules-load.service"
    assert {"slurmd.service", "nvidia-dcgm.service", "gpucluster-gpu-clocks.service"} <= set(lines["Before"].split())
    rows = {r[0]: r for r in bringup.bringup_rows(b200["gpu"]["bringup"])}
    assert rows["NVLink Subnet Manager"][1] == "required"


def test_hopper_plans_no_nvlsm() -> None:
    plan = cluster_plan(*load_inventory("tier4"))
    assert not plan["gpu"]["bringup"]["fabric_manager"]["nvlsm"]["required"]
    assert plan["health"]["gpu"]["nvlsm"] is None
    assert all(f["src"] != "nvlsm-modules.conf.j2" for f in files_by_host(plan)["compute01"])
    assert "After=" not in render_role_template("compute", "nvidia-fabricmanager.conf.j2", plan, "compute01")


def test_the_role_installs_nvlsm_with_fabric_manager_and_loads_ib_umad() -> None:
    tasks = yaml.safe_load((ROOT / "roles/compute/tasks/gpu_stack.yml").read_text())
    load = next(t for t in tasks if "ib_umad" in t["name"])
    assert load["loop"] == "{{ gpucluster_host_plan.gpu.bringup.fabric_manager.nvlsm.modules }}"
    assert load["ansible.builtin.command"]["argv"][0] == "modprobe"
    include = next(t for t in tasks if t.get("ansible.builtin.include_tasks") == "gpu_software.yml")
    assert "fabric_manager.nvlsm.package" in include["vars"]["compute_gpu_fabricmanager"]
    assert tasks.index(load) < tasks.index(include)  # loaded before Fabric Manager starts
    entry = next(f for f in ROLE_FILES["compute"] if f["src"] == "nvlsm-modules.conf.j2")
    assert entry["dest"] == bringup.NVLSM_MODULES_LOAD_FILE and entry["if"] == "nvlsm"


# ---------------------------------------------------------------- the health check reads NVLSM's state


def test_health_config_carries_nvlsm_where_planned(b200: dict[str, Any]) -> None:
    assert b200["health"]["gpu"]["nvlsm"] == {"modules": ["ib_umad"], "process": health.NVLSM_PROCESS}
    assert b200["health"]["gpu"]["fabric_state"] is True


def test_the_real_h100s_fabric_section_parses() -> None:
    """[G20]: a GPU without its NVSwitch board: Fabric State and Status N/A, a drain on an NVSwitch plan."""
    gpus = hc.parse_smi_q(SMI_Q_REAL_H100.read_text())
    assert gpus == [{"gpu": "00000000:00:06.0", "state": "N/A", "status": "N/A"}]
    assert hc.check_fabric_state(gpus) == (["gpu0 fabric N/A"], [])
    done = hc.parse_smi_q(SMI_Q_COMPLETED.read_text())
    assert hc.check_fabric_state(done) == ([], [])


def _proc(tmp_path: Path, *names: str) -> Path:
    proc = tmp_path / "proc"
    for pid, name in enumerate(names, start=100):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(name + "\n")
    return proc


def test_check_nvlsm_wants_its_module_and_process(tmp_path: Path) -> None:
    cfg = {"modules": ["ib_umad"], "process": "nvlsm"}
    module = tmp_path / "module"
    (module / "ib_umad").mkdir(parents=True)
    assert hc.check_nvlsm(cfg, str(module), str(_proc(tmp_path, "systemd", "nv-fabricmanager", "nvlsm"))) == []
    assert hc.check_nvlsm(cfg, str(tmp_path / "none"), str(tmp_path / "proc")) == ["ib_umad not loaded (nvlsm)"]
    (tmp_path / "p2").mkdir()
    assert hc.check_nvlsm(cfg, str(module), str(tmp_path / "p2")) == ["nvlsm not running"]


def _run(tmp_path: Path, cfg: dict[str, Any], smi_q: Path, proc: Path, module: Path) -> tuple[int, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    calls = tmp_path / "calls.jsonl"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "if sys.argv[1] == 'show': print('NodeName=compute01 State=IDLE')\n"
    )
    scontrol.chmod(0o755)
    config = tmp_path / "healthcheck.json"
    node = sorted(cfg["nodes"])[0]
    one = {**cfg, "modes": {**cfg["modes"], "periodic": {**cfg["modes"]["periodic"], "checks": ["bringup"]}}}
    one["gpu"] = {**cfg["gpu"], "nvlink_links": None}  # NVSwitch links: test_health's; here NVLSM only
    one["gpudirect_module"] = None  # GPUDirect RDMA: test_health's and test_bringup's
    one["gpudirect_open_modules"] = False  # the DMA-BUF flavour check: test_health's
    config.write_text(json.dumps(one))
    rc = hc.main(
        [
            "--config", str(config), "--node", node, "--scontrol", str(scontrol),
            "--nvidia-smi-q-output", str(smi_q), "--sys-module", str(module), "--proc", str(proc),
            "--state-dir", str(tmp_path / "state"),
        ]
    )  # fmt: skip
    updates = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return rc, [u[-1] for u in updates if u[0] == "update"]


def test_a_b200_node_without_nvlsm_is_drained_naming_it(tmp_path: Path, b200: dict[str, Any]) -> None:
    cfg = b200["health"]
    module = tmp_path / "module"
    (module / "ib_umad").mkdir(parents=True)
    healthy = _proc(tmp_path, "nv-fabricmanager", "nvlsm")
    assert _run(tmp_path / "a", cfg, SMI_Q_COMPLETED, healthy, module) == (0, [])
    # the real H100's Fabric State N/A, no nvlsm process: drained with NVLSM in the reason
    rc, reasons = _run(tmp_path / "b", cfg, SMI_Q_REAL_H100, _proc(tmp_path / "b", "nv-fabricmanager"), module)
    assert rc == 1 and reasons == ["reason=gpucluster: nvlsm not running, gpu0 fabric N/A (nvlsm)"]


# ---------------------------------------------------------------- topology/block for NVL72-class domains


def _gb200_site() -> tuple[dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory(B200)
    site = copy.deepcopy(site)
    node = site["gpucluster_node"]
    node.update(gpu_model="gb200", gpus_per_node=4, gpus=node["gpus"][:4])
    node["nics"] = [n for n in node["nics"] if n.get("rail", 0) < 4 or n["purpose"] != "compute"]
    return site, groups


def test_an_nvl72_site_is_refused_on_debian_12s_slurm() -> None:
    with pytest.raises(PlanError) as err:
        cluster_plan(*_gb200_site())
    msg = str(err.value)
    assert err.value.field == "gpucluster_node.gpu_model" and err.value.value == "gb200"
    for words in ("72 GPUs", "topology/block", topology.BLOCK_DOC, "23.11", "Debian 12", "22.05.8"):
        assert words in msg, words


def test_an_nvl72_domain_plans_one_block_per_18_nodes_where_slurm_has_topology_block() -> None:
    gb200 = catalog.GPUS["gb200"]
    hosts = [f"gb{i:03d}" for i in range(1, 37)]
    topo = topology.topology_plan(gb200, 4, hosts, [{"name": "leaf1"}], slurm_version="23.11.4")
    assert topo["plugin"] == "topology/block"
    assert topo["blocks"] == [{"name": "nvl01", "nodes": "gb[001-018]"}, {"name": "nvl02", "nodes": "gb[019-036]"}]
    assert topology.block_conf_text(topo["blocks"]) == (
        "BlockName=nvl01 Nodes=gb[001-018]\nBlockName=nvl02 Nodes=gb[019-036]\n"
    )
    with pytest.raises(PlanError, match=r"a multiple of 18"):
        topology.topology_plan(gb200, 4, hosts[:20], [], slurm_version="24.05")
    with pytest.raises(PlanError, match=r"gpus_per_node.*a divisor of the 72-GPU"):
        topology.topology_plan(gb200, 5, hosts, [], slurm_version="24.05")


def test_the_slurm_role_renders_blocks_when_planned(b200: dict[str, Any]) -> None:
    plan = copy.deepcopy(b200)
    plan["slurm"]["topology_blocks"] = [{"name": "nvl01", "nodes": "gb[001-018]"}]
    text = render_role_template("slurm", "topology.conf.j2", plan, "head01")
    assert text.splitlines()[-1] == "BlockName=nvl01 Nodes=gb[001-018]"


def test_hgx_b200_keeps_topology_tree(b200: dict[str, Any]) -> None:
    """HGX B200: the NVLink domain is the node's 8 GPUs, so jobs span nodes over the fabric's tree."""
    assert catalog.GPUS["b200"].nvlink_domain_gpus == 8
    assert b200["slurm"]["topology_plugin"] == "topology/tree" and b200["slurm"]["topology_blocks"] == []
    text = render_role_template("slurm", "topology.conf.j2", b200, "head01")
    assert "\nSwitchName=su01 Nodes=compute[01-08]\n" in text and "BlockName" not in text


# ---------------------------------------------------------------- thermal limits in every plan


def test_no_plan_has_a_null_temperature_threshold(plans: dict[str, dict[str, Any]]) -> None:
    """Issue 43: every reference and example plan drains and alerts on GPU temperature."""
    assert {"tier1", "tier4", "examples/tier4-b200", "examples/tier1-rtxpro6000"} <= set(plans)
    for name, plan in plans.items():
        gpu = plan["health"]["gpu"]
        assert isinstance(gpu["temp_critical_c"], int) and isinstance(gpu["temp_warn_c"], int), name
        assert gpu["temp_warn_c"] < gpu["temp_critical_c"] and gpu["temp_source"], name
        rules = {r["alert"]: r for g in plan["monitoring"]["rules"]["groups"] for r in g["rules"]}
        for alert in ("GpuTemperatureWarning", "GpuTemperatureCritical"):
            assert alert in rules and "None" not in rules[alert]["expr"], (name, alert)
        assert rules["GpuTemperatureCritical"]["expr"].endswith(f">= {gpu['temp_critical_c']}"), name
        report = plan["gpu"]["temperature"]
        assert report["critical_c"] == gpu["temp_critical_c"] and report["source"], name


def test_a_site_whose_gpus_have_no_thermal_limits_is_refused() -> None:
    site, groups = load_inventory(B200)
    site = copy.deepcopy(site)
    del site["gpucluster_node"]["gpu_temp_limits"]
    with pytest.raises(PlanError) as err:
        cluster_plan(site, groups)
    assert err.value.field == "gpucluster_node.gpu_temp_limits.max_operating_c"
    assert "b200" in str(err.value) and "nvidia-smi -q -d TEMPERATURE" in str(err.value)
