"""The fabric role's inputs: InfiniBand subnet manager and partitions, RoCEv2 lossless settings.

The role's templates are rendered here from the plan with Jinja2 (as ansible.builtin.template
does: trim_blocks), so the tests read the files a host gets.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROLE_FILES, ROOT, cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.module_utils import ibfabric
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import fabric_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

TEMPLATES = ROOT / "roles" / "fabric" / "templates"


def _render(src: str, plan: dict[str, Any], host: str) -> str:
    return render_role_template("fabric", src, plan, host)


def _fabric_files(plan: dict[str, Any], host: str) -> dict[str, str]:
    """dest -> rendered text of the fabric role's files on ``host`` (from the plan's manifest)."""
    return {f["dest"]: _render(f["src"], plan, host) for f in files_by_host(plan)[host] if f["role"] == "fabric"}


def _site(tier: str, **fabric: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site["gpucluster_fabric"] = {**site["gpucluster_fabric"], **fabric}
    if site["gpucluster_fabric"].get("type") != "infiniband":  # refused on another fabric (inventory/rules.py)
        site["gpucluster_fabric"].pop("infiniband", None)
    return site, groups


@pytest.fixture
def roce_tier2() -> dict[str, Any]:
    """tier2 on RoCEv2 instead of InfiniBand (no reference tier is RoCE)."""
    site, groups = _site("tier2", type="roce", roce={"dscp": 26})
    return cluster_plan(site, groups)


# --- engine -------------------------------------------------------------------------------


def test_roce_defaults_follow_the_dossier() -> None:
    """dossier 7.1/7.2: DSCP 26 -> priority 3, ToS 106 (ECT(0)), PFC on 3, CNP DSCP 48 / priority 6, MTU 4200."""
    r = fabric_host.roce_settings({})
    assert r["traffic_class"] == 106
    assert r["priority"] == 3
    assert r["pfc_vector"] == "0,0,0,1,0,0,0,0"
    assert (r["cnp_dscp"], r["cnp_priority"], r["mtu"]) == (48, 6, 4200)
    assert r["dscp2prio"] == [{"dscp": 26, "priority": 3}, {"dscp": 48, "priority": 6}]
    assert r["roce_mode"] == "RoCE v2"


def test_roce_site_choices() -> None:
    r = fabric_host.roce_settings({"dscp": 24, "priority": 4, "ecn": False, "pfc": False, "gid_index": 3})
    assert r["traffic_class"] == 96  # 24 x 4, no ECT bits without ECN
    assert r["pfc_vector"] == "0,0,0,0,0,0,0,0"  # lossy: ECN only (here: neither)
    assert r["dscp2prio"][0] == {"dscp": 24, "priority": 4}
    assert r["gid_index"] == 3  # passes through for NCCL


@pytest.mark.parametrize(
    ("roce", "field"),
    [
        ({"dscp": 64}, "gpucluster_fabric.roce.dscp"),
        ({"priority": 8}, "gpucluster_fabric.roce.priority"),
        ({"cnp_priority": -1}, "gpucluster_fabric.roce.cnp_priority"),
        ({"mtu": 1000}, "gpucluster_fabric.roce.mtu"),
        ({"mtu": 9600}, "gpucluster_fabric.roce.mtu"),
        ({"pfc": "yes"}, "gpucluster_fabric.roce.pfc"),
        ({"ecn": 1}, "gpucluster_fabric.roce.ecn"),
        ({"cnp_dscp": 26}, "gpucluster_fabric.roce.cnp_dscp"),  # DSCP 26 cannot be on priorities 3 and 6
    ],
)
def test_bad_roce_values_name_their_field(roce: dict[str, Any], field: str) -> None:
    with pytest.raises(PlanError) as err:
        fabric_host.roce_settings(roce)
    assert err.value.field == field


def test_infiniband_defaults() -> None:
    ib = fabric_host.infiniband_settings({"sm_hcas": ["mlx5_0"]}, subnet_manager="head", topology="fat_tree", subnets=1)
    assert ib == {
        "subnet_manager": "head",
        "service_level": None,
        "pkey": "0x7fff",
        "sm_priority": 14,
        "routing_engine": "updn",
        "sm_port_guids": None,
        "sm_hcas": ["mlx5_0"],
        "sm_where": "opensm on the head, one instance per subnet port",
    }
    rail = fabric_host.infiniband_settings({}, subnet_manager="switch", topology="rail_optimized", subnets=8)
    assert rail["routing_engine"] == "minhop"
    assert fabric_host.partition_lines({**ib, "service_level": 5}) == [
        "Default=0x7fff, ipoib, sl=5, defmember=full : ALL=full, SELF=full ;"
    ]


@pytest.mark.parametrize(
    ("ib", "sm", "field"),
    [
        ({}, "host", "gpucluster_fabric.subnet_manager"),
        ({}, None, "gpucluster_fabric.subnet_manager"),
        ({"service_level": 16}, "head", "gpucluster_fabric.infiniband.service_level"),
        ({"pkey": "0x8001"}, "head", "gpucluster_fabric.infiniband.pkey"),
        ({"pkey": "zz"}, "head", "gpucluster_fabric.infiniband.pkey"),
        ({"sm_priority": 16}, "head", "gpucluster_fabric.infiniband.sm_priority"),
        ({"routing_engine": "fastest"}, "head", "gpucluster_fabric.infiniband.routing_engine"),
        ({"sm_port_guids": ["0x1"]}, "head", "gpucluster_fabric.infiniband.sm_port_guids"),
        ({"sm_port_guids": ["0x0002c9030002fb05"]}, "head", "gpucluster_fabric.infiniband.sm_port_guids"),
        ({"sm_hcas": None}, "head", "gpucluster_fabric.infiniband.sm_hcas"),  # no SM port at all
        ({"sm_hcas": ["mlx5_0"]}, "head", "gpucluster_fabric.infiniband.sm_hcas"),  # 2 subnets, 1 port
        ({"sm_hcas": ["mlx5_0", "mlx5_0"]}, "head", "gpucluster_fabric.infiniband.sm_hcas"),
        ({"sm_hcas": ["mlx5_0", "a b"]}, "head", "gpucluster_fabric.infiniband.sm_hcas"),
    ],
)
def test_bad_infiniband_values_name_their_field(ib: dict[str, Any], sm: Any, field: str) -> None:
    ib = {"sm_hcas": ["mlx5_0", "mlx5_1"], **ib}
    with pytest.raises(PlanError) as err:
        fabric_host.infiniband_settings(ib, subnet_manager=sm, topology="rail_optimized", subnets=2)
    assert err.value.field == field


def test_full_membership_pkey_and_port_guids_are_accepted() -> None:
    guids = ["0x0002c9030002fb05", "0x0002c9030002fb06"]
    ib = fabric_host.infiniband_settings(
        {"pkey": "0xffff", "sm_port_guids": guids, "sm_hcas": ["mlx5_0", "mlx5_1"]},
        subnet_manager="head",
        topology="rail_optimized",
        subnets=2,
    )
    assert ib["pkey"] == "0x7fff"
    assert ib["sm_port_guids"] == guids


# --- the plan -----------------------------------------------------------------------------


def test_bad_subnet_manager_stops_the_plan() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.subnet_manager.*'host'.*head, switch, external"):
        cluster_plan(*_site("tier3", subnet_manager="host"))


@pytest.mark.parametrize("tier", ["tier2", "tier3", "tier4"])
def test_infiniband_tiers_run_opensm_on_the_head(tier: str) -> None:
    plan = cluster_plan(*load_inventory(tier))
    fh = plan["fabric_host"]
    head = plan["cluster"]["head"]
    computes = [h for h, v in plan["hosts"].items() if "compute" in v["roles"]]
    assert fh["infiniband_hosts"] == [head, *computes]
    assert fh["roce_hosts"] == []
    assert fh["opensm"]["host"] == head
    assert fh["check_ignore"] == []  # the SM's own HCAs are in the planned cabling
    # one SM port per subnet: a rail-optimized fabric without spines is a subnet per rail
    subnets = 8 if plan["fabric"]["topology"] == "rail_optimized" else 1
    assert len(fh["opensm"]["subnets"]) == subnets
    ports = fh["opensm"]["sm_ports"]
    assert [p["subnet"] for p in ports] == fh["opensm"]["subnets"]
    assert fh["node_descriptions"][head] == [{"hca": p["hca"], "desc": f"{head} {p['hca']}"} for p in ports]
    assert fh["node_descriptions"][computes[1]][3] == {"hca": "mlx5_3", "desc": f"{computes[1]} mlx5_3"}
    head_files = {f["dest"] for f in files_by_host(plan)[head] if f["role"] == "fabric"}
    assert head_files == {"/etc/opensm/opensm.conf", "/etc/opensm/partitions.conf", "/etc/default/opensm"}
    assert not [f for f in files_by_host(plan)[computes[0]] if f["role"] == "fabric"]


@pytest.mark.parametrize(
    ("tier", "ports"),
    [
        ("tier2", [("ib-sw01", 17)]),  # after the 16 compute ports of the one switch
        ("tier3", [(f"leaf0{r + 1}", 5) for r in range(8)]),  # one per rail leaf, after 4 hosts
        ("tier4", [("leaf01", 9)]),  # a leaf's host half (ports 1-32); spines are full
        ("tier4-k8s", [("leaf01", 9)]),
    ],
)
def test_every_subnet_has_a_cabled_sm_port(tier: str, ports: list[tuple[str, int]]) -> None:
    plan = cluster_plan(*load_inventory(tier))
    cabling = plan["fabric"]["cabling"]
    assert [(x["b"]["node"], x["b"]["port"]) for x in cabling["sm_links"]] == ports
    nets = ibfabric.subnets(cabling)
    assert [x["subnet"] for x in cabling["sm_hcas"]] == [n["name"] for n in nets]
    for net, link in zip(nets, cabling["sm_links"], strict=True):
        assert link["b"]["node"] in net["switches"]
    taken = [(e["node"], e["port"]) for x in ibfabric.all_links(cabling) for e in (x["a"], x["b"]) if not e.get("hca")]
    assert len(taken) == len(set(taken))  # no switch port cabled twice
    assert all("head01" not in sw.get("nodes", "") for sw in plan["fabric"]["slurm_topology"])  # no Slurm node


def test_a_full_switch_leaves_no_sm_port() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_fabric\.infiniband\.sm_hcas.*'mlx5_0'.*free host port"):
        cluster_plan(*_site("tier2", switch_radix=16))  # 2 nodes x 8 rails fill a 16-port switch


@pytest.mark.parametrize("sm", ["switch", "external"])
def test_a_managed_switch_or_ufm_needs_no_sm_port(sm: str) -> None:
    site, groups = _site("tier2", switch_radix=16, subnet_manager=sm)
    site["gpucluster_fabric"]["infiniband"] = {"service_level": 0}  # no sm_hcas
    plan = cluster_plan(site, groups)
    assert plan["fabric_host"]["opensm"] is None and not plan["fabric"]["cabling"].get("sm_links")
    where = {"switch": "the subnet manager of a managed switch", "external": "an external fabric manager such as UFM"}
    assert _sm_row(plan) == ["subnet manager", sm, f"{where[sm]} (nothing runs on the hosts)"]


def _sm_row(plan: dict[str, Any]) -> list[str]:
    rows = next(s["rows"] for s in report_sections(plan) if s["title"] == "Fabric and NCCL")
    return next(r for r in rows if r[0] == "subnet manager")


def test_the_report_names_the_heads_sm_ports() -> None:
    row = _sm_row(cluster_plan(*load_inventory("tier2")))
    assert row == [
        "subnet manager",
        "head",
        "opensm on the head, one instance per subnet port: head01 mlx5_0 on ib-sw01 port 17",
    ]


def test_tier1_has_no_fabric_work() -> None:
    plan = cluster_plan(*load_inventory("tier1"))
    fh = plan["fabric_host"]
    assert fh["infiniband_hosts"] == fh["roce_hosts"] == [] and fh["opensm"] is None
    assert not [f for f in files_by_host(plan)["dgx01"] if f["role"] == "fabric"]


def test_switch_subnet_manager_leaves_the_head_alone() -> None:
    plan = cluster_plan(*_site("tier3", subnet_manager="switch"))
    fh = plan["fabric_host"]
    assert fh["opensm"] is None and fh["check_ignore"] == []
    assert "head01" not in fh["infiniband_hosts"]
    assert not [f for f in files_by_host(plan)["head01"] if f["role"] == "fabric"]


def test_opensm_files_carry_the_plan(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> None:
    site, groups = tier3
    site["gpucluster_fabric"]["infiniband"] = {
        **site["gpucluster_fabric"]["infiniband"],
        "service_level": 3,
        "pkey": "0x7fff",
        "sm_priority": 12,
    }
    plan = cluster_plan(site, groups)
    assert plan["nccl"]["conf"]["NCCL_IB_SL"] == "3"
    files = _fabric_files(plan, "head01")
    partitions = files["/etc/opensm/partitions.conf"]
    rule = [line for line in partitions.splitlines() if line and not line.startswith("#")]
    assert rule == ["Default=0x7fff, ipoib, sl=3, defmember=full : ALL=full, SELF=full ;"]
    assert "NCCL_IB_SL=3" in partitions
    conf = files["/etc/opensm/opensm.conf"]
    assert re.search(r"^sm_priority 12$", conf, re.M)
    assert re.search(r"^routing_engine minhop$", conf, re.M)
    assert re.search(r"^partition_config_file /etc/opensm/partitions.conf$", conf, re.M)
    assert re.search(r"^qos TRUE$", conf, re.M)  # opensm drops a partition SL other than 0 without QoS
    assert 'PORTS="ALL"' in files["/etc/default/opensm"]
    assert "one in each planned subnet (8)" in files["/etc/default/opensm"]
    assert '#   rail7: mlx5_7 ("head01 mlx5_7") on leaf08 port 5' in files["/etc/default/opensm"]


@pytest.mark.skipif(shutil.which("opensm") is None, reason="opensm is not installed")
def test_opensm_reads_the_rendered_options(tmp_path: Path) -> None:
    """opensm -F loads the file and -c writes back every option it ended up with."""
    plan = cluster_plan(*load_inventory("tier4"))
    conf = tmp_path / "opensm.conf"
    conf.write_text(_fabric_files(plan, "head01")["/etc/opensm/opensm.conf"])
    dump = tmp_path / "dump.conf"
    run = subprocess.run(
        ["opensm", "-F", str(conf), "-c", str(dump)], capture_output=True, text=True, timeout=30, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    options = dict(line.split(None, 1) for line in dump.read_text().splitlines() if line and line[0] != "#")
    assert options["sm_priority"] == "14"
    assert options["routing_engine"] == "updn"
    assert options["partition_config_file"] == "/etc/opensm/partitions.conf"
    assert options["qos"] == "FALSE"  # SL 0: no QoS needed


HAVE_IBSIM = (
    all(shutil.which(t) for t in ("ibsim", "opensm", "saquery", "sminfo"))
    and Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so").exists()
)


@pytest.mark.skipif(not HAVE_IBSIM, reason="ibsim, opensm, infiniband-diags or libumad2sim not installed")
def test_opensm_files_reach_the_simulated_fabric(tmp_path: Path) -> None:
    """tier2 with SL 3 on ibsim: the rendered opensm.conf and partitions.conf make the head's
    SM master at priority 14, IPoIB's broadcast group and path records carry SL 3, and every
    port is a full member of 0x7fff."""
    spec = importlib.util.spec_from_file_location("ibsim_check", ROOT / "tools" / "lab" / "ibsim_check.py")
    assert spec and spec.loader
    lab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab)
    site, groups = _site("tier2")
    site["gpucluster_fabric"]["infiniband"] = {**site["gpucluster_fabric"]["infiniband"], "service_level": 3}
    plan = cluster_plan(site, groups)
    files = _fabric_files(plan, "head01")
    partitions = tmp_path / "partitions.conf"
    partitions.write_text(files["/etc/opensm/partitions.conf"])
    conf = tmp_path / "opensm.conf"
    conf.write_text(files["/etc/opensm/opensm.conf"].replace("/etc/opensm/partitions.conf", str(partitions)))
    sim = lab.Simulation(plan["fabric"]["cabling"], tmp_path, timeout=20)
    sm = None
    try:
        sim.start()
        # the SM on the head's planned SM port (fabric_host.sm_cabling); the queries from a compute HCA
        sm = subprocess.Popen(
            ["opensm", "-s", "0", "-F", str(conf), "-f", str(tmp_path / "opensm.log")],
            env=sim.client_env("head01 mlx5_0"), cwd=tmp_path, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        env = sim.client_env("compute02 mlx5_0")
        deadline = time.monotonic() + 30
        while True:
            info = lab._run(["sminfo"], env, tmp_path, 20)
            if "SMINFO_MASTER" in info.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert "priority 14" in info.stdout and "SMINFO_MASTER" in info.stdout, info.stdout + info.stderr
        groups_out = lab._run(["saquery", "-g"], env, tmp_path, 20).stdout
        assert re.search(r"SL\.+0x3$", groups_out, re.M), groups_out
        assert re.search(r"pkey\.+0xFFFF$", groups_out, re.M), groups_out
        path = lab._run(["saquery", "PR", "--src-to-dst", "1:2"], env, tmp_path, 20).stdout
        assert re.search(r"sl\.+0x3$", path, re.M), path
        pkeys = lab._run(["smpquery", "pkeys", "-D", "0"], env, tmp_path, 20).stdout
        assert re.search(r"^\s+0: 0xffff ", pkeys, re.M), pkeys  # full member of the default partition
    finally:
        if sm is not None and sm.poll() is None:
            os.killpg(sm.pid, signal.SIGTERM)
            try:
                sm.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(sm.pid, signal.SIGKILL)
                sm.wait(timeout=10)
        sim.stop()


def test_roce_plan_renders_one_traffic_class(roce_tier2: dict[str, Any]) -> None:
    """The ToS the hosts set and NCCL_IB_TC come from one engine value and cannot disagree."""
    plan = roce_tier2
    assert plan["fabric_host"]["roce_hosts"] == ["compute01", "compute02"]
    assert plan["fabric_host"]["infiniband_hosts"] == [] and plan["fabric_host"]["opensm"] is None
    files = _fabric_files(plan, "compute01")
    assert set(files) == {"/usr/local/sbin/gpucluster-roce-setup", "/etc/systemd/system/gpucluster-roce.service"}
    script = files["/usr/local/sbin/gpucluster-roce-setup"]
    tos = re.search(r"^TOS=(\d+)$", script, re.M)
    assert tos and tos.group(1) == plan["nccl"]["conf"]["NCCL_IB_TC"] == "106"
    values = dict(re.findall(r"^([A-Z_0-9]+)=(\S+)$", script, re.M))
    assert values["PRIORITY"] == "3"
    assert values["PFC"] == "0,0,0,1,0,0,0,0"
    assert values["ECN"] == "1"
    assert values["CNP_DSCP"] == "48"
    assert values["CNP_PRIORITY"] == "6"
    assert values["MTU"] == "4200"
    assert 'ROCE_MODE="RoCE v2"' in script
    assert 'DSCP2PRIO=("set,26,3" "set,48,6")' in script
    rails = re.findall(r'^  "(mlx5_\d+) (\S+)"$', script, re.M)
    assert rails[0] == ("mlx5_0", "ibp26s0") and len(rails) == 8  # compute NICs only, in rail order
    assert "mlx5_8" not in script  # storage NICs are not RoCE rails here
    unit = files["/etc/systemd/system/gpucluster-roce.service"]
    assert "ExecStart=/usr/local/sbin/gpucluster-roce-setup" in unit
    assert "Type=oneshot" in unit and "RemainAfterExit=yes" in unit
    assert "ToS 106" in unit
    # the head gets no RoCE files; the rails' interface units carry the RoCE MTU
    assert not [f for f in files_by_host(plan)["head01"] if f["role"] == "fabric"]
    units = plan["hosts"]["compute01"]["network_units"]
    assert {u["mtu"] for u in units if u["purpose"] == "compute"} == {4200}
    assert all("mtu" not in u for u in units if u["purpose"] != "compute")
    assert plan["fabric"]["roce"]["traffic_class"] == 106


def test_roce_without_ecn_keeps_nccl_and_hosts_together() -> None:
    site, groups = _site("tier2", type="roce", roce={"dscp": 26, "ecn": False, "mtu": 9000})
    plan = cluster_plan(site, groups)
    script = _fabric_files(plan, "compute02")["/usr/local/sbin/gpucluster-roce-setup"]
    assert re.search(r"^TOS=104$", script, re.M)
    assert plan["nccl"]["conf"]["NCCL_IB_TC"] == "104"
    assert re.search(r"^ECN=0$", script, re.M) and re.search(r"^MTU=9000$", script, re.M)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_roce_script_is_valid_bash(roce_tier2: dict[str, Any], tmp_path: Path) -> None:
    script = tmp_path / "gpucluster-roce-setup"
    script.write_text(_fabric_files(roce_tier2, "compute01")["/usr/local/sbin/gpucluster-roce-setup"])
    run = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr


def test_roce_script_stops_without_mlnx_qos(roce_tier2: dict[str, Any], tmp_path: Path) -> None:
    """On a host without the DOCA/MLNX_OFED tools the unit fails loudly instead of half-applying."""
    script = tmp_path / "gpucluster-roce-setup"
    script.write_text(_fabric_files(roce_tier2, "compute01")["/usr/local/sbin/gpucluster-roce-setup"])
    env = {"PATH": str(tmp_path)}  # nothing on PATH: mlnx_qos is missing
    bash = shutil.which("bash") or "/bin/bash"
    run = subprocess.run([bash, str(script)], capture_output=True, text=True, env=env, check=False, timeout=30)
    assert run.returncode == 1
    assert "mlnx_qos not found" in run.stderr


def test_fabric_templates_are_listed_in_the_manifest() -> None:
    listed = {f["src"] for f in ROLE_FILES["fabric"]}
    assert listed == {p.name for p in TEMPLATES.glob("*.j2")}
