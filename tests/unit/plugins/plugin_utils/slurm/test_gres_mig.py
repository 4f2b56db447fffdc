"""MIG nodes' gres.conf: the node writes MultipleFiles= lines from its driver, checked against the plan.

Why on the node and not AutoDetect=nvml: compute/mig.py GRES_MIG_REASON. The program is the slurm role's
files/gpucluster-mig-gres (run by slurmd's drop-in before every start). Its inputs here:
- ``nvidia-smi -q``: the recorded output of a real H100 (tests/data/nvidia-smi/h100-580-q.txt) for the
  parser; a GPU's "Minor Number" line per GPU for the 8-GPU layouts;
- ``nvidia-smi mig -lci`` and /proc/driver/nvidia-caps/mig-minors: no MIG output was recorded on hardware;
  the rows below follow the formats the NVIDIA MIG User Guide prints ("Getting Started with MIG",
  "Device Nodes and Capabilities": ``gpu0/gi0/access 3``, ``gpu0/gi0/ci0/access 4`` ... 9 minors per GPU
  instance, 15 GPU instances per GPU after ``config 1`` and ``monitor 2``), with instance IDs chosen here.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import mig
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

PROGRAM = ROOT / "roles" / "slurm" / "files" / "gpucluster-mig-gres"
Q_H100 = ROOT / "tests" / "data" / "nvidia-smi" / "h100-580-q.txt"


def _program() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("gpucluster_mig_gres", str(PROGRAM))
    spec = importlib.util.spec_from_loader("gpucluster_mig_gres", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


prog = _program()


def mig_minors(gpus: int = 8) -> str:
    """/proc/driver/nvidia-caps/mig-minors as the driver lists it (the MIG User Guide's rule, see above)."""
    lines = ["config 1", "monitor 2"]
    for g in range(gpus):
        for gi in range(15):
            base = 3 + g * 135 + gi * 9
            lines.append(f"gpu{g}/gi{gi}/access {base}")
            lines += [f"gpu{g}/gi{gi}/ci{ci}/access {base + 1 + ci}" for ci in range(8)]
    return "\n".join(lines) + "\n"


def lci(rows: list[tuple[int, int, str, int]]) -> str:
    """``nvidia-smi mig -lci`` for (GPU, GI ID, profile, CI ID) rows, in the MIG User Guide's layout."""
    out = [
        "+--------------------------------------------------------------------+",
        "| Compute instances:                                                 |",
        "| GPU     GPU       Name             Profile   Instance   Placement  |",
        "|       Instance                       ID        ID       Start:Size |",
        "|         ID                                                         |",
        "|====================================================================|",
    ]
    for gpu, gi, profile, ci in rows:
        out.append(f"|   {gpu}      {gi}       MIG {profile:<12}     0         {ci}          0:1     |")
        out.append("+--------------------------------------------------------------------+")
    return "\n".join(out) + "\n"


def query(gpus: int = 8) -> str:
    """``nvidia-smi -q``'s "Minor Number" lines, GPU i at minor i (as on an HGX board)."""
    return "".join(f"GPU 00000000:{i:02X}:00.0\n    Minor Number                          : {i}\n" for i in range(gpus))


@pytest.fixture(scope="module")
def mig_plan() -> dict[str, Any]:
    return cluster_plan(*load_inventory("examples/tier2-mig"))


def _driver_rows(config: dict[str, Any]) -> list[tuple[int, int, str, int]]:
    """Each planned MIG device as the driver might number it: GPU instances from ID 1 up, CI 0."""
    rows = []
    for index, profiles in sorted(config["gpus"].items(), key=lambda kv: int(kv[0])):
        gi = 1
        for profile, count in sorted(profiles.items()):
            for _n in range(count):
                rows.append((int(index), gi, profile, 0))
                gi += 1
    return rows


def test_the_recorded_h100_query_gives_its_minor_number() -> None:
    assert prog.parse_gpu_minors(Q_H100.read_text()) == [0]


def test_parsers_read_the_guides_formats() -> None:
    rows = prog.parse_lci(lci([(0, 1, "3g.40gb", 0), (1, 13, "1g.10gb", 0)]))
    assert rows == [
        {"gpu": 0, "gi": 1, "profile": "3g.40gb", "ci": 0},
        {"gpu": 1, "gi": 13, "profile": "1g.10gb", "ci": 0},
    ]
    minors = prog.parse_minors(mig_minors(2))
    assert minors[(0, 0, None)] == 3 and minors[(0, 0, 0)] == 4 and minors[(0, 1, None)] == 12
    assert minors[(1, 1, 0)] == 3 + 135 + 9 + 1
    assert len(minors) == 2 * 15 * 9  # config and monitor are no instance's


def test_the_mig_example_plans_each_nodes_devices_and_includes_their_lines(mig_plan: dict[str, Any]) -> None:
    gres = mig_plan["slurm"]["gres_mig"]
    assert gres["hosts"] == ["compute01", "compute02"]
    assert mig_plan["slurm"]["gres_conf_lines"] == [f"Include {mig.GRES_MIG_CONF}"]
    assert "nvidia-caps" in gres["reason"] and "contrib" in gres["reason"]
    one = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert gres["nodes"]["compute01"] == {
        "node": "compute01",
        "whole_type": "h100",
        "gpus": {str(i): one for i in range(8)},
    }
    assert gres["nodes"]["compute02"]["gpus"] == {str(i): {"1g.10gb": 7} for i in range(4)}
    # the plan's per-node counts are slurm.conf's Gres of that node
    for node in mig_plan["slurm"]["nodes"]:
        config = gres["nodes"][node["nodes"]]
        counts: dict[str, int] = {}
        for profiles in config["gpus"].values():
            for p, n in profiles.items():
                counts[p] = counts.get(p, 0) + n
        whole = 8 - len(config["gpus"])
        expected = ",".join([f"gpu:{p}:{n}" for p, n in sorted(counts.items())] + [f"gpu:h100:{whole}"] * bool(whole))
        assert node["gres"] == expected


def test_a_plan_without_mig_has_no_mig_part() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    assert plan["slurm"]["gres_mig"] == {
        "hosts": [],
        "program": None,
        "conf": None,
        "config_file": None,
        "nodes": {},
        "reason": None,
    }
    assert not any("Include" in line or "AutoDetect" in line for line in plan["slurm"]["gres_conf_lines"])
    assert not any(f["src"] == "gpucluster-mig-gres" for f in files_by_host(plan)["compute01"])


@pytest.mark.parametrize("host", ["compute01", "compute02"])
def test_the_program_writes_a_line_per_mig_device_and_whole_gpu(mig_plan: dict[str, Any], host: str) -> None:
    config = json.loads(json.dumps(mig_plan["slurm"]["gres_mig"]["nodes"][host]))
    rows = _driver_rows(config)
    lines, problems = prog.gres_lines(
        config, prog.parse_lci(lci(rows)), prog.parse_minors(mig_minors()), list(range(8))
    )
    assert problems == []
    mig_lines = [line for line in lines if "MultipleFiles=" in line]
    assert len(mig_lines) == len(rows)
    for line, (gpu, gi, profile, ci) in zip(mig_lines, rows, strict=True):
        base = 3 + gpu * 135 + gi * 9
        files = f"/dev/nvidia{gpu},/dev/nvidia-caps/nvidia-cap{base},/dev/nvidia-caps/nvidia-cap{base + 1 + ci}"
        assert line == f"NodeName={host} Name=gpu Type={profile} MultipleFiles={files}"
    whole = [line for line in lines if " File=" in line]
    assert whole == [
        f"NodeName={host} Name=gpu Type=h100 File=/dev/nvidia{i}" for i in range(8) if str(i) not in config["gpus"]
    ]


def test_the_program_refuses_a_layout_the_plan_does_not_have(mig_plan: dict[str, Any]) -> None:
    config = json.loads(json.dumps(mig_plan["slurm"]["gres_mig"]["nodes"]["compute01"]))
    rows = _driver_rows(config)
    rows[0] = (rows[0][0], rows[0][1], "7g.80gb", 0)  # GPU 0 was partitioned otherwise (a layout by hand)
    lines, problems = prog.gres_lines(
        config, prog.parse_lci(lci(rows)), prog.parse_minors(mig_minors()), list(range(8))
    )
    assert lines == []
    assert problems == [
        "GPU 0: planned MIG devices {'1g.10gb': 2, '2g.20gb': 1, '3g.40gb': 1}, "
        "the driver has {'1g.10gb': 1, '2g.20gb': 1, '3g.40gb': 1, '7g.80gb': 1}"
    ]
    # MIG not applied at all (gpucluster-mig.service did not run): every GPU is named
    _lines, problems = prog.gres_lines(config, [], prog.parse_minors(mig_minors()), list(range(8)))
    assert len(problems) == 8 and all("the driver has none" in p for p in problems)


def test_the_program_writes_the_file_and_fails_with_the_difference(
    mig_plan: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = mig_plan["slurm"]["gres_mig"]["nodes"]["compute02"]
    (tmp_path / "gres-mig.json").write_text(json.dumps(config))
    (tmp_path / "lci").write_text(lci(_driver_rows(json.loads(json.dumps(config)))))
    (tmp_path / "minors").write_text(mig_minors())
    (tmp_path / "q").write_text(query())
    args = ["--config", str(tmp_path / "gres-mig.json"), "--out", str(tmp_path / "gres-mig.conf")]
    inputs = ["--lci", str(tmp_path / "lci"), "--minors", str(tmp_path / "minors"), "--query", str(tmp_path / "q")]
    assert prog.main(args + inputs) == 0
    text = (tmp_path / "gres-mig.conf").read_text()
    assert text.startswith("# Managed by gpucluster.tiers")
    assert text.count("Type=1g.10gb MultipleFiles=") == 28 and text.count("Type=h100 File=") == 4
    (tmp_path / "lci").write_text(lci([]))
    assert prog.main(args + inputs) == 1
    assert "compute02's MIG devices are not the planned layout" in capsys.readouterr().err
    assert (tmp_path / "gres-mig.conf").read_text() == text  # the last good file stays
    # a node without MIG: a file without lines, no driver read
    (tmp_path / "gres-mig.json").write_text(json.dumps({"node": "compute09", "whole_type": "", "gpus": {}}))
    assert prog.main(args) == 0
    assert (tmp_path / "gres-mig.conf").read_text() == prog.HEADER


def test_the_role_installs_the_program_with_slurmd_s_drop_in(mig_plan: dict[str, Any]) -> None:
    files = {f["src"]: f for f in files_by_host(mig_plan)["compute01"] if f["role"] == "slurm"}
    assert files["gpucluster-mig-gres"]["dest"] == mig_plan["slurm"]["gres_mig"]["program"] == mig.GRES_MIG_PROGRAM
    assert files["gres-mig.json.j2"]["dest"] == mig.GRES_MIG_JSON
    assert not any(f["src"] == "gpucluster-mig-gres" for f in files_by_host(mig_plan)["head01"])
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "roles" / "slurm" / "templates")))
    env.filters["to_nice_json"] = lambda v, sort_keys=True: json.dumps(v, indent=4, sort_keys=sort_keys)
    drop_in = env.get_template("slurmd-mig-gres.conf.j2").render(gpucluster_host_plan=mig_plan)
    assert "After=gpucluster-mig.service" in drop_in
    assert f"ExecStartPre={mig.GRES_MIG_PROGRAM} --config {mig.GRES_MIG_JSON} --out {mig.GRES_MIG_CONF}" in drop_in
    part = env.get_template("gres-mig.json.j2").render(gpucluster_host_plan=mig_plan, inventory_hostname="compute02")
    assert json.loads(part) == mig_plan["slurm"]["gres_mig"]["nodes"]["compute02"]
    # the slurm role writes both itself (a change restarts slurmd under a drain), no NVML plugin package
    tasks = (ROOT / "roles" / "slurm" / "tasks" / "main.yml").read_text()
    assert "'gres-mig.json.j2'" in tasks and "'slurmd-mig-gres.conf.j2'" in tasks
    assert "nvml" not in yaml.safe_dump(yaml.safe_load((ROOT / "roles" / "slurm" / "vars" / "main.yml").read_text()))


PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb"]


@settings(max_examples=60, deadline=None)
@given(
    layout=st.dictionaries(
        st.integers(0, 7), st.lists(st.sampled_from(PROFILES), min_size=1, max_size=7), min_size=1, max_size=8
    ),
    data=st.data(),
)
def test_any_layout_gets_one_line_per_device_and_no_capability_twice(layout: dict[int, list[str]], data: Any) -> None:
    """Whatever GPU instance IDs the driver assigns (distinct per GPU), every planned MIG device gets one
    line with its GPU's file and capability files no other line names, and each other GPU a File= line."""
    gpus = {str(g): dict(sorted(Counter(names).items())) for g, names in layout.items()}
    config = {"node": "n1", "whole_type": "h100", "gpus": gpus}
    rows = []
    for g, names in sorted(layout.items()):
        ids = data.draw(st.lists(st.integers(0, 14), min_size=len(names), max_size=len(names), unique=True))
        rows += [(g, gi, name, data.draw(st.integers(0, 7))) for gi, name in zip(ids, names, strict=True)]
    lines, problems = prog.gres_lines(
        config, prog.parse_lci(lci(rows)), prog.parse_minors(mig_minors()), list(range(8))
    )
    assert problems == []
    mig_lines = [line for line in lines if "MultipleFiles=" in line]
    assert len(mig_lines) == len(rows)
    caps = [f for line in mig_lines for f in line.split("MultipleFiles=")[1].split(",")[1:]]
    assert len(caps) == len(set(caps)) == 2 * len(rows)
    assert Counter(line.split("Type=")[1].split()[0] for line in mig_lines) == Counter(r[2] for r in rows)
    assert [line for line in lines if " File=" in line] == [
        f"NodeName=n1 Name=gpu Type=h100 File=/dev/nvidia{g}" for g in range(8) if g not in layout
    ]
