"""Strings from the inventory cannot escape the file they land in (issue 16, item 3).

The inventory schema (plugins/plugin_utils/inventory/schema_v1.json) is the first layer: it
types every string, so a quote, a space, ';' or '$' never reaches a template. This module holds
the second layer: each reviewed template is rendered from a plan whose strings use every
character the schema allows that is special somewhere ('-', '.', '_', ':' in names; '+', '@',
'%', '=', ',', ':', '~' in paths; IPv6 NTP servers), and the output must parse in its own
grammar with the value read back unchanged. Plus the repository rule: no shell task pastes a
variable into its script text.

Reviewed here: roles common, compute, fabric, storage and head (not the nftables, grafana or
slurm templates, which other tests own) and playbooks/templates/report.md.j2.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from conftest import ROOT, TIERS, cluster_plan, collection_filters, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host

NAME = "Ai._lab_.x-1"  # cluster_name: letters, digits, '.', '_', '-' ('_' next to '.' is Markdown emphasis)
DOMAIN = "ai-lab.example-1.org"
NTP = ["ntp-1.example.org", "2001:db8::1", "192.0.2.7"]
#: every character abs_path allows beyond letters, digits and '/': ._+@%=,:~-
PATH_CHARS = "a+b@c%d=e,f:g~h_"
#: the roles whose templates this module reviews; the templates other modules own
ROLES = ("common", "compute", "fabric", "storage", "head")
# The mount units (nfs-client.mount.j2, slurm-state.mount.j2) print the engine's unit text as is:
# its Description does not double a '%' of the mount path (storage/nfs.py, slurm/ha.py: an open
# finding for their owners, the hosts got these bytes before the files were in the manifest too).
NOT_REVIEWED = re.compile(r"^(nftables|gpucluster-nftables|grafana|nfs-client\.mount|slurm-state\.mount)")

BASH = shutil.which("bash")


def _netdev(name: str) -> str:
    """An interface name with every special character ifname allows (at most 15 characters)."""
    return name[:9] + "-.:_"


def _rdma(name: str) -> str:
    return name + ".a-b:c_"


def _path(path: str) -> str:
    return path.rstrip("/") + "/_" + PATH_CHARS + "_"


def tricky_inventory(tier: str, **fabric: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """inventories/<tier> with its strings renamed to use the schema's special characters."""
    site, groups = load_inventory(tier)
    site = copy.deepcopy(site)
    site["gpucluster_cluster"].update(name=NAME, domain=DOMAIN)
    site["gpucluster_fabric"].update(fabric)
    if site["gpucluster_fabric"].get("type") != "infiniband":  # an infiniband section on another fabric is refused
        site["gpucluster_fabric"].pop("infiniband", None)
    net = site["gpucluster_network"]
    net["ntp_servers"] = NTP
    net["management"]["interface"] = _netdev(net["management"]["interface"])
    node = site["gpucluster_node"]
    for nic in node.get("nics", []):
        nic.update(netdev=_netdev(nic["netdev"]), name=_rdma(nic["name"]))
    for gpu in node.get("gpus", []):
        if "nic" in gpu:
            gpu["nic"] = _rdma(gpu["nic"])
    if node.get("gpus") and all("pcie_switch" in g for g in node["gpus"]):
        node["nccl_topology"] = "file"  # renders nccl-topo.xml too
    st = site["gpucluster_storage"]
    st["local_scratch"] = _path(st.get("local_scratch", "/raid"))
    devices = [f"/dev/disk/by-id/nvme-A_B+C@d:e.{i}" for i in range(40)]
    if st["type"] == "nfs":
        for export in st["nfs"]["exports"]:
            export.update(path=_path(export["path"]), mount_point=_path(export["mount_point"]))
        base = st["nfs"]["exports"][0]["mount_point"]
    elif st["type"] == "lustre":
        lu = st["lustre"]
        lu.update(
            mount_point=_path(lu["mount_point"]), mdt_devices=[f"/dev/disk/by-id/nvme-M_D+T@d:e.{i}" for i in (0, 1)]
        )
        lu["ost_devices"] = devices[: len(lu["ost_devices"])]
        base = lu["mount_point"]
    else:
        ln = st["local_nvme"]
        ln.update(mount_point=_path(ln["mount_point"]), devices=devices[: len(ln["devices"])])
        base = ln["mount_point"]
    st["paths"] = {k: f"{base}/{k}" for k in st["paths"]}
    return site, groups


_PLANS: dict[str, dict[str, Any]] = {}
CASES = (*TIERS, "tier2-roce")


