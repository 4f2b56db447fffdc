"""Slurm against its own users: what a tenant may see and where a tenant may log in.

- ``PrivateData`` (slurm.conf and slurmdbd.conf): a user sees only their own jobs, usage,
  reservations they can use, and in accounting only the users and accounts they deal with;
  SlurmUser, root and Slurm operators (``sacctmgr ... AdminLevel=Operator``) see everything
  (https://slurm.schedmd.com/slurm.conf.html#OPT_PrivateData,
  https://slurm.schedmd.com/slurmdbd.conf.html#OPT_PrivateData). ``nodes`` and ``partitions``
  stay visible: users need ``sinfo`` to place their jobs, and neither names another user.
- ``CommunicationParameters=block_null_hash``: every daemon refuses authentication tokens without
  the payload hash added in 20.11.9/21.08.8 against credential replay (CVE-2022-29500,
  https://slurm.schedmd.com/slurm.conf.html#OPT_block_null_hash; in Debian 12's 22.05.8 man page
  and accepted by its slurmctld, checked in the lab). Safe here: every daemon is 22.05.
- ``pam_slurm_adopt`` on the compute nodes' sshd: a user with no job on the node is refused; a
  user with a job is adopted into the job's extern step (its cgroup in production), so a login
  cannot use GPUs or memory the job does not hold (https://slurm.schedmd.com/pam_slurm_adopt.html).
  It needs ``PrologFlags=Contain`` (the extern step), which this module adds to the plan's flags.
  root and the site's admin group pass first through pam_access (the module's own documented
  alternative for administrators); every failure action is ``deny`` (SchedMD: the defaults
  ``allow``/``ignore`` are "insecure and recommended for testing purposes only").

No I/O; pure functions.
"""

from __future__ import annotations

import re

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.slurm.model import TenancyPlan

FIELD = "gpucluster_slurm"
#: slurm.conf PrivateData: jobs (squeue, scontrol show job, sacct), usage (sshare), users and accounts
#: (accounting), reservations (those the user cannot use), events (node events): every value that hides
#: another user's data; not nodes, partitions or cloud (slurm.conf(5) PrivateData).
PRIVATE_DATA = ("accounts", "events", "jobs", "reservations", "usage", "users")
#: slurmdbd.conf PrivateData accepts the same accounting values (slurmdbd.conf(5) PrivateData).
DBD_PRIVATE_DATA = ("accounts", "events", "jobs", "reservations", "usage", "users")
#: slurm.conf CommunicationParameters (slurm.conf(5), block_null_hash; CVE-2022-29500).
COMMUNICATION_PARAMETERS = ("block_null_hash",)
#: PrologFlags pam_slurm_adopt needs: the extern step into which ssh sessions are adopted.
ADOPT_PROLOG_FLAG = "Contain"
#: The group exempt from pam_slurm_adopt by default: on Debian the group whose members may sudo to
#: root already, so exempting it opens nothing a member could not do anyway, and keeps an operator
#: (or an Ansible connection as a sudo user) able to reach a node without a job.
DEFAULT_ADMIN_GROUP = "sudo"
#: pam_slurm_adopt options: every failure refuses (pam_slurm_adopt.html, "Module Options").
PAM_ADOPT_OPTIONS = (
    "action_no_jobs=deny",
    "action_unknown=newest",
    "action_adopt_failure=deny",
    "action_generic_failure=deny",
)
#: A POSIX group name as useradd/groupadd accept it (Debian's NAME_REGEX default).
_GROUP = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z")


def _flags(base: str) -> str:
    """``base`` (comma-separated PrologFlags, may be empty) with Contain added once."""
    flags = [f for f in base.split(",") if f]
    if ADOPT_PROLOG_FLAG.lower() not in (f.lower() for f in flags):
        flags.append(ADOPT_PROLOG_FLAG)
    return ",".join(flags)


def tenancy_plan(section: object, prolog_flags: str) -> TenancyPlan:
    """``plan.slurm.tenancy``: PrivateData, CommunicationParameters and the compute nodes' ssh admission.

    ``section``: ``gpucluster_slurm`` (or None): ``pam_slurm_adopt`` (bool, default true) and
    ``admin_group`` (default ``sudo``). ``prolog_flags``: the plan's PrologFlags before adoption."""
    section = section if isinstance(section, dict) else {}
    adopt = section.get("pam_slurm_adopt", True)
    require(isinstance(adopt, bool), f"{FIELD}.pam_slurm_adopt", adopt, "true or false")
    group = section.get("admin_group", DEFAULT_ADMIN_GROUP)
    require(
        isinstance(group, str) and bool(_GROUP.match(group)) and group != "root",
        f"{FIELD}.admin_group",
        group,
        "a group name (lower-case letters, digits, '_', '-', at most 32, not 'root': root is always exempt)",
    )
    return {
        "private_data": ",".join(PRIVATE_DATA),
        "dbd_private_data": ",".join(DBD_PRIVATE_DATA),
        "communication_parameters": ",".join(COMMUNICATION_PARAMETERS),
        "prolog_flags": _flags(prolog_flags) if adopt else prolog_flags,
        "pam_adopt": {
            "enabled": adopt,
            "admin_group": group,
            "options": list(PAM_ADOPT_OPTIONS),
            # pam_access rules, first match wins (access.conf(5)): root and the admin group pass, the rest
            # go on to pam_slurm_adopt
            "access_rules": ["+:root:ALL", f"+:({group}):ALL", "-:ALL:ALL"],
        },
    }
