"""DCGM from the plan: health watches, policy thresholds, dcgm-exporter's counters and binding,
and the compute role's GPU software tasks (tasks/gpu_stack.yml).

Option letters follow dossier 5.1/5.2 (NVIDIA/DCGM ``dcgmi/CommandLineParser.cpp``, DCGM 4.6.0).
The role's templates are rendered here with Jinja2 as ansible.builtin.template does
(trim_blocks), so the tests read the files a compute node gets.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROLE_FILES, ROOT, TIERS, cluster_plan, load_inventory, render_role_template

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import dcgm
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.alerts import rules_yaml
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

ROLE = ROOT / "roles" / "compute"
POLICY_UNIT = "/etc/systemd/system/gpucluster-dcgm-policy.service"
COUNTERS = "/etc/dcgm-exporter/gpucluster-counters.csv"
DROP_IN = "/etc/systemd/system/nvidia-dcgm-exporter.service.d/gpucluster.conf"
HOSTENGINE_DROP_IN = "/etc/systemd/system/nvidia-dcgm.service.d/gpucluster.conf"
SOCKET = "/run/nvidia-dcgm/nv-hostengine"
HOST = f"unix://{SOCKET}"


def _render(src: str, plan: dict[str, Any], host: str) -> str:
    return render_role_template("compute", src, plan, host)


def _compute_hosts(plan: dict[str, Any]) -> list[str]:
    return sorted(h for h, host in plan["hosts"].items() if "compute" in host["roles"])


def _plan(tier: str, node: dict[str, Any] | None = None, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    if node:
        site["gpucluster_node"] = {**site["gpucluster_node"], **node}
    if policy:
        site["gpucluster_gpu_policy"] = policy
    return cluster_plan(site, groups)


@pytest.fixture(scope="module", params=TIERS)
def tier_plan(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _plan(request.param)


# --- engine -------------------------------------------------------------------------------


def test_no_policy_only_health_watches(tier_plan: dict[str, Any]) -> None:
    """Reference tiers are H100 SXM (NVLink4): watches p m i t n, and no `dcgmi policy --set`: nothing
    registered for its violations (docs/monitoring.md, "DCGM policy")."""
    d = tier_plan["dcgm"]
    assert d["health_args"] == ["health", "-s", "pmitn"]
    assert d["policy"] is None and "policy_args" not in d
    # every dcgmi command reaches the host engine on its root-only socket (--host unix://<path>)
    assert d["commands"] == [f"/usr/bin/dcgmi health --host {HOST} -s pmitn"]
    assert d["clear_command"] == f"/usr/bin/dcgmi policy --host {HOST} --clear"  # a policy an earlier release set
    assert not any("policy --set" in c for c in d["commands"])


def test_every_condition_of_the_removed_policy_has_a_consumer(tier_plan: dict[str, Any]) -> None:
    consumers = tier_plan["dcgm"]["policy_consumers"]
    assert set(consumers) == {"dbe", "xid", "thermal", "nvlink", "pcie", "power"}
    rules = rules_yaml(tier_plan["monitoring"]["rules"])
    assert "GpuDoubleBitEcc" in consumers["dbe"] and "GpuDoubleBitEcc" in rules
    assert "GpuNvlinkErrors" in consumers["nvlink"] and "GpuNvlinkErrors" in rules
    periodic = tier_plan["health"]["modes"]["periodic"]["checks"]
    assert "gpus" in periodic and "bringup" in periodic  # ECC, temperature; NVLink count
    assert "xid" in tier_plan["health"]["modes"]["epilog"]["checks"]


def test_health_watch_letters_follow_the_dossier() -> None:
    """dossier 5.2: health -s p PCIe, m memory, i infoROM, t thermal and power, n NVLink; 5.1: --clear."""
    assert dict((name, letter) for letter, name in dcgm.HEALTH_WATCHES) == {
        "pcie": "p",
        "memory": "m",
        "inforom": "i",
        "thermal_power": "t",
        "nvlink": "n",
    }
    assert dcgm.POLICY_CLEAR_ARGS == ("policy", "--clear")


def test_model_without_nvlink_has_no_nvlink_watch_or_counter() -> None:
    plan = _plan("tier1", node={"gpu_model": "l40s"})
    d = plan["dcgm"]
    assert d["health_systems"] == "pmit"
    assert not any("NVLINK" in c["field"] for c in d["exporter"]["counters"])
    assert any("no NVLink" in n for n in d["notes"])


def test_exporter_counters_cover_every_dcgm_metric_the_alerts_read(tier_plan: dict[str, Any]) -> None:
    fields = [c["field"] for c in tier_plan["dcgm"]["exporter"]["counters"]]
    assert len(fields) == len(set(fields))
    used = set(re.findall(r"DCGM_FI_\w+", rules_yaml(tier_plan["monitoring"]["rules"])))
    assert {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"} <= used
    assert used <= set(fields)
    assert all(c["type"] in ("gauge", "counter") for c in tier_plan["dcgm"]["exporter"]["counters"])


# --- manifest and templates ---------------------------------------------------------------


def test_files_are_in_the_manifest_of_every_compute_node(tier_plan: dict[str, Any]) -> None:
    for src, dest in (
        ("gpucluster-dcgm-policy.service.j2", POLICY_UNIT),
        ("dcgm-exporter-counters.csv.j2", COUNTERS),
        ("nvidia-dcgm-exporter.conf.j2", DROP_IN),
        ("nvidia-dcgm.conf.j2", HOSTENGINE_DROP_IN),
    ):
        listed = next(f for f in ROLE_FILES["compute"] if f["src"] == src)
        assert (listed["dest"], listed["hosts"], listed.get("task")) == (dest, "compute", None)
    for host, files in files_by_host(tier_plan).items():
        dests = {f["dest"] for f in files}
        is_compute = "compute" in tier_plan["hosts"][host]["roles"]
        assert ({POLICY_UNIT, COUNTERS, DROP_IN, HOSTENGINE_DROP_IN} <= dests) == is_compute, host
        assert is_compute or not ({POLICY_UNIT, COUNTERS, DROP_IN, HOSTENGINE_DROP_IN} & dests), host


def test_policy_unit_runs_the_plans_commands(tier_plan: dict[str, Any]) -> None:
    host = _compute_hosts(tier_plan)[0]
    text = _render("gpucluster-dcgm-policy.service.j2", tier_plan, host)
    lines = text.splitlines()
    assert "After=nvidia-dcgm.service" in lines
    assert "Requires=nvidia-dcgm.service" in lines
    assert "ConditionPathExists=/usr/bin/dcgmi" in lines
    assert "Type=oneshot" in lines and "RemainAfterExit=yes" in lines
    assert [line.split("=", 1)[1] for line in lines if line.startswith("ExecStart=")] == [
        f"-/usr/bin/dcgmi policy --host {HOST} --clear",  # "-": no policy to clear is no failure
        *tier_plan["dcgm"]["commands"],
    ]
    assert f"ExecStart=/usr/bin/dcgmi health --host {HOST} -s pmitn" in lines
    assert not any("policy --set" in line for line in lines)
    # started by the host engine, never on its own at boot where DCGM is absent
    assert "WantedBy=nvidia-dcgm.service" in lines
    assert not any("multi-user.target" in line for line in lines)


def test_counters_file_enables_double_bit_ecc_and_nvlink_errors(tier_plan: dict[str, Any]) -> None:
    text = _render("dcgm-exporter-counters.csv.j2", tier_plan, _compute_hosts(tier_plan)[0])
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(rows) == len(tier_plan["dcgm"]["exporter"]["counters"])
    for row in rows:
        field, kind, help_text = (part.strip() for part in row.split(",", 2))
        assert field.startswith("DCGM_FI_") and kind in ("gauge", "counter") and help_text
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors." in rows
    assert any(r.startswith("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, counter,") for r in rows)


def test_exporter_binds_the_scraped_management_address(tier_plan: dict[str, Any]) -> None:
    port = tier_plan["monitoring"]["dcgm_exporter_port"]
    for host in _compute_hosts(tier_plan):
        text = _render("nvidia-dcgm-exporter.conf.j2", tier_plan, host)
        execs = [line for line in text.splitlines() if line.startswith("ExecStart=")]
        assert execs[0] == "ExecStart="  # clears the package's ExecStart
        address = f"{tier_plan['hosts'][host]['addresses']['management']}:{port}"
        assert execs[1] == (
            f"ExecStart=/usr/bin/dcgm-exporter --collectors {COUNTERS} --address {address}"
            f" --remote-hostengine-info {HOST}"
        )
        assert address in tier_plan["monitoring"]["targets"]["dcgm"]  # what Prometheus scrapes
        lines = text.splitlines()
        # restarted with the host engine it connects to
        assert "Requires=nvidia-dcgm.service" in lines
        assert "After=network-online.target nvidia-dcgm.service" in lines


def test_host_engine_listens_on_a_root_only_socket_and_no_tcp_port(tier_plan: dict[str, Any]) -> None:
    """nv-hostengine --domain-socket: "No TCP listening port is opened when this option is specified"
    (hostengine/src/HostEngineCommandLine.cpp); the folder 0700 (RuntimeDirectory= of a root unit)."""
    h = tier_plan["dcgm"]["hostengine"]
    assert h["socket"] == SOCKET and h["address"] == HOST and h["socket_dir"] == "/run/nvidia-dcgm"
    for host in _compute_hosts(tier_plan):
        lines = _render("nvidia-dcgm.conf.j2", tier_plan, host).splitlines()
        execs = [line for line in lines if line.startswith("ExecStart=")]
        assert execs == [
            "ExecStart=",  # clears the package's ExecStart (which opens TCP 5555)
            f"ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm --domain-socket {SOCKET}",
        ]
        assert "RuntimeDirectory=nvidia-dcgm" in lines
        assert "RuntimeDirectoryMode=0700" in lines
        assert "UMask=0077" in lines
        assert not any(re.search(r"(--port|-p |--bind-interface|-b )", line) for line in execs)
        assert not any(line.startswith(("User=", "Group=", "DynamicUser=")) for line in lines)  # root owns the folder


def test_every_dcgmi_caller_passes_the_socket() -> None:
    """The health watch unit (plan), the health check's epilog and the validate play all pass --host."""
    plan = _plan("tier3")
    assert all(f"--host {HOST}" in c for c in [*plan["dcgm"]["commands"], plan["dcgm"]["clear_command"]])
    assert plan["health"]["dcgm"]["host"] == HOST
    script = (ROLE / "files" / "gpucluster-healthcheck").read_text()
    assert '["--host", cfg["dcgm"]["host"]]' in script
    validate = yaml.safe_load((ROOT / "playbooks" / "validate.yml").read_text())
    run = next(
        t for play in validate for t in play.get("tasks", []) if str(t.get("name", "")).startswith("Run dcgmi diag")
    )
    argv = run["ansible.builtin.command"]["argv"]
    assert argv[argv.index("--host") + 1] == "{{ _validate_plan.dcgm.hostengine.address }}"


