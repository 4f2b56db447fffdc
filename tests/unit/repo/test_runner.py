"""CI through ansible-runner: the private data dir, the Python API example, the make
target's syntax and sliced runs (tools/ci/run_slices.py: slices, command lines, plan hash,
summaries from recorded job events), and no caller secret in the artifacts (the filtered
environment of tools/ci/runner_dir.py). The plan only (tier1, no host is contacted), so it
stays fast."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from conftest import ROOT, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan

#: one pytest-xdist worker runs this module: its module fixture (built once) is costly
pytestmark = pytest.mark.xdist_group("runner")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


SECRET_NAME = "GPUCLUSTER_CI_DEPLOY_TOKEN"
SECRET = f"s3cret-{uuid.uuid4().hex}"


def _files_holding(root: Path, needle: str) -> list[str]:
    """Files under ``root`` (not following the project/ link) whose bytes contain ``needle``."""
    hits = []
    for dirpath, _dirs, files in os.walk(root):  # os.walk does not follow symlinked folders
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink() and needle.encode() in path.read_bytes():
                hits.append(str(path.relative_to(root)))
    return hits


@pytest.fixture(scope="module")
def tier1_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    base = tmp_path_factory.mktemp("runner")
    run_plan = _load("run_plan")
    os.environ[SECRET_NAME] = SECRET  # a CI secret in the caller's environment: it must stay out of the artifacts
    try:
        result = run_plan.run_plan(
            ROOT / "inventories" / "tier1", base / "pdd", plan_root=base / "plan", ident="plan-test"
        )
    finally:
        del os.environ[SECRET_NAME]
    return result, base / "pdd", base / "plan"


def test_plan_through_ansible_runner_succeeds(tier1_run: tuple[dict, Path, Path]) -> None:
    result, _, _ = tier1_run
    assert result["status"] == "successful"
    assert result["rc"] == 0
    assert not result["stats"]["failures"] and not result["stats"]["dark"]
    assert result["stats"]["ok"]["localhost"] > 0


def test_the_plan_task_is_a_job_event(tier1_run: tuple[dict, Path, Path]) -> None:
    result, pdd, _ = tier1_run
    run_plan = sys.modules["run_plan"]
    ok = [t for t in result["tasks"] if t["event"] == "runner_on_ok"]
    assert {"task": run_plan.PLAN_TASK, "host": "localhost"}.items() <= next(
        t for t in ok if t["task"] == run_plan.PLAN_TASK
    ).items()
    # the same event is in the artifacts, as a file per event
    events = [json.loads(p.read_text()) for p in (pdd / "artifacts" / "plan-test" / "job_events").glob("*.json")]
    assert any(e["event"] == "runner_on_ok" and e["event_data"]["task"] == run_plan.PLAN_TASK for e in events)
    assert any(e["event"] == "playbook_on_stats" for e in events)


def test_plan_and_pictures_are_written(tier1_run: tuple[dict, Path, Path]) -> None:
    result, _, plan_root = tier1_run
    out = plan_root / "tier1"
    assert result["plan_json"] == str(out / "plan.json")
    plan = json.loads((out / "plan.json").read_text())
    assert plan["cluster"]["name"] == "tier1"
    for name in ("report.md", "report.html", "fabric.dot", "power.svg"):
        assert (out / name).is_file(), name
    report = (out / "report.md").read_text()
    assert "![Rack power and cooling](power.svg)" in report and "[report.html](report.html)" in report
    assert ("![Fabric](fabric.svg)" in report) == (out / "fabric.svg").is_file() == bool(shutil.which("dot"))


def test_artifacts_and_layout(tier1_run: tuple[dict, Path, Path]) -> None:
    result, pdd, _ = tier1_run
    art = pdd / "artifacts" / "plan-test"
    assert result["artifact_dir"] == str(art)
    assert (art / "status").read_text().strip() == "successful"
    assert (art / "rc").read_text().strip() == "0"
    assert "PLAY RECAP" in (art / "stdout").read_text()
    assert (pdd / "project").resolve() == ROOT
    assert (pdd / "inventory" / "hosts.yml").read_text() == (ROOT / "inventories/tier1/hosts.yml").read_text()
    envvars = (pdd / "env" / "envvars").read_text()
    assert f"ANSIBLE_CONFIG: {ROOT / 'ansible.cfg'}" in envvars
    summary = _load("runner_dir").stats(art)
    assert summary["status"] == "successful" and summary["rc"] == 0 and summary["failed_tasks"] == []
    assert summary["stats"]["changed"]["localhost"] > 0


def test_the_plan_ends_saying_where_it_is_what_to_open_and_how_many_warnings(
    tier1_run: tuple[dict, Path, Path],
) -> None:
    _, pdd, plan_root = tier1_run
    stdout = (pdd / "artifacts" / "plan-test" / "stdout").read_text()
    before_recap = stdout.split("PLAY RECAP")[0].strip().splitlines()
    last = next(line for line in reversed(before_recap) if '"msg":' in line)
    assert before_recap[-1].strip() == "}" and before_recap.index(last) == len(before_recap) - 2  # the last output
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_summary

    warnings = report_summary(json.loads((plan_root / "tier1" / "plan.json").read_text()))["warnings"]
    count = f"{len(warnings)} warning{'' if len(warnings) == 1 else 's'}"
    assert f"written to {plan_root / 'tier1'}/: open report.md" in last and count in last, last


def test_the_python_api_run_keeps_the_caller_secret_out(tier1_run: tuple[dict, Path, Path]) -> None:
    _, pdd, plan_root = tier1_run
    assert SECRET_NAME not in os.environ  # filtered_environ() put the environment back
    command = json.loads((pdd / "artifacts" / "plan-test" / "command").read_text())
    assert "PATH" in command["env"] and SECRET_NAME not in command["env"]
    assert _files_holding(pdd, SECRET) == [] and _files_holding(plan_root, SECRET) == []


def test_runner_env_keeps_what_a_run_needs_and_drops_the_rest() -> None:
    runner_dir = _load("runner_dir")
    caller = {
        "PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "SSH_AUTH_SOCK": "/tmp/agent",
        "ANSIBLE_CONFIG": "/repo/ansible.cfg", "ANSIBLE_VAULT_PASSWORD_FILE": "/run/vault-pass",
        "ANSIBLE_GALAXY_SERVER_RH_TOKEN": "t", "ANSIBLE_NET_PASSWORD": "p", "ANSIBLE_PRIVATE_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "a", "CI_JOB_TOKEN": "c", "GITHUB_TOKEN": "g", "DEPLOY": "d", "PWD": "/repo",
    }  # fmt: skip
    kept = runner_dir.runner_env(caller, keep="")
    assert set(kept) == {
        "PATH", "HOME", "LANG", "LC_ALL", "SSH_AUTH_SOCK", "ANSIBLE_CONFIG", "ANSIBLE_VAULT_PASSWORD_FILE",
    }  # fmt: skip
    # RUNNER_ENV_KEEP passes more names, never a credential's (issue 37: they would land in the artifacts)
    assert runner_dir.runner_env(caller, keep="DEPLOY, CI_JOB_TOKEN").keys() == kept.keys() | {"DEPLOY"}
    assert "DEPLOY" in runner_dir.runner_env({**caller, "RUNNER_ENV_KEEP": "DEPLOY"})
    assert runner_dir.refused_keep({**caller, "RUNNER_ENV_KEEP": "DEPLOY CI_JOB_TOKEN"}) == ["CI_JOB_TOKEN"]


# ansible-core's own secret settings (ansible-core's config/base.yml: become_password, remote_password,
# vault password ...) and the usual credential names; the paths to such files and ordinary settings stay
CREDENTIAL_NAMES = [
    "ANSIBLE_BECOME_PASS", "ANSIBLE_BECOME_PASSWORD", "ANSIBLE_REMOTE_PASS", "ANSIBLE_REMOTE_PASSWORD",
    "ANSIBLE_VAULT_PASS", "ANSIBLE_VAULT_PASSWORD", "ANSIBLE_SSH_PASS", "ANSIBLE_CONNECTION_PASSWORD",
    "ANSIBLE_NET_AUTH_PASS", "ANSIBLE_HTTPAPI_PASS", "ANSIBLE_GALAXY_SERVER_RH_TOKEN", "ANSIBLE_GALAXY_TOKEN",
    "ANSIBLE_AWS_CREDS", "ANSIBLE_MY_SECRET", "ANSIBLE_PRIVATE_KEY", "ANSIBLE_API_KEY", "ANSIBLE_X_APIKEY",
    "ANSIBLE_REGISTRY_CREDENTIALS", "ANSIBLE_BASIC_AUTH", "ANSIBLE_SESSION_COOKIE", "LC_TOKEN",
]  # fmt: skip
KEPT_NAMES = [
    "ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_PRIVATE_KEY_FILE", "ANSIBLE_BECOME_PASSWORD_FILE",
    "ANSIBLE_GALAXY_TOKEN_PATH", "ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_PRIVATE_ROLE_VARS", "ANSIBLE_CONFIG",
    "ANSIBLE_SSH_ARGS", "ANSIBLE_FORCE_COLOR", "ANSIBLE_VAULT_IDENTITY_LIST", "LC_ALL",
]  # fmt: skip


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_runner_env_drops_ansible_own_secret_variables(name: str) -> None:
    runner_dir = _load("runner_dir")
    assert runner_dir.credential_name(name)
    assert name not in runner_dir.runner_env({"PATH": "/bin", name: "hunter2"}, keep=name)  # not even kept on request


@pytest.mark.parametrize("name", KEPT_NAMES)
def test_runner_env_keeps_paths_to_secrets_and_ordinary_settings(name: str) -> None:
    runner_dir = _load("runner_dir")
    assert name in runner_dir.runner_env({"PATH": "/bin", name: "/run/x"}, keep="")


@pytest.mark.parametrize(
    "value",
    [
        "ghp_" + "A1b2C3d4" * 5, "glpat-" + "x1Y2z3" * 4, "AKIA" + "ABCDEFGH12345678", "xoxb-123456789012-abcdef",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "nvapi-" + "Zz9" * 12,
    ],
)  # fmt: skip
def test_runner_env_drops_a_token_shaped_value_whatever_its_name(value: str) -> None:
    runner_dir = _load("runner_dir")
    kept = runner_dir.runner_env({"PATH": "/bin", "ANSIBLE_EXTRA_THING": value, "DEPLOY": value}, keep="DEPLOY")
    assert kept == {"PATH": "/bin"}


def test_scrub_filters_recorded_environments(tmp_path: Path) -> None:
    runner_dir = _load("runner_dir")
    art = tmp_path / "artifacts" / "old-run"
    art.mkdir(parents=True)
    record = {"command": ["ansible-playbook", "x.yml"], "cwd": "/p", "env": {"PATH": "/bin", SECRET_NAME: SECRET}}
    (art / "command").write_text(json.dumps(record))
    assert runner_dir.scrub(tmp_path) == [art / "command"]
    assert json.loads((art / "command").read_text()) == {**record, "env": {"PATH": "/bin"}}
    assert runner_dir.scrub(tmp_path) == []  # nothing left to scrub


def test_make_runner_writes_no_caller_secret_under_build_runner(tmp_path: Path) -> None:
    """The acceptance check: a secret in the environment of `make runner` is nowhere in its private data dir."""
    pdd, plan_root = tmp_path / "runner", tmp_path / "plan"
    env = {**os.environ, SECRET_NAME: SECRET, "ANSIBLE_GALAXY_SERVER_X_TOKEN": SECRET}
    run = subprocess.run(
        [
            "make", "-o", "setup", "-o", ".venv/.stamp", "runner", "TIER=tier1", "PLAYBOOK=plan",
            f"RUNNER_DIR={pdd}", "RUNNER_IDENT=plan-secret",
            f"RUNNER_ARGS=--cmdline '-e gpucluster_plan_root={plan_root}'",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    art = pdd / "artifacts" / "plan-secret"
    assert (art / "status").read_text().strip() == "successful"
    assert (plan_root / "tier1" / "plan.json").is_file()
    command = json.loads((art / "command").read_text())
    assert "ANSIBLE_CONFIG" in command["env"] and "PATH" in command["env"]  # the environment is recorded...
    assert SECRET_NAME not in command["env"] and "ANSIBLE_GALAXY_SERVER_X_TOKEN" not in command["env"]  # ...filtered
    assert _files_holding(pdd, SECRET) == []
    assert _files_holding(plan_root, SECRET) == []


def test_prepare_keeps_artifacts_and_adds_the_lab_sources(tmp_path: Path) -> None:
    runner_dir = _load("runner_dir")
    fake_root = tmp_path / "repo"
    for sub in ("inventories/tier2", "lab/overlay", "tools/ci/runner"):
        (fake_root / sub).parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(ROOT / sub, fake_root / sub)
    (fake_root / "ansible.cfg").write_text("[defaults]\n")
    pdd = tmp_path / "pdd"
    (pdd / "artifacts" / "old").mkdir(parents=True)
    with pytest.raises(SystemExit, match="make lab-up TIER=tier2"):
        runner_dir.prepare("inventories/tier2", pdd, lab="tier2", root=fake_root)
    (fake_root / ".lab" / "tier2").mkdir(parents=True)
    (fake_root / ".lab" / "tier2" / "inventory.yml").write_text("all:\n  hosts: {}\n")
    runner_dir.prepare("inventories/tier2", pdd, lab="tier2", root=fake_root)
    assert (pdd / "artifacts" / "old").is_dir()
    assert (pdd / "inventory" / "zz-lab-overlay.yml").read_text() == (ROOT / "lab/overlay/lab.yml").read_text()
    assert (pdd / "inventory" / "zz-lab-connection.yml").is_file()
    assert (pdd / "project").resolve() == fake_root.resolve()
    runner_dir.prepare("inventories/tier2", pdd, root=fake_root)  # again, without the lab
    assert not (pdd / "inventory" / "zz-lab-overlay.yml").exists()


def test_make_runner_and_pipeline_parse() -> None:
    run = subprocess.run(
        ["make", "-n", "-f", "Makefile", "-f", "mk/ci.mk", "runner", "TIER=tier2", "PLAYBOOK=site", "LAB=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    prepare = "tools/ci/runner_dir.py prepare --inventory inventories/tier2 --dest build/runner/tier2 --lab tier2"
    assert prepare in run.stdout
    assert "ansible-runner run build/runner/tier2 -p playbooks/site.yml --ident site-" in run.stdout
    assert "tools/ci/runner_dir.py exec -- " in run.stdout  # ansible-runner gets the filtered environment
    pipeline = ["bash", "-n", "tools/ci/pipeline.sh"]
    bash = subprocess.run(pipeline, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bash.returncode == 0, bash.stderr


def test_make_check_runs_the_quick_checks_without_root_or_containers() -> None:
    run = subprocess.run(
        ["make", "-n", "-o", "setup", "-o", ".venv/.stamp", "check"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = run.stdout
    steps = ("ruff check .", "ansible-lint --profile production", "tools/sanity/run.py", "pytest tests/integration")
    for step in steps:
        assert step in out, step
    # the unit suite (pyproject's testpaths, no path given), on UNIT_WORKERS pytest-xdist workers
    assert re.search(r"\.venv/bin/pytest -n auto --dist loadgroup\s*$", out, re.M)
    for heavy in ("host_deps.sh", "molecule", "lab-images", "podman"):  # root, containers
        assert heavy not in out, heavy
    readme = (ROOT / "README.md").read_text().split("## ")[0]  # the start block
    assert "make plan" in readme and "make test" in readme and "make check" in readme
    assert "min" in readme and "~20 s" in readme  # says what each costs


# --- sliced runs (tools/ci/run_slices.py): slicing, command lines, plan hash, summaries ---------

DATA = ROOT / "tests" / "data" / "runner"
#: ok per host in the recap of tests/data/runner/site-slice1 (a recorded compute slice)
RECORDED_OK = {"compute01": 48, "compute03": 46, "compute05": 46, "compute07": 46, "localhost": 3}


@pytest.fixture(scope="module")
def slices() -> ModuleType:
    _load("runner_dir")
    return _load("run_slices")


def test_slices_are_deterministic_balanced_and_cover_every_host(slices: ModuleType) -> None:
    hosts = [f"gpu{i}" for i in range(1, 104)]  # 103 hosts: not a multiple of any count below
    for count in (1, 2, 3, 7, 16):
        shares = slices.slice_hosts(hosts, count)
        assert len(shares) == count
        assert sorted(h for s in shares for h in s) == sorted(hosts)  # every host once
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
        shuffled = list(reversed(hosts))
        random.Random(count).shuffle(shuffled)
        assert slices.slice_hosts(shuffled + hosts[:5], count) == shares  # order and duplicates do not matter
    # natural order, round robin: gpu2 before gpu10
    assert slices.slice_hosts(["gpu10", "gpu2", "gpu1", "gpu3"], 2) == [["gpu1", "gpu3"], ["gpu2", "gpu10"]]
    assert slices.slice_hosts(["a1", "a2"], 5) == [["a1"], ["a2"]]  # never an empty slice
    assert slices.slice_hosts([], 3) == []
    with pytest.raises(ValueError, match="slices must be 1 or more"):
        slices.slice_hosts(["a1"], 0)


def test_slice0_holds_every_non_compute_host_and_the_compute_slices_only_compute(slices: ModuleType) -> None:
    _, groups = load_inventory("tier4")
    plan = slices.plan_slices("site-x", groups, 3)
    assert [s.ident for s in plan] == ["site-x-slice0", "site-x-slice1", "site-x-slice2", "site-x-slice3"]
    assert plan[0].hosts == ("head01", "head02", "mds01", "oss01", "oss02")  # head02: the backup controller
    compute = [h for s in plan[1:] for h in s.hosts]
    assert sorted(compute) == sorted(groups["compute"]) and len(compute) == len(set(compute)) == 8
    assert [len(s.hosts) for s in plan[1:]] == [3, 3, 2]
    assert all(s.limit_hosts[0] == "localhost" for s in plan)  # the plan play runs in every slice


def test_inventory_groups_flattens_children(slices: ModuleType) -> None:
    groups = slices.inventory_groups(
        ROOT / "inventories" / "tier4", str(Path(sys.executable).parent / "ansible-inventory")
    )
    assert groups["storage"] == ["mds01", "oss01", "oss02"]
    assert len(groups["compute"]) == 8 and len(groups["all"]) == 13 and groups["slurm_backup"] == ["head02"]
    assert slices.plan_slices("i", groups, 2)[0].hosts == ("head01", "head02", "mds01", "oss01", "oss02")


def test_each_slice_command_carries_its_limit_the_plan_file_and_hash(slices: ModuleType, tmp_path: Path) -> None:
    _, groups = load_inventory("tier4")
    extravars = {"gpucluster_plan_file": "/x/plan dir/plan.json", "gpucluster_plan_sha256_expected": "ab" * 32}
    commands = []
    for s in slices.plan_slices("site-1", groups, 2):
        limit = slices.limit_argument(s.limit_hosts, tmp_path / f"{s.ident}.limit")
        cmd = slices.runner_command(
            "ansible-runner", Path("/pdd"), "site", s.ident, extravars=extravars, limit=limit, extra_args=["-v"]
        )
        assert cmd[:7] == ["ansible-runner", "run", "/pdd", "-p", "playbooks/site.yml", "--ident", s.ident]
        assert cmd[cmd.index("--limit") + 1] == ",".join(["localhost", *s.hosts])
        # ansible-runner splits --cmdline with shlex: one -e with the JSON, spaces kept
        e = shlex.split(cmd[cmd.index("--cmdline") + 1])
        assert e[0] == "-e" and json.loads(e[1]) == extravars
        assert cmd[-1] == "-v"
        commands.append(cmd)
    assert commands[1][commands[1].index("--limit") + 1] == "localhost,compute01,compute03,compute05,compute07"
    # the same extra vars in every slice: one plan, one hash
    assert len({c[c.index("--cmdline") + 1] for c in commands}) == 1


def test_a_long_limit_goes_to_a_file(slices: ModuleType, tmp_path: Path) -> None:
    hosts = ["localhost", *(f"compute{i:05d}" for i in range(20000))]
    limit = slices.limit_argument(hosts, tmp_path / "s.limit")
    assert limit == f"@{tmp_path / 's.limit'}"
    assert (tmp_path / "s.limit").read_text().split() == hosts
    assert slices.limit_argument(hosts[:3], tmp_path / "t.limit") == "localhost,compute00000,compute00001"


def test_the_plan_hash_is_the_same_for_every_computation_of_one_inventory(slices: ModuleType) -> None:
    site, groups = load_inventory("tier4")
    first = slices.plan_sha256(cluster_plan(copy.deepcopy(site), groups))
    assert first == slices.plan_sha256(cluster_plan(copy.deepcopy(site), groups))
    # groups in another order, hosts shuffled in each group: the plan and its hash stay
    rng = random.Random(14)
    names = list(groups)
    rng.shuffle(names)
    shuffled = {g: rng.sample(groups[g], len(groups[g])) for g in names}
    plan = cluster_plan(copy.deepcopy(site), shuffled)
    assert slices.plan_sha256(plan) == first
    # the hash of plan.json as written (to_nice_json) and read back by each slice
    assert slices.plan_sha256(json.loads(json.dumps(plan, indent=2))) == first
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    gone = groups["compute"][-1]  # out of every group, "all" too: a host in no group is an error
    fewer = {g: [h for h in hosts if h != gone] for g, hosts in groups.items()}
    assert slices.plan_sha256(cluster_plan(copy.deepcopy(site), fewer)) != first


def test_the_script_hashes_as_the_plan_play(slices: ModuleType) -> None:
    """run_slices hashes with the engine's helper (the plan play's gpucluster_plan_sha256): no copy of it."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import host_plan

    assert slices.plan_sha256 is host_plan.plan_sha256
    assert not hasattr(slices, "local_plan_sha256")
    text = (ROOT / "tools" / "ci" / "run_slices.py").read_text()
    assert "hashlib" not in text and "def _canonical" not in text  # no canonical form of its own


