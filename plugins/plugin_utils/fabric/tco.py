"""What the compute fabric costs: InfiniBand and RoCEv2 side by side over N years.

For the site's node count, rails and topology the fabric plan (cabling.expected_cabling) gives the
switches (rail leaves, spines, core switches) and the links; the fabric is priced twice, once with
InfiniBand parts and once with RoCEv2 (Ethernet) parts, whatever fabric the site itself runs. The
site's own fabric kind is priced on the plan's fabric (plan["fabric"]["cabling"]); the other kind on
the same tree sized with that kind's switch radix (catalog.yml ``switches``: an NDR InfiniBand
QM9700 has 64 x 400G ports, a 51.2 Tb/s Spectrum-4 SN5600 128 x 400G), so a large RoCE fabric needs
fewer switches than the InfiniBand one:

    NICs       = nodes x rails x nic_usd
    switches   = (leaves + spines + cores) x switch_usd
    optics     = links x link_usd                      (a link: cable and its two transceivers)
    support    = (NICs + switches + optics) x support_fraction_per_year x years
    staff      = staff_usd_per_year x years            (the fabric specialist's cost)
    power      = (switches x switch_w + links x link_w) x 8760 h x years x power_usd_per_kwh
    total      = NICs + switches + optics + support + staff + power

and RoCE's expected performance (``roce_performance_ratio`` of InfiniBand's training throughput)
becomes GPU-hours the cluster does not deliver:

    lost GPU-hours = GPUs x 8760 h x years x gpu_utilization x (1 - roce_performance_ratio)
    lost $         = lost GPU-hours x gpu_hour_usd (gpucluster_workload.gpu_hour_cost_usd)

Every default below is a LIST-PRICE ESTIMATE with its source: the prices and staff costs come from
the reference article's 64-GPU table (its component lines spread over the tier4 fabric plan's counts:
64 NICs, 10 switches, 128 links), the watts from NVIDIA's published specifications. A site overrides
any of them in the inventory section ``gpucluster_costs`` (docs/inventory.md). With no switched
fabric (tier1: one node, NVLink only) there is nothing to price: the answer says "no fabric".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import cabling
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import Cabling, FabricSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.tco_text import LINE_NAMES, tco_rows, tco_text
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError, check_range, require

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site

FIELD = "gpucluster_costs"
FABRICS = RDMA_FABRICS
HOURS_PER_YEAR = 8760  # 365 x 24

#: The reference article 000 ("InfiniBand vs RoCEv2 - The Real TCO for a 64-GPU Cluster"), docs/sources.md
#: [C1]; the tier4 plan (8 nodes x 8 rails, non-blocking fat_tree, at least 2 spines) has 64 NICs,
#: 10 switches (8 rail leaves + 2 spines) and 128 links (64 host + 64 uplinks), with 64-port InfiniBand
#: and with 128-port Ethernet switches alike.
ARTICLE = "[C1] article 000 (InfiniBand vs RoCEv2 TCO table, 64 GPUs)"

#: Per fabric: (value, source). List-price estimates, not quotes.
PART_DEFAULTS: dict[str, dict[str, tuple[float, str]]] = {
    "infiniband": {
        "nic_usd": (2000.0, f"{ARTICLE}: NICs ~$128,000 for 64 ConnectX-7 IB = $2,000 each"),
        "switch_usd": (
            220000 / 10,
            f"{ARTICLE}: ToR + spine switches ~$220,000 over the tier4 plan's 10 switches = $22,000 each",
        ),
        "link_usd": (
            48000 / 128,
            f"{ARTICLE}: optics and cabling ~$48,000 over the tier4 plan's 128 links = $375 each "
            "(below two 400G transceivers' list price: override it)",
        ),
        "staff_usd_per_year": (
            120000.0,
            f"{ARTICLE}: specialist staff premium ~$360,000 over 3 years = $120,000/year",
        ),
        "switch_w": (
            747.0,
            "[C2] NVIDIA QM9700/QM9790 user manual, Specifications: typical power with passive cables 747 W "
            "(https://docs.nvidia.com/networking/display/QM97X0PUB/Specifications)",
        ),
        "link_w": (
            18.0,
            "[C3] NVIDIA MMS4X00-NS400 400G OSFP transceiver: 9 W typical, two ends per link "
            "(https://docs.nvidia.com/networking/display/mms4x00ns400/overview)",
        ),
    },
    "roce": {
        "nic_usd": (1000.0, f"{ARTICLE}: NICs ~$64,000 for 64 ConnectX-7 Ethernet = $1,000 each"),
        "switch_usd": (
            110000 / 10,
            f"{ARTICLE}: ToR + spine switches ~$110,000 over the tier4 plan's 10 switches = $11,000 each",
        ),
        "link_usd": (
            38000 / 128,
            f"{ARTICLE}: optics and cabling ~$38,000 over the tier4 plan's 128 links = $296.88 each",
        ),
        "staff_usd_per_year": (
            40000.0,
            f"{ARTICLE}: staff ~$120,000 over 3 years = $40,000/year (Ethernet skills a site already has)",
        ),
        "switch_w": (
            747.0,
            "assumed equal to the InfiniBand switch (a 51.2 Tb/s switch: SN5600, 128 x 400G [C6]); "
            "set gpucluster_costs.roce.switch_w from the switch's datasheet",
        ),
        "link_w": (
            18.0,
            "[C3] the same 400G OSFP optics as InfiniBand (MMS4X00-NS400 family: 9 W per end, "
            "https://docs.nvidia.com/networking/display/mms4x00ns400/overview)",
        ),
    },
}

#: Site-wide defaults: (value, source).
SITE_DEFAULTS: dict[str, tuple[float, str]] = {
    "years": (3, f"{ARTICLE}: a 3-year TCO"),
    "power_usd_per_kwh": (0.10, f"{ARTICLE}: network power at $0.10/kWh"),
    "support_fraction_per_year": (0.18, f"{ARTICLE}: annual support 18% of hardware"),
    "roce_performance_ratio": (
        0.90,
        f"{ARTICLE}: properly tuned RoCEv2 (PFC + ECN + DCQCN) delivers 85-95% of InfiniBand; midpoint",
    ),
    "gpu_utilization": (
        1.0,
        f"{ARTICLE}: its GPU-idle arithmetic charges every GPU 24 h a day ($4.00/GPU-h x 64 GPUs = $6,144/day)",
    ),
}

#: The article's stated performance range for tuned RoCE, reported as the penalty's low/high bounds.
ROCE_RATIO_RANGE = (0.85, 0.95)
CAVEAT = (
    "List-price estimates (the reference article's 64-GPU table spread over the tier4 plan's parts, "
    "NVIDIA datasheet watts), not quotes: set gpucluster_costs from your own quotes."
)


@dataclass(frozen=True)
class FabricParts:
    """The parts of one fabric kind's bill: unit prices, watts and staff cost."""

    nic_usd: float
    switch_usd: float
    link_usd: float
    staff_usd_per_year: float
    switch_w: float
    link_w: float


