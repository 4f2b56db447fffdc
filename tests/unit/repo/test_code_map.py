"""README's map of the code ("How it is built") matches the tree, and the engine's split holds:
target-side code never imports controller-side code."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

PLUGIN_UTILS = ROOT / "plugins" / "plugin_utils"
MODULE_UTILS = ROOT / "plugins" / "module_utils"


def _section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## How it is built", 1)[1].split("\n## ", 1)[0]


def test_readme_names_every_engine_package_and_module() -> None:
    text = _section()
    packages = sorted(p.name for p in PLUGIN_UTILS.iterdir() if (p / "__init__.py").is_file())
    assert packages
    for package in packages:
        assert f"`{package}/`" in text, f"README's 'How it is built' does not name plugin_utils/{package}/"
    named = set(re.findall(r"^  - `(\w+)/`", text, flags=re.M))
    assert named == set(packages), named ^ set(packages)
    for module in sorted(p.stem for p in MODULE_UTILS.glob("*.py")):
        assert f"`{module}`" in text, f"README's 'How it is built' does not name module_utils/{module}"


def test_paths_in_the_readme_map_exist() -> None:
    for path in re.findall(r"`((?:plugins|playbooks|roles|tests|molecule|lab)/[\w./-]*)`", _section()):
        if "<" not in path and ".." not in path:
            assert (ROOT / path.rstrip("/")).exists(), path


def test_every_package_says_what_it_answers() -> None:
    for init in sorted(PLUGIN_UTILS.glob("*/__init__.py")):
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} has no docstring"
        assert [type(n).__name__ for n in tree.body] == ["Expr"], f"{init.relative_to(ROOT)}: docstring only"


def test_target_side_code_imports_no_controller_code() -> None:
    for path in sorted(MODULE_UTILS.glob("*.py")) + sorted((ROOT / "plugins" / "modules").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert "plugin_utils" not in (node.module or ""), f"{path.relative_to(ROOT)} imports {node.module}"


def test_target_side_code_parses_as_python_3_10() -> None:
    for path in sorted(MODULE_UTILS.glob("*.py")) + sorted((ROOT / "plugins" / "modules").glob("*.py")):
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 10))


def test_the_plan_package_does_not_import_the_report() -> None:
    """The report is rendered from the plan (filter plan_report), never part of computing it."""
    report = "ansible_collections.gpucluster.tiers.plugins.plugin_utils.report"
    found = []
    for path in sorted((PLUGIN_UTILS / "plan").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.name}: {n}" for n in names if n == report or n.startswith(report + ".")]
    assert found == []
