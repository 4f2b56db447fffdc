"""The cables and HCAs of the plan's fabric design, generated where a reader needs them (the cabling check,
health, the report's picture, the acceptance pairs, bisect): the plan carries ``fabric.cabling`` as its design
(fabric/cabling.py), module_utils/fabric_links.py holds the rules (the fabric_check module runs them on the
host as well)."""

from __future__ import annotations

from ansible_collections.gpucluster.tiers.plugins.module_utils.fabric_links import (
    Hca,
    Link,
    LinkEnd,
    hca_count,
    hcas,
    host_ports,
    link_count,
    links,
    switch_name,
    uplinks_needed,
)

__all__ = [
    "Hca",
    "Link",
    "LinkEnd",
    "hca_count",
    "hcas",
    "host_ports",
    "link_count",
    "links",
    "switch_name",
    "uplinks_needed",
]