def tricky_plan(case: str) -> dict[str, Any]:
    """The plan of a tricky inventory (tier2-roce: tier2 on RoCEv2, no reference tier is RoCE)."""
    if case not in _PLANS:
        tier, _, variant = case.partition("-")
        fabric = {"type": "roce"} if variant == "roce" else {}
        _PLANS[case] = cluster_plan(*tricky_inventory(tier, **fabric))
    return _PLANS[case]


def _env(folder: Path) -> jinja2.Environment:
    """Jinja as the roles render (trim_blocks, strict), with ansible.builtin's core filters but
    Jinja's own ``default``: Ansible's needs its templar to see an undefined value."""
    from ansible.plugins.filter.core import FilterModule

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update({k: v for k, v in FilterModule().filters().items() if k not in ("default", "d")})
    env.filters.update(collection_filters())
    return env


def _render(plan: dict[str, Any], host: str, f: dict[str, Any]) -> str:
    env = _env(ROOT / "roles" / f["role"] / "templates")
    return env.get_template(f["src"]).render(gpucluster_host_plan=plan, inventory_hostname=host, item=f)


def rendered(case: str) -> list[tuple[str, dict[str, Any], str]]:
    """(host, file entry, text) of every reviewed template the plan installs."""
    plan = tricky_plan(case)
    return [
        (host, f, _render(plan, host, f))
        for host, files in files_by_host(plan).items()
        for f in files
        # a copied entry (static: true, a program of files/) is no template: no inventory string reaches it
        if f["role"] in ROLES and not NOT_REVIEWED.match(f["src"]) and not f.get("static")
    ]


# --- grammars ---------------------------------------------------------------------------------


def parse_unit(text: str) -> dict[tuple[str, str], list[str]]:
    """A systemd unit/drop-in/.network file: [Section] and Key=Value lines (systemd.syntax(7)).

    A '%' must be doubled or start a specifier (systemd.unit(5) "Specifiers"): no value from the
    inventory may bring one in, so a lone '%' fails here."""
    out: dict[tuple[str, str], list[str]] = {}
    section = ""
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if m := re.fullmatch(r"\[([A-Za-z]+)\]", line):
            section = m.group(1)
            continue
        key, sep, value = line.partition("=")
        assert sep and section and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key), f"not a unit line: {line!r}"
        assert "%" not in value.replace("%%", ""), f"undoubled % in {line!r}"
        if key == "Environment":
            for word in shlex.split(value):  # systemd.exec(5): quoted assignments, each VAR=value
                assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word), line
        out.setdefault((section, key), []).append(value)
    return out