@dataclass(frozen=True)
class Counts:
    """What a fabric plan needs: NICs, switches and links."""

    nics: int
    leaves: int
    spines: int
    host_links: int
    uplinks: int
    cores: int = 0
    core_links: int = 0
    switch_radix: int = 0

    @property
    def switches(self) -> int:
        return self.leaves + self.spines + self.cores

    @property
    def links(self) -> int:
        return self.host_links + self.uplinks + self.core_links


def _number(value: Any, field: str, low: float, high: float | None = None, *, integer: bool = False) -> float:
    return check_range(value, field, low, high, integer=integer)


def parts(kind: str, overrides: object = None) -> FabricParts:
    """One fabric kind's parts: PART_DEFAULTS[kind] overridden by ``gpucluster_costs.<kind>`` (as written)."""
    field = f"{FIELD}.{kind}"
    given = overrides or {}
    if not isinstance(given, dict):
        raise PlanError(field, given, "a mapping of part prices and watts")
    unknown = sorted(set(given) - set(PART_DEFAULTS[kind]))
    require(
        not unknown, f"{field}.{unknown[0] if unknown else ''}", unknown, "one of " + ", ".join(PART_DEFAULTS[kind])
    )
    values = {
        key: _number(given.get(key, default), f"{field}.{key}", 0, 1e9)
        for key, (default, _source) in PART_DEFAULTS[kind].items()
    }
    return FabricParts(**values)


