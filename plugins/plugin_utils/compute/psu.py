"""A GPU node's power supplies: how many may fail (``gpucluster_node.psu_redundancy``) and what the rest
carry, the bound compute/power.py holds the per-GPU power limit to. No I/O."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute.model import PsuSection
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError

NODE_FIELD = "gpucluster_node"
PSU_REDUNDANCY_FIELD = f"{NODE_FIELD}.psu_redundancy"
_PSU_LEVEL = re.compile(r"N(?:\+([0-9]+|N))?")


def psu_redundant(count: int, level: str | None, field: str = PSU_REDUNDANCY_FIELD) -> tuple[int, str]:
    """(how many of a node's ``count`` PSUs may fail, the level): ``N`` none, ``N+<k>`` k, ``N+N`` half.

    Default: ``N+1`` when the node has more than one PSU, else ``N``. PlanError for a level the count
    cannot have (``N+6`` of 6 PSUs leaves none; ``N+N`` needs an even count)."""
    if level is None:
        level = "N+1" if count > 1 else "N"
    m = _PSU_LEVEL.fullmatch(str(level))
    if not m:
        raise PlanError(field, level, "N (no spare PSU), N+<k> (k PSUs may fail, e.g. N+1) or N+N (half of them)")
    if m.group(1) is None:
        return 0, level
    if m.group(1) == "N":
        if count % 2:
            raise PlanError(field, level, f"N+N needs an even psu_count (the node has {count}): N+<k> with k < {count}")
        return count // 2, level
    k = int(m.group(1))
    if not 1 <= k < count:
        upto = f" to N+{count - 1}" if count > 2 else ""
        allowed = f"N+1{upto}, N+N or N" if count > 1 else "N (a node of one PSU has no spare)"
        raise PlanError(field, level, f"{allowed}: at least one of the node's {count} PSUs must stay")
    return k, level


@dataclass(frozen=True)
class PsuBudget:
    """What a node's PSUs carry when the redundant ones have failed."""

    count: int
    rating_w: float
    redundant: int
    level: str

    @property
    def surviving_w(self) -> float:
        return (self.count - self.redundant) * self.rating_w

    def describe(self) -> str:
        return (
            f"{NODE_FIELD}.psu_count x psu_rating_w at psu_redundancy {self.level}: "
            f"({self.count} - {self.redundant}) x {self.rating_w:g} W = {self.surviving_w:g} W"
        )

    def as_dict(self) -> PsuSection:
        return {
            "count": self.count,
            "rating_w": self.rating_w,
            "redundant": self.redundant,
            "level": self.level,
            "surviving_w": self.surviving_w,
        }


def psu_budget(count: int | None, rating_w: float | None, level: str | None) -> PsuBudget | None:
    """The node's PSU budget; None when the inventory does not give both the count and the rating."""
    if count is None or rating_w is None:
        if level is not None:
            missing = "psu_count" if count is None else "psu_rating_w"
            raise PlanError(PSU_REDUNDANCY_FIELD, level, f"set together with {NODE_FIELD}.{missing}")
        return None
    redundant, level = psu_redundant(int(count), level)
    return PsuBudget(int(count), float(rating_w), redundant, level)


def largest_psu_limit_w(psu: PsuBudget, gpus_per_node: int, base_power_w: float) -> int:
    """The largest whole-watt per-GPU limit with GPUs x limit + base <= the surviving PSUs' watts."""
    return math.floor(round((psu.surviving_w - base_power_w) / gpus_per_node, 6))


__all__ = ["NODE_FIELD", "PSU_REDUNDANCY_FIELD", "PsuBudget", "largest_psu_limit_w", "psu_budget", "psu_redundant"]
