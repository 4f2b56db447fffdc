#!/usr/bin/python
"""Documentation of the acceptance_report action (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: acceptance_report
short_description: Gate the acceptance tools' results against the tier's floors and write the report (controller only)
version_added: 0.1.0
description:
  - Reads the raw outputs the validate play collected per compute node (nccl-tests C(all_reduce_perf),
    perftest C(ib_write_bw) and C(ib_write_lat), C(perfquery) port counters, fio JSON, C(dcgmi diag -j))
    and the head's multi-node C(all_reduce_perf) run through Slurm, compares each result with the plan's
    floors (C(plan.validation)) and writes
    C(report.json) and C(report.md) under O(dest), plus each run's raw output under C(raw/<host>/).
  - all_reduce is gated on the large-message rows (at least C(plan.validation.gate_message_bytes), or the
    largest row present), never on C(# Avg bus bandwidth); a non-zero C(#wrong) fails the check.
  - A tool that is not installed gives C(skipped) with reason C(not installed), never a pass; a host
    that sent no results, a timeout or unreadable output gives C(fail).
  - The gates are the pure functions of C(plugin_utils/validation/acceptance.py); nothing is run on a host.
options:
  plan:
    description: The cluster plan (C(gpucluster_plan)); its C(validation) holds the floors and the tests.
    type: dict
    required: true
  hosts:
    description:
      - Per compute host, C(tools) (a mapping tool -> installed, or the list of installed tools) and C(runs).
      - C(runs) holds the registered command results C(all_reduce_intra_node) and C(dcgm_diag), and the loop
        registrations C(fio_write), C(fio_read) (items are C(plan.validation.tests.fio) targets) and
        C(ib_write_bw) (items are C(plan.validation.tests.ib_write_bw) pairs, client side), C(ib_write_lat)
        (items are C(plan.validation.tests.ib_write_lat) pairs, client side) and C(port_errors) (items are
        C(plan.validation.tests.port_counters) ports, the C(perfquery -C <hca> -P <port>) output).
    type: dict
    default: {}
  cluster:
    description: The head's C(tools) (must include C(srun)) and C(runs.all_reduce_inter_node).
    type: dict
    default: {}
  dest:
    description: Folder for C(report.json), C(report.md) and C(raw/).
    type: path
    required: true
  dcgm_level:
    description: The C(dcgmi diag -r) level that was run (named in the check, C(dcgm_diag_r2)).
    type: int
  write_raw:
    description: Also write every run's stdout and stderr under C(raw/<host>/).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - gpucluster.tiers.attributes
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Build the acceptance report
  gpucluster.tiers.acceptance_report:
    plan: "{{ gpucluster_plan }}"
    hosts: "{{ dict(groups['compute'] | zip(groups['compute'] | map('extract', hostvars)
      | map(attribute='gpucluster_validate_results', default={}))) }}"
    cluster: "{{ hostvars[gpucluster_plan.cluster.head].gpucluster_validate_results | default({}) }}"
    dest: "build/validate/{{ gpucluster_plan.cluster.name }}"
    dcgm_level: 2
  register: validate_report
"""

RETURN = r"""
report:
  description: The whole report (also written to report.json).
  returned: always
  type: dict
  contains:
    summary:
      description: Counts of pass, fail and skipped checks and the C(result) (pass, fail or incomplete).
      type: dict
    checks:
      description: Every check as C({name, nodes, measured, floor, unit, status, reason, drain}).
      type: list
      elements: dict
    drain:
      description: Nodes that failed a node-level check, with the Slurm drain reason.
      type: list
      elements: dict
summary:
  description: The report's summary.
  returned: always
  type: dict
drain:
  description: C({node, reason}) per node failing a node-level check (the drain task's input).
  returned: always
  type: list
  elements: dict
failed_checks:
  description: The checks whose status is fail.
  returned: always
  type: list
  elements: dict
written:
  description: Files whose content changed (written unless in check mode).
  returned: always
  type: list
  elements: str
"""
