"""Shared fixtures: the reference inventories read as the plan play sees them."""

from __future__ import annotations

import copy
import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import read_inventory, role_files
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly

ROOT = Path(__file__).resolve().parents[2]

#: ibsim and the real infiniband-diags tools (Debian ibsim-utils, infiniband-diags, opensm): the fabric tests' lab
HAVE_IBSIM = all(shutil.which(t) for t in ("ibsim", "ibnetdiscover", "opensm")) and os.path.exists(
    "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
)
needs_ibsim = pytest.mark.skipif(
    not HAVE_IBSIM, reason="ibsim, ibnetdiscover, opensm or libumad2sim not installed (ibsim-utils, infiniband-diags)"
)


def lab_runner() -> Any:
    """tools/lab/ibsim_check.py as a module (a lab tool, not part of the collection)."""
    spec = importlib.util.spec_from_file_location("ibsim_check", ROOT / "tools" / "lab" / "ibsim_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_topology_conf(text: str) -> dict[str, dict[str, list[str]]]:
    """A rendered Slurm topology.conf read back, ``{switch: {"nodes": [...], "switches": [...]}}``: the shape of
    ibfabric.planned_topology, to check that the plan's switches say what their topology.conf says."""
    from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist

    out: dict[str, dict[str, list[str]]] = {}
    for raw in text.splitlines():
        fields = dict(kv.split("=", 1) for kv in raw.split("#", 1)[0].split() if "=" in kv)
        if fields.get("SwitchName"):
            members = {key: fields.get(key) for key in ("Nodes", "Switches")}
            out[fields["SwitchName"]] = {k.lower(): sorted(hostlist.expand(v)) if v else [] for k, v in members.items()}
    return out


TIERS = ("tier1", "tier2", "tier3", "tier4")

#: the venv's ansible-playbook, and the environment the playbook tests run it with (the repository's ansible.cfg)
PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
PLAYBOOK_ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def run_playbook(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook ARGS`` from the repository root, as make runs it."""
    return subprocess.run(
        [PLAYBOOK, *args], cwd=ROOT, env=PLAYBOOK_ENV, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def planned(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Callable[[str], tuple[Path, str]]:
    """make plan of one unmodified inventory (``tier3``, ``examples/tier2-mig``, ...), run once for the
    whole session: (the plan's folder, the run's output). Tests only read it; a test that needs its own
    output folder or changes the inventory runs its own plan.

    Under pytest-xdist the workers share one folder (the session's base temp folder) and a lock per
    inventory, so each inventory is still planned once."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if worker_id != "master" else base) / "plans"
    shared.mkdir(exist_ok=True)

    def plan(inventory: str) -> tuple[Path, str]:
        root = shared / inventory.replace("/", "__")
        with (shared / f"{root.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            stdout = shared / f"{root.name}.stdout"
            if not stdout.is_file():
                root.mkdir(exist_ok=True)
                run = run_playbook(
                    "-i", f"inventories/{inventory}", "playbooks/plan.yml", "-e", f"gpucluster_plan_root={root}"
                )  # fmt: skip
                assert run.returncode == 0, run.stdout[-3000:]
                stdout.write_text(run.stdout)
        return root / Path(inventory).name, stdout.read_text()

    return plan


@pytest.fixture(scope="session")
def worker_id(request: pytest.FixtureRequest) -> str:
    """pytest-xdist's worker name (``gw0``, ...), ``master`` without xdist (xdist's own fixture when loaded)."""
    return str(getattr(request.config, "workerinput", {}).get("workerid", "master"))


# Shared by the block_guard (module_utils) and block_device_guard (module) tests: the local NVMe
# section's field name, and mdadm --detail --export of a 2-member raid0 (keys as mdadm Detail.c
# prints them)
FLAG = "gpucluster_storage.local_nvme"
MDADM_EXPORT = """MD_LEVEL=raid0
MD_DEVICES=2
MD_METADATA=1.2
MD_UUID=3b1f6a2c:5d0e41a7:9c2b7e13:0f4d8a61
MD_DEVNAME=0
MD_NAME=dgx01:0
MD_DEVICE_dev_{a}_ROLE=0
MD_DEVICE_dev_{a}_DEV={pa}
MD_DEVICE_dev_{b}_ROLE=1
MD_DEVICE_dev_{b}_DEV={pb}
"""

#: Each role's file list (roles/<role>/vars/files.yml), read as the cluster_plan filter reads them:
#: pass it to the engine's cluster_plan (third argument) for a plan with the per-host ``files``.
ROLE_FILES: dict[str, Any] = role_files(ROOT)


def cluster_plan(site_vars: dict[str, Any], groups: dict[str, list[str]]) -> dict[str, Any]:
    """The engine's cluster_plan with the roles' file lists, as the cluster_plan filter calls it."""
    return assembly.cluster_plan(site_vars, groups, ROLE_FILES)


def load_inventory(tier: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(gpucluster_* variables, groups) of inventories/<tier> (the filter file's read_inventory)."""
    return read_inventory(ROOT / "inventories" / tier)


@pytest.fixture(params=TIERS)
def tier_inventory(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory(request.param)
    return request.param, site, groups


@pytest.fixture
def tier3() -> tuple[dict[str, Any], dict[str, list[str]]]:
    site, groups = load_inventory("tier3")
    return copy.deepcopy(site), groups


def render_role_template(
    role: str,
    src: str,
    plan: dict[str, Any],
    host: str,
    *,
    core_filters: bool = False,
    undefined: type[jinja2.Undefined] = jinja2.StrictUndefined,
    **extra: Any,
) -> str:
    """A role template rendered with the plan, as the role renders it (trim_blocks, strict).

    ``core_filters``: ansible.builtin's core filters too (to_nice_json, ...); ``extra``: other variables."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROOT / "roles" / role / "templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=undefined,
    )
    if core_filters:
        from ansible.plugins.filter.core import FilterModule

        env.filters.update(FilterModule().filters())
    env.filters.update(collection_filters())
    return env.get_template(src).render(gpucluster_host_plan=plan, inventory_hostname=host, **extra)


#: the collection's filter files (plugins/filter/<name>.py), each with its FilterModule
FILTER_FILES = sorted(p.stem for p in (ROOT / "plugins" / "filter").glob("*.py") if p.stem != "__init__")


def all_filters() -> dict[str, Any]:
    """Every filter of the collection by its short name (cluster_plan, grafana_dashboard, ...), from every
    filter file; a name twice fails (ansible-core would take one of them)."""
    import importlib

    out: dict[str, Any] = {}
    for stem in FILTER_FILES:
        module = importlib.import_module(f"ansible_collections.gpucluster.tiers.plugins.filter.{stem}")
        for name, func in module.FilterModule().filters().items():
            assert name not in out, f"filter {name} is defined twice (plugins/filter/{stem}.py)"
            out[name] = func
    return out


def collection_filters() -> dict[str, Any]:
    """The collection's own filters by FQCN (gpucluster.tiers.grafana_dashboard, ...), as the roles call them."""
    return {f"gpucluster.tiers.{name}": f for name, f in all_filters().items()}


def render_role_template_with_filters(role: str, src: str, plan: dict[str, Any], host: str) -> str:
    """:func:`render_role_template` for templates that use ansible.builtin's core filters (to_nice_json, ...)."""
    return render_role_template(role, src, plan, host, core_filters=True)


# Shared by the ibfabric (module_utils) and ibsim (plugin_utils/fabric) tests
_FABRICS: dict[str, dict[str, Any]] = {}


def fabric(tier: str, *, sm_ports: bool = True) -> dict[str, Any]:
    """plan["fabric"] of a reference tier (a fresh copy: tests mutate cablings).

    ``sm_ports=False``: without the subnet manager's ports (``cabling.sm_links``), for recordings
    made before the plan cabled them (tests/data/ibnetdiscover)."""
    if tier not in _FABRICS:
        _FABRICS[tier] = cluster_plan(*load_inventory(tier))["fabric"]
    out = copy.deepcopy(_FABRICS[tier])
    if not sm_ports:
        out["cabling"].pop("sm_links", None)
        out["cabling"].pop("sm_hcas", None)
    return out


def listed(cabling: dict[str, Any]) -> dict[str, Any]:
    """The cabling (a plan's design) with its generated ``hcas`` and ``links`` lists, in place: what a test
    edits to simulate other cables (a cabling that lists its links is read as it is)."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import links

    if "links" not in cabling:
        cabling["hcas"] = list(links.hcas(cabling))
        cabling["links"] = list(links.links(cabling))
    return cabling


def host_link(cabling: dict[str, Any], host: str, rail: int) -> dict[str, Any]:
    """The host link of ``host`` on ``rail`` in a cabling."""
    return next(
        x for x in listed(cabling)["links"] if x["kind"] == "host" and x["a"]["node"] == host and x["rail"] == rail
    )


def lustre_plan() -> dict[str, Any]:
    """tier3's Lustre layouts (2 OSS x 4 OSTs), shared by the lustre_yaml and lustre_layout tests."""
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage import lustre

    return lustre.lustre_layouts(
        ost_count=8,
        paths={
            "checkpoints": "/lustre/aifs/checkpoints",
            "datasets": "/lustre/aifs/datasets",
            "home": "/lustre/aifs/home",
        },
    )


def load_script(path: Path, name: str) -> ModuleType:
    """A host script without a .py suffix (roles/*/files/...) imported as module ``name``, for its unit tests."""
    loader = SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
