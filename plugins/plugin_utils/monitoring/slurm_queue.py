"""The Slurm queue exporter on the head: what it writes and how it runs, from the plan.

Debian packages no Slurm exporter. The head role installs a small one,
``roles/head/files/gpucluster-slurm-metrics`` (Python standard library), run by a systemd timer every
scrape interval, as Slurm's own unprivileged user (``slurm``, the SlurmUser of slurm.conf: never root).
It writes node-exporter textfile-collector metrics to its own folder,
``/var/lib/gpucluster-slurm-metrics`` (owned by that user, writable by it only), and a link in
``/var/lib/prometheus/node-exporter`` (root's, the directory Debian's prometheus-node-exporter 1.5
reads by default: ``--collector.textfile.directory``, checked with ``prometheus-node-exporter --help``
on Debian 12; the collector opens each ``*.prom`` name, following a link) names the file there. The
head's node-exporter serves them and the node scrape job (prometheus.py) collects them: no new port,
no new scrape job.

Why SlurmUser and not a user of its own: with slurm.conf ``PrivateData=jobs`` (tenant isolation)
``squeue`` shows a plain user its own jobs only; SlurmUser, root and accounting admins/operators
see all (https://slurm.schedmd.com/archive/slurm-22.05.8/slurm.conf.html#OPT_PrivateData), and an
operator level would let the exporter change jobs. The commands talk to slurmctld as that user
through munge; the program touches no file of Slurm's.

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

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.monitoring.model import SlurmQueue

#: the exporter script, in the collection (roles/head/files)
SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "head" / "files" / "gpucluster-slurm-metrics"
#: where the head role installs it, and its systemd units
PROGRAM = "/usr/local/sbin/gpucluster-slurm-metrics"
UNIT = "gpucluster-slurm-metrics"
#: Debian's prometheus-node-exporter textfile directory (its --collector.textfile.directory default)
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
#: the user it runs as (slurm.conf's SlurmUser: sees every job under PrivateData) and its own folder
USER = "slurm"
OUTPUT_DIR = "/var/lib/gpucluster-slurm-metrics"
OUTPUT = f"{OUTPUT_DIR}/gpucluster_slurm.prom"
#: the name node-exporter reads: a link to OUTPUT (the textfile folder stays root's)
LINK = f"{TEXTFILE_DIR}/gpucluster_slurm.prom"


@cache
def exporter_metrics() -> dict[str, str]:
    """``{metric name: help}`` of every metric the exporter writes (the script's ``METRICS``)."""
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"), str(SCRIPT))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["METRICS"]:
            return {name: help_ for name, (_kind, help_) in ast.literal_eval(node.value).items()}
    raise RuntimeError(f"{SCRIPT}: no METRICS literal")


def slurm_queue_plan(plan: Mapping[str, Any]) -> SlurmQueue | None:
    """The exporter's settings on the head, or None when the cluster runs no Slurm (Kubernetes path)."""
    if plan["cluster"]["scheduler"] != "slurm":
        return None
    return {
        "program": PROGRAM,
        "unit": UNIT,
        "user": USER,
        "output_dir": OUTPUT_DIR,
        "output": OUTPUT,
        "link": LINK,
        "interval": plan["monitoring"]["scrape_interval"],  # one fresh file per scrape
        "metrics": sorted(exporter_metrics()),
    }


__all__ = [
    "LINK",
    "OUTPUT",
    "OUTPUT_DIR",
    "PROGRAM",
    "SCRIPT",
    "TEXTFILE_DIR",
    "UNIT",
    "USER",
    "exporter_metrics",
    "slurm_queue_plan",
]
