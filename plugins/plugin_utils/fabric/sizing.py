"""How a fabric is sized (docs/fabric.md, "Sizing"): hosts per leaf at an oversubscription, the fewest
spines that carry a group's uplinks evenly, the switch radix of the site or the catalog, the tree fields'
defaults, and the ``sizing`` numbers of the plan (fabric/cabling.py builds the design with them)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypedDict

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.model import Sizing, Switch
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory import catalog
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.choices import RDMA_FABRICS


def hosts_per_leaf(radix: int, oversubscription: float) -> int:
    """The most host ports h of a radix-port leaf with h + ceil(h / oversubscription) <= radix."""
    h = int(radix * oversubscription / (oversubscription + 1))
    while h > 0 and h + math.ceil(h / oversubscription - 1e-9) > radix:
        h -= 1
    while h + 1 + math.ceil((h + 1) / oversubscription - 1e-9) <= radix:
        h += 1
    return h


def spread(needs: dict[int, tuple[int, int]], down_ports: int, minimum: int, fixed: int | None = None) -> int | None:
    """The fewest upper switches S for lower switches whose uplink needs are ``needs``
    ({need: (how many switches, their free ports)}): S >= max(ceil(sum / down_ports), minimum), every
    lower switch with S * ceil(need / S) uplinks within its free ports (the same count to every upper
    switch), every upper switch with sum(ceil(need / S)) <= down_ports. ``fixed``: only that S.
    None when no S fits (the group needs another tier)."""
    total = sum(n * count for n, (count, _free) in needs.items())
    low = max(math.ceil(total / down_ports), minimum, 1)
    candidates = [fixed] if fixed else range(low, max(free for _c, free in needs.values()) + 1)
    for s in candidates:
        if sum(count * math.ceil(n / s) for n, (count, _free) in needs.items()) > down_ports:
            continue
        if all(s * math.ceil(n / s) <= free for n, (_count, free) in needs.items()):
            return s
    return None


def radix_for(
    section: Mapping[str, object], fabric_type: str, link_rate_gbps: float, field: str = "gpucluster_fabric"
) -> int:
    """Ports per switch: the inventory's ``switch_radix``, else its ``switch_model``'s (catalog.yml
    ``switches``) at the link rate, else the fabric type's default switch's (QM9700 64 x NDR 400G,
    Q3400 144 x XDR 800G, SN5600 128 x 400GbE / 64 x 800GbE)."""
    radix = section.get("switch_radix")
    if radix is not None:
        return int(radix)  # type: ignore[call-overload]  # the inventory's value: expected_cabling checks its range
    if fabric_type not in RDMA_FABRICS:
        return 64  # no switched RDMA fabric: nothing is cabled
    model = section.get("switch_model")
    return catalog.switch_radix(fabric_type, link_rate_gbps, None if model is None else str(model), field)


class TreeFields(TypedDict):
    """The tree fields of ``gpucluster_fabric`` (docs/inventory.md), defaulted."""

    spines: int
    spine_scope: str
    oversubscription: float
    min_spines: int


#: the defaults of ``gpucluster_fabric``'s tree fields (docs/inventory.md), read by the cabling and the TCO
#: alike: no spine count of the site's own (sized from the leaves), spines shared by the rails, a
#: non-blocking tree, at least two spines
TREE_DEFAULTS: TreeFields = {"spines": 0, "spine_scope": "shared", "oversubscription": 1, "min_spines": 2}


def tree_fields(section: Mapping[str, object]) -> TreeFields:
    """``spines``, ``spine_scope``, ``oversubscription`` and ``min_spines`` of a fabric section, defaulted
    (as the inventory gives them: expected_cabling checks their types and ranges)."""
    return {  # type: ignore[return-value]  # raw inventory values, checked by expected_cabling
        key: section.get(key, default) for key, default in TREE_DEFAULTS.items()
    }


def sizing(
    switches: list[Switch],
    units: int,
    radix: int,
    over: float,
    per_su: int,
    *,
    tiers: int,
    spines_per_group: int = 0,
    groups: int = 1,
    pods: int = 0,
    sus_per_pod: int = 0,
    cores_per_group: int = 0,
    links: tuple[int, int, int] = (0, 0, 0),
) -> Sizing:
    """The numbers behind the fabric (report.py, docs/fabric.md "Sizing"); ``links``: host, leaf-spine
    and spine-core cable counts, from the design (test_cabling checks them against the link list)."""
    count: dict[str, int] = {}
    for sw in switches:
        count[sw["kind"]] = count.get(sw["kind"], 0) + 1
    return {
        "tiers": tiers,
        "switch_radix": radix,
        "oversubscription": over,
        "hosts_per_leaf": per_su,
        "scalable_units": units,
        "spine_groups": groups if tiers > 1 else 0,
        "spines_per_group": spines_per_group,
        "pods": pods,
        "sus_per_pod": sus_per_pod,
        "cores_per_group": cores_per_group,
        "leaves": count.get("leaf", 0) + count.get("switch", 0),
        "spines": count.get("spine", 0),
        "cores": count.get("core", 0),
        "host_links": links[0],
        "uplinks": links[1],
        "core_links": links[2],
    }
