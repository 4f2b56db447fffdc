#!/usr/bin/python
"""Take, join or release the converge lock on the head: one site.yml at a time per cluster."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: converge_lock
short_description: One converge at a time per cluster, a lock file on the head
version_added: 0.1.0
description:
  - Keeps a JSON lock file on the head (O(path)) naming the run that converges the cluster, with
    its run id, controller host, pid of the ansible-playbook process and its start time, user, and
    when the head granted it (the head's clock).
  - Every read-decide-write holds C(flock) on C(<path>.guard), so two runs asking at once are
    serialised; the file is first created with C(O_CREAT|O_EXCL) and replaced with C(rename).
  - "O(state=present): no lock: take it (RV(status) C(acquired)); the same O(run_id): join
    (C(joined), the slices of one sliced run share it); O(force): replace it (C(broken));
    O(stale_token) equal to the holder's token: replace it (C(taken_over), the action plugin on the
    holder's own controller found its process dead); older than O(max_age_s): replace it
    (C(stale)); else RV(status) is C(held) and the action plugin fails naming the holder."
  - O(state=absent) removes the file only when O(run_id) holds it, or with O(force).
  - Use it through its action plugin (same name), which fills in the controller's identity and
    checks whether a holder on this controller still runs; playbooks/tasks/converge_lock.yml does.
  - In check mode nothing is written; RV(status) says what a real run would do.
options:
  state:
    description: Take (present) or release (absent) the lock.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The lock file. Under C(/run) (a tmpfs) a reboot of the head clears it.
    type: path
    default: /run/gpucluster/converge.lock
  run_id:
    description:
      - This run's id; runs with the same id share the lock.
      - The action plugin makes one (C(<controller>-<pid>-<time>)) when it is empty.
    type: str
    default: ""
  controller:
    description: The controller's hostname (the action plugin fills it in).
    type: str
    default: ""
  pid:
    description:
      - Pid of the process that holds the lock on the controller (ansible-playbook, or run_slices.py).
      - The action plugin fills in its ansible-playbook's pid when it is 0.
    type: int
    default: 0
  pid_start:
    description: That process's start time (C(/proc/<pid>/stat) field 22), so a reused pid is told apart.
    type: str
    default: ""
  user:
    description: Who runs it (shown to a refused run).
    type: str
    default: ""
  playbook:
    description: The playbook that holds it (shown to a refused run).
    type: str
    default: ""
  max_age_s:
    description: A lock older than this (seconds, the head's clock) is stale and taken over.
    type: int
    default: 14400
  force:
    description: Break another run's lock (take it over, or remove it with O(state=absent)).
    type: bool
    default: false
  stale_token:
    description: The token of a holder judged dead; the lock is replaced only if it is still that holder's.
    type: str
    default: ""
attributes:
  check_mode:
    description: Nothing is written; RV(status) says what a real run would do.
    support: full
  diff_mode:
    description: No diff.
    support: none
author:
  - gpucluster.tiers developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Take the converge lock (through the action plugin, which fills in the controller's identity)
  gpucluster.tiers.converge_lock:
    state: present
    run_id: "{{ gpucluster_lock_run_id | default(omit) }}"
  delegate_to: "{{ groups['head'] | first }}"

- name: Break a stale lock left by a controller that is gone
  gpucluster.tiers.converge_lock:
    state: absent
    force: true
  delegate_to: "{{ groups['head'] | first }}"
"""

RETURN = r"""
status:
  description: acquired, joined, broken, taken_over, stale or held (present); released, absent or not_holder (absent).
  returned: always
  type: str
  sample: acquired
holder:
  description:
    - The lock's holder after the task.
    - Keys run_id, controller, pid, pid_start, user, playbook, acquired, acquired_utc.
  returned: always
  type: dict
previous:
  description: The holder that was replaced or released, if any.
  returned: always
  type: dict
token:
  description: The holder's token (controller:pid:pid_start:run_id), for a takeover.
  returned: always
  type: str
"""

from dataclasses import asdict  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpucluster.tiers.plugins.module_utils.converge_lock import (  # noqa: E402
    Holder,
    acquire,
    release,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "path": {"type": "path", "default": "/run/gpucluster/converge.lock"},
            "run_id": {"type": "str", "default": ""},
            "controller": {"type": "str", "default": ""},
            "pid": {"type": "int", "default": 0},
            "pid_start": {"type": "str", "default": ""},
            "user": {"type": "str", "default": ""},
            "playbook": {"type": "str", "default": ""},
            "max_age_s": {"type": "int", "default": 14400},
            "force": {"type": "bool", "default": False},
            "stale_token": {"type": "str", "default": "", "no_log": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not (p["run_id"] and p["controller"] and p["pid"] > 0):
        module.fail_json(msg="run_id, controller and pid are required: use the module through its action plugin")
    me = Holder(
        run_id=p["run_id"],
        controller=p["controller"],
        pid=p["pid"],
        pid_start=p["pid_start"],
        user=p["user"],
        playbook=p["playbook"],
    )
    try:
        if p["state"] == "present":
            out = acquire(
                p["path"],
                me,
                max_age_s=p["max_age_s"],
                force=p["force"],
                stale_token=p["stale_token"],
                check_mode=module.check_mode,
            )
        else:
            out = release(p["path"], me, force=p["force"], check_mode=module.check_mode)
    except OSError as exc:
        module.fail_json(msg=f"converge lock {p['path']}: {exc}")
    for warning in out.warnings:
        module.warn(warning)
    token = Holder.from_dict(out.holder).token if out.holder else ""
    result = asdict(out)
    result.pop("warnings")
    module.exit_json(token=token, **result)


if __name__ == "__main__":
    main()