def test_plan_hash_checked_against_plan_sha256(slices: ModuleType, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"b": [1, 2.5], "a": {"z": None}}, indent=2))
    digest = slices.read_plan_hash(plan_file)
    assert digest == hashlib.sha256(b'{"a":{"z":null},"b":[1,2.5]}').hexdigest()
    (tmp_path / "plan.sha256").write_text(f"{digest}  plan.json\n")
    assert slices.read_plan_hash(plan_file) == digest
    (tmp_path / "plan.sha256").write_text("0" * 64 + "\n")
    with pytest.raises(SystemExit, match="hashes to " + digest):
        slices.read_plan_hash(plan_file)


def test_summaries_from_recorded_job_events(slices: ModuleType) -> None:
    ok = slices.summarise("slice1", DATA / "site-slice1", 4)
    assert (ok.status, ok.rc, ok.hosts, ok.changed, ok.failed, ok.unreachable) == ("successful", 0, 4, 0, 0, 0)
    assert ok.ok == sum(RECORDED_OK.values())
    assert ok.failed_tasks == []  # an ignored failure is not a failed task
    assert "slice1" in ok.line() and "changed=0" in ok.line() and "rc=0" in ok.line()
    bad = slices.summarise("slice2", DATA / "site-slice2", 4)
    assert (bad.status, bad.rc, bad.changed, bad.failed) == ("failed", 2, 1, 1)
    assert bad.failed_tasks == [{"host": "compute02", "task": "Start slurmd"}]
    missing = slices.summarise("slice3", DATA / "site-slice3", 4)
    assert (missing.status, missing.rc) == ("not run", None)
    assert slices.exit_code([ok]) == 0
    assert slices.exit_code([ok, bad, missing]) == 2
    assert slices.exit_code([ok, missing]) == 1
    assert slices.exit_code([ok, bad], expect_unchanged=True) == 2


