#!/usr/bin/env python3
"""Build an ansible-runner private data dir from tools/ci/runner/ and read a run's artifacts.

    python tools/ci/runner_dir.py prepare --inventory inventories/tier3 --dest build/runner/tier3 [--lab tier3]
    python tools/ci/runner_dir.py stats build/runner/tier3/artifacts/<ident> [--expect-unchanged]
    python tools/ci/runner_dir.py exec -- ansible-runner run build/runner/tier3 -p playbooks/plan.yml ...
    python tools/ci/runner_dir.py scrub build/runner/tier3

``exec`` runs a command (ansible-runner) with :func:`runner_env`, the caller's environment
filtered to what a run needs: ansible-runner writes the whole environment of its process into
``artifacts/<ident>/command`` (and the playbook's localhost facts hold it as ``ansible_env``), so
a CI secret in the caller's environment would otherwise land in the artifacts and in the archive
tools/ci/pipeline.sh packs. ``scrub`` applies the same filter to the ``command`` files already
written (runs from before, or through another caller). The names kept: ``RUNNER_ENV_NAMES``,
``RUNNER_ENV_PREFIXES`` and those listed in ``RUNNER_ENV_KEEP`` (space or comma separated), which are
then written into the artifacts too; never a name that looks like a credential's (ANSIBLE_BECOME_PASS,
..._TOKEN, ..._KEY: :func:`credential_name`) nor a value shaped like a token (ghp_..., a JWT), even
when RUNNER_ENV_KEEP names it.

``prepare`` copies env/ from the template (adding ANSIBLE_CONFIG), copies the inventory
(and, with ``--lab``, the lab's overlay and connection files) and links project/ to this
repository; earlier artifacts stay. With ``--container`` (ansible-runner's container mode,
``--container-image`` with an execution environment) the private data dir is mounted at
``/runner`` inside the container: project/ is then a copy of the repository's run-time files
(:data:`CONTAINER_SKIP` left out; its relative links resolve inside the copy) and ANSIBLE_CONFIG is
``/runner/project/ansible.cfg``, so no path points back to the host. ``stats`` prints a run's status, rc and
per-host recap from its job events, the hosts that failed and those that could not be reached (and their
tasks); with ``--expect-unchanged`` it fails when a host changed (the idempotence check of a second
converge). The layout: tools/ci/runner/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # the system python3 has no jmespath: re-run with .venv/bin/python
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from venv_python import require

    require(__file__, ("jmespath", "yaml"))

import jmespath
import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "tools" / "ci" / "runner"
#: where ansible-runner mounts the private data dir in container mode (``-v <dir>/:/runner/``) and the
#: project's folder in it (its working directory), from ansible-runner's container command
CONTAINER_MOUNT = "/runner"
CONTAINER_PROJECT = f"{CONTAINER_MOUNT}/project"
#: top-level names of the repository a container run does not need: the controller's own tools and
#: state (the execution environment brings ansible-core and the declared collections), tests, the lab
CONTAINER_SKIP = frozenset({
    ".git", ".venv", ".cache", ".collections", ".lab", ".hypothesis", ".pytest_cache", ".ruff_cache",
    "build", "tests", "molecule", "lab", "tools", "docs", "changelogs",
})  # fmt: skip


#: Environment variables a run gets from its caller (ansible-runner, ansible-playbook, ssh,
#: podman for the lab, kubectl's config for the Kubernetes path); every other one stays out
#: of the run and of its artifacts.
RUNNER_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE",
    "SSH_AUTH_SOCK",  # the agent's socket (a path), for ssh to real hosts
    "XDG_RUNTIME_DIR",  # podman (the lab's connection)
    "KUBECONFIG",  # a path: kubernetes.core reads the cluster's credentials from that file
    "VIRTUAL_ENV", "PYTHONUNBUFFERED",
})  # fmt: skip
RUNNER_ENV_PREFIXES = ("ANSIBLE_", "LC_")
#: A name that looks like a credential's (issue 37), split into its words at '_':
#: - any word naming a secret: TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL(S), CREDS, COOKIE
#:   (ANSIBLE_GALAXY_SERVER_X_TOKEN, ANSIBLE_NET_PASSWORD, AWS_SECRET_ACCESS_KEY, CI_JOB_TOKEN);
#: - the last word PASS, PWD, KEY, APIKEY, AUTH or SESSION: ansible-core's own secret settings
#:   (ANSIBLE_BECOME_PASS, ANSIBLE_REMOTE_PASS, ANSIBLE_VAULT_PASS, ANSIBLE_SSH_PASS ... and
#:   ANSIBLE_PRIVATE_KEY) and the usual API_KEY / _AUTH; not in the middle (ANSIBLE_HOST_KEY_CHECKING and
#:   ANSIBLE_PRIVATE_ROLE_VARS stay);
#: except a PATH to such a file, the last word FILE, PATH or DIR (ANSIBLE_VAULT_PASSWORD_FILE,
#: ANSIBLE_PRIVATE_KEY_FILE, ANSIBLE_GALAXY_TOKEN_PATH): a path is no secret, and ansible needs it.
CREDENTIAL_WORDS = frozenset(
    {"TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS"}
    | {"CREDS", "COOKIE"}
)
CREDENTIAL_LAST_WORDS = frozenset({"PASS", "PWD", "KEY", "APIKEY", "AUTH", "SESSION"})
PATH_WORDS = frozenset({"FILE", "PATH", "DIR"})
#: Values shaped like a credential whatever their name (the plan's rule: plugin_utils/inventory/values.py
#: SECRET_SHAPES, the vendors' token formats): GitHub, GitLab, AWS access key ids, Slack, NGC, Hugging Face,
#: a JSON Web Token, a PEM private key. test_secrets_never_written checks both lists agree.
SECRET_VALUE = re.compile(
    r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|gl(pat|dt|rt|ptt|cbt|imt|agent|oas|ft|soat)-[A-Za-z0-9_-]{16,}"
    r"|(AKIA|ASIA|AROA|AIDA)[0-9A-Z]{16}\b|xox[abposr]-[A-Za-z0-9-]{10,}|nvapi-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
)


def credential_name(name: str) -> bool:
    """Whether ``name`` looks like a credential's (:data:`CREDENTIAL_WORDS`); paths to one are not."""
    words = [w for w in name.upper().split("_") if w]
    if not words or words[-1] in PATH_WORDS:
        return False
    return bool(CREDENTIAL_WORDS & set(words)) or words[-1] in CREDENTIAL_LAST_WORDS


