"""A secret never lands in plan.json, report.md/html, build/, the runner's artifacts or a 0644 file (issue 37).

Fake secrets go in through every channel a site has, then every file the runs wrote is searched for
each of them:

- the inventory's vault: the secret variables the roles read (Grafana's admin password, the registries'
  credentials, the BeeGFS secret, the accounting database and SMTP passwords), encrypted with Ansible
  Vault as a site keeps them, the vault's password in a file named by ANSIBLE_VAULT_PASSWORD_FILE;
- the environment: ansible-core's own secret variables (ANSIBLE_BECOME_PASS, ANSIBLE_REMOTE_PASS,
  ANSIBLE_VAULT_PASS ...), CI tokens, a token-shaped value under an ordinary name, and RUNNER_ENV_KEEP
  asking for a credential;
- a token-shaped credential NAME in gpucluster_containers.registries: refused at plan time, the error
  naming the field without echoing the value.

The plan play runs as make plan runs it (ansible-playbook playbooks/plan.yml, the caller's whole
environment) and through ansible-runner (tools/ci/run_plan.py, the filtered environment); the files
searched: the plan's folder (plan.json, report.md/html, every host's rendered files), the fact cache,
and the runner's private data dir (artifacts: command, stdout, job events; env; the inventory copy, which
holds the vault's ciphertext only).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from conftest import ROOT

#: one pytest-xdist worker runs this module: its module fixture (built once) is costly
pytestmark = pytest.mark.xdist_group("secrets_never_written")

PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
TAG = uuid.uuid4().hex[:12]

#: the roles' secret variables, as a site's vault holds them (the names the roles read, or will)
VAULT_SECRETS = {
    "head_grafana_admin_password": f"grafana-admin-{TAG}",
    "compute_container_credentials": {"ngc": {"username": "$oauthtoken", "password": f"ngc-password-{TAG}"}},
    "storage_beegfs_conn_auth_secret": f"beegfs-secret-{TAG}",
    "slurm_db_password": f"slurmdbd-password-{TAG}",
    "head_alertmanager_smtp_password": f"smtp-password-{TAG}",
}
SECRET_WORDS = ("password", "passwd", "secret", "credential", "token")


def _role_secret_variables() -> dict[str, object]:
    """Every role variable named like a secret in the roles' argument specs (what the roles read from the
    site's vault, whoever adds one): a fake value each, a mapping of {name: {username, password}} for a dict."""
    out: dict[str, object] = {}
    for spec in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        for entry in (yaml.safe_load(spec.read_text()).get("argument_specs") or {}).values():
            for name, option in (entry.get("options") or {}).items():
                words = name.lower().split("_")
                if words[-1] in ("file", "dir", "path", "mode", "owner", "group") or "repo" in words:
                    continue
                if any(w.startswith(SECRET_WORDS) for w in words):
                    fake = f"{name}-{TAG}"
                    out[name] = {"site": {"username": "u", "password": fake}} if option.get("type") == "dict" else fake
    return out


for _name, _fake in _role_secret_variables().items():
    VAULT_SECRETS.setdefault(_name, _fake)
VAULT_PASSWORD = f"vault-password-{TAG}"
#: the caller's environment: ansible-core's own secret settings, CI tokens, a token under a plain name
ENV_SECRETS = {
    "ANSIBLE_BECOME_PASS": f"become-{TAG}",
    "ANSIBLE_REMOTE_PASS": f"remote-{TAG}",
    "ANSIBLE_VAULT_PASS": f"vaultpass-{TAG}",
    "ANSIBLE_NET_PASSWORD": f"netpass-{TAG}",
    "ANSIBLE_GALAXY_SERVER_X_TOKEN": f"galaxy-{TAG}",
    "ANSIBLE_AWS_CREDS": f"creds-{TAG}",
    "ANSIBLE_SOME_SETTING": "ghp_" + (TAG * 4)[:36],  # a GitHub token under an ordinary name
    "CI_JOB_TOKEN": f"ci-job-{TAG}",
    "GITHUB_TOKEN": f"github-{TAG}",
    "AWS_SECRET_ACCESS_KEY": f"aws-{TAG}",
}
#: a credential's NAME shaped like a token (a GitHub personal access token)
TOKEN_NAME = "ghp_" + (TAG.upper() + TAG) * 2 + "abcd"


def _secrets() -> list[str]:
    found: list[str] = [VAULT_PASSWORD, *ENV_SECRETS.values()]

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, str) and TAG in value:
            found.append(value)

    walk(VAULT_SECRETS)
    return found


