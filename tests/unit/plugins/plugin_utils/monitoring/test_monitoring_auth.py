"""Who may use the head's monitoring APIs (issue 37): basic auth in front of Prometheus and
Alertmanager (plan.monitoring.auth), their web configs written on the head by
roles/head/files/gpucluster-web-auth, the site's Alertmanager receivers with file-only secrets, and
Grafana without admin/admin, anonymous access or sign-up. No secret ever in the plan or a rendered
file: they hold paths only."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, TIERS, cluster_plan, load_inventory, load_script, render_role_template

WEB_AUTH = ROOT / "roles" / "head" / "files" / "gpucluster-web-auth"
AMTOOL = shutil.which("amtool")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="gpucluster-web-auth chowns its files to root")


@cache
def _plan(tier: str) -> dict[str, Any]:
    return cluster_plan(*load_inventory(tier))


def _render(src: str, plan: dict[str, Any], **extra: Any) -> str:
    return render_role_template("head", src, plan, plan["cluster"]["head"], **extra)


# ---------------------------------------------------------------- the plan and the rendered files


@pytest.mark.parametrize("tier", TIERS)
def test_both_apis_read_a_web_config_and_prometheus_authenticates_with_a_password_file(tier: str) -> None:
    plan = _plan(tier)
    m = plan["monitoring"]
    auth = m["auth"]
    assert auth["scheme"] == "basic" and auth["group"] == "prometheus"
    assert auth["password_file"].startswith(auth["secrets_dir"] + "/")
    prometheus = _render("prometheus.default.j2", plan)
    alertmanager = _render("alertmanager.default.j2", plan)
    assert f"--web.config.file={auth['web_config']['prometheus']}" in prometheus
    assert f"--web.config.file={auth['web_config']['alertmanager']}" in alertmanager
    assert f"--web.listen-address={m['address']}:{m['alertmanager_port']}" in alertmanager
    config = yaml.safe_load(_render("prometheus.yml.j2", plan))
    basic = {"username": auth["user"], "password_file": auth["password_file"]}
    (manager,) = config["alerting"]["alertmanagers"]
    assert manager["basic_auth"] == basic
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert jobs["prometheus"]["basic_auth"] == basic
    assert jobs["prometheus"]["static_configs"][0]["targets"] == [f"{m['address']}:{m['prometheus_port']}"]


def test_grafana_has_its_own_account_on_prometheus_only() -> None:
    m = _plan("tier3")["monitoring"]
    grafana = m["grafana"]
    assert grafana["datasource"]["user"] != m["auth"]["user"]
    assert grafana["datasource"]["password_file"] != m["auth"]["password_file"]
    assert set(m["auth"]["web_config"]) == {"prometheus", "alertmanager"}


@pytest.mark.parametrize("tier", TIERS)
def test_grafana_drop_in_takes_the_admin_password_from_a_file_and_allows_no_anonymous_or_sign_up(tier: str) -> None:
    plan = _plan(tier)
    grafana = plan["monitoring"]["grafana"]
    dropin = _render("grafana-server.conf.j2", plan)
    env = dict(
        line.removeprefix("Environment=").strip('"').split("=", 1)
        for line in dropin.splitlines()
        if line.startswith("Environment=")
    )
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == f"$__file{{{grafana['admin_password_file']}}}"
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert env["GF_SERVER_HTTP_ADDR"] == grafana["http_addr"]
    assert grafana["admin_password_file"].startswith(grafana["secrets_dir"] + "/") and grafana["group"] == "grafana"


def test_the_plan_holds_no_secret_only_paths() -> None:
    """Every credential field of the plan is a path under a secrets folder, never a value."""
    m = _plan("tier3")["monitoring"]
    for path in (
        m["auth"]["password_file"],
        m["grafana"]["admin_password_file"],
        m["grafana"]["datasource"]["password_file"],
    ):
        assert path.startswith(("/etc/prometheus/secrets/", "/etc/grafana/secrets/")), path
    text = json.dumps(m)
    assert "basic_auth_users" not in text and "$2b$" not in text


# ---------------------------------------------------------------- Alertmanager's receivers


def test_without_site_receivers_every_alert_goes_to_the_null_receiver() -> None:
    config = yaml.safe_load(_render("alertmanager.yml.j2", _plan("tier3")))
    assert config["route"]["receiver"] == "default"
    assert config["receivers"] == [{"name": "default"}]


RECEIVERS = [
    {
        "name": "oncall",
        "email_configs": [
            {
                "to": "ops@example.org",
                "from": "alertmanager@example.org",
                "smarthost": "smtp.example.org:587",
                "auth_username": "alertmanager",
                "auth_password_file": "/etc/prometheus/secrets/smtp.password",
            }
        ],
        "webhook_configs": [
            {
                "url": "https://hooks.example.org/gpu",
                "http_config": {
                    "basic_auth": {"username": "am", "password_file": "/etc/prometheus/secrets/hook.password"}
                },
            }
        ],
    },
    {"name": "pager", "pagerduty_configs": [{"routing_key_file": "/etc/prometheus/secrets/pagerduty.key"}]},
]


def test_site_receivers_are_rendered_and_the_first_takes_every_alert(tmp_path: Path) -> None:
    text = _render("alertmanager.yml.j2", _plan("tier3"), head_alertmanager_receivers=RECEIVERS)
    config = yaml.safe_load(text)
    assert config["route"]["receiver"] == "oncall"
    assert config["receivers"] == [{"name": "default"}, *RECEIVERS]
    if AMTOOL:  # Debian's prometheus-alertmanager: the *_file fields are Alertmanager 0.25's
        for name in ("smtp.password", "hook.password", "pagerduty.key"):
            (tmp_path / name).write_text("x\n")
        (tmp_path / "alertmanager.yml").write_text(text.replace("/etc/prometheus/secrets/", f"{tmp_path}/"))
        result = subprocess.run(
            [AMTOOL, "check-config", str(tmp_path / "alertmanager.yml")], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_the_role_refuses_an_inline_receiver_secret() -> None:
    """The role's assertion (tasks/auth.yml) as a regular expression over the receivers' JSON."""
    tasks = yaml.safe_load((ROOT / "roles" / "head" / "tasks" / "auth.yml").read_text())
    (check,) = [t for t in tasks if "inline secret" in t["name"]]
    pattern = re.compile(check["vars"]["head_receiver_secret_keys"].strip())
    assert not pattern.search(json.dumps(RECEIVERS))
    for inline in (
        {"email_configs": [{"auth_password": "hunter2"}]},
        {"slack_configs": [{"api_url": "https://hooks.slack.com/services/T/B/X"}]},
        {"pagerduty_configs": [{"routing_key": "abc"}]},
        {"webhook_configs": [{"http_config": {"basic_auth": {"password": "x"}}}]},
        {"opsgenie_configs": [{"api_key": "k"}]},
    ):
        assert pattern.search(json.dumps([{"name": "x", **inline}])), inline


# ---------------------------------------------------------------- gpucluster-web-auth (on the head)


def _run(*args: str) -> dict[str, Any]:
    out = subprocess.run(["python3", str(WEB_AUTH), *args], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def _check(password: str, hashed: str) -> bool:
    return bool(load_script(WEB_AUTH, "gpucluster_web_auth").check_password(password, hashed))


@as_root
def test_passwords_are_generated_once_and_hashed_only_when_they_change(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    secret = tmp_path / "secrets" / "gpucluster.password"
    other = tmp_path / "grafana" / "prometheus.password"
    args = [
        "--web-config",
        str(web),
        "--group",
        "daemon",
        f"--user=gpucluster={secret}",
        f"--user=grafana={other}:root",
    ]
    first = _run(*args)
    assert first == {"changed": True, "generated": [str(secret), str(other)], "written": True}
    # root-only files: 0640 root:<service group>, 0600 for group root; folders 0750
    assert (secret.stat().st_mode & 0o7777, secret.stat().st_uid) == (0o640, 0)
    assert secret.stat().st_gid == __import__("grp").getgrnam("daemon").gr_gid
    assert other.stat().st_mode & 0o7777 == 0o600 and secret.parent.stat().st_mode & 0o7777 == 0o750
    assert web.stat().st_mode & 0o7777 == 0o640
    config = yaml.safe_load(web.read_text())
    assert set(config) == {"basic_auth_users"}
    users = config["basic_auth_users"]
    assert set(users) == {"gpucluster", "grafana"}
    assert _check(secret.read_text().strip(), users["gpucluster"]) and users["gpucluster"].startswith("$2")
    password = secret.read_text()
    assert password not in web.read_text() and len(password.strip()) >= 40
    # idempotent: no new password, no new hash
    before = web.read_text()
    assert _run(*args) == {"changed": False, "generated": [], "written": False}
    assert web.read_text() == before and secret.read_text() == password
    # a changed password file: its hash only is new, the other user's is kept
    secret.write_text("a new password\n")
    assert _run("--check", *args)["changed"] is True and web.read_text() == before
    assert _run(*args)["written"] is True
    users_after = yaml.safe_load(web.read_text())["basic_auth_users"]
    assert _check("a new password", users_after["gpucluster"]) and users_after["grafana"] == users["grafana"]
    # a user removed from the command line leaves the web config
    assert _run(*args[:5])["written"] is True
    assert set(yaml.safe_load(web.read_text())["basic_auth_users"]) == {"gpucluster"}


@as_root
def test_a_loosened_password_file_is_made_root_only_again(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    secret = tmp_path / "secrets" / "p"
    args = ["--web-config", str(web), "--group", "daemon", f"--user=gpucluster={secret}"]
    _run(*args)
    secret.chmod(0o644)
    web.chmod(0o644)
    assert _run(*args)["changed"] is True
    assert secret.stat().st_mode & 0o7777 == 0o640 and web.stat().st_mode & 0o7777 == 0o640


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool not installed (Debian package prometheus)")
@as_root
def test_promtool_accepts_the_web_config(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    _run("--web-config", str(web), "--group", "root", f"--user=gpucluster={tmp_path / 's' / 'p'}")
    result = subprocess.run(["promtool", "check", "web-config", str(web)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