def test_role_refuses_a_dcgm_without_unix_socket_addresses() -> None:
    """dcgm-exporter's unix:// address needs DCGM >= 4.5.0 (dcgmConnect_v3): the pin is checked."""
    tasks = _tasks("gpu_software.yml")
    check = next(t for t in tasks if "unix socket" in t["name"])
    (that,) = check["ansible.builtin.assert"]["that"]
    assert "gpucluster_host_plan.dcgm.hostengine.min_dcgm_version" in that
    assert dcgm.MIN_DCGM_VERSION == "4.5.0"
    # the epoch ("1:4.5.2-1") is dropped before the comparison
    assert "regex_replace('^[0-9]+:', '')" in that


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_units_parse_with_systemd(tmp_path: Path) -> None:
    """systemd-analyze verify of the policy unit and of the exporter's and the host engine's drop-ins
    (on stubs of the packages' units): the only complaints allowed are the DCGM binaries this host lacks."""
    plan = _plan("tier3")
    host = _compute_hosts(plan)[0]
    (tmp_path / "gpucluster-dcgm-policy.service").write_text(_render("gpucluster-dcgm-policy.service.j2", plan, host))
    stub = "[Unit]\nDescription=stub\n[Service]\nExecStart={}\n"
    (tmp_path / "nvidia-dcgm.service").write_text(stub.format("/usr/bin/nv-hostengine -n"))
    (tmp_path / "nvidia-dcgm.service.d").mkdir()
    (tmp_path / "nvidia-dcgm.service.d" / "gpucluster.conf").write_text(_render("nvidia-dcgm.conf.j2", plan, host))
    (tmp_path / "nvidia-dcgm-exporter.service").write_text(stub.format("/usr/bin/dcgm-exporter"))
    (tmp_path / "nvidia-dcgm-exporter.service.d").mkdir()
    (tmp_path / "nvidia-dcgm-exporter.service.d" / "gpucluster.conf").write_text(
        _render("nvidia-dcgm-exporter.conf.j2", plan, host)
    )
    run = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            "gpucluster-dcgm-policy.service",
            "nvidia-dcgm-exporter.service",
            "nvidia-dcgm.service",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"},
    )
    missing = re.compile(r"Command /usr/bin/(dcgmi|dcgm-exporter|nv-hostengine) is not executable")
    assert [line for line in run.stderr.splitlines() if line.strip() and not missing.search(line)] == []


