#!/usr/bin/python
"""Documentation of the render_files action (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: render_files
short_description: Render role templates for a host into a local folder (controller only)
version_added: 0.1.0
description:
  - Renders each listed role template with the host's variables, as M(ansible.builtin.template)
    would on the host, and writes it under O(dest_root) on the controller.
  - Used by C(playbooks/plan.yml) so that C(make plan) shows every file the roles install,
    byte for byte, without contacting a host.
options:
  files:
    description: Files to render; items of the plan's C(files) list (role, src, dest, and optional data).
    type: list
    elements: dict
    required: true
  dest_root:
    description: Local folder under which each file's absolute C(dest) is written.
    type: path
    required: true
  template_root:
    description: Folder that holds the roles (C(<role>/templates/<src>)).
    type: path
    required: true
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
- name: Render the host's files from the roles' templates
  gpucluster.tiers.render_files:
    files: "{{ gpucluster_host_plan.files[inventory_hostname] }}"
    dest_root: "build/plan/tier3/hosts/{{ inventory_hostname }}"
    template_root: "{{ playbook_dir }}/../roles"
  delegate_to: localhost
"""

RETURN = r"""
rendered:
  description: How many files were rendered.
  returned: always
  type: int
written:
  description: Destinations whose content changed (and were written unless in check mode).
  returned: always
  type: list
  elements: str
checksums:
  description: sha256 of each rendered file's bytes, by destination (the host's file when it is as planned).
  returned: always
  type: dict
"""
