"""The Slurm queue exporter on the head: what it writes and how it runs, from the plan.

Debian packages no Slurm exporter. The head role installs a small one,
``roles/head/files/gpucluster-slurm-metrics`` (Python standard library), run by a systemd timer every
scrape interval; it writes node-exporter textfile-collector metrics to
``/var/lib/prometheus/node-exporter/gpucluster_slurm.prom``, the directory Debian's
prometheus-node-exporter 1.5 reads by default (``--collector.textfile.directory``, checked with
``prometheus-node-exporter --help`` on Debian 12). The head's node-exporter serves them and the node
scrape job (prometheus.py) collects them: no new port, no new scrape job.

The metric names are defined once, in the script's ``METRICS``; :func:`exporter_metrics` reads that
literal (``ast``, the script is never run here). Next to catalog.yml it is the engine's only read of
static collection data.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

#: the exporter script, in the collection (roles/head/files)
SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "head" / "files" / "gpucluster-slurm-metrics"
#: where the head role installs it, and its systemd units
PROGRAM = "/usr/local/sbin/gpucluster-slurm-metrics"
UNIT = "gpucluster-slurm-metrics"
#: Debian's prometheus-node-exporter textfile directory (its --collector.textfile.directory default)
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
OUTPUT = f"{TEXTFILE_DIR}/gpucluster_slurm.prom"


@cache
def exporter_metrics() -> dict[str, str]:
    """``{metric name: help}`` of every metric the exporter writes (the script's ``METRICS``)."""
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"), str(SCRIPT))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["METRICS"]:
            return {name: help_ for name, (_kind, help_) in ast.literal_eval(node.value).items()}
    raise RuntimeError(f"{SCRIPT}: no METRICS literal")


def slurm_queue_plan(plan: Mapping[str, Any]) -> dict[str, Any] | None:
    """The exporter's settings on the head, or None when the cluster runs no Slurm (Kubernetes path)."""
    if plan["cluster"]["scheduler"] != "slurm":
        return None
    return {
        "program": PROGRAM,
        "unit": UNIT,
        "output": OUTPUT,
        "interval": plan["monitoring"]["scrape_interval"],  # one fresh file per scrape
        "metrics": sorted(exporter_metrics()),
    }


__all__ = ["OUTPUT", "PROGRAM", "SCRIPT", "TEXTFILE_DIR", "UNIT", "exporter_metrics", "slurm_queue_plan"]
