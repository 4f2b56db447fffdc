"""Parsers of what the audit reads on a host (plugins/module_utils/audit_probe.py).

nvidia-smi --query-gpu rows and ibstat/nvlink samples in tests/data/audit are synthetic, written in the
tools' documented formats (nvidia-smi(1) --query-gpu with csv,noheader,nounits; ``nvidia-smi nvlink -s``;
infiniband-diags ibstat); the scontrol sample is the recorded one of tests/data/slurm."""

from __future__ import annotations

import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import audit_probe

DATA = ROOT / "tests" / "data"


def test_gpu_applied_rows() -> None:
    text = (
        "0, 00000000:19:00.0, NVIDIA H100 80GB HBM3, 700.00, Enabled, Disabled, 550.54.15, 96.00.89.00.01\n"
        "1, 00000000:3B:00.0, NVIDIA H100 80GB HBM3, 500.00, Disabled, [N/A], 550.54.15, 96.00.89.00.01\n"
    )
    gpus = audit_probe.parse_gpu_applied(text)
    assert gpus[0] == {
        "index": 0,
        "pci_bus_id": "00000000:19:00.0",
        "name": "NVIDIA H100 80GB HBM3",
        "power_limit_w": 700,
        "persistence": True,
        "mig": False,
        "driver_version": "550.54.15",
        "vbios_version": "96.00.89.00.01",
    }
    assert (gpus[1]["power_limit_w"], gpus[1]["persistence"], gpus[1]["mig"]) == (500, False, None)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0, 00000000:19:00.0, H100, 700\n", "expected 8 fields"),
        ("x, 00000000:19:00.0, H100, 700, Enabled, Disabled, 550, 96\n", "GPU row"),
        ("0, 00000000:19:00.0, H100, 700, Maybe, Disabled, 550, 96\n", "not Enabled/Disabled"),
    ],
)
def test_gpu_applied_refuses_other_output(text: str, match: str) -> None:
    with pytest.raises(audit_probe.ProbeParseError, match=match):
        audit_probe.parse_gpu_applied(text)


def test_nvlink_status_counts_active_links() -> None:
    links = audit_probe.parse_nvlink_status((DATA / "audit" / "nvidia-smi-nvlink-s.txt").read_text())
    assert links == {0: {"links": 4, "active": 3}, 1: {"links": 4, "active": 4}}


def test_ibstat_ports() -> None:
    ports = audit_probe.parse_ibstat((DATA / "audit" / "ibstat.txt").read_text())
    assert [(p["ca"], p["port"], p["state"], p["rate_gbps"], p["firmware"]) for p in ports] == [
        ("mlx5_0", 1, "Active", 400.0, "28.39.1002"),
        ("mlx5_1", 1, "Down", 10.0, "28.39.1002"),
    ]
    assert ports[0]["port_guid"] == "0xa088c20300d1e2f0"
    assert ports[1]["physical_state"] == "Polling"


def test_fabricmanager_version() -> None:
    assert audit_probe.parse_fabricmanager_version("Fabric Manager version is : 550.54.15\n") == "550.54.15"
    assert audit_probe.parse_fabricmanager_version("usage: nv-fabricmanager [options]") is None


def test_scontrol_nodes_recorded() -> None:
    text = (DATA / "slurm" / "scontrol-show-node-d-oneliner-registered.txt").read_text()
    nodes = audit_probe.parse_scontrol_nodes(text)
    assert sorted(nodes) == [f"compute0{i}" for i in range(1, 9)]
    assert nodes["compute01"] == {
        "gres": "gpu:h100:8",
        "features": "h100,infiniband,su01,dlc",
        "state": "IDLE",
        "reason": None,
    }
    assert nodes["compute02"]["state"] == "IDLE+DRAIN"
    assert nodes["compute02"]["reason"] == "operator: replace DIMM"


def test_srun_env_one_task_per_node_keyed_by_its_node() -> None:
    """srun --label pads the task number to the widest (" 3: "); srun's own messages carry no label."""
    lines = ["srun: job 4242 queued and waiting for resources", "srun: job 4242 has been allocated resources"]
    for task in range(12):
        lines.append(f"{task:>2}: SLURMD_NODENAME=compute{task + 1:02d}")
        lines.append(f"{task:>2}: NCCL_DEBUG=WARN")
    lines += [
        " 4: NCCL_IB_HCA==mlx5_0:1,mlx5_1:1",
        " 4: NCCL_VERSION=2.21.5",  # a container image's label, not an NCCL setting
        " 4: SLURM_JOB_ID=4242",
    ]
    env = audit_probe.parse_srun_env("\n".join(lines) + "\n")
    assert sorted(env) == [f"compute{i:02d}" for i in range(1, 13)]
    assert env["compute05"] == {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}
    assert env["compute12"] == {"NCCL_DEBUG": "WARN"}