# --- role ---------------------------------------------------------------------------------


def _tasks(name: str = "gpu_stack.yml") -> list[dict[str, Any]]:
    return yaml.safe_load((ROLE / "tasks" / name).read_text())


def test_defaults_fetch_nothing() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["compute_gpu_repo"] == []
    for key in (
        "compute_gpu_repo_key",
        "compute_gpu_driver_branch",
        "compute_cuda_toolkit_version",
        "compute_dcgm_version",
        "compute_dcgm_exporter_version",
    ):
        assert defaults[key] == "", key
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    for key, value in defaults.items():
        assert spec[key]["default"] == value, key


def test_install_is_skipped_with_its_reason_when_no_repository_is_set() -> None:
    tasks = _tasks()
    say = next(t for t in tasks if "ansible.builtin.debug" in t)
    assert say["ansible.builtin.debug"]["msg"].startswith(
        "no GPU package source configured (compute_gpu_repo): driver, CUDA and DCGM not installed"
    )
    assert "Fabric Manager" in say["ansible.builtin.debug"]["msg"]  # said too on NVSwitch boards
    assert say["when"] == "compute_gpu_repo | length == 0"
    # the install is one include under one `when`: a host without the repository (the lab) skips one
    # task, not one per task of the install
    (include,) = [t for t in tasks if t.get("ansible.builtin.include_tasks") == "gpu_software.yml"]
    assert include["ansible.builtin.include_tasks"] == "gpu_software.yml"
    assert include["when"] == "compute_gpu_repo | length > 0"
    assert {"compute_gpu_driver", "compute_gpu_fabricmanager", "compute_gpu_toolkit"} <= set(include["vars"])
    modules = [next(k for k in t if "." in k) for t in _tasks("gpu_software.yml")]  # each task's module (FQCN)
    assert "ansible.builtin.deb822_repository" in modules and "ansible.builtin.apt" in modules
    # the repository's key is checked against its pinned fingerprint before the repository is added (issue 37)
    assert modules.index("gpucluster.tiers.apt_signing_key") < modules.index("ansible.builtin.deb822_repository")
    (repo,) = [t for t in _tasks("gpu_software.yml") if "ansible.builtin.deb822_repository" in t]
    assert repo["ansible.builtin.deb822_repository"]["signed_by"] == "{{ compute_gpu_repo_keyring.path }}"
    # nothing outside the include installs a package or adds a source
    outside = [next(k for k in t if k.startswith("ansible.builtin.")) for t in tasks if t is not include]
    assert not {"ansible.builtin.apt", "ansible.builtin.deb822_repository", "ansible.builtin.get_url"} & set(outside)
    included = [p.name for p in sorted((ROLE / "tasks").glob("*.yml")) if "gpu_software.yml" in p.read_text()]
    assert included == ["gpu_stack.yml"]  # included from there only


