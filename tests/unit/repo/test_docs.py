"""The docs stay true: docs/settings.md is exactly what the engine generates (make docs),
and the relative links of the user docs and the README point at files that exist."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import ROOT

DOCS = ("docs/guide.md", "docs/tiers.md", "docs/runbook.md", "docs/settings.md", "tools/ci/runner/README.md")


def _gen_settings():
    spec = importlib.util.spec_from_file_location("gen_settings", ROOT / "tools" / "docs" / "gen_settings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_md_is_generated_from_the_engine() -> None:
    generated = _gen_settings().generate()
    committed = (ROOT / "docs" / "settings.md").read_text()
    assert committed == generated, "docs/settings.md is stale: run `make docs` and commit it"


def test_settings_md_covers_every_report_setting_and_plan_key() -> None:
    gen = _gen_settings()
    text = gen.generate()
    plan = gen.cluster_plan(*gen.read_inventory(gen.ROOT / "inventories" / "tier4"))
    for key in plan:
        assert f"| `{key}` |" in text, key
    for section in gen.report_sections(plan):
        assert f"## {section['title']}" in text
        for row in section["rows"]:
            assert f"| {gen._cell(row[0])} |" in text, row[0]


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc: str) -> None:
    path = ROOT / doc
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        assert (path.parent / target).exists(), f"{doc}: broken link {target}"
