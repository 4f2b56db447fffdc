"""MIG partitioning (compute/mig.py): the catalog's tables, the placement search, the rendered configs.

Sources: docs/sources.md [G1] (profiles and instance counts), [G2] (which GPUs), [G3] [G4] [G5]
(``nvidia-smi mig -lgipp`` starts), [G6] (mig-parted's format), [G7] (Slurm), [G8] (GPU Operator).
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import sys
from typing import Any

import pytest
import yaml
from conftest import ROOT, cluster_plan, load_inventory, render_role_template
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import mig
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import GPUS
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.files import files_by_host
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.report.sections import report_sections

H100 = mig.geometry(GPUS["h100_sxm"])

#: docs/sources.md [G1]: per model, its profiles and "Number of Instances Available"
GUIDE = {
    "h100_sxm": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "h100_pcie": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "h100_nvl": {"1g.12gb": 7, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1},
    "h200_sxm": {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1},
    "b200": {"1g.23gb": 7, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1},
    "a100_sxm4": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "a100_pcie": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "rtx_pro_6000": {"1g.24gb": 4, "2g.48gb": 2, "4g.96gb": 1},
}


def test_the_catalog_has_the_guides_profiles_and_counts() -> None:
    assert mig.mig_models() == sorted(GUIDE)
    for key, counts in GUIDE.items():
        geo = mig.geometry(GPUS[key])
        offered = mig.offered(geo)
        assert {n: geo.profiles[n].max_instances for n in offered} == counts, key
        for p in (geo.profiles[n] for n in offered):
            # the Ng of the name is its compute slices; -lgipp lists as many starts as instances ([G3] [G5])
            assert p.compute == int(p.name.split("g.")[0]), p
            assert len(p.starts) == p.max_instances, p
            assert all(s + p.memory <= geo.memory_slices for s in p.starts), p


def test_the_h100_starts_are_nvidia_smi_mig_lgipp() -> None:
    # docs/sources.md [G3]: {0,1,2,3,4,5,6}:1  {0,2,4,6}:2  {0,2,4}:2  {0,4}:4  {0}:4  {0}:8
    got = {n: (H100.profiles[n].starts, H100.profiles[n].memory) for n in mig.offered(H100)}
    assert got == {
        "1g.10gb": ((0, 1, 2, 3, 4, 5, 6), 1),
        "1g.20gb": ((0, 2, 4, 6), 2),
        "2g.20gb": ((0, 2, 4), 2),
        "3g.40gb": ((0, 4), 4),
        "4g.40gb": ((0,), 4),
        "7g.80gb": ((0,), 8),
    }


def test_the_catalog_matches_a_real_h100s_mig_lgip() -> None:
    """docs/sources.md [G20]: ``nvidia-smi mig -lgip`` of a real H100 80GB HBM3 (driver 580.159.04)."""
    listed = mig.parse_lgip((ROOT / "tests/data/nvidia-smi/h100-580-mig-lgip.txt").read_text())
    assert listed["1g.10gb+me"] == {"id": 20, "instances": 1, "memory_gib": 9.75}
    assert set(listed) == set(H100.profiles)
    full = listed["7g.80gb"]["memory_gib"] / H100.memory_slices
    for name, row in listed.items():
        prof = H100.profiles[name]
        assert prof.max_instances == row["instances"], name
        assert prof.memory == round(row["memory_gib"] / full), name  # 9.75 GiB of 79.25: 1 slice of 8


def test_a_media_variant_is_catalogued_but_not_offered() -> None:
    assert "1g.10gb+me" in H100.profiles and "1g.10gb+me" not in mig.offered(H100)
    with pytest.raises(PlanError, match=r"f\[1\].*media-extension profiles .* are not planned") as err:
        mig.check_mix(H100, ["3g.40gb", "1g.10gb+me"], "f")
    assert err.value.value == "1g.10gb+me"
    assert "+me" not in str(err.value).split("one of ")[1].split(":")[0]


def test_a_model_without_mig_is_refused_by_name() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_gpu_policy\.mig.*L40S does not support MIG") as err:
        mig.geometry(GPUS["l40s"])
    assert err.value.value == "l40s"


@pytest.mark.parametrize(
    "mix",
    [
        ["7g.80gb"],
        ["3g.40gb", "3g.40gb"],
        ["4g.40gb", "3g.40gb"],
        ["4g.40gb", "2g.20gb", "1g.10gb"],
        ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],  # mig-parted's all-balanced of H100 has 2 1g, 1 2g, 1 3g ([G6])
        ["2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"],
        ["1g.20gb"] * 4,
        ["1g.10gb"] * 7,
        ["1g.10gb"] * 6 + ["1g.20gb"],
    ],
)
def test_valid_h100_mixes_are_placed_without_overlap(mix: list[str]) -> None:
    placed = mig.check_mix(H100, mix, "f")
    assert sorted(p.profile for p in placed) == sorted(mix)
    used: set[int] = set()
    for p in placed:
        prof = H100.profiles[p.profile]
        assert p.start in prof.starts
        cells = set(range(p.start, p.start + prof.memory))
        assert not cells & used and max(cells) < H100.memory_slices
        used |= cells


def _first_fit(geo: mig.MigGeometry, names: list[str]) -> bool:
    """What creating instances one by one in the given order does: each takes its first free start."""
    used: set[int] = set()
    for name in names:
        prof = geo.profiles[name]
        free = [s for s in prof.starts if not set(range(s, s + prof.memory)) & used]
        if not free:
            return False
        used |= set(range(free[0], free[0] + prof.memory))
    return True


def test_order_matters_and_the_search_finds_the_placement_first_fit_misses() -> None:
    # created in this order, the first 1g takes slice 0, where the 4g would have to start
    mix = ["1g.10gb", "4g.40gb", "1g.10gb", "1g.10gb"]
    assert not _first_fit(H100, mix)
    placed = mig.check_mix(H100, mix, "f")
    assert [(p.profile, p.start) for p in placed] == [("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6)]


def test_a_compute_only_count_accepts_what_the_memory_slices_refuse() -> None:
    mix = ["3g.40gb", "3g.40gb", "1g.10gb"]
    assert sum(H100.profiles[n].compute for n in mix) == 7  # "7 slices": a naive check passes
    with pytest.raises(PlanError, match=r"memory slices sum to at most 8 \(these sum to 9\)"):
        mig.check_mix(H100, mix, "f")


def test_the_search_holds_where_sums_are_not_enough() -> None:
    # a table whose 2g may start only at 1 and whose 1g only at 0 and 2: 2g + 1g + 1g fills 4 of 4 memory
    # and 4 of 4 compute slices, so the sums pass, but the second 1g has no start left
    geo = mig.MigGeometry(
        "narrow",
        4,
        4,
        {
            "1g.1gb": mig.MigProfile("1g.1gb", 1, 1, 2, (0, 2)),
            "2g.2gb": mig.MigProfile("2g.2gb", 2, 2, 1, (1,)),
        },
    )
    mix = ["1g.1gb", "2g.2gb", "1g.1gb"]
    assert mig.place(geo, mix) is None
    assert mig.place(geo, ["1g.1gb", "1g.1gb"]) == [mig.Placement("1g.1gb", 0), mig.Placement("1g.1gb", 2)]
    with pytest.raises(PlanError, match=r"fit side by side.*1g\.1gb at \[0, 2\]; 2g\.2gb at \[1\]"):
        mig.check_mix(geo, mix, "f")


@pytest.mark.parametrize("key", sorted(GUIDE))
def test_every_mix_within_counts_and_sums_has_a_placement(key: str) -> None:
    """For the catalog's tables the search and the sums agree on every mix (exhaustive)."""
    geo = mig.geometry(GPUS[key])
    names = mig.offered(geo)
    for size in range(1, geo.compute_slices + 1):
        for mix in itertools.combinations_with_replacement(names, size):
            if any(mix.count(n) > geo.profiles[n].max_instances for n in set(mix)):
                continue
            compute = sum(geo.profiles[n].compute for n in mix)
            memory = sum(geo.profiles[n].memory for n in mix)
            sums = compute <= geo.compute_slices and memory <= geo.memory_slices
            assert (mig.place(geo, list(mix)) is not None) == sums, mix