def test_srun_env_environment_file_first_then_the_task_environment_wins() -> None:
    """JOB_ENV_SCRIPT prints /etc/environment's NCCL_* lines (quotes, ``export``) before the task's own."""
    text = (
        '0: NCCL_P2P_DISABLE="1"\n'
        "0: export NCCL_SOCKET_IFNAME='=eth9'\n"
        "0: NCCL_SOCKET_IFNAME==eno1\n"
        "0: SLURMD_NODENAME=dgx01\n"
        "0: BASH_FUNC_module%%=() {  eval `/usr/bin/modulecmd bash $*`\n"
        "0: }\n"
    )
    assert audit_probe.parse_srun_env(text) == {"dgx01": {"NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eno1"}}
    assert audit_probe.parse_srun_env("srun: error: Unable to allocate resources: Requested nodes are busy\n") == {}


def test_srun_env_without_the_node_name_is_refused() -> None:
    with pytest.raises(audit_probe.ProbeParseError, match="task 3 printed no SLURMD_NODENAME"):
        audit_probe.parse_srun_env("3: NCCL_DEBUG=INFO\n")


def test_srun_arguments_are_bounded_and_read_only() -> None:
    argv = audit_probe.job_env_argv("compute[01-04]", 30)
    assert argv[:7] == [
        "--label",
        "--immediate=30",
        "--time=1",
        "--export=NONE",
        "--ntasks-per-node=1",
        "--nodelist=compute[01-04]",
        "--job-name=gpucluster-audit",
    ]
    assert argv[7:9] == ["/bin/sh", "-lc"] and "/etc/environment" in argv[9] and argv[9].endswith("exit 0")


@pytest.mark.parametrize(
    ("name", "want"),
    [
        # doc.beegfs.io, "Striping": a directory (BeeGFS 8 "entry info --retro --verbose", BeeGFS 7's format)
        ("beegfs-getentryinfo-dir.txt", {"entry_type": "directory", "pattern": "RAID0", "chunksize": 1 << 20,
                                         "numtargets": 4}),
        # doc.beegfs.io 7.4.5, "Deep inspection": a file, "desired: 2; actual: 2", lower-case unit
        ("beegfs-getentryinfo-file.txt", {"entry_type": "file", "pattern": "RAID0", "chunksize": 512 << 10,
                                          "numtargets": 2}),
    ],
)  # fmt: skip
def test_beegfs_entryinfo_recorded(name: str, want: dict[str, object]) -> None:
    assert audit_probe.parse_beegfs_entryinfo((DATA / "audit" / name).read_text()) == want


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("Entry type: directory\n", "no stripe pattern"),
        ("+ Chunksize: lots\n+ Number of storage targets: desired: 4\n", "Chunksize 'lots'"),
        ("+ Chunksize: 1M\n+ Number of storage targets: four\n", "no desired target count"),
    ],
)
def test_beegfs_entryinfo_refuses_other_output(text: str, match: str) -> None:
    with pytest.raises(audit_probe.ProbeParseError, match=match):
        audit_probe.parse_beegfs_entryinfo(text)


def test_srun_env_recorded_in_the_lab() -> None:
    """tests/data/audit/srun-label-env-dgx01.txt: ``srun --label --export=NONE ... /bin/sh -lc env`` on the tier1
    lab (Slurm 22.05.8), with ``export NCCL_P2P_DISABLE=1`` in /etc/profile.d: the login shell's profile
    reaches the task; the caller's environment does not (--export=NONE: no HOME, no SHELL from the audit)."""
    text = (DATA / "audit" / "srun-label-env-dgx01.txt").read_text()
    assert audit_probe.parse_srun_env(text) == {"dgx01": {"NCCL_P2P_DISABLE": "1"}}


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"node[0-9]{1,4}", fullmatch=True),
        st.dictionaries(
            st.from_regex(r"NCCL_[A-Z_]{1,12}", fullmatch=True), st.from_regex(r"[=^a-z0-9_:,.]{0,20}", fullmatch=True)
        ),
        max_size=12,
    )
)
def test_srun_env_reads_back_what_each_task_printed(nodes: dict[str, dict[str, str]]) -> None:
    """Any nodes' NCCL_* variables, printed one task per node with srun's padded labels, parse back."""
    width = len(str(max(len(nodes) - 1, 0)))
    lines = []
    for task, (node, env) in enumerate(nodes.items()):
        lines.append(f"{task:>{width}}: SLURMD_NODENAME={node}")
        lines += [f"{task:>{width}}: {k}={v}" for k, v in env.items()]
    want = {node: {k: v for k, v in env.items() if k not in audit_probe.NOT_SETTINGS} for node, env in nodes.items()}
    assert audit_probe.parse_srun_env("\n".join(lines)) == want