def runner_env(environ: Mapping[str, str] | None = None, keep: str | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) filtered to what a run needs; ``keep`` (default
    ``$RUNNER_ENV_KEEP``) names more variables to pass, comma or space separated.

    Never passed, whatever ``keep`` says: a name that looks like a credential's (:func:`credential_name`)
    and a value shaped like a token (:data:`SECRET_VALUE`): ansible-runner writes the run's environment
    into its artifacts. A run that needs a secret reads it from a file (ANSIBLE_VAULT_PASSWORD_FILE,
    ANSIBLE_PRIVATE_KEY_FILE, an ssh agent's socket)."""
    environ = os.environ if environ is None else environ
    extra = set(re.split(r"[\s,]+", (environ.get("RUNNER_ENV_KEEP", "") if keep is None else keep).strip())) - {""}

    def wanted(name: str, value: str) -> bool:
        if credential_name(name) or SECRET_VALUE.search(str(value)):
            return False
        return name in RUNNER_ENV_NAMES or name in extra or name.startswith(RUNNER_ENV_PREFIXES)

    return {k: v for k, v in environ.items() if wanted(k, v)}


def refused_keep(environ: Mapping[str, str] | None = None) -> list[str]:
    """The names of ``$RUNNER_ENV_KEEP`` that :func:`runner_env` drops anyway (credentials), to say so."""
    environ = os.environ if environ is None else environ
    extra = set(re.split(r"[\s,]+", environ.get("RUNNER_ENV_KEEP", "").strip())) - {""}
    return sorted(n for n in extra if credential_name(n) or SECRET_VALUE.search(str(environ.get(n, ""))))


@contextmanager
def filtered_environ() -> Iterator[dict[str, str]]:
    """This process's environment filtered by :func:`runner_env` while the block runs (for
    ansible_runner.run(), which copies os.environ into the run and its ``command`` artifact)."""
    saved = dict(os.environ)
    kept = runner_env(saved)
    os.environ.clear()
    os.environ.update(kept)
    try:
        yield kept
    finally:
        os.environ.clear()
        os.environ.update(saved)


def scrub(private_data_dir: str | Path) -> list[Path]:
    """Filter the ``env`` of every ``artifacts/*/command`` file under ``private_data_dir`` by
    :func:`runner_env` (without RUNNER_ENV_KEEP); return the files that changed."""
    changed = []
    for path in sorted(Path(private_data_dir).glob("artifacts/*/command")):
        record = json.loads(path.read_text())
        env = record.get("env") or {}
        kept = runner_env(env, keep="")
        if kept != env:
            record["env"] = kept
            path.write_text(json.dumps(record, ensure_ascii=False))
            changed.append(path)
    return changed


def _copy_project(root: Path, project: Path) -> None:
    """The repository's run-time files into project/, links kept as links (all relative, inside it)."""

    def skip(folder: str, names: list[str]) -> set[str]:
        top = Path(folder).resolve() == root.resolve()
        return {n for n in names if (top and n in CONTAINER_SKIP) or n == "__pycache__"}

    shutil.copytree(root, project, symlinks=True, ignore=skip)
    for link in (p for p in project.rglob("*") if p.is_symlink()):
        target = (link.parent / os.readlink(link)).resolve()
        if os.path.isabs(os.readlink(link)) or not target.is_relative_to(project.resolve()):
            raise SystemExit(f"runner_dir: {link} points outside the project ({os.readlink(link)}): it would dangle")


def prepare(
    inventory: str | Path,
    dest: str | Path,
    *,
    lab: str | None = None,
    root: Path = ROOT,
    container: bool = False,
) -> Path:
    """Make ``dest`` a private data dir for ``inventory``; return its absolute path.

    ``container``: for ansible-runner's container mode (an execution environment): project/ a copy,
    every path as the container sees it (:data:`CONTAINER_MOUNT`)."""
    if container and lab:
        raise SystemExit(
            "runner_dir: --lab and --container do not mix: the lab's containers are reached through the "
            "host's podman, which a run inside an execution environment does not have"
        )
    inventory, dest = Path(inventory), Path(dest).resolve()
    if not inventory.is_absolute():
        inventory = root / inventory
    if not (inventory / "hosts.yml").is_file():
        raise SystemExit(f"runner_dir: {inventory} is not an inventory folder (no hosts.yml)")
    dest.mkdir(parents=True, exist_ok=True)
    for sub in ("env", "inventory"):
        shutil.rmtree(dest / sub, ignore_errors=True)
    shutil.copytree(TEMPLATE / "env", dest / "env")
    envvars = yaml.safe_load((dest / "env" / "envvars").read_text()) or {}
    envvars["ANSIBLE_CONFIG"] = f"{CONTAINER_PROJECT}/ansible.cfg" if container else str(root / "ansible.cfg")
    (dest / "env" / "envvars").write_text(
        "---\n# built by tools/ci/runner_dir.py from tools/ci/runner/env/envvars\n"
        + yaml.safe_dump({k: str(v) for k, v in envvars.items()}, sort_keys=True)
    )
    shutil.copytree(inventory, dest / "inventory")
    if lab:
        connection = root / ".lab" / lab / "inventory.yml"
        if not connection.is_file():
            raise SystemExit(f"runner_dir: {connection} is missing; start the lab first (make lab-up TIER={lab})")
        shutil.copy(root / "lab" / "overlay" / "lab.yml", dest / "inventory" / "zz-lab-overlay.yml")
        shutil.copy(connection, dest / "inventory" / "zz-lab-connection.yml")
    project = dest / "project"
    if project.is_symlink() or project.is_file():
        project.unlink()
    elif project.is_dir():
        shutil.rmtree(project)
    if container:
        _copy_project(root, project)
    else:
        project.symlink_to(root, target_is_directory=True)
    return dest


#: JMESPath queries over a run's job events (ansible-runner writes one JSON document per event
#: to artifacts/<ident>/job_events/; the fields are ansible-runner's event schema,
#: https://ansible-runner.readthedocs.io/en/stable/intro/#runner-artifact-job-events-host-and-playbook-events).
EVENT_QUERIES = {
    # the recap: the last playbook_on_stats event's per-host counters
    "stats": "[?event=='playbook_on_stats'] | [-1].event_data",
    # tasks that failed a host, not counting failures the play ignores (ignore_errors: true);
    # the parentheses matter: `!` binds tighter than `.` in JMESPath
    "failed_tasks": (
        "[?event=='runner_on_failed' && !(event_data.ignore_errors)].{host: event_data.host, task: event_data.task}"
    ),
    # tasks a host could not be reached for (ssh refused, timed out, host down): its run stops there, and
    # the recap counts it as `dark`, not as a failure; ignore_unreachable: true plays do not count
    "unreachable_tasks": (
        "[?event=='runner_on_unreachable' && !(event_data.ignore_unreachable)]"
        ".{host: event_data.host, task: event_data.task, msg: event_data.res.msg}"
    ),
    # tasks that changed a host: on a second converge, each one breaks idempotence
    "changed_tasks": (
        "[?event=='runner_on_ok' && event_data.res.changed].{host: event_data.host, task: event_data.task}"
    ),
}
_COMPILED = {name: jmespath.compile(query) for name, query in EVENT_QUERIES.items()}
RECAP_KEYS = ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")


def job_events(artifact_dir: str | Path) -> list[dict[str, Any]]:
    """A run's job events in the order they happened (file names start with the event counter)."""
    files = sorted((Path(artifact_dir) / "job_events").glob("*.json"), key=lambda p: int(p.name.split("-")[0]))
    return [json.loads(f.read_text()) for f in files]


def stats(artifact_dir: str | Path) -> dict[str, Any]:
    """status, rc, the playbook_on_stats recap, the failed and unreachable hosts, and the failed,
    unreachable and changed tasks of one run (from its artifacts).

    A host that could not be reached is no failed task (the recap counts it under ``dark``): it is in
    ``unreachable_hosts`` and ``unreachable_tasks``; ``failed_hosts`` and ``unreachable_hosts`` come from
    the recap (the hosts with a failure, the hosts that went dark), or from the events when the run
    ended before its recap."""
    art = Path(artifact_dir)
    events = job_events(art)
    recap = _COMPILED["stats"].search(events) or {}
    failed_tasks = _COMPILED["failed_tasks"].search(events) or []
    unreachable_tasks = _COMPILED["unreachable_tasks"].search(events) or []
    counters = {k: dict(recap.get(k) or {}) for k in RECAP_KEYS} if recap else {}

    def hosts(recap_key: str, tasks: list[dict[str, Any]]) -> list[str]:
        if counters:
            return sorted(h for h, n in counters[recap_key].items() if n)
        return sorted({t["host"] for t in tasks})

    failed_hosts, unreachable_hosts = hosts("failures", failed_tasks), hosts("dark", unreachable_tasks)
    return {
        "artifact_dir": str(art),
        "status": (art / "status").read_text().strip() if (art / "status").exists() else "unknown",
        "rc": int((art / "rc").read_text().strip()) if (art / "rc").exists() else None,
        "stats": counters,
        "failed_hosts": failed_hosts,
        "unreachable_hosts": unreachable_hosts,
        "hosts_failed": len(failed_hosts),
        "hosts_unreachable": len(unreachable_hosts),
        "failed_tasks": failed_tasks,
        "unreachable_tasks": unreachable_tasks,
        "changed_tasks": _COMPILED["changed_tasks"].search(events) or [],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="build a private data dir")
    p.add_argument("--inventory", required=True, help="inventory folder, e.g. inventories/tier3")
    p.add_argument("--dest", required=True, help="the private data dir, e.g. build/runner/tier3")
    p.add_argument("--lab", metavar="TIER", help="add the lab overlay and .lab/TIER/inventory.yml")
    p.add_argument(
        "--container",
        action="store_true",
        help="for ansible-runner --container-image (an execution environment): project/ a copy, paths under /runner",
    )
    e = sub.add_parser("exec", help="run a command (ansible-runner ...) with the filtered environment")
    e.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    c = sub.add_parser("scrub", help="filter the environment recorded in artifacts/*/command")
    c.add_argument("private_data_dir")
    s = sub.add_parser("stats", help="summarise a run's artifacts")
    s.add_argument("artifact_dir")
    s.add_argument("--expect-unchanged", action="store_true", help="fail when any host reports changed")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(prepare(args.inventory, args.dest, lab=args.lab, container=args.container))
        return 0
    if args.command == "exec":
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            parser.error("exec needs a command after --")
        env = runner_env()
        for name in refused_keep():
            print(f"runner_dir: {name} (RUNNER_ENV_KEEP) looks like a credential: not passed", file=sys.stderr)
        os.execvpe(cmd[0], cmd, env)  # PATH from the filtered environment (make puts .venv/bin first)
    if args.command == "scrub":
        for path in scrub(args.private_data_dir):
            print(f"scrubbed {path}")
        return 0
    result = stats(args.artifact_dir)
    print(json.dumps(result, indent=2, sort_keys=True))
    changed = {h: n for h, n in result["stats"].get("changed", {}).items() if n}
    if args.expect_unchanged and changed:
        tasks = "; ".join(f"{t['host']}: {t['task']}" for t in result["changed_tasks"])
        print(f"not idempotent: changed tasks per host {changed} ({tasks})", file=sys.stderr)
        return 1
    if result["status"] != "successful":
        why = [f"unreachable: {', '.join(result['unreachable_hosts'])}"] if result["unreachable_hosts"] else []
        why += [f"failed: {', '.join(result['failed_hosts'])}"] if result["failed_hosts"] else []
        print(f"run {result['status']} (rc {result['rc']}); {'; '.join(why) or 'no host failed'}", file=sys.stderr)
    return 0 if result["status"] == "successful" else 1


if __name__ == "__main__":
    sys.exit(main())