def site_costs(costs: object) -> dict[str, float]:
    """The site-wide inputs (SITE_DEFAULTS overridden by ``gpucluster_costs``, as written), checked."""
    given = costs or {}
    if not isinstance(given, dict):
        raise PlanError(FIELD, given, "a mapping (docs/inventory.md, gpucluster_costs)")
    allowed = set(SITE_DEFAULTS) | set(FABRICS)
    unknown = sorted(set(given) - allowed)
    require(not unknown, f"{FIELD}.{unknown[0] if unknown else ''}", unknown, "one of " + ", ".join(sorted(allowed)))
    bounds = {
        "years": (1, 30, True),
        "power_usd_per_kwh": (0, 10, False),
        "support_fraction_per_year": (0, 1, False),
        "roce_performance_ratio": (0, 1, False),
        "gpu_utilization": (0, 1, False),
    }
    out: dict[str, float] = {}
    for key, (default, _source) in SITE_DEFAULTS.items():
        low, high, integer = bounds[key]
        out[key] = _number(given.get(key, default), f"{FIELD}.{key}", low, high, integer=integer)
    require(out["roce_performance_ratio"] > 0, f"{FIELD}.roce_performance_ratio", 0, "a number > 0 and <= 1")
    return out


def fabric_counts(plan_cabling: Cabling) -> Counts:
    """NICs, leaves, spines, cores and links of a fabric plan (cabling.expected_cabling's answer): its
    ``sizing`` when it has one (the design's counts), else counted from its lists."""
    sz = plan_cabling.get("sizing") or {}
    if sz.get("leaves"):
        return Counts(
            nics=sz["host_links"],
            leaves=sz["leaves"],
            spines=sz["spines"],
            host_links=sz["host_links"],
            uplinks=sz["uplinks"],
            cores=sz["cores"],
            core_links=sz["core_links"],
            switch_radix=sz["switch_radix"],
        )
    switches: dict[str, int] = {}
    for s in plan_cabling["switches"]:
        switches[s["kind"]] = switches.get(s["kind"], 0) + 1
    links: dict[str, int] = {}
    for link in fabric_links.links(plan_cabling):
        links[link["kind"]] = links.get(link["kind"], 0) + 1
    radix = max((int(s.get("ports") or 0) for s in plan_cabling["switches"]), default=0)
    return Counts(
        nics=fabric_links.hca_count(plan_cabling),
        leaves=switches.get("leaf", 0) + switches.get("switch", 0),
        spines=switches.get("spine", 0),
        host_links=links.get("host", 0),
        uplinks=links.get("uplink", 0),
        cores=switches.get("core", 0),
        core_links=links.get("core", 0),
        switch_radix=radix,
    )


def bill(counts: Counts, part: FabricParts, site: dict[str, float]) -> dict[str, Any]:
    """One fabric kind's lines (USD over ``years``), its hardware and its total."""
    years = site["years"]
    nics = counts.nics * part.nic_usd
    switches = counts.switches * part.switch_usd
    optics = counts.links * part.link_usd
    hardware = nics + switches + optics
    support = hardware * site["support_fraction_per_year"] * years
    staff = part.staff_usd_per_year * years
    power_kw = (counts.switches * part.switch_w + counts.links * part.link_w) / 1000
    power = power_kw * HOURS_PER_YEAR * years * site["power_usd_per_kwh"]
    lines = {"nics": nics, "switches": switches, "optics": optics, "support": support, "staff": staff, "power": power}
    return {
        "parts": asdict(part),
        "lines_usd": {k: round(v, 2) for k, v in lines.items()},
        "hardware_usd": round(hardware, 2),
        "support_per_year_usd": round(hardware * site["support_fraction_per_year"], 2),
        "power_kw": round(power_kw, 3),
        "total_usd": round(sum(lines.values()), 2),
    }


def performance_penalty(gpus: int, site: dict[str, float], gpu_hour_usd: float, ratio: float) -> dict[str, float]:
    """GPU-hours (and their price) RoCE at ``ratio`` of InfiniBand's throughput does not deliver."""
    gpu_hours = gpus * HOURS_PER_YEAR * site["years"] * site["gpu_utilization"]
    lost = gpu_hours * (1 - ratio)
    return {
        "roce_performance_ratio": ratio,
        "gpu_hours": round(gpu_hours, 2),
        "lost_gpu_hours": round(lost, 2),
        "lost_usd": round(lost * gpu_hour_usd, 2),
    }


