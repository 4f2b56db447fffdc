#!/usr/bin/python
"""Documentation of the cluster_plan action (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_plan
short_description: Compute the cluster plan, or load a plan.json, on the controller
version_added: 0.2.0
description:
  - Computes the plan from the site's C(gpucluster_*) variables and the inventory groups (the same
    engine as the P(gpucluster.tiers.cluster_plan#filter) filter), or loads a precomputed plan.json.
  - Register the result as C(gpucluster_plan) on localhost, the whole plan (C(playbooks/tasks/plan.yml)
    does). A host play reads its own slice of it as C(gpucluster_host_plan)
    (P(gpucluster.tiers.host_plan#filter)).
  - A registered result is not templated; the same plan as a C(set_fact) value is finalised value by
    value by ansible-core, which at 16,384 nodes took most of the plan stage. Unlike an action's
    C(ansible_facts), a registered value is not written to the persistent fact cache.
  - ansible-core adds C(changed) and C(failed) to the registered value; the
    P(gpucluster.tiers.plan_data#filter) filter gives the plan without them, and
    P(gpucluster.tiers.host_plan#filter) and P(gpucluster.tiers.plan_sha256#filter) leave them out.
  - Before it computes or loads a plan, the action checks the inventory (the check of the
    P(gpucluster.tiers.inventory_scope#filter) filter, on the task's C(hostvars) and C(groups['all']), each host's
    variables read raw). A misspelt site variable, a C(gpucluster_*) variable set on a host or a group other
    than C(all), C(gpucluster_plan_root) or C(gpucluster_plan_dir) from the inventory, two hosts with one
    C(ansible_host), a template or an unbounded value in a C(gpucluster_*) variable stop the task, with or
    without O(file).
  - A bad inventory fails with the check's or the engine's error, naming the inventory field, the value, what is
    allowed and, where Ansible knows it, the file. The error is shown even with O(quiet).
options:
  site:
    description:
      - The C(gpucluster_*) variables by name (ignored with O(file)).
      - By default the task's own C(gpucluster_*) variables, without a run's switches and results
        (C(gpucluster_plan*), C(gpucluster_host_plan), C(gpucluster_lock*), C(gpucluster_shutdown_*)), templated
        only after the inventory check, so that a template in an inventory value is refused unevaluated. Given
        as an argument, they are templated by Ansible before the action runs.
    type: dict
  groups:
    description:
      - The inventory's groups (ignored with O(file)); by default the play's C(groups), read from the task's
        variables as they are. Given as an argument, they are templated and travel back to the main process
        with the result, as every task argument does (seconds at 16,384 nodes).
    type: dict
  file:
    description: A plan.json to load instead of computing (searched like C(lookup('file'))).
    type: str
  quiet:
    description:
      - Hide the plan (a successful result) from the output and the job events, as C(no_log) would.
        A failure is shown, so a bad inventory's error is printed once.
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
- name: Compute the cluster plan (the inventory checked first, the site read from the task's variables)
  gpucluster.tiers.cluster_plan:
    file: "{{ gpucluster_plan_file | default('', true) }}"
  register: gpucluster_plan

- name: Compute the cluster plan from the variables given (templated before the inventory check)
  gpucluster.tiers.cluster_plan:
    site: "{{ dict(names | zip(query('ansible.builtin.vars', *names))) }}"
  vars:
    names: "{{ query('ansible.builtin.varnames', '^gpucluster_(?!plan|host_plan|lock|shutdown_)') }}"
  register: gpucluster_plan
"""

RETURN = r"""
schema:
  description: The plan's schema version; every other plan section is returned too (see docs/settings.md).
  returned: success
  type: int
"""
