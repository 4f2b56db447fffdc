"""README.md's quick start, run as written in an empty folder with only the built tarball.

The shell block under README's ``<!-- quick-start -->`` marker is read from README.md itself (so the
two cannot drift) and run by bash (``set -euo pipefail``) in an empty temporary folder that holds the
tarball ansible-galaxy builds from this repository and, in ``./collections``, galaxy.yml's
dependencies (``.collections/runtime``, what the install would otherwise fetch from Galaxy). No
ANSIBLE_* variable of the caller reaches it: the block's own ansible.cfg is the configuration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEPS = ROOT / ".collections" / "runtime" / "ansible_collections"
MARKER = "<!-- quick-start:"


def quick_start_block(readme: str) -> str:
    """The first ```sh block after the quick-start marker."""
    after = readme.split(MARKER, 1)
    assert len(after) == 2, f"README.md has no {MARKER} marker"
    found = re.search(r"```sh\n(.*?)```", after[1], re.S)
    assert found, "no ```sh block after the quick-start marker"
    return found.group(1)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(dist), str(ROOT)],
        cwd=dist, env=_env(dist), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    (built,) = dist.glob("*.tar.gz")
    return built


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    return {**env, "PATH": os.pathsep.join([str(BIN), env.get("PATH", "")]), "ANSIBLE_HOME": str(home / ".ansible"),
            "ANSIBLE_NOCOLOR": "1"}  # fmt: skip


def _empty_folder(base: Path, tarball: Path) -> Path:
    if not DEPS.is_dir():
        pytest.fail(f"{DEPS} is missing: run `make setup` (it installs galaxy.yml's dependencies there)")
    work = base / "site"
    work.mkdir()
    shutil.copy2(tarball, work / tarball.name)
    shutil.copytree(DEPS, work / "collections" / "ansible_collections")  # the declared dependencies only
    return work


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=_env(cwd),
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def test_the_readme_quick_start_gives_plans_from_an_empty_folder(tmp_path: Path, tarball: Path) -> None:
    block = quick_start_block((ROOT / "README.md").read_text())
    assert "gpucluster.tiers.plan" in block and "ansible-galaxy collection install" in block
    work = _empty_folder(tmp_path, tarball)
    run = _bash(block, work)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-3000:]
    installed = work / "collections" / "ansible_collections" / "gpucluster" / "tiers"
    assert (installed / "MANIFEST.json").is_file() and (installed / "inventories" / "tier3" / "hosts.yml").is_file()
    for name, hosts in (("tier3", 4), ("tier1", 1)):  # -i tier3 (the plugin), -i my-site (the copy of tier1)
        plan = json.loads((work / "build" / "plan" / name / "plan.json").read_text())
        assert plan["cluster"]["name"] == name and plan["cluster"]["compute_nodes"] == hosts
        assert (work / "build" / "plan" / name / "report.md").is_file()
    assert (work / "my-site" / "hosts.yml").is_file()
    # the plans were written under the folder, never inside the installed collection
    assert not (installed / "build").exists()


def test_a_tier_by_name_without_the_plugin_says_how_to_enable_it(tmp_path: Path, tarball: Path) -> None:
    work = _empty_folder(tmp_path, tarball)
    block = quick_start_block((ROOT / "README.md").read_text())
    install = next(line for line in block.splitlines() if line.startswith("ansible-galaxy collection install"))
    (work / "ansible.cfg").write_text("[defaults]\ncollections_path = ./collections\n")  # no enable_plugins line
    run = _bash(f"{install}\nansible-playbook gpucluster.tiers.plan -i tier3", work)
    assert run.returncode != 0
    assert "known tiers: tier1, tier2, tier3, tier4, tier4-k8s" in run.stdout, run.stdout[-3000:]
    assert "gpucluster.tiers.tiers, which is not enabled" in run.stdout
    assert "enable_plugins = host_list, script, yaml, auto, ini, toml, gpucluster.tiers.tiers" in run.stdout
    assert not (work / "build").exists()


def test_the_readme_names_the_releases_meta_runtime_requires() -> None:
    """The quick start's ansible-core releases are the ones meta/runtime.yml requires (and make compat tests)."""
    spec = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    found = re.fullmatch(r">=2\.(\d+)\.0,<2\.(\d+)\.0", spec)
    assert found, spec
    low, high = int(found.group(1)), int(found.group(2)) - 1
    named = " or ".join(f"2.{minor}" for minor in range(low, high + 1))
    assert f"ansible-core {named} on Python" in (ROOT / "README.md").read_text().split(MARKER, 1)[0], named
