"""The collection builds into a small tarball that works once installed elsewhere.

Built with ansible-galaxy into a temporary folder, installed into a clean collections
path, and used from there with neither this repository's ansible.cfg nor its in-place
collections/ link: ansible-doc finds the roles and filters, and playbooks run the
filters and the plan play of the installed copy. Also: ee-requirements.yml,
collections/requirements.yml, execution-environment.yml and meta/runtime.yml agree with
galaxy.yml and ansible-core; the collection ships its LICENSE and declares its Python and
system requirements where ansible-builder (and so AWX) reads them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import ansible
import pytest
import yaml
from conftest import ROOT
from packaging.requirements import Requirement

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_conf_text

#: one pytest-xdist worker runs this module: its module fixture (built once) is costly
pytestmark = pytest.mark.xdist_group("collection_build")

BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
TARBALL = f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"
MAX_TARBALL_BYTES = 1_500_000  # ~850 kB with the reference inventories; a stray .venv or build/ blows past it


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("collection")
    cfg = base / "ansible.cfg"
    cfg.write_text("[defaults]\n")  # stock settings: not the repository's ansible.cfg
    coll = base / "collections"
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(cfg),
        "ANSIBLE_COLLECTIONS_PATH": str(coll),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_HOME": str(base / "home"),
    }
    dist = base / "dist"
    run = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(dist), str(ROOT)],
        cwd=base, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    tarball = dist / TARBALL
    # --no-deps: offline; community.mysql (galaxy.yml dependencies) is only needed by roles/slurm's tasks
    run = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(coll), str(tarball)],
        cwd=base, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return {"base": base, "tarball": tarball, "path": coll / "ansible_collections" / "gpucluster" / "tiers", "env": env}


def _run(installed: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=installed["base"], env=installed["env"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_tarball_is_small_and_holds_only_the_collection(installed: dict) -> None:
    tarball: Path = installed["tarball"]
    assert tarball.stat().st_size < MAX_TARBALL_BYTES
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    tops = {n.split("/")[0] for n in names}
    assert {"plugins", "roles", "playbooks", "meta", "MANIFEST.json", "FILES.json", "README.md"} <= tops
    assert "inventories" in tops  # the reference inventories: README's quick start plans them
    for banned in (".venv", ".lab", "build", "collections", "tests", "molecule", "lab", "ci", ".git", ".ansible"):
        assert banned not in tops, banned
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".tar.gz"))]
    manifest = json.loads((installed["path"] / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == GALAXY["version"]


def test_ansible_doc_finds_roles_and_filters_in_the_installed_copy(installed: dict) -> None:
    where = str(installed["path"])
    run = _run(installed, "ansible-doc", "-t", "role", "gpucluster.tiers.compute")
    assert run.returncode == 0, run.stderr
    assert "ENTRY POINT:" in run.stdout and where in run.stdout
    run = _run(installed, "ansible-doc", "-t", "inventory", "gpucluster.tiers.tiers")  # -i tier3
    assert run.returncode == 0 and where in run.stdout, run.stderr
    for name in ("nccl_conf", "cluster_plan", "fabric_dot", "power_svg", "markdown_html"):
        run = _run(installed, "ansible-doc", "-t", "filter", f"gpucluster.tiers.{name}")
        assert run.returncode == 0, (name, run.stderr)
        assert where in run.stdout, name


def test_a_playbook_uses_the_installed_filters(installed: dict) -> None:
    play = installed["base"] / "use.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Use gpucluster.tiers from the installed collection",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Plan tier1",
                            "ansible.builtin.set_fact": {
                                "plan": "{{ site | gpucluster.tiers.cluster_plan(groups) }}",
                            },
                            "vars": {
                                "names": "{{ query('ansible.builtin.varnames', '^gpucluster_') }}",
                                "site": "{{ dict(names | zip(query('ansible.builtin.vars', *names))) }}",
                            },
                        },
                        {
                            "name": "Check the plan and a question filter",
                            "ansible.builtin.assert": {
                                "that": [
                                    "plan.cluster.name == 'tier1'",
                                    "plan.cluster.gpus_total == 8",
                                    "(nccl_args | gpucluster.tiers.nccl_conf).NCCL_IB_HCA == '=mlx5_0:1'",
                                    "'dgx01' in (plan | gpucluster.tiers.fabric_dot)",
                                ]
                            },
                            "vars": {
                                "nccl_args": {
                                    "fabric_type": "infiniband",
                                    "topology": "single_switch",
                                    "compute_hcas": ["mlx5_0"],
                                    "socket_ifname": "eno1",
                                    "nodes": 2,
                                }
                            },
                        },
                    ],
                }
            ],
            sort_keys=False,
        )
    )
    run = _run(installed, "ansible-playbook", "-i", str(ROOT / "inventories" / "tier1"), str(play))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "failed=0" in run.stdout


def test_the_installed_plan_playbook_runs(installed: dict) -> None:
    out = installed["base"] / "plan"
    run = _run(
        installed, "ansible-playbook", "-i", str(ROOT / "inventories" / "tier2"), "gpucluster.tiers.plan",
        "-e", f"gpucluster_plan_root={out}",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    plan = json.loads((out / "tier2" / "plan.json").read_text())
    assert plan["cluster"]["compute_nodes"] == 2
    for name in ("report.md", "report.html", "fabric.dot", "power.svg"):
        assert (out / "tier2" / name).is_file(), name
    nccl = (out / "tier2" / "hosts" / "compute01" / "etc" / "nccl.conf").read_text()
    assert nccl == nccl_conf_text(plan["nccl"]["conf"])  # rendered from the keys plan.json holds


def test_requirements_and_execution_environment_agree_with_galaxy_yml() -> None:
    reqs = yaml.safe_load((ROOT / "ee-requirements.yml").read_text())["collections"]
    local = [r for r in reqs if r.get("type") == "file"]
    assert [r["name"] for r in local] == [f"build/dist/{TARBALL}"]  # what `make collection` writes
    ranges = {r["name"]: r["version"] for r in reqs if "type" not in r}
    assert ranges == GALAXY["dependencies"]
    # AWX project sync installs collections/requirements.yml: the same collections and ranges
    sync = yaml.safe_load((ROOT / "collections" / "requirements.yml").read_text())["collections"]
    assert {r["name"]: r["version"] for r in sync} == GALAXY["dependencies"]
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    assert ee["version"] == 3
    deps = ee["dependencies"]
    assert deps["galaxy"] == "ee-requirements.yml" and (ROOT / deps["galaxy"]).is_file()
    # the collection's own requirements come from its installed copy (meta/execution-environment.yml)
    assert "python" not in deps and "system" not in deps
    assert deps["ansible_core"]["package_pip"] == "ansible-core>=2.19,<2.20"
    (build_file,) = ee["additional_build_files"]
    assert Path(f"build/dist/{TARBALL}").match(build_file["src"]) and build_file["dest"] == "build/dist"


def _requirements() -> list[Requirement]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [Requirement(line.split("#")[0]) for line in lines if line.split("#")[0].strip()]


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level modules the plugins import that are neither the standard library nor ansible -> files."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in {"ansible", "ansible_collections", "__future__"}:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_requirements_txt_declares_every_third_party_import_with_a_lower_bound() -> None:
    reqs = _requirements()
    declared = {r.name.lower() for r in reqs}
    dists = importlib.metadata.packages_distributions()  # import name -> distributions installed here
    core = {Requirement(r).name.lower() for r in importlib.metadata.requires("ansible-core") or []}
    imports = _third_party_imports()
    assert {"jsonschema", "markdown_it", "yaml"} <= set(imports)  # the scan sees the known imports
    assert "netaddr" not in imports  # the address plan uses the standard library's ipaddress
    for module, files in imports.items():
        names = {d.lower() for d in dists.get(module, [])}
        assert names, f"{module} (imported by {sorted(files)}) is not installed in the toolchain"
        assert names & (declared | core), (
            f"{module} (imported by {sorted(files)}): add its package {sorted(names)} to requirements.txt"
        )
    for req in reqs:  # lower bounds only, met by the toolchain the tests run with
        assert req.specifier and all(s.operator == ">=" for s in req.specifier), str(req)
        assert importlib.metadata.version(req.name) in req.specifier, str(req)
    unused = declared - {d.lower() for m in imports for d in dists.get(m, [])}
    assert not unused, f"in requirements.txt but imported by no plugin: {sorted(unused)}"


def test_the_collection_ships_its_license_and_requirements(installed: dict) -> None:
    with tarfile.open(installed["tarball"]) as tar:
        names = set(tar.getnames())
    assert {"LICENSE", "requirements.txt", "bindep.txt", "meta/execution-environment.yml"} <= names
    assert GALAXY["license"] == ["Apache-2.0"]
    text = (installed["path"] / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    meta = yaml.safe_load((installed["path"] / "meta" / "execution-environment.yml").read_text())
    assert meta == {"version": 1, "dependencies": {"python": "requirements.txt", "system": "bindep.txt"}}


def test_ansible_builder_introspect_lists_the_requirements_of_the_installed_collection(installed: dict) -> None:
    """What an execution environment (ansible-builder, AWX) installs for the collection."""
    run = _run(installed, "ansible-builder", "introspect", str(installed["path"].parents[2]))
    assert run.returncode == 0, run.stdout + run.stderr
    found = yaml.safe_load(run.stdout.split("---", 1)[1])
    python = [line.split("#")[0].strip() for line in found["python"]]
    assert python == [str(r) for r in _requirements()]
    assert all(line.endswith("# from collection gpucluster.tiers") for line in found["python"] + found["system"])
    system = {line.split()[0] for line in found["system"]}
    assert {"graphviz", "openssh-client", "openssh-clients"} <= system


def test_requires_ansible_matches_the_toolchain() -> None:
    """The toolchain's ansible-core is the newest line requires_ansible claims; the older claimed lines are
    the ones tests/compat/ pins (make compat runs the unit tests and every reference plan on each)."""
    spec = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert spec == ">=2.18.0,<2.20.0"
    major_minor = tuple(int(x) for x in ansible.__version__.split(".")[:2])
    assert major_minor == (2, 19)
    pinned = sorted(p.name for p in (ROOT / "tests" / "compat").glob("ansible-core-*.txt"))
    assert pinned == ["ansible-core-2.18.txt"], pinned