@settings(max_examples=200, deadline=None)
@given(
    key=st.sampled_from(sorted(GUIDE)),
    picks=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=8),
)
def test_any_accepted_mix_has_a_placement_within_the_slices(key: str, picks: list[int]) -> None:
    geo = mig.geometry(GPUS[key])
    names = sorted(geo.profiles)
    mix = [names[i % len(names)] for i in picks]
    try:
        placed = mig.check_mix(geo, mix, "f")
    except PlanError:
        return
    cells: list[int] = []
    for p in placed:
        prof = geo.profiles[p.profile]
        assert p.start in prof.starts
        cells += range(p.start, p.start + prof.memory)
    assert len(cells) == len(set(cells)) and all(0 <= c < geo.memory_slices for c in cells)
    assert sum(geo.profiles[p.profile].compute for p in placed) <= geo.compute_slices
    assert sorted(p.profile for p in placed) == sorted(mix)


def _tier2(policy: Any) -> dict[str, Any]:
    site, groups = load_inventory("tier2")
    site = copy.deepcopy(site)
    site["gpucluster_gpu_policy"] = dict(site["gpucluster_gpu_policy"], mig=policy)
    return cluster_plan(site, groups)


POLICY = [
    {"nodes": ["compute01"], "gpus": "all", "profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
    {"nodes": "compute02", "gpus": [0, 1, 2, 3], "profiles": ["1g.10gb"] * 7},
]


def test_no_policy_no_mig_and_the_reference_slurm_lines_stay() -> None:
    site, groups = load_inventory("tier2")
    plan = cluster_plan(copy.deepcopy(site), groups)
    assert plan["gpu"]["mig"] is None
    assert [n["gres"] for n in plan["slurm"]["nodes"]] == ["gpu:h100:8"]
    assert not any("AutoDetect" in line for line in plan["slurm"]["gres_conf_lines"])
    assert plan["slurm"]["accounting_tres"] == "gres/gpu"
    assert not any(f["src"].startswith(("gpucluster-mig", "nvidia-mig")) for f in files_by_host(plan)["compute01"])
    assert not any(s["title"] == "MIG partitioning" for s in report_sections(plan))


def test_the_mig_parted_config_has_mig_parteds_format() -> None:
    plan = _tier2(POLICY)
    m = plan["gpu"]["mig"]
    assert m["host_config"] == {"compute01": "gpucluster-mig-0", "compute02": "gpucluster-mig-1"}
    assert "parted_yaml" not in m  # data in the plan, the file rendered from it (filter mig_parted_config)
    assert [c["name"] for c in m["parted"]["mig-configs"]] == ["all-disabled", "gpucluster-mig-0", "gpucluster-mig-1"]
    text = mig.mig_parted_config(m["parted"])
    assert text.startswith("version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n")
    # mig-parted's key order in each entry: the GPUs, MIG on or off, then its devices by profile
    assert "  gpucluster-mig-1:\n  - devices:\n    - 0\n" in text
    assert "    mig-enabled: true\n    mig-devices:\n      1g.10gb: 7\n  - devices:\n    - 4\n" in text
    assert yaml.safe_load(text) == {
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            "gpucluster-mig-0": [
                {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
            ],
            "gpucluster-mig-1": [
                {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                {"devices": [4, 5, 6, 7], "mig-enabled": False},
            ],
        },
    }
    assert m["mig_gpus"] == 12
    assert m["k8s_resources"] == {
        "nvidia.com/mig-1g.10gb": 8 * 2 + 4 * 7,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-3g.40gb": 8,
    }


def _reloaded(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan as a sliced run reads it back from plan.json (every mapping's keys sorted)."""
    return json.loads(json.dumps(plan, sort_keys=True))


def test_the_configs_follow_the_hosts_first_use_and_survive_plan_json() -> None:
    """compute01 uses the second entry, compute02 the first: the file lists compute01's config first
    (gpucluster-mig-1 before gpucluster-mig-0, against the names' order), also from a plan read back
    from plan.json, where every mapping's keys are sorted."""
    plan = _tier2([{**POLICY[1], "nodes": ["compute02"]}, {**POLICY[0], "nodes": ["compute01"]}])
    m = plan["gpu"]["mig"]
    assert m["host_config"] == {"compute01": "gpucluster-mig-1", "compute02": "gpucluster-mig-0"}
    text = mig.mig_parted_config(m["parted"])
    assert list(yaml.safe_load(text)["mig-configs"]) == ["all-disabled", "gpucluster-mig-1", "gpucluster-mig-0"]
    reloaded = _reloaded(plan)
    assert list(reloaded["gpu"]["mig"]["configs"]) == ["gpucluster-mig-0", "gpucluster-mig-1"]  # sorted
    assert mig.mig_parted_config(reloaded["gpu"]["mig"]["parted"]) == text
    for host in ("compute01", "compute02"):  # the compute role's file, through the collection's filter
        rendered = render_role_template("compute", "nvidia-mig-parted-config.yaml.j2", plan, host)
        assert rendered == render_role_template("compute", "nvidia-mig-parted-config.yaml.j2", reloaded, host)
        assert rendered.splitlines()[0].startswith("# Managed by gpucluster.tiers")
        assert rendered.split("\n", 2)[2] == text


#: one GPU set and its profiles per policy entry: whole nodes, half nodes, one GPU
ENTRIES = [
    ("all", ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]),
    ([0, 1, 2, 3], ["1g.10gb"] * 7),
    ("all", ["7g.80gb"]),
    ([5], ["3g.40gb", "3g.40gb"]),
]


@settings(max_examples=40, deadline=None)
@given(uses=st.lists(st.sampled_from([(), (0,), (1,), (2,), (3,), (1, 3)]), min_size=1, max_size=10))
def test_any_layout_renders_the_same_bytes_from_plan_json(uses: list[tuple[int, ...]]) -> None:
    """For any spread of entries over the compute hosts (a host may take two that split different GPUs):
    the file lists all-disabled, then each layout as the hosts first use it, names every host's config,
    and a plan read back with sorted keys renders the same bytes."""
    hosts = [f"gpu{i + 1:02d}" for i in range(len(uses))]
    policy = [
        {"nodes": [h for h, u in zip(hosts, uses, strict=True) if i in u], "gpus": gpus, "profiles": profiles}
        for i, (gpus, profiles) in enumerate(ENTRIES)
        if any(i in u for u in uses)
    ]
    if not policy:
        return
    m = mig.mig_plan(policy, GPUS["h100_sxm"], hosts, 8)
    assert m is not None
    text = mig.mig_parted_config(m["parted"])
    assert mig.mig_parted_config(_reloaded(m)["parted"]) == text
    assert "&id" not in text and "*id" not in text  # two layouts sharing a GPU list: written twice, no alias
    first_use = list(dict.fromkeys(m["host_config"][h] for h in hosts if m["host_config"][h] != mig.DISABLED))
    configs = yaml.safe_load(text)["mig-configs"]
    assert list(configs) == [mig.DISABLED, *first_use]
    assert all(m["host_config"][h] in configs for h in hosts)


def test_slurm_gets_mig_types_per_node_and_the_nodes_gres_lines() -> None:
    plan = _tier2(POLICY)
    lines = {n["nodes"]: n["gres"] for n in plan["slurm"]["nodes"]}
    assert lines == {
        "compute01": "gpu:1g.10gb:16,gpu:2g.20gb:8,gpu:3g.40gb:8",
        "compute02": "gpu:1g.10gb:28,gpu:h100:4",
    }
    assert plan["slurm"]["gres_conf_lines"] == ["Include /etc/slurm/gres-mig.conf"]
    # accounting counts every GPU (gres/gpu) and each planned MIG profile and the whole GPUs by name
    assert (
        plan["slurm"]["accounting_tres"] == "gres/gpu,gres/gpu:1g.10gb,gres/gpu:2g.20gb,gres/gpu:3g.40gb,gres/gpu:h100"
    )


def test_mig_site_bills_and_limits_in_mig_slices() -> None:
    """Issue 26: a 1g.10gb slice bills 1 of 7, not a whole H100; the QOS limits are billing in slices."""
    plan = _tier2(POLICY)
    acct = plan["slurm"]["accounting"]
    billing = acct["billing"]
    assert billing["unit"] == "mig_slice" and billing["per_gpu"] == 7
    assert billing["weights"] == {"1g.10gb": 1, "2g.20gb": 2, "3g.40gb": 3, "h100": 7}
    # a job naming its type is counted as gres/gpu and gres/gpu:<type> ([SL21]): untyped + typed = slices
    assert acct["billing_weights"] == (
        "GRES/gpu=1,GRES/gpu:1g.10gb=0,GRES/gpu:2g.20gb=1,GRES/gpu:3g.40gb=2,GRES/gpu:h100=6"
    )
    for name, slices in billing["weights"].items():
        typed = float(acct["billing_weights"].split(f"GRES/gpu:{name}=")[1].split(",")[0])
        assert billing["untyped"] + typed == slices
    high = next(q for q in acct["qos"] if q["name"] == "high")
    assert (high["gpu_tres"], high["grp_gpus"]) == ("billing", 4 * 7)  # 25 % of 16 GPUs, in slices
    assert all(a["gpu_tres"] == "billing" for a in acct["accounts"])
    conf = plan["slurm"]["partitions"]
    assert conf  # the slurm.conf partitions carry the same weights (template: a.billing_weights)
    section = next(s for s in report_sections(plan) if s["title"] == "MIG partitioning")
    assert any(r[0] == "Slurm billing (MIG slices)" for r in section["rows"])
    assert any(r[0] == "Slurm GPU limits unit" and "high 28" in r[2] for r in section["rows"])


def test_site_set_mig_billing_weight_and_its_errors() -> None:
    model = GPUS["h100_sxm"]
    m = mig.mig_plan([{"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}], model, ["c1"], 8)
    b = mig.billing_weights(m, "h100", {"1g.10gb": 0.25})
    assert b["weights"]["1g.10gb"] == 1.75 and b["untyped"] == 1.75
    assert "GRES/gpu:3g.40gb=1.25" in b["text"]
    with pytest.raises(PlanError, match=r"gpucluster_slurm\.mig_billing_weights\.7g\.80gb"):
        mig.billing_weights(m, "h100", {"7g.80gb": 1})
    with pytest.raises(PlanError, match=r"gpucluster_slurm\.mig_billing_weights\.1g\.10gb"):
        mig.billing_weights(m, "h100", {"1g.10gb": 2})
    with pytest.raises(PlanError, match=r"gpucluster_slurm\.mig_billing_weights"):
        mig.billing_weights(None, "h100", {"1g.10gb": 0.5})
    assert mig.billing_weights(None, "h100")["text"] == "GRES/gpu=1.0"


def test_nodes_without_an_entry_keep_their_whole_gpus() -> None:
    plan = _tier2([{"nodes": ["compute02"], "profiles": ["7g.80gb"]}])
    assert plan["gpu"]["mig"]["host_config"]["compute01"] == "all-disabled"
    lines = {n["nodes"]: n["gres"] for n in plan["slurm"]["nodes"]}
    assert lines == {"compute01": "gpu:h100:8", "compute02": "gpu:7g.80gb:8"}
    gres = plan["slurm"]["gres_conf_lines"]
    assert gres[0] == "Include /etc/slurm/gres-mig.conf"
    assert all(line.startswith("NodeName=compute01 Name=gpu Type=h100 File=/dev/nvidia") for line in gres[1:])


def test_the_compute_role_files_and_the_report_section() -> None:
    plan = _tier2(POLICY)
    srcs = {f["src"] for f in files_by_host(plan)["compute02"]}
    assert {"nvidia-mig-parted-config.yaml.j2", "gpucluster-mig.service.j2"} <= srcs
    section = next(s for s in report_sections(plan) if s["title"] == "MIG partitioning")
    assert section["rows"][0][1] == "3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb"
    assert "2g.20gb 0, 1g.10gb 2, 1g.10gb 3, 3g.40gb 4" in section["rows"][0][2]
    assert "12 GPUs in MIG mode" in section["intro"]


def _validator() -> Any:
    """tools/k8s/validate_manifests.py's validator (as test_manifest_schemas loads it); None without the CRDs."""
    spec = importlib.util.spec_from_file_location(
        "validate_manifests", ROOT / "tools" / "k8s" / "validate_manifests.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ManifestValidator() if module.crd_dir().is_dir() else None


def test_kubernetes_mixed_strategy_mig_manager_and_kueue_quotas() -> None:
    site, groups = load_inventory("tier4-k8s")
    site = copy.deepcopy(site)
    mig_nodes = groups["compute"][:2]
    site["gpucluster_gpu_policy"] = dict(
        site.get("gpucluster_gpu_policy") or {}, mig=[{"nodes": mig_nodes, "profiles": ["3g.40gb", "3g.40gb"]}]
    )
    plan = cluster_plan(site, groups)
    objects = [m["object"] for m in plan["kubernetes"]["manifests"]]
    policy = next(o for o in objects if o["kind"] == "ClusterPolicy")
    assert policy["spec"]["mig"] == {"strategy": "mixed"}
    assert policy["spec"]["migManager"]["config"]["name"] == "gpucluster-mig-parted-config"
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    assert config_map["metadata"]["namespace"] == "gpu-operator"
    # the compute role's file without its comment lines: the same function renders both
    text = config_map["data"]["config.yaml"]
    assert text == mig.mig_parted_config(plan["gpu"]["mig"]["parted"])
    node_file = render_role_template("compute", "nvidia-mig-parted-config.yaml.j2", plan, mig_nodes[0])
    assert node_file.split("\n", 2)[2] == text
    labels = plan["kubernetes"]["nodes"]
    assert labels[mig_nodes[0]]["labels"]["nvidia.com/mig.config"] == "gpucluster-mig-0"
    assert labels[groups["compute"][-1]]["labels"]["nvidia.com/mig.config"] == "all-disabled"
    # quotas: the MIG devices (2 per GPU on 2 nodes) and the GPUs left whole, exactly once over teams + cohort
    gpus_per_node = plan["cluster"]["gpus_per_node"]
    want = {"nvidia.com/mig-3g.40gb": 2 * gpus_per_node * 2, "nvidia.com/gpu": plan["cluster"]["gpus_total"] - 16}
    got = dict.fromkeys(want, 0)
    for o in objects:
        if o["kind"] in ("ClusterQueue", "Cohort"):
            for group in o["spec"].get("resourceGroups", []):
                for r in group["flavors"][0]["resources"]:
                    if r["name"] in got:
                        got[r["name"]] += r["nominalQuota"]
    assert got == want
    validator = _validator()
    if validator is not None:  # schema-valid: the CRDs (ClusterPolicy, Kueue) and the built-in ConfigMap
        assert [p for o in objects for p in validator.validate(o).problems] == []
