"""Node health check: plan thresholds (health_config) and the drain/resume script.

The script (roles/compute/files/gpucluster-healthcheck) is loaded as a module; scontrol is a
fake that records its calls and prints `scontrol show node` text in the layout of the
recorded Slurm 20.11 output in tests/data/slurm (dossier 8.4: HealthCheckProgram). The
thresholds are the tier4 plan's (H100 SXM, InfiniBand 400 Gb/s, DLC).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROLE_FILES, ROOT, cluster_plan, load_inventory, load_script, render_role_template

from ansible_collections.gpucluster.tiers.plugins.module_utils import gpu
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import health
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.health import REASON_PREFIX, health_config
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm import settings as slurm_settings

SCRIPT = ROOT / "roles" / "compute" / "files" / "gpucluster-healthcheck"
DATA = ROOT / "tests" / "data"
NODE = "compute01"


hc = load_script(SCRIPT, "gpucluster_healthcheck")


@pytest.fixture(scope="module")
def plan() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier4"))


# ---------------------------------------------------------------- thresholds from the plan


def test_health_config_comes_from_the_plan(plan: dict[str, Any]) -> None:
    cfg = plan["health"]
    assert cfg == health_config(plan)
    assert cfg["reason_prefix"] == REASON_PREFIX
    assert cfg["gpu"]["count"] == plan["cluster"]["gpus_per_node"]
    assert cfg["gpu"]["temp_critical_c"] == plan["gpu"]["temperature"]["critical_c"] == 87
    assert cfg["gpu"]["temp_warn_c"] == plan["gpu"]["temperature"]["warn_c"]
    assert cfg["fabric"]["rate_gbps"] == plan["fabric"]["link_rate_gbps"]
    assert cfg["coolant"] == {
        "supply_max_c": plan["cooling"]["supply_max_c"],
        "return_max_c": plan["cooling"]["return_max_c"],
        "flow_min_lpm": plan["cooling"]["flow_critical_lpm"],
    }
    compute = sorted(h for h, v in plan["hosts"].items() if "compute" in v["roles"])
    assert sorted(cfg["nodes"]) == compute
    assert cfg["nodes"][NODE] == {"slurm_node": NODE, "fabric_ports": [f"mlx5_{i}/1" for i in range(8)]}


def test_health_config_without_fabric_or_liquid() -> None:
    cfg = health_config(cluster_plan(*load_inventory("tier1")))
    assert cfg["coolant"] is None and cfg["fabric"]["rate_gbps"] is None
    assert all(node["fabric_ports"] == [] for node in cfg["nodes"].values())


def test_config_is_installed_on_compute_nodes(plan: dict[str, Any]) -> None:
    entry = {"role": "compute", "src": "healthcheck.json.j2", "dest": "/etc/gpucluster/healthcheck.json"}
    listed = next(f for f in ROLE_FILES["compute"] if f["src"] == entry["src"])
    assert (listed["dest"], listed["hosts"]) == (entry["dest"], "compute")

    def placed(host: str) -> list[dict[str, Any]]:  # role, template, destination of each manifest entry
        return [{key: f[key] for key in entry} for f in files_by_host(plan)[host]]

    assert entry in placed(NODE)
    assert entry not in placed("head01")


def test_script_queries_the_fields_the_parser_reads() -> None:
    assert hc.QUERY_FIELDS == gpu.QUERY_FIELDS


# ---------------------------------------------------------------- the script, end to end


def _gpu_csv(temps: dict[int, int] | None = None, ecc: dict[int, int] | None = None, count: int = 8) -> str:
    """Eight H100 rows in the layout of the recorded query (tests/data/nvidia-smi/h100-545-query.txt)."""
    template = (DATA / "nvidia-smi" / "h100-545-query.txt").read_text().strip().split(", ")
    rows = []
    for i in range(count):
        row = list(template)
        row[0], row[3] = str(i), f"00000000:{0x19 + i:02X}:00.0"
        row[9] = str((temps or {}).get(i, 33))
        row[10] = str((ecc or {}).get(i, 0))
        rows.append(", ".join(row))
    return "\n".join(rows) + "\n"


#: Recorded `nvidia-smi -q` of a healthy and of a failed HGX H100 node (their sources: the files' comments)
SMI_Q_HEALTHY = DATA / "nvidia-smi" / "h100-560-q-fabric-completed.txt"
SMI_Q_FAILED = DATA / "nvidia-smi" / "h100-570-q-fabric-in-progress.txt"


def _nvlink_status(count: int = 8, links: int = 18, inactive: dict[int, list[int]] | None = None) -> str:
    """`nvidia-smi nvlink -s` in the layout of published H100 outputs ("GPU 0: NVIDIA H100 80GB HBM3
    (UUID: ...)" then "Link N: 26.562 GB/s" per link: stas00/ml-engineering, nvidia-smi nvlink --status;
    an inactive link prints "<inactive>")."""
    rows = []
    for i in range(count):
        rows.append(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-00000000000{i})")
        for link in range(links):
            rate = "<inactive>" if link in (inactive or {}).get(i, []) else "26.562 GB/s"
            rows.append(f"\t Link {link}: {rate}")
    return "\n".join(rows) + "\n"


def _show(state: str, reason: str | None) -> str:
    """`scontrol show node compute01` in the layout of the recorded output, with State and Reason set."""
    text = (DATA / "slurm" / "scontrol-show-node-drained.txt").read_text().replace("cu201", NODE)
    text = re.sub(r"State=\S+", f"State={state}", text)
    return re.sub(r"(?m)^   Reason=.*\n", f"   Reason={reason} [root@2026-01-05T10:00:00]\n" if reason else "", text)


class Node:
    """A fake compute node: recorded inputs in tmp_path and a scontrol that logs its calls."""

    def __init__(self, tmp_path: Path, cfg: dict[str, Any]) -> None:
        self.dir = tmp_path
        self.config = tmp_path / "healthcheck.json"
        self.config.write_text(json.dumps(cfg))
        self.smi = tmp_path / "query.csv"
        self.smi.write_text(_gpu_csv())
        self.ib = tmp_path / "infiniband"
        for port in cfg["nodes"][NODE]["fabric_ports"]:
            self.port(port, "4: ACTIVE", "400 Gb/sec (4X NDR)")
        self.coolant = tmp_path / "coolant.json"
        self.coolant.write_text(json.dumps({"supply_c": 28.0, "return_c": 38.0, "flow_lpm": 60.0}))
        self.calls = tmp_path / "calls.jsonl"
        self.show = tmp_path / "show.txt"
        self.set_state("IDLE", None)
        self.scontrol = tmp_path / "scontrol"
        self.scontrol.write_text(
            f"#!{sys.executable}\nimport json, sys\n"
            f"open({str(self.calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
            f"if sys.argv[1] == 'show': sys.stdout.write(open({str(self.show)!r}).read())\n"
        )
        self.scontrol.chmod(0o755)
        self.state = tmp_path / "state"
        # bring-up: the recorded healthy HGX `nvidia-smi -q`, all NVLink links up, nvidia_peermem loaded
        self.smi_q = tmp_path / "smi-q.txt"
        self.smi_q.write_text(SMI_Q_HEALTHY.read_text())
        self.nvlink = tmp_path / "nvlink.txt"
        self.nvlink.write_text(_nvlink_status())
        self.sys_module = tmp_path / "module"
        if cfg.get("gpudirect_module"):
            (self.sys_module / cfg["gpudirect_module"]).mkdir(parents=True)
        # the loaded driver's version file: the open flavour (DMA-BUF; tests/data/nvidia-driver/README.md)
        self.driver_version = tmp_path / "nvidia-version"
        self.driver_version.write_text((DATA / "nvidia-driver" / "proc-version-open-570.txt").read_text())
        # journalctl -k prints kernel.log and logs its arguments; dcgmi diag prints diag.txt
        self.kernel = tmp_path / "kernel.log"
        self.kernel.write_text("")
        self.journalctl = self._tool("journalctl", self.kernel)
        self.diag = tmp_path / "diag.txt"
        self.diag.write_text((DATA / "acceptance" / "dcgm_diag_v3_real_pass.txt").read_text())
        self.dcgmi = self._tool("dcgmi", self.diag)

    def _tool(self, name: str, output: Path) -> Path:
        tool = self.dir / name
        tool.write_text(
            f"#!{sys.executable}\nimport json, sys\n"
            f"open({str(self.dir / (name + '.calls'))!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
            f"sys.stdout.write(open({str(output)!r}).read())\n"
        )
        tool.chmod(0o755)
        return tool

    def tool_calls(self, name: str) -> list[list[str]]:
        calls = self.dir / f"{name}.calls"
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []

    def port(self, name: str, state: str, rate: str) -> None:
        hca, port = name.split("/")
        base = self.ib / hca / "ports" / port
        base.mkdir(parents=True, exist_ok=True)
        (base / "state").write_text(state + "\n")
        (base / "rate").write_text(rate + "\n")

    def set_state(self, state: str, reason: str | None) -> None:
        self.show.write_text(_show(state, reason))

    def run(self, *extra: str) -> int:
        return hc.main(
            [
                "--config", str(self.config), "--node", NODE, "--scontrol", str(self.scontrol),
                "--nvidia-smi-output", str(self.smi), "--ib-sysfs", str(self.ib), "--coolant", str(self.coolant),
                "--state-dir", str(self.state), "--journalctl", str(self.journalctl), "--dcgmi", str(self.dcgmi),
                "--nvidia-smi-q-output", str(self.smi_q), "--nvlink-output", str(self.nvlink),
                "--sys-module", str(self.sys_module), "--driver-version", str(self.driver_version),
                *extra,
            ]
        )  # fmt: skip

    def updates(self) -> list[list[str]]:
        return [call for call in self.scontrol_calls() if call[0] == "update"]

    def scontrol_calls(self) -> list[list[str]]:
        lines = self.calls.read_text().splitlines() if self.calls.exists() else []
        return list(map(json.loads, lines))


@pytest.fixture
def node(tmp_path: Path, plan: dict[str, Any]) -> Node:
    return Node(tmp_path, plan["health"])


def _drain(reason: str) -> list[str]:
    return ["update", f"nodename={NODE}", "state=drain", f"reason={reason}"]


def test_healthy_node_is_left_alone(node: Node) -> None:
    assert node.run() == 0
    assert node.updates() == []


def test_hot_gpu_drains_naming_gpu_and_temperatures(node: Node) -> None:
    node.smi.write_text(_gpu_csv(temps={3: 89}))
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: gpu3 89C >= 87C")]


def test_warm_gpu_only_warns(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    node.smi.write_text(_gpu_csv(temps={5: 85}))
    assert node.run() == 0
    assert "gpu5 85C >= warn 84C" in capsys.readouterr().out
    assert node.updates() == []


def test_healthy_node_resumes_its_own_drain(node: Node) -> None:
    node.set_state("IDLE+DRAIN", "gpucluster: gpu3 89C >= 87C")
    assert node.run() == 0
    assert node.updates() == [["update", f"nodename={NODE}", "state=resume"]]


def test_operator_drain_is_never_resumed(node: Node) -> None:
    node.set_state("IDLE+DRAIN", "Low RealMemory")
    assert node.run() == 0
    assert node.updates() == []
    node.smi.write_text(_gpu_csv(temps={3: 89}))  # unhealthy too: the operator's reason stays
    assert node.run() == 1
    assert node.updates() == []


def test_own_drain_is_updated_only_when_the_reason_changes(node: Node) -> None:
    node.smi.write_text(_gpu_csv(temps={3: 89}))
    node.set_state("DRAINED", "gpucluster: gpu3 89C >= 87C")
    assert node.run() == 1
    assert node.updates() == []
    node.smi.write_text(_gpu_csv(temps={3: 90}))
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: gpu3 90C >= 87C")]


def test_ib_port_down_drains(node: Node) -> None:
    node.port("mlx5_2/1", "1: DOWN", "10 Gb/sec (4X SDR)")
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: mlx5_2/1 DOWN")]


def test_ib_rate_below_plan_drains(node: Node) -> None:
    node.port("mlx5_6/1", "4: ACTIVE", "200 Gb/sec (4X HDR)")
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: mlx5_6/1 200<400Gb")]


def test_missing_hca_drains(node: Node) -> None:
    for name in ("state", "rate"):
        (node.ib / "mlx5_7" / "ports" / "1" / name).unlink()
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: mlx5_7/1 missing")]


def test_coolant_flow_low_drains(node: Node) -> None:
    node.coolant.write_text(json.dumps({"supply_c": 28.0, "return_c": 38.0, "flow_lpm": 40.0}))
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: coolant flow 40 < 46.8lpm")]


def test_coolant_supply_hot_drains(node: Node) -> None:
    node.coolant.write_text(json.dumps({"supply_c": 33.5, "return_c": 38.0, "flow_lpm": 60.0}))
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: coolant supply 33.5C > 32C")]


def test_ecc_missing_gpu_and_short_reason(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    node.smi.write_text(_gpu_csv(temps={0: 90, 1: 91}, ecc={2: 2}, count=7))
    assert node.run() == 1
    out = capsys.readouterr().out
    assert "FAIL: gpu2 dbe ecc 2" in out
    assert node.updates() == [_drain("gpucluster: 7/8 gpus, gpu0 90C >= 87C, gpu1 91C >= 87C +1")]


def test_xid_from_kernel_log_and_dcgmi(node: Node) -> None:
    xid = node.dir / "xid.txt"
    # the kernel's NVRM line; PCI 0000:1c:00 is gpu3 in the query (00000000:1C:00.0)
    xid.write_text(
        "Oct 02 10:41:07 compute01 kernel: NVRM: Xid (PCI:0000:1c:00): 79, pid=0, GPU has fallen off the bus.\n"
    )
    assert node.run("--xid", str(xid)) == 1
    assert node.updates() == [_drain("gpucluster: gpu3 xid 79")]
    xid.write_text("#Entity   XID\nID\nGPU 0     0\nGPU 5     48\n")  # dcgmi dmon -e 230 -c 1
    node.calls.unlink()
    assert node.run("--xid", str(xid)) == 1
    assert node.updates() == [_drain("gpucluster: gpu5 xid 48")]


def test_dry_run_prints_and_changes_nothing(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    node.smi.write_text(_gpu_csv(temps={3: 89}))
    assert node.run("--dry-run") == 1
    assert node.updates() == []
    assert f"would run: {node.scontrol} update nodename={NODE} state=drain 'reason=gpucluster: gpu3 89C >= 87C'" in (
        capsys.readouterr().out
    )


def test_lab_skips_missing_gpu_and_hca(tmp_path: Path, plan: dict[str, Any]) -> None:
    node = Node(tmp_path, {**plan["health"], "lab": True})
    absent = str(tmp_path / "absent")
    argv = [
        "--config",
        str(node.config),
        "--node",
        NODE,
        "--scontrol",
        str(node.scontrol),
        "--state-dir",
        str(node.state),
    ]
    argv += ["--nvidia-smi", absent, "--ib-sysfs", absent, "--coolant", str(node.coolant)]
    assert hc.main(argv) == 0
    node.config.write_text(json.dumps(plan["health"]))  # the same node outside the lab drains
    assert hc.main(argv) == 1
    assert node.updates()[0][-1].startswith("reason=gpucluster: nvidia-smi missing, mlx5_0/1 missing")


def test_unknown_node_or_broken_scontrol_changes_nothing(node: Node) -> None:
    assert hc.main(["--config", str(node.config), "--node", "nosuch", "--scontrol", str(node.scontrol)]) == 2
    node.show.write_text("slurm_load_node error: Unable to contact slurm controller (connect failure)\n")
    assert node.run() == 2
    assert node.updates() == []


def test_parse_recorded_scontrol_output() -> None:
    text = (DATA / "slurm" / "scontrol-show-node-drained.txt").read_text()
    assert hc.parse_node(text) == ("IDLE+DRAIN", "Low RealMemory")
    assert hc.parse_node(_show("MIXED", None)) == ("MIXED", None)


# ---------------------------------------------------------------- Epilog and Prolog (docs/sources.md [SL9])

RESUME = ["update", f"nodename={NODE}", "state=resume"]
DBE = "gpucluster: gpu2 dbe ecc 2"


def test_modes_and_dcgm_from_the_plan(plan: dict[str, Any]) -> None:
    cfg = plan["health"]
    assert cfg["modes"] == {
        "periodic": {
            "enabled": True,
            "program": slurm_settings.HEALTH_CHECK_PROGRAM,
            "checks": ["gpus", "xid", "fabric", "coolant", "bringup"],
        },
        "epilog": {"enabled": True, "program": "/usr/local/sbin/gpucluster-epilog", "checks": ["gpus", "xid", "dcgm"]},
        "prolog": {
            "enabled": False,
            "program": "/usr/local/sbin/gpucluster-prolog",
            "checks": ["gpus", "xid", "bringup"],
        },
    }
    # dcgmi diag -r 1: "Quick (System Validation ~ seconds)" (docs/sources.md [D2]); the timeout is an input
    # host: nv-hostengine's root-only unix socket, never its TCP port (docs/security.md)
    assert cfg["dcgm"] == {"level": 1, "timeout_s": 120, "host": "unix:///run/nvidia-dcgm/nv-hostengine"}
    assert cfg["recorded"] is None  # real hosts read nvidia-smi, never a file
    assert (plan["slurm"]["epilog"], plan["slurm"]["prolog"]) == ("/usr/local/sbin/gpucluster-epilog", "")
    text = render_role_template("slurm", "slurm.conf.j2", plan, "head01")
    assert "\nEpilog=/usr/local/sbin/gpucluster-epilog\n" in text and "\nProlog=" not in text


def test_inventory_turns_the_prolog_on_and_dcgm_off() -> None:
    site, groups = load_inventory("tier2")
    site = {
        **site,
        "gpucluster_slurm": {**site.get("gpucluster_slurm", {}), "health": {"prolog": True, "dcgm_level": 0}},
    }
    plan = cluster_plan(site, groups)
    assert plan["health"]["modes"]["prolog"]["enabled"] is True
    assert "dcgm" not in plan["health"]["modes"]["epilog"]["checks"]
    assert plan["slurm"]["prolog"] == health.PROLOG_PROGRAM
    text = render_role_template("slurm", "slurm.conf.j2", plan, "head01")
    assert "\nProlog=/usr/local/sbin/gpucluster-prolog\n" in text
    off = cluster_plan({**site, "gpucluster_slurm": {"health": {"epilog": False}}}, groups)
    assert off["slurm"]["epilog"] == "" and "Epilog=" not in render_role_template(
        "slurm", "slurm.conf.j2", off, "head01"
    )


def test_lab_plan_names_the_recorded_gpu_input() -> None:
    site, groups = load_inventory("tier2")
    plan = cluster_plan({**site, "gpucluster_lab": {"enabled": True}}, groups)
    assert plan["health"]["recorded"] == {"nvidia_smi_output": health.LAB_NVIDIA_SMI_OUTPUT}


def test_wrappers_run_the_installed_check_in_their_mode(plan: dict[str, Any]) -> None:
    for mode in ("epilog", "prolog"):
        listed = next(f for f in ROLE_FILES["compute"] if f["src"] == f"gpucluster-{mode}.j2")
        assert (listed["dest"], listed["hosts"], listed["mode"]) == (
            plan["health"]["modes"][mode]["program"],
            "compute",
            "0755",
        )
        text = render_role_template("compute", f"gpucluster-{mode}.j2", plan, NODE)
        assert text.splitlines()[-1] == f"exec {slurm_settings.HEALTH_CHECK_PROGRAM} --mode {mode}"
        assert "\nPATH=" in text  # Slurm runs hooks without a search path


def test_epilog_drains_with_our_reason_and_exits_0(node: Node) -> None:
    node.smi.write_text(_gpu_csv(ecc={2: 2}))
    assert node.run("--mode", "epilog") == 0  # non-zero would make Slurm re-drain as "Epilog error"
    assert node.updates() == [_drain(DBE)]
    assert (node.state / "drained").exists()
    # against the host engine's root-only socket (plan health.dcgm.host)
    assert node.tool_calls("dcgmi") == [["diag", "--host", "unix:///run/nvidia-dcgm/nv-hostengine", "-r", "1", "-j"]]


def test_epilog_on_a_healthy_node_asks_the_controller_nothing(node: Node) -> None:
    assert node.run("--mode", "epilog") == 0
    assert node.scontrol_calls() == []


def test_clean_check_resumes_an_epilog_drain_and_clears_the_marker(node: Node) -> None:
    node.smi.write_text(_gpu_csv(ecc={2: 2}))
    assert node.run("--mode", "epilog") == 0
    node.set_state("IDLE+DRAIN", DBE)
    node.smi.write_text(_gpu_csv())
    assert node.run("--mode", "epilog") == 0  # the marker says: ask, and resume our drain
    assert node.updates()[-1] == RESUME
    assert not (node.state / "drained").exists()


def test_epilog_leaves_an_operator_drain_and_forgets_the_marker(node: Node) -> None:
    (node.state).mkdir()
    (node.state / "drained").write_text("")
    node.set_state("IDLE+DRAIN", "operator: replace DIMM")
    assert node.run("--mode", "epilog") == 0
    assert node.updates() == []
    assert not (node.state / "drained").exists()
    node.smi.write_text(_gpu_csv(ecc={2: 2}))
    assert node.run("--mode", "epilog") == 0  # drained already: the operator's reason stays
    assert node.updates() == []


def test_epilog_exits_1_only_when_it_cannot_drain(node: Node) -> None:
    node.smi.write_text(_gpu_csv(ecc={2: 2}))
    node.scontrol.write_text(node.scontrol.read_text() + "if sys.argv[1] == 'update': sys.exit(1)\n")
    assert node.run("--mode", "epilog") == 1  # Slurm's own "Epilog error" drain is the fallback
    node.config.write_text("{not json")
    assert node.run("--mode", "epilog") == 0  # a check that cannot run never drains the cluster


def test_prolog_fails_the_job_start_after_draining(node: Node) -> None:
    node.smi.write_text(_gpu_csv(temps={3: 89}))
    assert node.run("--mode", "prolog") == 1  # Slurm requeues the job and keeps our reason
    assert node.updates() == [_drain("gpucluster: gpu3 89C >= 87C")]
    assert node.tool_calls("dcgmi") == []  # no diagnostic before a job
    node.smi.write_text(_gpu_csv())
    assert node.run("--mode", "prolog") == 0


def test_epilog_reads_kernel_xids_since_the_last_read_and_keeps_them_drained(node: Node) -> None:
    node.kernel.write_text(
        "Oct 02 10:41:07 compute01 kernel: NVRM: Xid (PCI:0000:1c:00): 79, pid=0, GPU has fallen off\n"
    )
    assert node.run("--mode", "epilog") == 0
    assert node.updates() == [_drain("gpucluster: gpu3 xid 79")]
    (first,) = node.tool_calls("journalctl")
    assert first[-1] == "--boot"  # the first read: since boot
    node.kernel.write_text("")
    node.set_state("IDLE+DRAIN", "gpucluster: gpu3 xid 79")
    stamp = (node.state / "xid-since").read_text().strip()  # written by the first read
    assert node.run("--mode", "epilog") == 0
    assert node.tool_calls("journalctl")[-1][-2:] == ["--since", "@" + stamp]
    assert node.updates() == [_drain("gpucluster: gpu3 xid 79")]  # an XID is an event: an operator resumes


def test_periodic_check_reads_no_kernel_log_and_runs_no_diag(node: Node) -> None:
    assert node.run() == 0
    assert node.tool_calls("journalctl") == [] and node.tool_calls("dcgmi") == []


def test_dcgm_diag_failure_drains_naming_test_and_gpu(node: Node) -> None:
    node.diag.write_text((DATA / "acceptance" / "dcgm_diag_r3_h100_memory_fail.json").read_text())
    assert node.run("--mode", "epilog") == 0
    assert node.updates() == [_drain("gpucluster: dcgm memory fail gpu5")]


def test_dcgm_diag_without_answer_drains_and_missing_dcgmi_is_skipped(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = json.loads(node.config.read_text())
    node.config.write_text(json.dumps({**cfg, "dcgm": {"level": 1, "timeout_s": 1}}))
    node.dcgmi.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(5)\n")
    assert node.run("--mode", "epilog") == 0
    assert node.updates() == [_drain("gpucluster: dcgm diag r1 no answer in 1s")]
    node.calls.unlink()
    node.set_state("IDLE", None)
    assert node.run("--mode", "epilog", "--dcgmi", str(node.dir / "absent")) == 0
    assert "note: dcgmi missing: dcgm diag not run" in capsys.readouterr().out


def test_lab_config_reads_the_recorded_gpu_file_when_present(tmp_path: Path, plan: dict[str, Any]) -> None:
    recorded = tmp_path / "recorded.csv"
    node = Node(tmp_path, {**plan["health"], "lab": True, "recorded": {"nvidia_smi_output": str(recorded)}})
    argv = ["--config", str(node.config), "--node", NODE, "--scontrol", str(node.scontrol), "--mode", "epilog"]
    argv += [
        "--nvidia-smi",
        str(tmp_path / "absent"),
        "--state-dir",
        str(node.state),
        "--journalctl",
        str(node.journalctl),
    ]
    argv += ["--dcgmi", str(tmp_path / "absent"), "--ib-sysfs", str(tmp_path / "absent")]
    assert hc.main(argv) == 0 and node.scontrol_calls() == []  # no file: the lab's default is healthy
    recorded.write_text(_gpu_csv(ecc={2: 2}))
    assert hc.main(argv) == 0
    assert node.updates() == [_drain(DBE)]


def test_parse_recorded_dcgm_diag_outputs() -> None:
    assert hc.parse_dcgm_diag((DATA / "acceptance" / "dcgm_diag_v3_real_pass.txt").read_text()) == []
    assert hc.parse_dcgm_diag((DATA / "acceptance" / "dcgm_diag_r3_h100_memory_fail.json").read_text()) == [
        "dcgm memory fail gpu5"
    ]


def test_an_xid_drain_keeps_its_reason_when_another_problem_follows() -> None:
    xid = "gpucluster: gpu3 xid 79"
    assert hc.decide(["gpu2 dbe ecc 2"], "IDLE+DRAIN", xid, REASON_PREFIX) == (None, None)
    assert hc.decide([], "IDLE+DRAIN", xid, REASON_PREFIX) == (None, None)
    assert hc.decide(["gpu2 dbe ecc 2"], "IDLE+DRAIN", "gpucluster: gpu3 89C >= 87C", REASON_PREFIX) == (
        "drain",
        "gpucluster: gpu2 dbe ecc 2",
    )


def test_report_shows_the_hooks_and_the_diagnostic(plan: dict[str, Any]) -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

    section = next(s for s in report_sections(plan) if s["title"] == "Node health check")
    rows = {r[0]: r[1] for r in section["rows"]}
    assert rows["Epilog"] == "/usr/local/sbin/gpucluster-epilog (gpus, xid, dcgm)"
    assert rows["Prolog"] == "off"
    assert rows["dcgmi diag (epilog)"] == "-r 1, at most 120 s"


# ---------------------------------------------------------------- GPU bring-up (compute/bringup.py)


def test_bringup_thresholds_come_from_the_catalog_and_the_plan(plan: dict[str, Any]) -> None:
    gpu = plan["health"]["gpu"]
    assert gpu["fabric_state"] is True and plan["gpu"]["model"]["nvswitch"] is True  # h100_sxm: HGX board
    assert gpu["nvlink_links"] == plan["gpu"]["model"]["nvlink_links"] == 18
    # tier4 on Debian 12 (kernel 6.1, a current driver's open modules): DMA-BUF, nothing to load
    assert plan["health"]["gpudirect_module"] is None and plan["health"]["gpudirect_open_modules"] is True


def test_parse_recorded_fabric_states() -> None:
    healthy = hc.parse_smi_q(SMI_Q_HEALTHY.read_text())
    assert healthy == [{"gpu": "00000000:DB:00.0", "state": "Completed", "status": "Success"}]
    assert hc.parse_smi_q(SMI_Q_FAILED.read_text()) == [{"gpu": "#0", "state": "In Progress", "status": "N/A"}]
    assert hc.check_fabric_state(healthy) == ([], [])


def test_recorded_healthy_hgx_node_passes(node: Node) -> None:
    assert node.run() == 0
    assert node.updates() == []


def test_recorded_failed_fabric_drains(node: Node) -> None:
    node.smi_q.write_text(SMI_Q_FAILED.read_text())
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: gpu0 fabric In Progress")]
    node.set_state("IDLE+DRAIN", "gpucluster: gpu0 fabric In Progress")
    node.smi_q.write_text(SMI_Q_HEALTHY.read_text())  # Fabric Manager finished: the check resumes its drain
    assert node.run() == 0
    assert node.updates()[-1] == RESUME


def test_no_fabric_section_is_a_note_not_a_drain(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    node.smi_q.write_text("GPU 00000000:DB:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n")
    assert node.run() == 0
    assert "no Fabric section" in capsys.readouterr().out


def test_short_nvlink_count_drains(node: Node) -> None:
    node.nvlink.write_text(_nvlink_status(inactive={3: [5]}))
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: gpu3 nvlink 17/18")]
    node.nvlink.write_text(_nvlink_status(count=7))
    assert hc.check_nvlinks(18, hc.parse_nvlink_status(node.nvlink.read_text()), 8) == ["nvlink 7/8 gpus listed"]


def test_missing_gpudirect_module_drains(tmp_path: Path, plan: dict[str, Any]) -> None:
    # a plan with DOCA-OFED declared: nvidia_peermem, checked in /sys/module
    cfg = {**plan["health"], "gpudirect_module": "nvidia_peermem", "gpudirect_open_modules": False}
    node = Node(tmp_path, cfg)
    assert node.run() == 0
    (node.sys_module / "nvidia_peermem").rmdir()
    assert node.run() == 1
    assert node.updates() == [_drain("gpucluster: nvidia_peermem not loaded")]


def test_dmabuf_needs_the_open_driver_flavour(node: Node) -> None:
    assert hc.check_open_modules(str(DATA / "nvidia-driver" / "proc-version-open-570.txt")) is None
    node.driver_version.write_text((DATA / "nvidia-driver" / "proc-version-proprietary-535.txt").read_text())
    assert node.run() == 1
    assert node.updates() == [
        _drain("gpucluster: GPUDirect RDMA by DMA-BUF: the loaded NVIDIA driver is not the open kernel modules flavour")
    ]
    node.driver_version.unlink()  # no driver loaded
    assert "no NVIDIA driver loaded" in (hc.check_open_modules(str(node.driver_version)) or "")


def test_no_gpudirect_checks_nothing(tmp_path: Path, plan: dict[str, Any]) -> None:
    node = Node(tmp_path, {**plan["health"], "gpudirect_module": None, "gpudirect_open_modules": False})
    node.driver_version.unlink()
    assert node.run() == 0


def test_pcie_model_reads_no_fabric_state(tmp_path: Path) -> None:
    site, groups = load_inventory("tier2")
    node_vars = {**site["gpucluster_node"], "gpu_model": "l40s"}
    node_vars.pop("gpu_temp_limits", None)
    pcie = cluster_plan({**site, "gpucluster_node": node_vars}, groups)
    assert pcie["health"]["gpu"]["fabric_state"] is False and pcie["health"]["gpu"]["nvlink_links"] is None
    assert not pcie["gpu"]["bringup"]["fabric_manager"]["required"]
    assert all(f["src"] != "nvidia-fabricmanager.conf.j2" for f in files_by_host(pcie)[NODE])


def test_prolog_checks_the_fabric_before_a_job(node: Node) -> None:
    node.smi_q.write_text(SMI_Q_FAILED.read_text())
    assert node.run("--mode", "prolog") == 1  # the job is requeued, the node drained
    assert node.updates() == [_drain("gpucluster: gpu0 fabric In Progress")]


# ---------------------------------------------------------------- the Kubernetes path: cordon and taint


@pytest.fixture(scope="module")
def k8s_plan() -> dict[str, Any]:
    return cluster_plan(*load_inventory("tier4-k8s"))


class K8sNode(Node):
    """A node on the Kubernetes path: a fake kubectl that logs its calls and prints node.json."""

    def __init__(self, tmp_path: Path, cfg: dict[str, Any]) -> None:
        super().__init__(tmp_path, cfg)
        self.node_json = tmp_path / "node.json"
        self.set_k8s(False, [], None)
        self.kubectl = self._tool("kubectl", self.node_json)

    def set_k8s(self, cordoned: bool, taints: list[str], reason: str | None) -> None:
        doc = {
            "metadata": {"name": NODE, "annotations": {health.K8S_REASON_ANNOTATION: reason} if reason else {}},
            "spec": {"unschedulable": cordoned, "taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
        }
        self.node_json.write_text(json.dumps(doc))

    def run(self, *extra: str) -> int:
        return super().run("--kubectl", str(self.kubectl), *extra)

    def writes(self) -> list[list[str]]:
        return [c[2:] for c in self.tool_calls("kubectl") if c[2] != "get"]


@pytest.fixture
def k8s_node(tmp_path: Path, k8s_plan: dict[str, Any]) -> K8sNode:
    return K8sNode(tmp_path, k8s_plan["health"])


def test_k8s_config_uses_kubectl_with_the_plans_kubeconfig(k8s_plan: dict[str, Any]) -> None:
    cfg = k8s_plan["health"]
    assert cfg["scheduler"] == {
        "kind": "kubernetes",
        "kubectl": health.KUBECTL,
        "kubeconfig": health.NODE_KUBECONFIG,
        "taint": health.K8S_TAINT,
        "reason_annotation": health.K8S_REASON_ANNOTATION,
        "dry_run": False,
    }
    assert not cfg["modes"]["epilog"]["enabled"] and not cfg["modes"]["prolog"]["enabled"]  # Slurm's hooks
    assert cfg["interval_s"] == slurm_settings.HEALTH_CHECK_INTERVAL_S


def test_k8s_failed_fabric_cordons_and_taints(k8s_node: K8sNode) -> None:
    k8s_node.smi_q.write_text(SMI_Q_FAILED.read_text())
    assert k8s_node.run() == 1
    reason = "gpucluster: gpu0 fabric In Progress"
    assert k8s_node.writes() == [
        ["cordon", NODE],
        ["taint", "nodes", NODE, f"{health.K8S_TAINT}=health:NoSchedule", "--overwrite"],
        ["annotate", "node", NODE, f"{health.K8S_REASON_ANNOTATION}={reason}", "--overwrite"],
    ]
    assert k8s_node.tool_calls("kubectl")[0][:2] == ["--kubeconfig", health.NODE_KUBECONFIG]
    assert k8s_node.scontrol_calls() == []


def test_k8s_healthy_node_uncordons_only_its_own_cordon(k8s_node: K8sNode) -> None:
    k8s_node.set_k8s(True, [health.K8S_TAINT], "gpucluster: gpu0 fabric In Progress")
    assert k8s_node.run() == 0
    assert k8s_node.writes() == [
        ["uncordon", NODE],
        ["taint", "nodes", NODE, f"{health.K8S_TAINT}:NoSchedule-"],
        ["annotate", "node", NODE, f"{health.K8S_REASON_ANNOTATION}-"],
    ]
    (k8s_node.dir / "op").mkdir()
    operator = K8sNode(k8s_node.dir / "op", json.loads(k8s_node.config.read_text()))
    operator.set_k8s(True, [], None)  # an operator's cordon: never undone by the check
    assert operator.run() == 0 and operator.writes() == []
    assert hc.parse_k8s_node(operator.node_json.read_text(), health.K8S_TAINT, "x") == ("DRAIN", "cordoned")


def test_k8s_lab_calls_no_api(tmp_path: Path) -> None:
    site, groups = load_inventory("tier4-k8s")
    cfg = cluster_plan({**site, "gpucluster_lab": {"enabled": True}}, groups)["health"]
    assert cfg["scheduler"]["dry_run"] is True
    lab = K8sNode(tmp_path, cfg)
    lab.smi_q.write_text(SMI_Q_FAILED.read_text())
    assert lab.run() == 1
    assert lab.tool_calls("kubectl") == []  # printed ("would run"), never run