def test_policy_unit_is_enabled_never_started_by_the_tasks() -> None:
    # enabled with the role's other units in one gpucluster.tiers.host_state call (tasks/main.yml), no state
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    (units,) = [t for t in main if "services" in t.get("gpucluster.tiers.host_state", {})]
    assert (
        "{'name': 'gpucluster-dcgm-policy.service', 'enabled': true}"
        in units["gpucluster.tiers.host_state"]["services"]
    )
    assert "when" not in units
    named = [
        p.name for p in sorted((ROLE / "tasks").glob("*.yml")) if "gpucluster-dcgm-policy.service" in p.read_text()
    ]
    assert named == ["main.yml"]  # no other task starts or restarts it
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    apply = next(h for h in handlers if h["name"] == "Apply the DCGM policy")
    assert apply["when"] == "compute_gpu_repo | length > 0"


def test_services_are_started_only_with_the_repository() -> None:
    started = [
        t for t in _tasks("gpu_software.yml") if t.get("ansible.builtin.systemd_service", {}).get("state") == "started"
    ]
    fabric_manager, start = started  # Fabric Manager first (NVSwitch boards), then the GPU daemons
    assert "fabric_manager.service" in fabric_manager["ansible.builtin.systemd_service"]["name"]
    assert start["loop"] == ["nvidia-persistenced.service", "nvidia-dcgm.service", "nvidia-dcgm-exporter.service"]


def test_exporter_reads_the_clock_event_reasons_and_violation_counters(tier_plan: dict[str, Any]) -> None:
    """Field 112 by its DCGM 4 name (go-dcgm's name table has no DCGM_FI_DEV_CLOCK_THROTTLE_REASONS), the
    thermal and power violation counters the stock file comments out; CSV help texts hold no comma."""
    counters = {c["field"]: c for c in tier_plan["dcgm"]["exporter"]["counters"]}
    assert counters["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]["type"] == "gauge"
    assert counters["DCGM_FI_DEV_THERMAL_VIOLATION"]["type"] == "counter"
    assert counters["DCGM_FI_DEV_POWER_VIOLATION"]["type"] == "counter"
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" not in counters
    assert all("," not in c["help"] for c in counters.values())
    host = _compute_hosts(tier_plan)[0]
    lines = [line for line in _render("dcgm-exporter-counters.csv.j2", tier_plan, host).splitlines() if line]
    rows = [line.split(",") for line in lines if not line.startswith("#")]
    assert all(len(row) == 3 for row in rows)
    assert {r[0]: r[1].strip() for r in rows}["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"] == "gauge"
