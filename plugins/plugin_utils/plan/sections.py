"""The typed shapes of the plan sections this package computes (plan/model.py assembles them into ``Plan``).

Placeholders until each becomes a TypedDict of its keys; the names are fixed (plan/model.py imports them)."""

from __future__ import annotations

from typing import Any

ClusterSection = dict[str, Any]
HostsSection = dict[str, Any]
NetworkSection = dict[str, Any]
FirewallSection = dict[str, Any]
EtcHostsSection = dict[str, Any]
TimeSection = dict[str, Any]
RolloutSection = dict[str, Any]
FilesSection = dict[str, Any]
ServicesSection = dict[str, Any]
SupportSection = dict[str, Any]