def _sources(costs: dict[str, Any]) -> dict[str, Any]:
    """Where each input comes from: the inventory when set there, else the default's source."""
    out: dict[str, Any] = {
        key: (f"inventory {FIELD}.{key}" if key in costs else src) for key, (_v, src) in SITE_DEFAULTS.items()
    }
    for kind in FABRICS:
        given = costs.get(kind) or {}
        out[kind] = {
            key: (f"inventory {FIELD}.{kind}.{key}" if key in given else src)
            for key, (_v, src) in PART_DEFAULTS[kind].items()
        }
    return out


def _counts(
    kind: str,
    *,
    topology: str,
    compute_hosts: list[str],
    rails: int,
    fabric_type: str,
    switch_radix: int | None,
    spines: int,
    spine_scope: str,
    link_rate_gbps: float,
    oversubscription: float,
    min_spines: int,
    plan_cabling: Cabling | None,
) -> Counts:
    """One fabric kind's counts: the plan's own fabric for the site's kind, else the same tree with the
    kind's default switch (catalog.yml ``switches``) at the link rate."""
    if kind == fabric_type and plan_cabling is not None and plan_cabling.get("switches"):
        return fabric_counts(plan_cabling)
    own = kind == fabric_type
    section: dict[str, Any] = {
        "spine_scope": spine_scope,
        "oversubscription": oversubscription,
        "min_spines": min_spines,
        # the site's radix and spine count are its own fabric kind's; the other kind gets its default switch
        **({"switch_radix": switch_radix, "spines": spines} if own and switch_radix else {}),
    }
    plan = cabling.site_cabling(
        section,
        fabric_type=kind,
        topology=topology,
        compute_hosts=list(compute_hosts),
        rail_hcas=[f"rail{r}" for r in range(rails)],
        link_rate_gbps=link_rate_gbps,
        links=False,  # the counts only: no link list for a fabric the site does not run
    )
    return fabric_counts(plan)


def fabric_tco(
    *,
    topology: str,
    compute_hosts: list[str],
    rails: int,
    gpus_per_node: int,
    switch_radix: int | None = None,
    spines: int = 0,
    spine_scope: str = "shared",
    costs: dict[str, Any] | None = None,
    gpu_hour_usd: float = 4.0,
    gpu_hour_field: str = "gpucluster_workload.gpu_hour_cost_usd",
    fabric_type: str = "infiniband",
    link_rate_gbps: float = 400,
    oversubscription: float = 1,
    min_spines: int = 2,
    plan_cabling: Cabling | None = None,
) -> dict[str, Any]:
    """InfiniBand and RoCEv2 priced on the site's fat tree (each with its own switch radix), and RoCE's
    performance as GPU-hours. ``switch_radix`` and ``spines`` are the site's own fabric kind's
    (``fabric_type``); ``plan_cabling``: the plan's fabric, priced as it is for that kind."""
    costs = dict(costs or {})
    site = site_costs(costs)
    ib_parts, roce_parts = (parts(kind, costs.get(kind)) for kind in FABRICS)
    gpu_hour = _number(gpu_hour_usd, gpu_hour_field, 0, 1e6)
    rails = int(_number(rails, "gpucluster_node.nics", 0, 1024, integer=True))
    gpus_per_node = int(_number(gpus_per_node, "gpucluster_node.gpus_per_node", 1, 1024, integer=True))
    nodes = len(compute_hosts)
    gpus = nodes * gpus_per_node
    head = {
        "topology": topology,
        "nodes": nodes,
        "rails": rails,
        "gpus": gpus,
        "years": site["years"],
        "caveat": CAVEAT,
        "sources": _sources(costs),
    }
    if topology == "none" or rails == 0:
        why = "one node: GPUs talk over NVLink" if nodes <= 1 else "no switched fabric (topology none)"
        return {**head, "applies": False, "reason": f"no fabric: {why}; nothing to price"}
    own = fabric_type if fabric_type in FABRICS else "infiniband"
    counts = {
        kind: _counts(
            kind,
            topology=topology,
            compute_hosts=compute_hosts,
            rails=rails,
            fabric_type=own,
            switch_radix=switch_radix,
            spines=spines,
            spine_scope=spine_scope,
            link_rate_gbps=link_rate_gbps,
            oversubscription=oversubscription,
            min_spines=min_spines,
            plan_cabling=plan_cabling,
        )
        for kind in FABRICS
    }
    part = {"infiniband": ib_parts, "roce": roce_parts}
    fabrics = {kind: {**bill(counts[kind], part[kind], site), "counts": _counts_dict(counts[kind])} for kind in FABRICS}
    ratio = site["roce_performance_ratio"]
    penalty = performance_penalty(gpus, site, gpu_hour, ratio)
    low, high = (performance_penalty(gpus, site, gpu_hour, r) for r in ROCE_RATIO_RANGE)
    delta = round(fabrics["infiniband"]["total_usd"] - fabrics["roce"]["total_usd"], 2)
    roce_effective = round(fabrics["roce"]["total_usd"] + penalty["lost_usd"], 2)
    return {
        **head,
        "applies": True,
        "reason": f"{topology} fabric of {nodes} nodes x {rails} rails, priced as InfiniBand and as RoCEv2",
        "counts": _counts_dict(counts[own]),  # the site's own fabric kind's plan
        "fabric_type": own,
        "inputs": {**site, "gpu_hour_usd": gpu_hour},
        "fabrics": fabrics,
        "delta_usd": delta,  # InfiniBand minus RoCE: > 0 when InfiniBand costs more
        "performance": {
            **penalty,
            "gpu_hour_usd": gpu_hour,
            "range": {"low_ratio": low, "high_ratio": high},
        },
        "roce_with_performance_usd": roce_effective,
        "cheaper_with_performance": "roce" if roce_effective < fabrics["infiniband"]["total_usd"] else "infiniband",
    }