def test_make_runner_slices_parses() -> None:
    run = subprocess.run(
        [
            "make",
            "-n",
            "-f",
            "Makefile",
            "-f",
            "mk/ci.mk",
            "runner",
            "TIER=tier4",
            "PLAYBOOK=site",
            "SLICES=2",
            "LAB=1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = " ".join(run.stdout.replace("\\\n", " ").split())
    assert "tools/ci/run_slices.py --inventory inventories/tier4 --dest build/runner/tier4 --playbook site" in out
    assert "--slices 2 --ident site-" in out and "--lab tier4" in out
    assert "ansible-runner run" not in out  # the script runs ansible-runner, once per slice


def test_container_mode_paths_resolve_inside_the_container(tmp_path: Path) -> None:
    """ansible-runner's container mode (an execution environment) mounts the private data dir at /runner
    and works in /runner/project: the project is a copy whose links stay inside it, ANSIBLE_CONFIG is
    the container's path, and the command ansible-runner builds finds the playbook and the config there."""
    from ansible_runner.config.runner import RunnerConfig

    runner_dir = _load("runner_dir")
    pdd = runner_dir.prepare("inventories/tier1", tmp_path / "pdd", container=True)
    project = pdd / "project"
    assert project.is_dir() and not project.is_symlink()
    assert (project / "ansible.cfg").is_file() and (project / "playbooks" / "plan.yml").is_file()
    assert not {"tests", "molecule", ".venv", "build", ".git"} & {p.name for p in project.iterdir()}
    # the collection resolves in place inside the copy (collections/ansible_collections/gpucluster/tiers -> ../../..)
    in_place = project / "collections" / "ansible_collections" / "gpucluster" / "tiers"
    assert in_place.is_symlink() and in_place.resolve() == project.resolve()
    for link in (p for p in project.rglob("*") if p.is_symlink()):
        assert not os.path.isabs(os.readlink(link)), link
    envvars = yaml.safe_load((pdd / "env" / "envvars").read_text())
    assert envvars["ANSIBLE_CONFIG"] == "/runner/project/ansible.cfg"
    assert str(ROOT) not in (pdd / "env" / "envvars").read_text()

    config = RunnerConfig(
        private_data_dir=str(pdd),
        playbook="playbooks/plan.yml",
        ident="ee",
        process_isolation=True,
        process_isolation_executable="podman",
        container_image="gpucluster-tiers-ee:0.1.0",
    )
    config.prepare()  # builds the podman command; starts nothing
    command = config.command
    assert command[:2] == ["podman", "run"]
    mount = command[command.index("-v") + 1]
    host, inside = mount.split(":")[:2]
    assert Path(host) == pdd and inside.rstrip("/") == runner_dir.CONTAINER_MOUNT
    workdir = command[command.index("--workdir") + 1]
    assert workdir == runner_dir.CONTAINER_PROJECT

    def on_host(path: str) -> Path:
        """A path inside the container as the host sees it through the mount."""
        assert path.startswith(runner_dir.CONTAINER_MOUNT + "/"), path
        return pdd / path[len(runner_dir.CONTAINER_MOUNT) + 1 :]

    assert on_host(config.env["ANSIBLE_CONFIG"]).is_file()
    assert (on_host(workdir) / command[-1]).is_file()  # the playbook, relative to the working directory
    assert on_host(command[command.index("-i") + 1]).joinpath("hosts.yml").is_file()
    # no Ansible setting of the run points back to the host's repository
    assert not [k for k, v in config.env.items() if k.startswith("ANSIBLE_") and str(ROOT) in str(v)]


def test_container_mode_refuses_the_lab(tmp_path: Path) -> None:
    runner_dir = _load("runner_dir")
    with pytest.raises(SystemExit, match="--lab and --container do not mix"):
        runner_dir.prepare("inventories/tier1", tmp_path / "pdd", lab="tier1", container=True)


def test_make_runner_with_an_image_runs_in_container_mode() -> None:
    run = subprocess.run(
        ["make", "-n", "-f", "Makefile", "-f", "mk/ci.mk", "runner", "TIER=tier1", "RUNNER_IMAGE=ee:1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "--dest build/runner/tier1" in run.stdout and "--container" in run.stdout
    assert "--container-image ee:1 --process-isolation --process-isolation-executable podman" in run.stdout
