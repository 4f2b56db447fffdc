"""Sources travel with the code: every source the plugins cite has an entry in docs/sources.md."""

from __future__ import annotations

import re

from conftest import ROOT

SOURCES = (ROOT / "docs" / "sources.md").read_text()
CITED_FILES = sorted(p for p in (ROOT / "plugins").rglob("*") if p.suffix in (".py", ".yml") and p.is_file())


def _cited(pattern: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in CITED_FILES:
        for tag in set(re.findall(pattern, path.read_text())):
            found.setdefault(tag, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_source_id_cited_in_plugins_has_an_entry() -> None:
    cited = _cited(r"\[((?:S|N|T|A|I|L|D|CR|C|R|SL|MP|M|G|V|B|U|F)\d+)\]")
    assert len(cited) >= 20, sorted(cited)  # the catalog alone cites [S1]..[S26]
    missing = {tag: files for tag, files in cited.items() if f"### [{tag}]" not in SOURCES}
    assert not missing, f"cited in plugins/ but not in docs/sources.md: {missing}"


def test_every_topic_cited_in_plugins_is_listed() -> None:
    cited = _cited(r"docs/sources\.md §(\d+(?:\.\d+)?)") | _cited(r"dossier (\d+\.\d+)")
    assert cited
    missing = {sec: files for sec, files in cited.items() if f"| §{sec} |" not in SOURCES}
    assert not missing, f"topics cited in plugins/ but not listed in docs/sources.md: {missing}"


def test_entries_have_title_publisher_link_and_use() -> None:
    entries = re.split(r"^### ", SOURCES, flags=re.M)[1:]
    assert entries
    for entry in entries:
        for field in ("- Title: ", "- Publisher: ", "- Link: ", "- What we take: "):
            assert field in entry, (entry.splitlines()[0], field)
