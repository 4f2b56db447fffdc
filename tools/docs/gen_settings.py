#!/usr/bin/env python3
"""Generate docs/settings.md, the reference of every computed setting, from the engine.

    python tools/docs/gen_settings.py --output docs/settings.md     # make docs
    python tools/docs/gen_settings.py --check docs/settings.md      # exit 1 when it is stale

Everything in the page comes from the code, so it cannot drift from it
(tests/unit/repo/test_docs.py compares the committed page with this output):

- which engine functions compute each part of plan.json: read from the source of
  ``cluster_plan`` (plugins/plugin_utils/plan/assembly.py) with ``ast``, following its helpers
  and its stages (the functions of the site model it calls in the domain packages);
- every setting of the plan report with how it is reached (formula and inputs) and its
  value in the four reference tiers: ``cluster_plan`` run on inventories/tier1..tier4,
  ``report_sections(plan)`` (plugins/plugin_utils/report/sections.py, rendered from the plan, not in it);
- the sources behind the numbers: each engine module's docstring.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import read_inventory  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan  # noqa: E402
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections  # noqa: E402

PLUGINS = "ansible_collections.gpucluster.tiers.plugins"
PLAN_PY = ROOT / "plugins" / "plugin_utils" / "plan" / "assembly.py"
TIERS = ("tier1", "tier2", "tier3", "tier4")
#: modules that only read and check the inventory: every part of the plan goes through them
INPUT_CHECKS = ("inventory", "site", "errors")
#: engine module as plan.py names it -> its import path (filled by _engine_names)
ENGINE_MODULES: dict[str, str] = {
    "report": f"{PLUGINS}.plugin_utils.report.sections",
}


# ---------------------------------------------------------------- plan.json provenance


def _engine_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """Engine modules imported by plan.py, and names imported from them (name -> module.name)."""
    modules: set[str] = set()
    names: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or not node.module or not node.module.startswith(PLUGINS + "."):
            continue
        module = node.module
        if hasattr(importlib.import_module(module), "__path__"):  # from <package> import <module>
            modules |= {a.asname or a.name for a in node.names}
            ENGINE_MODULES.update({a.asname or a.name: f"{module}.{a.name}" for a in node.names})
        else:  # from <package>.<module> import <name>
            mod = module.rsplit(".", 1)[1]
            if mod == "plan":  # storage/plan.py, fabric/plan.py, ...: named with their package
                mod = ".".join(module.rsplit(".", 2)[1:])
            ENGINE_MODULES[mod] = module
            names.update({a.asname or a.name: f"{mod}.{a.name}" for a in node.names})
    return modules, names


#: module path -> (its functions, the engine modules and names it imports), parsed once
_PARSED: dict[str, tuple[dict[str, ast.FunctionDef], set[str], dict[str, str]]] = {}


def _parsed(module_path: str) -> tuple[dict[str, ast.FunctionDef], set[str], dict[str, str]]:
    if module_path not in _PARSED:
        tree = ast.parse(inspect.getsource(importlib.import_module(module_path)))
        modules, imported = _engine_names(tree)
        _PARSED[module_path] = ({f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}, modules, imported)
    return _PARSED[module_path]


def _is_stage(fn: ast.FunctionDef) -> bool:
    """A stage of cluster_plan in its domain package: a function of the site model (its first parameter a
    ``Site``) or of a plan module (storage/plan.py, storage/lustre_plan.py, ...); the page names the engine functions it
    calls too, as those cluster_plan calls itself."""
    args = [*fn.args.posonlyargs, *fn.args.args]
    return bool(args) and args[0].annotation is not None and ast.unparse(args[0].annotation) == "Site"


def _stage_calls(qualified: str, seen: frozenset[str]) -> list[str]:
    """The engine calls in the stage ``qualified`` (module.function) and in its module's private helpers."""
    mod, _, func = qualified.rpartition(".")
    if mod not in ENGINE_MODULES or qualified in seen:
        return []
    helpers, modules, imported = _parsed(ENGINE_MODULES[mod])
    if func not in helpers or not (_is_stage(helpers[func]) or mod.endswith("plan")):
        return []
    seen = seen | {qualified}

    def walk(node: ast.AST, inner: frozenset[str]) -> list[str]:
        found: list[str] = []
        for n in ast.walk(node):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            name = None
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
                name = f"{f.value.id}.{f.attr}"
            elif isinstance(f, ast.Name) and f.id in imported:
                name = imported[f.id]
            elif isinstance(f, ast.Name) and f.id in helpers and f.id.startswith("_") and f.id not in inner:
                found += walk(helpers[f.id], inner | {f.id})
            elif isinstance(f, ast.Name) and f.id in helpers and not f.id.startswith("_"):
                name = f"{mod}.{f.id}"
            if name:
                found += [name, *_stage_calls(name, seen)]
        return found

    return walk(helpers[func], frozenset())


