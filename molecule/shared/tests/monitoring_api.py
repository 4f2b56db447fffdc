"""Calls to the head's Prometheus and Alertmanager APIs from inside the lab, with or without the
head's credentials (plan.monitoring.auth: basic auth, the password in a root-only file on the head).

Every call runs Python's urllib on a lab host; the credentialed ones read the password file on the
head itself, so the password never crosses the test's command line or output.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

#: the script run on a host: METHOD URL [BODY]; prints {"status": code, "body": text}. With
#: PASSWORD_FILE (or PASSWORD) set it sends basic auth as USER_NAME with that password.
_SCRIPT = r"""
import base64, json, os, sys, urllib.request, urllib.error
method, url = sys.argv[1], sys.argv[2]
body = sys.argv[3].encode() if len(sys.argv) > 3 else None
req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
password = os.environ.get("PASSWORD")
if os.environ.get("PASSWORD_FILE"):
    with open(os.environ["PASSWORD_FILE"]) as f:
        password = f.read().strip()
if password is not None:
    token = base64.b64encode((os.environ["USER_NAME"] + ":" + password).encode()).decode()
    req.add_header("Authorization", "Basic " + token)
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": e.read().decode()}))
"""

#: the same for many GET URLs in one call (one SSH round trip): URL... ; prints [{"status", "body"}, ...]
_BATCH_SCRIPT = r"""
import base64, json, os, sys, urllib.request, urllib.error
headers = {}
if os.environ.get("PASSWORD_FILE"):
    with open(os.environ["PASSWORD_FILE"]) as f:
        token = base64.b64encode((os.environ["USER_NAME"] + ":" + f.read().strip()).encode()).decode()
    headers["Authorization"] = "Basic " + token
answers = []
for url in sys.argv[1:]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            answers.append({"status": r.status, "body": r.read().decode()})
    except urllib.error.HTTPError as e:
        answers.append({"status": e.code, "body": e.read().decode()})
print(json.dumps(answers))
"""


def call(
    host: Any,
    plan: dict[str, Any],
    service: str,
    path: str,
    *,
    method: str = "GET",
    body: Any = None,
    credentials: bool = True,
    run_as: str | None = None,
    password: str | None = None,
) -> tuple[int, str]:
    """(HTTP status, body) of ``method`` on ``service`` ("prometheus" or "alertmanager") at ``path``,
    from ``host``, as root or ``run_as``; ``credentials`` reads the password file on ``host`` (the
    head), ``password`` sends that one instead (a tenant's host has no password file)."""
    mon = plan["monitoring"]
    url = f"http://{mon['address']}:{mon[f'{service}_port']}{path}"
    args = [method, url] + ([json.dumps(body)] if body is not None else [])
    env = ""
    if password is not None:
        env = f"PASSWORD={shlex.quote(password)} USER_NAME={shlex.quote(mon['auth']['user'])} "
    elif credentials:
        auth = mon["auth"]
        env = f"PASSWORD_FILE={shlex.quote(auth['password_file'])} USER_NAME={shlex.quote(auth['user'])} "
    command = f"env {env}python3 -c {shlex.quote(_SCRIPT)} {' '.join(shlex.quote(a) for a in args)}"
    if run_as:
        command = f"cd /tmp && runuser -u {shlex.quote(run_as)} -- {command}"
    answer = json.loads(host.check_output(command))
    return int(answer["status"]), str(answer["body"])


def api(head: Any, plan: dict[str, Any], path: str) -> Any:
    """Prometheus' ``/api/v1/<path>`` data, asked on the head with the head's credentials."""
    status, body = call(head, plan, "prometheus", f"/api/v1/{path}")
    assert status == 200, (path, status, body)
    return json.loads(body)["data"]


def queries(head: Any, plan: dict[str, Any], exprs: list[str]) -> list[dict[str, Any]]:
    """Prometheus' answers to many instant queries (error answers included), asked on the head with the
    head's credentials in one command: one SSH round trip and one Python start for all of them."""
    from urllib.parse import urlencode

    mon, auth = plan["monitoring"], plan["monitoring"]["auth"]
    base = f"http://{mon['address']}:{mon['prometheus_port']}/api/v1/query?"
    urls = [base + urlencode({"query": expr}) for expr in exprs]
    env = f"PASSWORD_FILE={shlex.quote(auth['password_file'])} USER_NAME={shlex.quote(auth['user'])} "
    out = head.check_output(
        f"env {env}python3 -c {shlex.quote(_BATCH_SCRIPT)} {' '.join(shlex.quote(u) for u in urls)}"
    )
    return [dict(json.loads(answer["body"])) for answer in json.loads(out)]


def query(head: Any, plan: dict[str, Any], expr: str) -> dict[str, Any]:
    """Prometheus' answer to an instant query (an error answer included), with the head's credentials."""
    from urllib.parse import urlencode

    _status, body = call(head, plan, "prometheus", f"/api/v1/query?{urlencode({'query': expr})}")
    return dict(json.loads(body))
