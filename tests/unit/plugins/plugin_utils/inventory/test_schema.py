"""The inventory schema (schema_v1.json): valid, versioned, accepts every shipped inventory, and knows
every key docs/inventory.md documents."""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
import yaml
from conftest import ROOT, TIERS, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.schema import (
    RUNTIME_NAMES,
    SCHEMA,
    SCHEMA_ID,
    check_inventory,
    field_path,
    known_keys,
)

DOC = ROOT / "docs" / "inventory.md"
#: backticked words of docs/inventory.md's variable sections that are values, not keys
VALUES = {"air", "dlc", "wait", "skip", "max_performance", "fixed", "power_capped", "true", "false"}


def test_the_schema_is_a_valid_versioned_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert re.search(r"/inventory/v1\.json$", SCHEMA_ID)


def test_every_object_is_closed() -> None:
    def objects(node: object, where: str) -> list[tuple[str, dict]]:
        out = []
        if isinstance(node, dict):
            if node.get("type") == "object":
                out.append((where, node))
            for key, sub in node.items():
                out += objects(sub, f"{where}/{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                out += objects(sub, f"{where}/{i}")
        return out

    found = objects(SCHEMA, "#")
    assert len(found) > 20
    assert [w for w, o in found if o.get("additionalProperties") is not False] == []


@pytest.mark.parametrize("tier", TIERS)
def test_every_reference_inventory_and_the_lab_overlay_pass(tier: str) -> None:
    site, _ = load_inventory(tier)
    check_inventory(site)
    overlay = yaml.safe_load((ROOT / "lab" / "overlay" / "lab.yml").read_text())["all"]["vars"]
    check_inventory({**site, **overlay})


def test_runtime_facts_are_not_inventory() -> None:
    site, _ = load_inventory("tier3")
    check_inventory({**site, **{key: {"anything": 1} for key in RUNTIME_NAMES}})


def test_field_paths_read_like_the_inventory() -> None:
    assert field_path(["gpucluster_node", "nics", 3, "netdev"]) == "gpucluster_node.nics[3].netdev"
    assert field_path([]) == "gpucluster_*"


def test_an_error_names_field_value_and_allowed() -> None:
    site, _ = load_inventory("tier3")
    bad = copy.deepcopy(site)
    bad["gpucluster_fabric"]["link_rate_gbps"] = "400G"
    with pytest.raises(PlanError) as caught:
        check_inventory(bad)
    assert (caught.value.field, caught.value.value) == ("gpucluster_fabric.link_rate_gbps", "400G")
    assert "a number" in caught.value.allowed


def test_a_long_value_is_cut_in_the_message() -> None:
    site, _ = load_inventory("tier1")
    site["gpucluster_cluster"]["name"] = "x" * 5000
    with pytest.raises(PlanError) as caught:
        check_inventory(site)
    assert "(5000 characters)" in str(caught.value)
    assert len(str(caught.value)) < 400


def _documented_keys() -> set[str]:
    """Key paths docs/inventory.md names under its ``### `gpucluster_*` `` headings."""
    keys: set[str] = set()
    section = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^### `(gpucluster_[a-z_]+)`", line)
        if heading:
            section = heading.group(1)
            keys.add(section)
            continue
        if line.startswith("#"):
            section = None
        if section is None:
            continue
        # nested keys: "key {a (..), b: x|y, c: [{d, e}]}" or a table row "| `key` | `{a, b}` |"
        row = re.match(r"^\| (`[^|]+`) \|(.*)\|\s*$", line)
        if row:
            names = re.findall(r"`([a-z_]+(?:\[\])?(?:\.[a-z_]+)?)`", row.group(1))
            keys |= {f"{section}.{n}" for n in names}
            if len(names) == 1:
                keys |= {f"{section}.{names[0]}{sub}" for sub in _braced(row.group(2))}
            continue
        if line.startswith("|"):
            continue
        keys |= set(re.findall(r"`(gpucluster_[a-z_]+(?:\.[a-z_]+)+)`", line))
        line = re.sub(r"`gpucluster_[a-z_.]+`", "", line)
        for word, braces in re.findall(r"`([a-z_]+)(?::[^`]*)?`(?: \{([^}]*)\})?", line):
            if word in VALUES:
                continue
            keys.add(f"{section}.{word}")
            keys |= {f"{section}.{word}{sub}" for sub in _braced("{" + braces + "}")} if braces else set()
        for word, braces in re.findall(r"`([a-z_]+) \{([^}`]*)\}`", line):
            keys.add(f"{section}.{word}")
            keys |= {f"{section}.{word}{sub}" for sub in _braced("{" + braces + "}")}
    return keys


def _braced(text: str) -> set[str]:
    """``{a (x, y), b: p|q, c: [{d, e}]}`` -> {.a, .b, .c, .c[].d, .c[].e} (first braces only)."""
    match = re.search(r"\{(.*)\}", text)
    if not match:
        return set()
    inner = re.sub(r"\([^()]*\)", "", match.group(1))
    out: set[str] = set()
    bare = re.sub(r":\s*[a-z_|]+(?=[,}]|$)", "", inner)
    for name, sub in re.findall(r"([a-z_][a-z0-9_]*)(?::\s*\[(\{[^\]]*\})\])?", bare):
        out.add(f".{name}")
        if sub:
            out |= {f".{name}[]{s}" for s in _braced(sub)}
    return out


def test_every_documented_key_is_in_the_schema() -> None:
    documented = _documented_keys()
    expected = {
        "gpucluster_fabric.topology",
        "gpucluster_node.nics[].pcie_switch",
        "gpucluster_rollout.drain_policy",
        "gpucluster_workload.allow_storage_below_need",
        "gpucluster_storage.nfs.exports[].clients",
        "gpucluster_network.management.interface",
    }
    assert expected <= documented
    known = known_keys()
    # a section that is a list (gpucluster_tenants) documents its items' keys: `name` is `[].name`
    unknown = {k for k in {k.removesuffix("[]") for k in documented} if k not in known}
    assert sorted(k for k in unknown if k.replace(".", "[].", 1) not in known) == []
