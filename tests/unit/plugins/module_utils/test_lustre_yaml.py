"""lfs getstripe --yaml parsing, layout comparison and setstripe arguments (module_utils/lustre_yaml.py)."""

from __future__ import annotations

import pytest
from conftest import ROOT, lustre_plan

from ansible_collections.gpucluster.tiers.plugins.module_utils.lustre_yaml import (
    EOF_END,
    LayoutError,
    differences,
    normalize_wanted,
    parse_getstripe_yaml,
    setstripe_argv,
)

DATA = ROOT / "tests" / "data" / "lfs"

PLAN = lustre_plan()  # tier3: 2 OSS x 4 OSTs
CKPT = PLAN["checkpoints"]["components"]


def test_parse_composite_directory_default() -> None:
    comps = parse_getstripe_yaml((DATA / "checkpoints_tier3.yaml").read_text())
    assert comps == [
        {"start": 0, "end": 64 << 20, "stripe_count": 1, "stripe_size": 4 << 20, "layout": "raid0", "pool": None},
        {"start": 64 << 20, "end": 4 << 30, "stripe_count": 4, "stripe_size": 4 << 20, "layout": "raid0", "pool": None},
        {"start": 4 << 30, "end": EOF_END, "stripe_count": 8, "stripe_size": 16 << 20, "layout": "raid0", "pool": None},
    ]


def test_parse_plain_layout_is_one_component_to_eof() -> None:
    comps = parse_getstripe_yaml((DATA / "plain_default.yaml").read_text())
    assert comps == [
        {"start": 0, "end": EOF_END, "stripe_count": 1, "stripe_size": 1 << 20, "layout": "raid0", "pool": None}
    ]


def test_parse_dom_pool_and_path_line() -> None:
    dom = parse_getstripe_yaml((DATA / "home_dom.yaml").read_text())
    assert [c["layout"] for c in dom] == ["mdt", "raid0"]
    pool = parse_getstripe_yaml((DATA / "pool_flash.yaml").read_text())
    assert [c["pool"] for c in pool] == [None, "flash"]
    assert parse_getstripe_yaml((DATA / "path_first_line.yaml").read_text()) == parse_getstripe_yaml(
        (DATA / "datasets_tier3.yaml").read_text()
    )


def test_parse_empty_output_means_no_default_and_garbage_is_an_error() -> None:
    assert parse_getstripe_yaml("") is None
    with pytest.raises(LayoutError):
        parse_getstripe_yaml("lcm_layout_gen: 0\nfoo: bar\n")


def test_plan_layouts_match_their_recorded_outputs() -> None:
    for role, name in (("checkpoints", "checkpoints_tier3.yaml"), ("datasets", "datasets_tier3.yaml")):
        actual = parse_getstripe_yaml((DATA / name).read_text())
        assert differences(actual, normalize_wanted(PLAN[role]["components"])) == [], role
    home = parse_getstripe_yaml((DATA / "home_dom.yaml").read_text())
    assert differences(home, normalize_wanted(PLAN["home"]["components"])) == []


def test_differences_name_the_component_and_field() -> None:
    wide = parse_getstripe_yaml((DATA / "checkpoints_wide.yaml").read_text())
    why = differences(wide, normalize_wanted(CKPT))
    assert why == [
        "component 2: stripe_count -1, the plan has 8",
        "component 2: stripe_size 4194304, the plan has 16777216",
    ]
    plain = parse_getstripe_yaml((DATA / "plain_default.yaml").read_text())
    assert differences(plain, normalize_wanted(CKPT)) == ["1 components, the plan has 3"]


def test_pool_compared_only_when_the_plan_names_one() -> None:
    pooled = parse_getstripe_yaml((DATA / "pool_flash.yaml").read_text())
    wanted = normalize_wanted(PLAN["datasets"]["components"])
    assert differences(pooled, wanted) == []
    wanted[1]["pool"] = "nvme"
    assert differences(pooled, wanted) == ["component 1: pool 'flash', the plan has 'nvme'"]
    assert setstripe_argv(wanted) == [
        "-E",
        "256M",
        "-c",
        "1",
        "-S",
        "4M",
        "-E",
        "-1",
        "-c",
        "8",
        "-S",
        "4M",
        "-p",
        "nvme",
    ]


def test_setstripe_argv_is_the_engines_args() -> None:
    for entry in PLAN.values():
        assert " ".join(setstripe_argv(normalize_wanted(entry["components"]))) == entry["setstripe_args"]


def test_bad_wanted_components_are_refused() -> None:
    with pytest.raises(LayoutError, match="last component"):
        normalize_wanted([{"end": 64 << 20, "stripe_count": 1, "stripe_size": 4 << 20}])
    with pytest.raises(LayoutError, match="mdt"):
        normalize_wanted([{"end": 1 << 20, "stripe_count": 1, "stripe_size": 1 << 20}, {"end": -1, "layout": "mdt"}])


# -- recorded on real clients (tests/data/lfs/README.md) ---------------------------------------------

PFL4 = [
    {"end": 100 << 20, "stripe_count": 1, "stripe_size": 1 << 20},
    {"end": 10 << 30, "stripe_count": 8, "stripe_size": 1 << 20},
    {"end": 100 << 30, "stripe_count": 16, "stripe_size": 1 << 20},
    {"end": -1, "stripe_count": 32, "stripe_size": 1 << 20},
]


def test_recorded_directory_default_without_yaml_reads_like_its_yaml_form() -> None:
    plain = parse_getstripe_yaml((DATA / "recorded_dom_dir_plain.txt").read_text())
    assert plain == parse_getstripe_yaml((DATA / "recorded_dom_dir.yaml").read_text())
    assert plain == [
        {"start": 0, "end": 64 << 10, "stripe_count": 0, "stripe_size": 64 << 10, "layout": "mdt", "pool": None},
        {
            "start": 64 << 10,
            "end": EOF_END,
            "stripe_count": -1,
            "stripe_size": 1 << 20,
            "layout": "raid0",
            "pool": None,
        },
    ]
    # what `lfs setstripe -E 64k --layout mdt -E eof --stripe-count -1 --stripe-size=1M` asked for
    wanted = normalize_wanted(
        [
            {"end": 64 << 10, "layout": "mdt", "stripe_size": 64 << 10},
            {"end": -1, "stripe_count": -1, "stripe_size": 1 << 20},
        ]
    )
    assert differences(plain, wanted) == []


def test_recorded_four_component_default_against_the_plan() -> None:
    recorded = parse_getstripe_yaml((DATA / "recorded_pfl4_dir_plain.txt").read_text())
    assert differences(recorded, normalize_wanted(PFL4)) == []
    why = differences(recorded, CKPT)
    assert why == ["4 components, the plan has 3"]
    assert setstripe_argv(normalize_wanted(PFL4)) == [
        "-E", "100M", "-c", "1", "-S", "1M", "-E", "10G", "-c", "8", "-S", "1M",
        "-E", "100G", "-c", "16", "-S", "1M", "-E", "-1", "-c", "32", "-S", "1M",
    ]  # fmt: skip


def test_a_plain_layout_on_one_line_is_one_component() -> None:
    text = "/mnt/lustre/dir\nstripe_count:  1 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1\n"
    assert parse_getstripe_yaml(text) == [
        {"start": 0, "end": EOF_END, "stripe_count": 1, "stripe_size": 1 << 20, "layout": "raid0", "pool": None}
    ]
