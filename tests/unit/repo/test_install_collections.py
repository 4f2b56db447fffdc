"""tools/setup/install_collections.py: exactly the declared collections, from one release wheel, once.

A small stand-in for the `ansible` wheel (a zip with ansible_collections/<ns>/<name>/MANIFEST.json)
is placed in the cache, so nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
RELEASE = "12.3.0"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    path = ROOT / "tools" / "setup" / "install_collections.py"
    spec = importlib.util.spec_from_file_location("install_collections", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("install_collections", module)
    spec.loader.exec_module(module)
    return module


def _wheel(cache: Path, collections: dict[str, tuple[str, dict[str, str]]]) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / f"ansible-{RELEASE}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for fqcn, (version, deps) in collections.items():
            ns, name = fqcn.split(".")
            info = {"namespace": ns, "name": name, "version": version, "dependencies": deps}
            zf.writestr(f"ansible_collections/{ns}/{name}/MANIFEST.json", json.dumps({"collection_info": info}))
            zf.writestr(f"ansible_collections/{ns}/{name}/plugins/modules/m.py", "# module\n")
    return wheel


RELEASE_CONTENT = {
    "ansible.posix": ("2.1.0", {}),
    "community.mysql": ("3.16.1", {}),
    "community.general": ("11.4.2", {}),
    "ansible.netcommon": ("8.1.0", {"ansible.utils": ">=6.0.0"}),
}


def _galaxy(path: Path, deps: dict[str, str]) -> Path:
    lines = ["namespace: gpucluster", "name: tiers", "version: 0.1.0", "dependencies:"]
    lines += [f'  {k}: "{v}"' for k, v in deps.items()] or ["  {}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_installs_exactly_the_declared_collections_once(tool: ModuleType, tmp_path: Path) -> None:
    cache, dest = tmp_path / "cache", tmp_path / "dest"
    wheel = _wheel(cache, RELEASE_CONTENT)
    listing = _galaxy(tmp_path / "galaxy.yml", {"ansible.posix": ">=2.0.0,<3.0.0", "community.mysql": ">=3.9.0,<4.0.0"})
    summary = tool.install(listing, dest, release=RELEASE, cache=cache, also=[])
    assert "ansible.posix 2.1.0, community.mysql 3.16.1" in summary and "copied 2" in summary
    installed = sorted(
        p.parent.relative_to(dest).as_posix() for p in dest.glob("ansible_collections/*/*/MANIFEST.json")
    )
    assert installed == ["ansible_collections/ansible/posix", "ansible_collections/community/mysql"]
    assert (dest / "ansible_collections/ansible/posix/plugins/modules/m.py").is_file()
    # a second run reads the installed manifests and never opens the wheel
    wheel.unlink()
    assert "copied" not in tool.install(listing, dest, release=RELEASE, cache=cache, also=[])
    # a dropped declaration is removed from dest
    _galaxy(listing, {"ansible.posix": ">=2.0.0,<3.0.0"})
    summary = tool.install(listing, dest, release=RELEASE, cache=cache, also=[])
    assert "removed undeclared community.mysql" in summary
    assert not (dest / "ansible_collections/community/mysql").exists()


def test_a_requirements_file_skips_local_tarballs(tool: ModuleType, tmp_path: Path) -> None:
    reqs = tmp_path / "requirements.yml"
    reqs.write_text(
        "collections:\n  - name: build/dist/x.tar.gz\n    type: file\n"
        '  - name: community.general\n    version: ">=11.0.0,<12.0.0"\n  - ansible.posix\n'
    )
    assert tool.declared(reqs) == [
        tool.Wanted("ansible.posix", "*"),
        tool.Wanted("community.general", ">=11.0.0,<12.0.0"),
    ]


def test_out_of_range_missing_and_undeclared_dependencies_fail(tool: ModuleType, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _wheel(cache, RELEASE_CONTENT)
    listing = _galaxy(tmp_path / "galaxy.yml", {"ansible.posix": ">=3.0.0,<4.0.0"})
    with pytest.raises(
        tool.SetupError, match=re.escape("ansible.posix 2.1.0 does not meet the declared range '>=3.0.0,<4.0.0'")
    ):
        tool.install(listing, tmp_path / "a", release=RELEASE, cache=cache, also=[])
    _galaxy(listing, {"kubernetes.core": "*"})
    with pytest.raises(tool.SetupError, match=re.escape("kubernetes.core is not in ansible-12.3.0")):
        tool.install(listing, tmp_path / "b", release=RELEASE, cache=cache, also=[])
    _galaxy(listing, {"ansible.netcommon": ">=8.0.0,<9.0.0"})
    with pytest.raises(tool.SetupError, match=re.escape("ansible.netcommon needs ansible.utils: declare it")):
        tool.install(listing, tmp_path / "c", release=RELEASE, cache=cache, also=[])
    lab = tmp_path / "lab.yml"
    lab.write_text('collections:\n  - name: ansible.utils\n    version: ">=5.0.0"\n')
    assert "ansible.netcommon 8.1.0" in tool.install(listing, tmp_path / "d", release=RELEASE, cache=cache, also=[lab])


def test_the_repository_lists_install_from_the_pinned_release(tool: ModuleType) -> None:
    """galaxy.yml's and the lab's collections are what `make setup` put in .collections/."""
    for listing, dest in (("galaxy.yml", "runtime"), ("lab/requirements.yml", "lab")):
        for want in tool.declared(ROOT / listing):
            assert tool.installed_version(ROOT / ".collections" / dest, want), f"{want.fqcn}: run make setup"