def _files_holding(root: Path, needles: list[str]) -> dict[str, list[str]]:
    """{needle: files under ``root`` holding it} (links not followed: project/ is the repository)."""
    hits: dict[str, list[str]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            data = path.read_bytes()
            for needle in needles:
                if needle.encode() in data:
                    hits.setdefault(needle, []).append(str(path.relative_to(root)))
    return hits


def _vault(plaintext: str) -> str:
    from ansible.parsing.vault import VaultLib, VaultSecret

    vault = VaultLib([("default", VaultSecret(VAULT_PASSWORD.encode()))])
    return vault.encrypt(plaintext).decode()


def _vaulted(value: object) -> object:
    """``value`` with every string encrypted inline (``!vault``), as ansible-vault encrypt_string writes it."""
    if isinstance(value, dict):
        return {k: _vaulted(v) for k, v in value.items()}
    return _Vaulted(_vault(str(value)))


class _Vaulted(str):
    pass


def _dump(data: dict[str, object]) -> str:
    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(_Vaulted, lambda d, v: d.represent_scalar("!vault", str(v), style="|"))
    return yaml.dump(data, Dumper=Dumper, sort_keys=True)


def _load_runner(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "ci" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return sys.modules[name]


@contextmanager
def _environ(extra: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """tier1 with the vault file; the vault's password file; a fact cache of its own."""
    base = tmp_path_factory.mktemp("secrets")
    inv = base / "inv"
    shutil.copytree(ROOT / "inventories" / "tier1", inv)
    (inv / "group_vars" / "all" / "vault.yml").write_text("---\n" + _dump(_vaulted(VAULT_SECRETS)))  # type: ignore[arg-type]
    password_file = base / "vault-password"
    password_file.write_text(VAULT_PASSWORD + "\n")
    password_file.chmod(0o600)
    facts = base / "facts"
    return {"base": base, "inv": inv, "password_file": password_file, "facts": facts}


def _env(site: dict[str, Path]) -> dict[str, str]:
    return {
        **ENV_SECRETS,
        "RUNNER_ENV_KEEP": "CI_JOB_TOKEN GITHUB_TOKEN",  # asking for credentials: refused anyway
        "ANSIBLE_VAULT_PASSWORD_FILE": str(site["password_file"]),  # a path: passed, and the vault opens
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(site["facts"]),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
    }


def test_the_roles_secret_variables_are_fed() -> None:
    assert "head_grafana_admin_password" in _role_secret_variables()


def test_the_vault_file_holds_ciphertext_only(site: dict[str, Path]) -> None:
    text = (site["inv"] / "group_vars" / "all" / "vault.yml").read_text()
    assert "$ANSIBLE_VAULT;1.1;AES256" in text
    assert not [s for s in _secrets() if s in text]


def test_make_plan_writes_no_secret(site: dict[str, Path]) -> None:
    """ansible-playbook playbooks/plan.yml (what make plan runs) with the caller's whole environment."""
    plan_root = site["base"] / "plan-direct"
    run = subprocess.run(
        [PLAYBOOK, "-i", str(site["inv"]), "playbooks/plan.yml", "-e", f"gpucluster_plan_root={plan_root}"],
        cwd=ROOT, env={**os.environ, **_env(site)}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    plan = plan_root / "tier1"
    assert {"plan.json", "report.md", "report.html"} <= {p.name for p in plan.iterdir()}
    assert (plan / "hosts").is_dir()
    assert _files_holding(plan_root, _secrets()) == {}
    if site["facts"].exists():
        assert _files_holding(site["facts"], _secrets()) == {}
    assert not [s for s in _secrets() if s in run.stdout + run.stderr]


def test_the_runner_writes_no_secret(site: dict[str, Path]) -> None:
    """tools/ci/run_plan.py (ansible-runner's Python API): artifacts, env, inventory copy and the plan."""
    run_plan = _load_runner("run_plan")
    pdd, plan_root = site["base"] / "pdd", site["base"] / "plan-runner"
    with _environ(_env(site)):
        result = run_plan.run_plan(site["inv"], pdd, plan_root=plan_root, ident="secrets")
    assert result["status"] == "successful", result
    command = (pdd / "artifacts" / "secrets" / "command").read_text()
    assert "ANSIBLE_VAULT_PASSWORD_FILE" in command  # the path is passed (the vault opened) ...
    for name in ENV_SECRETS:
        assert f'"{name}"' not in command, name  # ... no credential's name, not even through RUNNER_ENV_KEEP
    assert (plan_root / "tier1" / "plan.json").is_file()
    assert _files_holding(pdd, _secrets()) == {}
    assert _files_holding(plan_root, _secrets()) == {}


def test_a_token_shaped_credential_name_is_refused_and_never_echoed(site: dict[str, Path]) -> None:
    """The registries' credential NAME given a token: the plan stops naming the field, says the value
    looks like a secret, and no file written (plan folder, runner artifacts) nor the output holds it."""
    base = site["base"] / "token"
    inv = base / "inv"
    shutil.copytree(ROOT / "inventories" / "tier3", inv)
    containers = inv / "group_vars" / "all" / "containers.yml"
    containers.write_text(containers.read_text().replace("credential: ngc}", f"credential: {TOKEN_NAME}}}"))
    assert TOKEN_NAME in containers.read_text()
    run_plan = _load_runner("run_plan")
    pdd, plan_root = base / "pdd", base / "plan"
    with _environ(_env(site)):
        result = run_plan.run_plan(inv, pdd, plan_root=plan_root, ident="token")
    assert result["status"] == "failed"
    stdout = (pdd / "artifacts" / "token" / "stdout").read_text()
    assert "inventory field 'gpucluster_containers.registries[0].credential'" in stdout
    assert "looks like a secret (a GitHub token)" in stdout
    assert _files_holding(pdd / "artifacts", [TOKEN_NAME]) == {}
    assert not plan_root.exists() or _files_holding(plan_root, [TOKEN_NAME]) == {}


def test_the_runner_and_the_plan_share_one_token_rule() -> None:
    """tools/ci/runner_dir.py's SECRET_VALUE (no collection import there) agrees with the plan's SECRET_SHAPES."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.values import secret_shape

    runner_dir = _load_runner("runner_dir")
    samples = [
        TOKEN_NAME, "github_pat_" + "A1" * 20, "glpat-" + "x1Y2" * 5, "AKIAABCDEFGH12345678", "xoxb-1234-5678-abcdef",
        "nvapi-" + "Ab1" * 10, "hf_" + "Ab1" * 11, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2ln",
        "-----BEGIN OPENSSH PRIVATE KEY-----", "ngc", "nvcr_pull", "/run/secrets/vault", "C.UTF-8",
    ]  # fmt: skip
    for sample in samples:
        assert bool(runner_dir.SECRET_VALUE.search(sample)) == (secret_shape(sample) is not None), sample
