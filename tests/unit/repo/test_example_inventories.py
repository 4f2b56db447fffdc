"""Every inventory under inventories/examples/ plans, and every host's files render from its slice.

The examples are the reference tiers with one thing changed (a storage alternative, a node variant,
MIG, ...): ``make plan INVENTORY=inventories/examples/<name>`` must work for each, as it does for the
tiers. Here the plan is computed as the plan play computes it (the roles' file lists), each host's
view is cut as site.yml cuts it (host_plan), and each of the host's files is rendered from its
role's template with that view, as ``make plan`` writes build/plan/<name>/hosts/<host>/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest
from conftest import ROOT, cluster_plan, collection_filters, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.host_plan import host_view

EXAMPLES = sorted(p.name for p in (ROOT / "inventories" / "examples").iterdir() if (p / "hosts.yml").is_file())


def _env(role: str) -> jinja2.Environment:
    from ansible.plugins.filter.core import FilterModule

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROOT / "roles" / role / "templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    # Jinja's own default (Ansible's does not see a StrictUndefined), as test_template_escaping does
    filters = {k: v for k, v in FilterModule().filters().items() if k not in ("default", "d")}
    env.filters.update(filters)
    env.filters.update({f"ansible.builtin.{name}": f for name, f in filters.items()})
    env.filters.update(collection_filters())
    return env


def test_there_are_examples() -> None:
    assert {"tier2-nvmeof", "tier3-beegfs"} <= set(EXAMPLES), EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_plans_and_every_host_file_renders(name: str) -> None:
    plan = cluster_plan(*load_inventory(f"examples/{name}"))
    assert plan["cluster"]["name"] == name  # build/plan/<name>/: no example overwrites a tier's plan
    envs: dict[str, jinja2.Environment] = {}
    for host, files in files_by_host(plan).items():
        assert files, f"{name}: {host} gets no file"
        view = host_view(plan, host)
        for f in files:
            if f.get("static"):  # a program of files/, installed as is: no template to render
                assert (ROOT / "roles" / f["role"] / "files" / f["src"]).is_file(), f"{name}: {host} {f['dest']}"
                continue
            template = Path(ROOT / "roles" / f["role"] / "templates" / f["src"])
            assert template.is_file(), f"{name}: {host} {f['dest']}: no {template}"
            env = envs.setdefault(f["role"], _env(f["role"]))
            extra: dict[str, Any] = {"item": f} if "unit" in f else {}
            text = env.get_template(f["src"]).render(gpucluster_host_plan=view, inventory_hostname=host, **extra)
            assert text.strip(), f"{name}: {host} {f['dest']} renders empty"
