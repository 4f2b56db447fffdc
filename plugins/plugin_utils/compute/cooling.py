"""Cooling: GPU temperature thresholds and direct-liquid-cooling (DLC) alarms.

Coolant flow from heat load and design rise: Q = m c dT, so
flow [L/min] = P [kW] / (c [kJ/(kg K)] x dT [K]) x 60, water c = 4.186 kJ/(kg K) and
~1 kg/L. tiers.md correction: 44.8 kW at a 5 K rise needs ~128 L/min (the article's
60 L/min gives ~10.7 K).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import (
    CoolingSection,
    PowerSection,
    TemperatureSection,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GpuModel
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import (
    PlanError,
    check_choice,
    check_range,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

WATER_KJ_PER_KG_K = 4.186
WATER_KG_PER_L = 1.0

# docs/sources.md §6.1: ASHRAE TC 9.9 liquid-cooling classes, maximum facility supply temperature (C).
# 2021 names (W17..W45) and the 2011 names (W1..W4) they replace.
ASHRAE_SUPPLY_MAX_C = {"W17": 17, "W27": 27, "W32": 32, "W40": 40, "W45": 45, "W1": 17, "W2": 27, "W3": 32, "W4": 45}

WARN_MARGIN_C = 3  # warn 3 C below the Max Operating Temp (docs/sources.md §5.1 suggests -T = Max Operating Temp)


def flow_for(heat_kw: float, delta_t_k: float) -> float:
    """Coolant flow in L/min that carries ``heat_kw`` at a rise of ``delta_t_k``."""
    return heat_kw / (WATER_KJ_PER_KG_K * delta_t_k) * 60.0 / WATER_KG_PER_L


def gpu_temperature_thresholds(gpu: GpuModel, override: Mapping[str, object] | None = None) -> TemperatureSection:
    """GPU temperature warn/critical: critical = Max Operating Temp (where the health check drains).

    docs/sources.md §1.2: H100 SXM 87 C max operating, 89 C slowdown, 92 C shutdown; docs/sources.md §5.1:
    DCGM policy -T = Max Operating Temp. Models without a sourced Max Operating Temp (B200, GB200,
    H100 PCIe, RTX PRO 6000: dossier 1.2 found none) need ``gpucluster_node.gpu_temp_limits``
    (max_operating_c, slowdown_c, shutdown_c, read on the site's nodes with ``nvidia-smi -q -d
    TEMPERATURE``): without it the plan refuses the site, since it would otherwise have no GPU
    temperature drain and no temperature alert (issue 43).
    """
    limits: dict[str, int | None] = {
        "max_operating_c": gpu.temp_max_operating_c,
        "slowdown_c": gpu.temp_slowdown_c,
        "shutdown_c": gpu.temp_shutdown_c,
    }
    source = f"catalog ({gpu.sources.get('thermal', 'dossier 1.2')})"
    if override:
        for key in limits:
            if override.get(key) is not None:
                limits[key] = int(
                    check_range(
                        override[key], f"gpucluster_node.gpu_temp_limits.{key}", 40, 110, integer=True, unit=" C"
                    )
                )
        source = "inventory gpucluster_node.gpu_temp_limits"
    top = limits["max_operating_c"]
    if top is None:
        raise PlanError(
            "gpucluster_node.gpu_temp_limits.max_operating_c",
            None,
            f"the GPU's Max Operating Temp in C (40-110): the catalog has no sourced thermal limits for "
            f"{gpu.key} ({gpu.name}; dossier 1.2), so the health check would not drain a hot GPU and no "
            "temperature alert would fire. Read it on a node: nvidia-smi -q -d TEMPERATURE, 'GPU Max Operating "
            "Temp' (or the T.Limit point: current temperature + 'GPU T.Limit Temp' where the driver prints the "
            "T.Limit form); slowdown_c and shutdown_c likewise",
        )
    for key in ("slowdown_c", "shutdown_c"):
        value = limits[key]
        if value is not None and value < top:
            raise PlanError(
                f"gpucluster_node.gpu_temp_limits.{key}",
                value,
                f"at least max_operating_c ({top} C): the GPU slows down and shuts down above its max operating temp",
            )
    return {
        "max_operating_c": top,
        "slowdown_c": limits["slowdown_c"],
        "shutdown_c": limits["shutdown_c"],
        "warn_c": top - WARN_MARGIN_C,
        "critical_c": top,
        "source": source,
        "notes": [],
    }


def dlc_thresholds(
    *,
    cooling: str,
    heat_load_kw: float,
    delta_t_k: float = 10,
    ashrae_class: str = "W32",
    liquid_fraction: float = 1.0,
    field: str = "gpucluster_facility",
) -> CoolingSection:
    """Coolant flow and the supply/return/dT/flow alarms of one rack's liquid loop."""
    check_choice(cooling, f"{field}.cooling", ("air", "dlc"))
    if cooling == "air":
        return {"cooling": "air", "notes": ["air cooled: no coolant alarms"]}
    heat = check_range(heat_load_kw, "rack heat load (kW)", 0.001, 2000)
    dt = check_range(delta_t_k, f"{field}.coolant_delta_t_k", 1, 30, unit=" K")
    share = check_range(liquid_fraction, f"{field}.liquid_heat_fraction", 0.01, 1)
    check_choice(ashrae_class, f"{field}.ashrae_class", tuple(ASHRAE_SUPPLY_MAX_C))
    supply_max = ASHRAE_SUPPLY_MAX_C[ashrae_class]
    liquid_kw = heat * share
    flow = flow_for(liquid_kw, dt)
    return {
        "cooling": "dlc",
        "ashrae_class": ashrae_class,
        "heat_load_kw": round(heat, 3),
        "liquid_fraction": share,
        "liquid_heat_kw": round(liquid_kw, 3),
        "design_delta_t_k": dt,
        "required_flow_lpm": round(flow, 1),
        # supply: the class maximum is the alarm; warn 2 C before it (CDU practice, docs/sources.md §6.3: +-2 C bands)
        "supply_max_c": supply_max,
        "supply_warn_c": supply_max - 2,
        # return: supply at its maximum plus the design rise, with the same 2 C band
        "return_warn_c": supply_max + dt,
        "return_max_c": supply_max + dt + 2,
        # dT high: flow has dropped or the load rose (1.5x design); dT low: bypass or idle loop (0.5x)
        "delta_t_high_k": round(dt * 1.5, 2),
        "delta_t_low_k": round(dt * 0.5, 2),
        "flow_low_lpm": round(flow * 0.9, 1),
        "flow_critical_lpm": round(flow * 0.8, 1),
        "notes": [
            f"{liquid_kw:.1f} kW at a {dt:g} K rise needs {flow:.1f} L/min "
            f"(Q = P / (c dT), c = {WATER_KJ_PER_KG_K} kJ/(kg K))"
        ],
    }


def site_cooling(site: Site, pw: PowerSection) -> CoolingSection:
    """The DLC loop of the fullest rack, sized for the heat it makes at the APPLIED GPU power limit (``pw``:
    plan.power)."""
    fac = site.facility_model
    return dlc_thresholds(
        cooling=fac.cooling,
        heat_load_kw=pw["rack_kw"],
        delta_t_k=fac.coolant_delta_t_k,
        ashrae_class=fac.ashrae_class,
        liquid_fraction=fac.liquid_heat_fraction,
    )
