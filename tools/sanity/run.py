#!/usr/bin/env python3
"""ansible-test sanity on the collection as it ships (make sanity, part of make lint).

    python tools/sanity/run.py [ansible-test sanity arguments, e.g. --test pylint]

ansible-test only runs from a folder named ``ansible_collections/<namespace>/<name>`` and
resolves symlinks, so the in-place link collections/ansible_collections/gpucluster/tiers (which
points back at the repository) does not do. This builds the collection with ansible-galaxy
(galaxy.yml's build_ignore decides what ships), unpacks it into a temporary
``.../ansible_collections/gpucluster/tiers`` together with tests/config.yml and
tests/sanity/ (ansible-test's own inputs), and runs ``ansible-test sanity --local --python 3.11``
there. The repository's tools, lab, molecule scenarios and pytest suites are not in the built
collection and are checked by ruff and pytest instead.

ansible-test bootstraps pip into each test's venv with get-pip.py from ci-files.testing.ansible.com,
which is not reachable from every CI machine; when it is not cached yet, tools/sanity/get_pip.py
(an offline equivalent using ensurepip and the package index) is put in its cache.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import ansible_test
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PYTHON = "3.11"  # the controller's Python (pyproject.toml); tests/config.yml: modules need >= 3.10
SHIPPED_WITH_TESTS = ("tests/config.yml", "tests/sanity")


def pip_bootstrap_version() -> str:
    """The pip version ansible-test bootstraps its venvs with (get_venv_packages in python_requirements.py)."""
    source = (Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
    found = re.search(r"pip='([0-9.]+)'", source)
    if not found:
        raise SystemExit("sanity: cannot find the pip version ansible-test bootstraps (python_requirements.py)")
    return found.group(1)


def ensure_pip_bootstrap() -> None:
    version = pip_bootstrap_version()
    cached = Path.home() / ".ansible" / "test" / "cache" / f"get_pip_{version.replace('.', '_')}.py"
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "tools" / "sanity" / "get_pip.py", cached)


def build_tree(dest_root: Path) -> Path:
    """Unpack the built collection (plus ansible-test's inputs) into dest_root/ansible_collections/<ns>/<name>."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    tree = dest_root / "ansible_collections" / galaxy["namespace"] / galaxy["name"]
    shutil.rmtree(dest_root / "ansible_collections", ignore_errors=True)
    tree.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(
            [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", tmp, str(ROOT)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if run.returncode != 0:
            raise SystemExit(f"sanity: ansible-galaxy collection build failed:\n{run.stdout}{run.stderr}")
        (tarball,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(tarball) as tar:
            tar.extractall(tree, filter="data")
    for rel in SHIPPED_WITH_TESTS:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, tree / rel)
        elif src.is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tree / rel)
    return tree


def main(argv: list[str]) -> int:
    ensure_pip_bootstrap()
    # outside the repository: inside it (build/ is git-ignored) ansible-test would list the tree's
    # files with git and find none
    with tempfile.TemporaryDirectory(prefix="gpucluster-sanity-") as tmp:
        tree = build_tree(Path(tmp))
        cmd = [str(BIN / "ansible-test"), "sanity", "--local", "--python", PYTHON, "--color", "no", *argv]
        print(f"sanity: {' '.join(cmd[1:])} in {tree}", flush=True)
        env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}  # not the repository's ansible.cfg
        return subprocess.run(cmd, cwd=tree, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
