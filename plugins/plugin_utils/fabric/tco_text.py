"""The fabric cost comparison as text (fabric/tco.py computes it): the report's rows (report.md, ``tco_rows``)
and the ``fabric_tco`` filter's and ``make tco``'s table (``tco_text``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: The cost lines of a fabric, in the table's order.
LINE_NAMES = ("nics", "switches", "optics", "support", "staff", "power")


def _usd(value: float) -> str:
    return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"


def tco_rows(tco: dict[str, Any]) -> list[list[str]]:
    """The comparison as rows [line, InfiniBand, RoCEv2, IB - RoCE, how] (report.py and `make tco`)."""
    if not tco["applies"]:
        return [["fabric", "none", "none", "$0", tco["reason"]]]
    ib, roce = tco["fabrics"]["infiniband"], tco["fabrics"]["roce"]
    c, inputs = tco["counts"], tco["inputs"]
    years = f"{tco['years']:g} years"
    how = {
        "nics": f"{c['nics']} NICs ({tco['nodes']} nodes x {tco['rails']} rails)",
        "switches": _per_kind(tco, _switches_text),
        "optics": _per_kind(tco, _links_text),
        "support": f"{inputs['support_fraction_per_year']:.0%}/year of the hardware x {years}",
        "staff": f"staff cost per year x {years}",
        "power": f"{_kw(ib['power_kw'])} / {_kw(roce['power_kw'])} kW x 8760 h x {years} "
        f"at ${inputs['power_usd_per_kwh']:.2f}/kWh",
    }
    label = {"nics": "NICs", "switches": "switches", "optics": "optics and cabling", "support": "support",
             "staff": "fabric staff", "power": "switch and optics power"}  # fmt: skip
    rows = [
        [label[k], _usd(ib["lines_usd"][k]), _usd(roce["lines_usd"][k]),
         _usd(ib["lines_usd"][k] - roce["lines_usd"][k]), how[k]]
        for k in LINE_NAMES
    ]  # fmt: skip
    rows.append(
        ["fabric total", _usd(ib["total_usd"]), _usd(roce["total_usd"]), _usd(tco["delta_usd"]), f"over {years}"]
    )
    perf = tco["performance"]
    rng = perf["range"]
    rows.append(
        [
            "RoCE performance",
            _usd(0),
            _usd(perf["lost_usd"]),
            _usd(-perf["lost_usd"]),
            f"at {perf['roce_performance_ratio']:.0%} of InfiniBand: {perf['lost_gpu_hours']:,.0f} GPU-h not "
            f"delivered x ${perf['gpu_hour_usd']:.2f}/GPU-h (at 85%: {_usd(rng['low_ratio']['lost_usd'])}, "
            f"at 95%: {_usd(rng['high_ratio']['lost_usd'])})",
        ]
    )
    rows.append(
        [
            "total with performance",
            _usd(ib["total_usd"]),
            _usd(tco["roce_with_performance_usd"]),
            _usd(ib["total_usd"] - tco["roce_with_performance_usd"]),
            f"cheaper: {'RoCEv2' if tco['cheaper_with_performance'] == 'roce' else 'InfiniBand'}",
        ]
    )
    return rows


def _switches_text(c: Mapping[str, int]) -> str:
    core = f" + {c['cores']} core" if c.get("cores") else ""
    radix = f", {c['switch_radix']}-port" if c.get("switch_radix") else ""
    plural = "" if c["switches"] == 1 else "es"
    return f"{c['switches']} switch{plural} ({c['leaves']} leaf + {c['spines']} spine{core}{radix})"


def _links_text(c: Mapping[str, int]) -> str:
    core = f" + {c['core_links']} core" if c.get("core_links") else ""
    return f"{c['links']} links ({c['host_links']} host + {c['uplinks']} uplinks{core})"


def _per_kind(tco: dict[str, Any], text: Callable[[Mapping[str, int]], str]) -> str:
    """One text when both fabric kinds have the same counts, else "IB: ...; RoCE: ..."."""
    ib = tco["fabrics"]["infiniband"].get("counts") or tco["counts"]
    roce = tco["fabrics"]["roce"].get("counts") or tco["counts"]
    if text(ib) == text(roce):
        return text(ib)
    return f"IB: {text(ib)}; RoCE: {text(roce)}"


def _kw(value: float) -> str:
    return f"{value:,.1f}"


def tco_text(tco: dict[str, Any]) -> str:
    """The comparison as a plain-text table (what `make tco` prints)."""
    header = ["", "InfiniBand", "RoCEv2", "IB - RoCE", "how"]
    rows = [header, *tco_rows(tco)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]

    def line(r: list[str]) -> str:
        cells = [r[0].ljust(widths[0]), *(r[i].rjust(widths[i]) for i in (1, 2, 3)), r[4]]
        return "  ".join(cells).rstrip()

    lines = [f"Fabric cost: {tco['reason']}", *(line(r) for r in rows)]
    if tco["applies"]:
        lines.append(tco["caveat"])
    return "\n".join(lines) + "\n"


__all__ = ["LINE_NAMES", "tco_rows", "tco_text"]