def plan_provenance() -> dict[str, list[str]]:
    """plan.json key -> the engine functions (module.function) that compute it."""
    tree = ast.parse(PLAN_PY.read_text())
    modules, imported = _engine_names(tree)
    helpers = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    main = helpers["cluster_plan"]
    local_values: dict[str, ast.AST] = {}
    for stmt in main.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                # ``pw, limit = _power(...)``: each name of a tuple target comes from the same call
                for name in t.elts if isinstance(t, ast.Tuple) else [t]:
                    if isinstance(name, ast.Name) and stmt.value is not None:
                        local_values[name.id] = stmt.value

    def engine_call(node: ast.AST) -> bool:
        """A direct call of an engine function that is no stage (a stage's result is an input, as a
        helper's was: ``fab`` in ``"gpu": gpu_plan(..., fab, ...)`` is not followed)."""
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name):  # a function imported from an engine module
            return func.id in imported and not _stage_calls(imported[func.id], frozenset())
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules:
            return not _stage_calls(f"{func.value.id}.{func.attr}", frozenset())
        return False

    plan_call = next(
        s.value
        for s in main.body
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == "Plan"
    )
    sections = {k.arg for k in plan_call.keywords}
    # the sections settled before the address check (system.check_addresses): the others' inputs, followed
    checked = next(
        i for i, s in enumerate(main.body) if isinstance(s, ast.Expr) and "check_addresses" in ast.unparse(s)
    )
    early = {
        name.id
        for s in main.body[:checked]
        if isinstance(s, ast.Assign)
        for t in s.targets
        for name in ast.walk(t)
        if isinstance(name, ast.Name)
    }

    def calls(node: ast.AST, seen: frozenset[str], top: bool = False) -> list[str]:
        """Engine calls in ``node`` and in the plan.py helpers it calls. At the top (a plan key's
        own expression) a local variable set by a direct engine call counts too
        (``addresses`` -> addresses.address_plan); other locals are inputs, not followed: a section an
        earlier stage computed (``cluster``), and the sections handed to a stage (``_needs``)."""
        found: list[str] = []
        handed = {
            id(name)
            for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_needs"
            for name in ast.walk(n)
        }
        for n in ast.walk(node):
            if (
                top
                and isinstance(n, ast.Name)
                and id(n) not in handed
                and n.id not in sections - early
                and n.id in local_values
                and engine_call(local_values[n.id])
            ):
                found += calls(local_values[n.id], seen)
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
                    found += [f"{f.value.id}.{f.attr}", *_stage_calls(f"{f.value.id}.{f.attr}", frozenset())]
                elif isinstance(f, ast.Name) and f.id in imported:
                    found += [imported[f.id], *_stage_calls(imported[f.id], frozenset())]
                elif isinstance(f, ast.Name) and f.id in helpers and f.id not in seen and f.id != "cluster_plan":
                    found += calls(helpers[f.id], seen | {f.id})
        return [f for f in found if f.split(".")[0] not in INPUT_CHECKS]

    out: dict[str, list[str]] = {}
    for keyword in plan_call.keywords:
        value: ast.AST = keyword.value
        if isinstance(value, ast.Name) and value.id in local_values:  # power=power  ->  power = site_power_plan(...)
            value = local_values[value.id]
        out[str(keyword.arg)] = calls(value, frozenset(), top=True)
    for stmt in main.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript):
            node = stmt.targets[0]
            while isinstance(node.value, ast.Subscript):
                node = node.value
            if isinstance(node.value, ast.Name) and node.value.id == "plan":
                key = ast.literal_eval(node.slice)
                out.setdefault(key, [])
                out[key] += calls(stmt.value, frozenset(), top=True)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def _first_line(qualified: str) -> str:
    mod, _, func = qualified.rpartition(".")
    obj = getattr(importlib.import_module(ENGINE_MODULES[mod]), func, None)
    doc = inspect.getdoc(obj) if obj is not None else None
    return (doc or "").strip().split("\n\n")[0].replace("\n", " ")


# ---------------------------------------------------------------- the page


