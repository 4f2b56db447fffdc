"""The built tarball, installed elsewhere, runs with exactly the collections galaxy.yml declares.

`make integration` (part of `make test`). The collection is built with ansible-galaxy, installed
with --no-deps into a temporary collections path, and used with a stock ansible.cfg and
ANSIBLE_COLLECTIONS_PATH = that path + .collections/runtime (galaxy.yml's dependencies, which
`make setup` installs; tools/setup/install_collections.py), never the repository itself:

- the tarball holds the collection and its reference inventories, not the repository's ansible.cfg or site.yml, and
  ships its LICENSE and its requirements (requirements.txt, bindep.txt, meta/execution-environment.yml),
  which `ansible-builder introspect` on the installed copy lists;
- every FQCN the roles, playbooks and plugins call belongs to ansible.builtin, this collection or
  a collection galaxy.yml declares, and ee-requirements.yml carries the same ranges;
- every task and handler file of the installed roles parses with only the declared collections
  (an undeclared module fails to resolve), and does not without them;
- `ansible-playbook gpucluster.tiers.plan` run from another folder writes build/plan/<name>/ under
  that folder (or gpucluster_plan_dir), and nothing inside the installed collection.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.nccl import nccl_conf_text

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
DEPS_PATH = ROOT / ".collections" / "runtime"
NAME = f"{GALAXY['namespace']}.{GALAXY['name']}"
# repository-only files that must not ship (galaxy.yml build_ignore)
REPO_ONLY = ("ansible.cfg", "site.yml", "tools", "tests", "lab", "molecule", "ci", "mk", "Makefile")
# namespace.collection.plugin where a plugin is named: a task key (module, action), after `|` or
# `is` (filter, test), as lookup()/query()'s first argument, or a whole quoted string in a Python plugin
_NAME = r"([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*"
CALLS = {
    "yaml": re.compile(
        rf"^\s*(?:- )?{_NAME}:|(?:\||\bis|\bis not)\s*{_NAME}|(?:lookup|query)\(\s*['\"]{_NAME}['\"]", re.M
    ),
    "python": re.compile(rf"['\"]{_NAME}['\"]"),  # 'ansible.builtin.template' in an action plugin
}


def _run(cmd: list[str], *, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def _env(base: Path, *paths: Path) -> dict[str, str]:
    cfg = base / "stock.cfg"
    cfg.write_text("[defaults]\n")  # stock settings, not the repository's ansible.cfg
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    return {
        **env,
        "ANSIBLE_CONFIG": str(cfg),
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(str(p) for p in paths),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",  # no collections from a Python package
        "ANSIBLE_HOME": str(base / "home"),
        "ANSIBLE_NOCOLOR": "1",
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not (DEPS_PATH / "ansible_collections").is_dir():
        pytest.fail(f"{DEPS_PATH} is missing: run `make setup` (it installs galaxy.yml's dependencies there)")
    base = tmp_path_factory.mktemp("installed")
    coll = base / "collections"
    env = _env(base, coll, DEPS_PATH)
    run = _run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(base / "dist"), str(ROOT)],
               env=env, cwd=base)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    (tarball,) = (base / "dist").glob("*.tar.gz")
    run = _run([str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(coll), str(tarball)],
               env=env, cwd=base)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    path = coll / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    return {"base": base, "tarball": tarball, "path": path, "env": env, "coll": coll}


def test_the_tarball_ships_the_collection_not_the_repository(installed: dict) -> None:
    with tarfile.open(installed["tarball"]) as tar:
        names = tar.getnames()
    tops = {n.split("/")[0] for n in names}
    assert {"playbooks", "roles", "plugins", "meta", "inventories", "README.md", "MANIFEST.json"} <= tops
    assert {f"inventories/{t}/hosts.yml" for t in ("tier1", "tier2", "tier3", "tier4", "tier4-k8s")} <= set(names)
    assert {"LICENSE", "requirements.txt", "bindep.txt", "meta/execution-environment.yml"} <= set(names)
    assert not tops & set(REPO_ONLY), sorted(tops & set(REPO_ONLY))
    assert not [n for n in names if n.startswith(".")]


def test_ansible_builder_introspect_finds_the_declared_requirements(installed: dict) -> None:
    run = _run([str(BIN / "ansible-builder"), "introspect", str(installed["coll"])], env=installed["env"],
               cwd=installed["base"])  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    found = yaml.safe_load(run.stdout.split("---", 1)[1])
    python = {re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0].lower() for line in found["python"]}
    assert {"jsonschema", "markdown-it-py"} <= python and "netaddr" not in python, found
    assert "graphviz" in {line.split()[0] for line in found["system"]}, found


def _called_collections() -> dict[str, set[str]]:
    """namespace.collection -> the files that call a plugin of it (roles, playbooks, plugins)."""
    found: dict[str, set[str]] = {}
    for folder in ("roles", "playbooks", "plugins"):
        for path in sorted((ROOT / folder).rglob("*")):
            kind = {".yml": "yaml", ".yaml": "yaml", ".j2": "yaml", ".py": "python"}.get(path.suffix)
            if kind is None or "__pycache__" in path.parts or {"plugin_utils", "module_utils"} & set(path.parts):
                continue  # the engine and target-side helpers: file names and dotted field paths, no plugin calls
            for match in CALLS[kind].finditer(path.read_text()):
                collection = next(g for g in match.groups() if g)
                if not collection.startswith("gpucluster_"):  # gpucluster_plan.x.y is a variable path
                    found.setdefault(collection, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_called_collection_is_declared() -> None:
    called = _called_collections()
    declared = set(GALAXY.get("dependencies") or {})
    undeclared = {c: sorted(files) for c, files in called.items() if c not in declared | {"ansible.builtin", NAME}}
    assert not undeclared, f"declare these in galaxy.yml dependencies and ee-requirements.yml: {undeclared}"
    assert "ansible.posix" in called and "community.mysql" in called  # the scan sees the known calls
    unused = declared - set(called)
    assert not unused, f"declared in galaxy.yml but not called: {sorted(unused)}"


def test_ee_requirements_carry_the_same_collections_and_ranges() -> None:
    reqs = yaml.safe_load((ROOT / "ee-requirements.yml").read_text())["collections"]
    ranges = {r["name"]: r["version"] for r in reqs if r.get("type", "galaxy") == "galaxy"}
    assert ranges == GALAXY["dependencies"]
    lab = yaml.safe_load((ROOT / "lab" / "requirements.yml").read_text())["collections"]
    assert not {r["name"] for r in lab} & set(ranges), "a lab collection is also a runtime dependency"


def test_the_installed_dependencies_meet_the_declared_ranges() -> None:
    from ansible.galaxy.dependency_resolution.versioning import meets_requirements

    for fqcn, spec in GALAXY["dependencies"].items():
        manifest = DEPS_PATH / "ansible_collections" / fqcn.replace(".", "/") / "MANIFEST.json"
        version = json.loads(manifest.read_text())["collection_info"]["version"]
        assert meets_requirements(version, spec), (fqcn, version, spec)


def _role_files_playbook(installed: dict) -> Path:
    """One play per task and handler file of the installed roles, imported statically (parsed, not run)."""
    plays = []
    for path in sorted(installed["path"].glob("roles/*/*/*.yml")):
        if path.parent.name not in {"tasks", "handlers"}:
            continue
        plays.append({
            "name": f"Parse {path.relative_to(installed['path'])}",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"name": "Import", "ansible.builtin.import_tasks": str(path)}],
        })  # fmt: skip
    assert len(plays) > 10
    play = installed["base"] / "parse_roles.yml"
    play.write_text(yaml.safe_dump(plays, sort_keys=False))
    return play


def test_every_role_file_parses_with_only_the_declared_collections(installed: dict) -> None:
    play = _role_files_playbook(installed)
    run = _run([str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(play)],
               env=installed["env"], cwd=installed["base"])  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # and the check has teeth: without galaxy.yml's dependencies the same files do not parse
    bare = _env(installed["base"], installed["coll"])
    run = _run([str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(play)],
               env=bare, cwd=installed["base"])  # fmt: skip
    assert run.returncode != 0
    assert any(f"{dep}." in run.stderr for dep in GALAXY["dependencies"]), run.stderr[-2000:]


def _snapshot(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in path.rglob("*")}


def test_the_plan_playbook_by_fqcn_writes_under_the_current_directory(installed: dict) -> None:
    inventory = installed["base"] / "inventory"
    shutil.copytree(ROOT / "inventories" / "tier2", inventory)
    work = installed["base"] / "work"
    work.mkdir()
    before = _snapshot(installed["path"])
    run = _run([str(BIN / "ansible-playbook"), "-i", str(inventory), f"{NAME}.plan"], env=installed["env"], cwd=work)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    out = work / "build" / "plan" / "tier2"
    plan = json.loads((out / "plan.json").read_text())
    assert plan["cluster"]["name"] == "tier2"
    for name in ("plan.sha256", "report.md", "report.html", "fabric.dot", "power.svg"):
        assert (out / name).is_file(), name
    nccl = (out / "hosts" / "compute01" / "etc" / "nccl.conf").read_text()
    assert nccl == nccl_conf_text(plan["nccl"]["conf"])  # rendered from the keys plan.json holds
    assert _snapshot(installed["path"]) == before, "the plan playbook wrote inside the installed collection"
    assert not (installed["coll"] / "ansible_collections" / GALAXY["namespace"] / "build").exists()


def test_gpucluster_plan_dir_puts_the_plan_where_asked(installed: dict) -> None:
    inventory = ROOT / "inventories" / "tier1"
    where = installed["base"] / "elsewhere" / "plan-tier1"
    cmd = [str(BIN / "ansible-playbook"), "-i", str(inventory), f"{NAME}.plan", "-e", f"gpucluster_plan_dir={where}"]
    run = _run(cmd, env=installed["env"], cwd=installed["base"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert json.loads((where / "plan.json").read_text())["cluster"]["name"] == "tier1"
    assert (where / "hosts" / "dgx01").is_dir()
    assert not (installed["base"] / "build").exists()


def test_every_playbook_parses_by_fqcn_from_the_installed_collection(installed: dict) -> None:
    """gpucluster.tiers.<playbook> for each playbooks/*.yml: its imports, templates and roles resolve from the
    installed copy (tasks/, templates/, roles by FQCN), with only the declared collections."""
    names = sorted(p.stem for p in (installed["path"] / "playbooks").glob("*.yml"))
    assert {"site", "plan", "validate", "audit"} <= set(names)
    inventory = installed["path"] / "inventories" / "tier3"
    for name in names:
        run = _run([str(BIN / "ansible-playbook"), "--syntax-check", "-i", str(inventory), f"{NAME}.{name}"],
                   env=installed["env"], cwd=installed["base"])  # fmt: skip
        assert run.returncode == 0, (name, run.stdout[-2000:] + run.stderr[-2000:])