def _counts_dict(c: Counts) -> dict[str, int]:
    return {**asdict(c), "switches": c.switches, "links": c.links}


def fabric_tco_for(source: dict[str, Any], *, text: bool = False) -> dict[str, Any] | str:
    """The filter's entry: ``source`` is a plan (its ``fabric_tco``) or fabric_tco's arguments, where
    ``nodes`` (a count) may stand for ``compute_hosts``; ``text``: the plain-text table instead."""
    if "schema" in source and "fabric_tco" in source:
        result = source["fabric_tco"]
    else:
        args = dict(source)
        if "nodes" in args:
            nodes = int(_number(args.pop("nodes"), "nodes", 1, 100000, integer=True))
            args["compute_hosts"] = [f"node{i + 1:0{max(2, len(str(nodes)))}d}" for i in range(nodes)]
        result = fabric_tco(**args)
    return tco_text(result) if text else result


def plan_fabric_tco(site: Site, fab: FabricSection) -> dict[str, Any]:
    """plan["fabric_tco"] for a loaded Site and the plan's fabric section (assembly.py): the site's own
    fabric kind priced on the plan's cabling, the other kind on the same tree with its own switch."""
    f = site.fabric_model.tree  # the switch tree as written (switch_radix, spines, ...)
    radix = f.get("switch_radix")  # checked by the cabling (fabric/plan.py) before this stage
    costs = site.costs  # gpucluster_costs (FIELD), as written: fabric_tco checks its keys and values
    require(costs is None or isinstance(costs, dict), FIELD, costs, "a mapping (ib, roce, years, ...)")
    return fabric_tco(
        topology=fab["topology"],
        compute_hosts=list(site.compute_hosts),
        rails=len(site.node.compute_nics),
        gpus_per_node=site.node.gpus_per_node,
        switch_radix=int(radix) if isinstance(radix, int | float) and not isinstance(radix, bool) else None,
        costs=costs if isinstance(costs, dict) else None,
        gpu_hour_usd=site.workload_model.gpu_hour_cost_usd,
        fabric_type=fab["type"],
        link_rate_gbps=fab["link_rate_gbps"],  # the site model's (its default decided there)
        plan_cabling=fab["cabling"],
        **cabling.tree_fields(f),
    )


__all__ = ["LINE_NAMES", "fabric_tco", "fabric_tco_for", "plan_fabric_tco", "tco_rows", "tco_text"]