def _cell(text: Any) -> str:
    return str(text).replace("\n", " ").replace("|", "\\|").replace("\\\\|", "\\|").strip()


def generate() -> str:
    plans = {tier: cluster_plan(*read_inventory(ROOT / "inventories" / tier)) for tier in TIERS}
    lines = [
        "# Settings reference",
        "",
        "<!-- Generated by tools/docs/gen_settings.py (make docs) from the planning engine. Do not edit:",
        "     tests/unit/repo/test_docs.py fails when this page and the engine disagree. -->",
        "",
        "Every setting the engine computes, how it is reached and its value in the four reference",
        "tiers (`inventories/tier1..tier4`). `make plan` writes the same rows, for your inventory,",
        "into `build/plan/<name>/report.md`; `plan.json` holds every value. The tiers and their",
        "corrections: [tiers.md](tiers.md); the inventory fields: [inventory.md](inventory.md).",
        "",
        "## Where plan.json comes from",
        "",
        "Each top-level key of `plan.json` and the engine functions (`plugins/plugin_utils/<package>/<module>.py`)",
        "that compute it, read from `cluster_plan`'s source.",
        "",
        "Every input first goes through `inventory.load_site` (presence, type and range of each",
        "inventory field; a bad value names the field and stops the plan).",
        "",
        "| key | computed by |",
        "|---|---|",
    ]
    provenance = plan_provenance()
    for key in plans["tier4"]:
        funcs = ", ".join(f"`{f}`" for f in provenance.get(key, []))
        lines.append(f"| `{key}` | {funcs or 'assembled in `plan.cluster_plan` from the inventory'} |")
    lines += ["", "The engine functions named above:", ""]
    for func in sorted({f for funcs in provenance.values() for f in funcs}):
        doc = _first_line(func)
        lines.append(f"- `{func}`" + (f": {doc}" if doc else ""))
    lines.append("")

    # report sections in report order; one tier's own section goes after its predecessor there
    titles: list[str] = []
    for plan in plans.values():
        previous = None
        for section in report_sections(plan):
            if section["title"] not in titles:
                titles.insert(titles.index(previous) + 1 if previous else 0, section["title"])
            previous = section["title"]
    header = "| setting | how | " + " | ".join(TIERS) + " |"
    rule = "|---|---|" + "---|" * len(TIERS)
    for title in titles:
        sections = {t: next((s for s in report_sections(p) if s["title"] == title), None) for t, p in plans.items()}
        present = [t for t, s in sections.items() if s]
        lines += [f"## {title}", ""]
        if len(present) < len(TIERS):
            lines += [f"In {', '.join(present)} only.", ""]
        settings: list[str] = []
        for s in sections.values():
            settings += [r[0] for r in s["rows"] if r[0] not in settings] if s else []
        lines += [header, rule]
        for name in settings:
            rows = {t: next((r for r in s["rows"] if r[0] == name), None) if s else None for t, s in sections.items()}
            hows = list(dict.fromkeys(r[2] for r in rows.values() if r and r[2]))
            if len(hows) > 1:
                how = "; ".join(f"{t}: {r[2]}" for t, r in rows.items() if r and r[2])
            else:
                how = hows[0] if hows else ""
            values = [_cell(row[1]) if (row := rows[t]) else "—" for t in TIERS]
            lines.append(f"| {_cell(name)} | {_cell(how)} | " + " | ".join(values) + " |")
        intros = list(dict.fromkeys(s["intro"] for s in sections.values() if s and s["intro"]))
        if intros:
            lines.append("")
            lines += [f"- {_cell(i)}" for i in intros]
        lines.append("")

    lines += [
        "## Sources",
        "",
        "Each engine module's own account of its formulas and sources (its docstring); the",
        "bracketed tags such as [S2] or [L1] and the topics (§1.2) are entries of [sources.md](sources.md).",
        "",
    ]
    mods = sorted({f.rpartition(".")[0] for funcs in provenance.values() for f in funcs} | {"report"})
    for mod in mods:
        doc = inspect.getdoc(importlib.import_module(ENGINE_MODULES[mod])) or ""
        lines += [f"### `{mod}`", "", doc.strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--output", help="write the page here")
    group.add_argument("--check", help="exit 1 when this file differs from the generated page")
    args = parser.parse_args(argv)
    text = generate()
    if args.output:
        Path(args.output).write_text(text)
        return 0
    if Path(args.check).read_text() != text:
        print(f"{args.check} is stale: run make docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
