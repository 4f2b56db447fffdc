"""The report's one shape of a section: a :class:`Section` (title, intro, rows of setting, value, how), built by
one function of the plan per section (report/sections.py ``SECTIONS``, in report order) and rendered by
:func:`render` into what report.md.j2 reads (:class:`SectionView`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.sections import HostFiles
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.text import fmt

#: a row as built: setting, value (any plain value: :func:`report.text.fmt` writes it), how it was reached
Row = list[object]


@dataclass(frozen=True)
class Section:
    """One section of report.md: its title, an optional paragraph before the table, the table's rows."""

    title: str
    rows: Sequence[Sequence[object]]
    intro: str = ""


class SectionView(TypedDict):
    """A section as report.md.j2 reads it: every cell text."""

    title: str
    intro: str
    rows: list[list[str]]


class Summary(TypedDict):
    """The report's opening: the warnings a reader must see first, then the next steps."""

    warnings: list[str]
    next_steps: list[str]


class Report(TypedDict):
    """What report.md.j2 reads beside the plan (filter plan_report): the sections, the summary, and each
    host's role files (host name -> its entries: role, src, dest, mode, ...)."""

    sections: list[SectionView]
    summary: Summary
    files: HostFiles


def render(section: Section) -> SectionView:
    """The section as text: the value column through :func:`report.text.fmt`, the others as they are."""
    return {
        "title": section.title,
        "intro": section.intro,
        "rows": [[fmt(c) if i == 1 else str(c) for i, c in enumerate(r)] for r in section.rows],
    }