def bash(script: str, *args: str) -> str:
    """Run a bash script (it must parse) and return its stdout."""
    done = subprocess.run([BASH, "-c", script, "bash", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def bash_syntax(text: str) -> None:
    done = subprocess.run([BASH, "-n"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# --- every reviewed file parses ---------------------------------------------------------------


@pytest.mark.skipif(BASH is None, reason="bash not on PATH")
@pytest.mark.parametrize("case", CASES)
def test_every_reviewed_template_parses_in_its_grammar(case: str) -> None:
    plan = tricky_plan(case)
    seen = set()
    for _host, f, text in rendered(case):
        dest = f["dest"]
        seen.add(f["src"])
        if dest.endswith((".service", ".network")) or "/systemd/system/" in dest:
            units = parse_unit(text)
            if dest.endswith(".network"):
                assert units[("Match", "Name")] == [f["unit"]["netdev"]]
                assert units[("Network", "Address")] == [f["unit"]["address"]]
        elif dest.endswith((".yml", ".yaml")) or dest == "/etc/lnet.conf":
            assert yaml.safe_load(text) is not None, dest
        elif dest.endswith(".json"):
            json.loads(text)
        elif dest.endswith(".xml"):
            ET.fromstring(text)
        elif dest.startswith("/etc/default/") or dest.endswith(
            (".sbatch", "-setup", "mkfs.list", "-epilog", "-prolog")
        ):
            bash_syntax(text)  # /etc/default files are sourced by sh; the others are scripts
    assert seen, f"{case}: nothing rendered"
    if plan["storage"]["type"] == "lustre":
        assert {"lustre-mkfs.list.j2", "lnet-server.conf.j2", "lnet.conf.j2"} <= seen


# --- values read back unchanged ---------------------------------------------------------------


def _files(case: str, src: str) -> list[tuple[str, dict[str, Any], str]]:
    return [r for r in rendered(case) if r[1]["src"] == src]


@pytest.mark.parametrize("case", TIERS)
def test_names_and_servers_round_trip(case: str) -> None:
    plan = tricky_plan(case)
    for host, _, text in _files(case, "hosts.j2"):
        rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
        fqdns = {w for row in rows for w in row[1:] if w.endswith("." + DOMAIN)}
        assert {f"{h}.{DOMAIN}" for h in plan["hosts"]} <= fqdns, host
    for host, _, text in _files(case, "chrony.conf.j2"):
        servers = [line.split()[1] for line in text.splitlines() if line.startswith("server ")]
        if host == plan["time"]["server"]:
            assert servers == NTP
        else:
            assert servers == [plan["time"]["server_address"]]
    for _, _, text in _files(case, "nccl.conf.j2"):
        conf = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
        assert conf == {k: str(v) for k, v in plan["nccl"]["conf"].items()}
        assert _netdev("eno1") in conf["NCCL_SOCKET_IFNAME"]
    for _, _, text in _files(case, "nccl-topo.xml.j2"):
        names = {n.get("name") for n in ET.fromstring(text).iter("net")}
        assert names and all(n.endswith(".a-b:c_") for n in names)


@pytest.mark.parametrize("case", ("tier3", "tier4"))
def test_lustre_files_round_trip(case: str) -> None:
    lu = tricky_plan(case)["storage"]["lustre"]
    for host, _, text in _files(case, "lustre-mkfs.list.j2"):
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        # each target: its md array's mdadm --create (where it has one), then its mkfs.lustre
        want = [
            argv
            for t in lu["targets"][host]
            for argv in ([t["array"]["create_argv"]] if t["array"] else []) + [t["mkfs_argv"]]
        ]
        assert [shlex.split(line) for line in lines] == want
    for host, _, text in _files(case, "lustre-fstab.j2"):
        for line, target in zip(
            [x for x in text.splitlines() if x and not x.startswith("#")], lu["targets"][host], strict=True
        ):
            fields = line.split()  # fstab(5): six fields separated by blanks, no blank inside one
            assert len(fields) == 6 and fields[0] == target["device"] and fields[1] == target["mount_point"]
    for _, _, text in _files(case, "lustre-set_param.list.j2"):
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        # the storage role runs each line as argv: "{{ item | split }}"; the words must be shlex's words
        assert lines == lu["set_param_commands"]
        assert all(line.split() == shlex.split(line) for line in lines)
    for src, key in (("lnet.conf.j2", "lnet"), ("lnet-server.conf.j2", "server_lnet")):
        for _, _, text in _files(case, src):
            ni = yaml.safe_load(text)["net"][0]["local NI(s)"]
            assert [n["interfaces"][0] for n in ni] == lu[key]["interfaces"]
    for src, key in (("lustre-client.conf.j2", "lnet"), ("lustre-server-modprobe.conf.j2", "server_lnet")):
        for _, _, text in _files(case, src):
            line = next(x for x in text.splitlines() if x.startswith("options lnet "))
            words = shlex.split(line)  # modprobe.d(5): options MODULE OPTION=VALUE, the value quoted
            m = re.fullmatch(r"networks=([a-z0-9]+)\((.*)\)", words[2])
            assert m and m.group(2).split(",") == lu[key]["interfaces"]


def test_nfs_exports_round_trip() -> None:
    plan = tricky_plan("tier2")
    exports = plan["storage"]["nfs"]["exports"]
    for _, _, text in _files("tier2", "exports.j2"):
        lines = [x for x in text.splitlines() if x and not x.startswith("#")]
        assert [x.split()[0] for x in lines] == [e["path"] for e in exports]  # exports(5): path first
    host = plan["storage"]["nfs"]["server"] if "server" in plan["storage"]["nfs"] else next(iter(plan["hosts"]))
    text = _render(plan, host, {"role": "storage", "src": "ganesha.conf.j2"})
    assert re.findall(r'^\s*Path = "([^"\\]*)";$', text, re.M) == [e["path"] for e in exports]
    assert all(PATH_CHARS in e["path"] for e in exports)


@pytest.mark.skipif(BASH is None, reason="bash not on PATH")
def test_shell_scripts_read_back_the_plan() -> None:
    plan = tricky_plan("tier2-roce")
    (_, _, script), *_ = _files("tier2-roce", "gpucluster-roce-setup.j2")
    head = script[: script.index("\nsay()")]  # the settings, before any command runs
    out = bash(
        head + '\nfor rail in "${RAILS[@]}"; do read -r hca dev <<<"$rail"; printf "%s|%s\\n" "$hca" "$dev"; done'
    )
    assert out.splitlines() == [f"{r['hca']}|{r['netdev']}" for r in plan["fabric_host"]["rails"]]
    assert all(r["netdev"].endswith("-.:_") for r in plan["fabric_host"]["rails"])
    (_, _, sbatch), *_ = _files("tier2", "nccl-allreduce.sbatch.j2")
    exports = "\n".join(x for x in sbatch.splitlines() if x.startswith("export "))
    env = bash(exports + "\nenv -0")
    values = dict(x.split("=", 1) for x in env.split("\0") if "=" in x)
    for key, value in tricky_plan("tier2")["nccl"]["conf"].items():
        assert values[key] == str(value)


def test_report_names_are_text_not_markdown() -> None:
    """report.md: '_' next to punctuation would be emphasis (CommonMark 6.2); report.html shows it literally."""
    from ansible_collections.gpucluster.tiers.plugins.filter.gpucluster import plan_report
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report import html

    plan = tricky_plan("tier3")
    markdown = (
        _env(ROOT / "playbooks" / "templates")
        .get_template("report.md.j2")
        .render(gpucluster_plan=plan, gpucluster_plan_report=plan_report(plan))
    )
    page = html.markdown_html(markdown)
    assert f"<h1>Cluster plan: {NAME} (tier3)</h1>" in page
    assert "<em>" not in page
    mount = plan["storage"]["lustre"]["mount_point"]
    assert PATH_CHARS in mount and mount.replace("&", "&amp;") in page


# --- commands ---------------------------------------------------------------------------------

#: shell tasks that interpolate a variable, each reviewed: why it stays
SHELL_ALLOWED: dict[tuple[str, str], str] = {
    (
        "roles/slurm/tasks/accounting.yml",
        "Generate the accounting database password (first run only)",
    ): "slurm_db_password_file is a role path default, not an inventory value (slurm role: convert to argv)",
}


def _tasks(path: Path) -> list[dict[str, Any]]:
    """Every task of a tasks/handlers/playbook file, blocks flattened."""
    out: list[dict[str, Any]] = []

    def walk(items: Any) -> None:
        for item in items or []:
            if not isinstance(item, dict):
                continue
            out.append(item)
            for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
                walk(item.get(key))

    walk(yaml.safe_load(path.read_text()))
    return out


def _task_files() -> list[Path]:
    files = [p for p in (ROOT / "roles").glob("*/tasks/*.yml")] + list((ROOT / "roles").glob("*/handlers/*.yml"))
    return sorted(files + list((ROOT / "playbooks").glob("*.yml")))


def test_no_shell_task_pastes_a_variable_into_its_script() -> None:
    """A value reaching a shell goes as an argument ("$1"), never into the script text."""
    found = {}
    for path in _task_files():
        for task in _tasks(path):
            for key in ("ansible.builtin.shell", "shell"):
                if key not in task:
                    continue
                spec = task[key]
                script = spec.get("cmd", "") if isinstance(spec, dict) else str(spec)
                if "{{" in script or "{%" in script:
                    found[(str(path.relative_to(ROOT)), task.get("name", ""))] = script
    assert set(found) <= set(SHELL_ALLOWED), {k: v for k, v in found.items() if k not in SHELL_ALLOWED}


NO_STRING_COMMANDS = [ROOT / "roles" / r / "tasks" for r in ("common", "compute", "fabric", "storage")]


def test_commands_with_values_use_argv() -> None:
    """ansible.builtin.command in roles common/compute/fabric/storage and validate.yml: a templated
    command string is re-split by shlex, so a value's quote or blank would change the words; argv passes
    each word as it is."""
    paths = sorted(p for d in NO_STRING_COMMANDS for p in d.glob("*.yml") if p.name != "firewall.yml")
    bad = []
    for path in [*paths, ROOT / "playbooks" / "validate.yml"]:
        for task in _tasks(path):
            spec = task.get("ansible.builtin.command", task.get("command"))
            if spec is None:
                continue
            text = spec.get("cmd", "") if isinstance(spec, dict) else str(spec)
            if "{{" in text:
                bad.append((str(path.relative_to(ROOT)), task.get("name")))
    assert not bad


@pytest.mark.parametrize("ifname", ["yes", "null", "1"])
def test_lnet_yaml_keeps_any_interface_name_a_string(ifname: str) -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre

    text = lustre.lnet_conf_yaml(lustre.lnet_config(interfaces=[ifname]))
    assert yaml.safe_load(text)["net"][0]["local NI(s)"][0]["interfaces"][0] == ifname
