"""Slurm host lists (plugins/module_utils/hostlist.py) as Slurm itself writes and reads them.

The recorded cases (tests/data/hostlist/slurm-22.05.json) are Slurm 22.05.8's own answers:
`scontrol show hostnames` for expressions and `scontrol show hostlistsorted` for name lists
(docs/sources.md [SL40]). Where scontrol is installed, random cases are also compared live.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpucluster.tiers.plugins.module_utils import hostlist
from ansible_collections.gpucluster.tiers.plugins.module_utils.hostlist import HostlistError, compress, expand

RECORDED = json.loads((ROOT / "tests" / "data" / "hostlist" / "slurm-22.05.json").read_text())


def test_the_issue_cases() -> None:
    assert expand("rack[1-2]-node[01-02]") == ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]
    assert compress(["node8", "node9", "node10"]) == "node[8-10]"
    assert compress(["node08", "node09", "node10"]) == "node[08-10]"


@pytest.mark.parametrize("case", RECORDED["expand"], ids=lambda c: c["expr"][:40])
def test_expand_as_scontrol_show_hostnames(case: dict) -> None:
    if case["slurm"] is None:  # scontrol: "Invalid hostlist"
        with pytest.raises(HostlistError, match=re.escape(repr(case["expr"]))):
            expand(case["expr"])
    else:
        assert expand(case["expr"]) == case["slurm"]


@pytest.mark.parametrize("case", RECORDED["compress"], ids=lambda c: ",".join(c["names"])[:40])
def test_compress_as_scontrol_show_hostlistsorted(case: dict) -> None:
    assert compress(case["names"]) == case["slurm"]
    shuffled = list(case["names"])
    random.Random(len(shuffled)).shuffle(shuffled)
    assert compress(shuffled + shuffled[:2]) == case["slurm"]  # input order and duplicates do not matter


def test_the_recorded_cases_cover_the_hard_parts() -> None:
    exprs = [c["expr"] for c in RECORDED["expand"]]
    assert sum(e.count("[") >= 3 for e in exprs) >= 3  # several brackets in one token
    assert any(c["slurm"] is None for c in RECORDED["expand"])
    results = [c["slurm"] for c in RECORDED["compress"]]
    assert "n[8,010]" in results and "n[1-2,01]" in results  # padding kept per range
    assert len(RECORDED["compress"]) >= 50 and len(RECORDED["expand"]) >= 50


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("", []),
        ("head01", ["head01"]),
        ("compute[01-04]", ["compute01", "compute02", "compute03", "compute04"]),
        ("compute[01-02],dgx[1-2]", ["compute01", "compute02", "dgx1", "dgx2"]),
        ("n[8-10]", ["n8", "n9", "n10"]),  # lo's width: no padding
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("n[98-100]", ["n98", "n99", "n100"]),
        ("n[098-100]", ["n098", "n099", "n100"]),
        ("n[3,1-2]", ["n3", "n1", "n2"]),  # as written
        ("n[1,1]", ["n1", "n1"]),  # duplicates kept, as scontrol
        (" n[1-2] , m3\tm4 ", ["n1", "n2", "m3", "m4"]),  # blanks separate too
        ("[1-2]", ["1", "2"]),
        ("gpu[1-2]-ib[1-2]", ["gpu1-ib1", "gpu1-ib2", "gpu2-ib1", "gpu2-ib2"]),
        ("a[1-2]b[3-4]c[5-6]", ["a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6", "a1b4c5", "a1b4c6", "a2b4c5", "a2b4c6"]),
    ],
)
def test_expand_cases(expr: str, names: list[str]) -> None:
    assert expand(expr) == names


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("node[1-2]-ib", "'-ib' after the last bracket"),
        ("n[3-1]", "range '3-1' ends before it starts"),
        ("n[a-b]", "'a-b' in brackets is not a number"),
        ("n[]", "'' in brackets is not a number"),
        ("n[-1]", "'-1' in brackets"),
        ("n[1-]", "'1-' in brackets"),  # Slurm reads n1; a typo here is better refused
        ("n[1-2", "a '[' without its ']'"),  # Slurm makes a host named "n]" of it
        ("n1-2]", "a ']' without its '['"),
        ("n[1[2]]", "a '[' inside brackets"),
        ("n[0-65536]", "more than 65536 hosts"),
        ("a[0-1023]b[0-1024]", "expands to more than 1048576 hosts"),
    ],
)
def test_bad_expressions_name_the_expression_and_the_problem(expr: str, problem: str) -> None:
    with pytest.raises(HostlistError, match=re.escape(problem)) as err:
        expand(expr)
    assert repr(expr) in str(err.value) and "compute[01-04]" in str(err.value)  # what is allowed
    assert isinstance(err.value, ValueError)


def test_expand_refuses_what_is_not_a_string() -> None:
    with pytest.raises(HostlistError, match="not a string"):
        expand(["n1"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        ([], ""),
        (["dgx01"], "dgx01"),
        ([f"compute{i:02d}" for i in range(1, 9)], "compute[01-08]"),
        (["compute01", "compute03", "compute04"], "compute[01,03-04]"),
        (["node10", "node8", "node9", "node9"], "node[8-10]"),
        (["n9", "n010"], "n[9,010]"),  # 9 padded to 3 would be 009: two ranges
        (["n099", "n100", "n101"], "n[099-101]"),
        (["r10n1", "r2n1", "r1n1"], "r1n1,r2n1,r10n1"),  # natural order of prefixes
        (["node", "node2", "node1"], "node,node[1-2]"),
        (["head01", "head02", "mds01", "oss01", "oss02"], "head[01-02],mds01,oss[01-02]"),
        (["rack2-node01", "rack1-node02", "rack1-node01", "rack2-node02"], "rack1-node[01-02],rack2-node[01-02]"),
    ],
)
def test_compress_cases(names: list[str], expr: str) -> None:
    assert compress(names) == expr


@pytest.mark.parametrize("bad", ["", "n[1]", "a,b", "a b", 7])
def test_compress_refuses_names_slurm_cannot_hold(bad: object) -> None:
    with pytest.raises(HostlistError, match="non-empty, without brackets, commas or blanks"):
        compress(["n1", bad])  # type: ignore[list-item]


# --- properties: any names, any order ---------------------------------------------------------

_PREFIX = st.text(alphabet="abn-_.", min_size=0, max_size=4) | st.sampled_from(["r1n", "r10n", "gpu-", "n0"])
_NAME = st.builds(
    lambda prefix, number, pad, tail: (prefix + (f"{number:0{pad}d}" if tail is None else tail)) or "x",
    _PREFIX,
    st.integers(min_value=0, max_value=1200),
    st.integers(min_value=0, max_value=5),
    st.none() | st.sampled_from(["", "a", "-ib"]),
)


@given(st.lists(_NAME, max_size=40))
def test_expand_of_compress_gives_back_the_names_once(names: list[str]) -> None:
    text = compress(names)
    again = expand(text)
    assert sorted(again) == sorted(set(names))
    assert len(again) == len(set(names))  # each name once
    assert compress(again) == text  # the compressed form is stable


@given(st.lists(_NAME, max_size=30), st.randoms())
def test_compress_depends_on_the_set_of_names_only(names: list[str], rnd: random.Random) -> None:
    shuffled = list(names)
    rnd.shuffle(shuffled)
    assert compress(shuffled + names[:3]) == compress(names)


@given(st.sampled_from(["compute", "gpu-a", "r2n"]), st.sets(st.integers(0, 300), max_size=40), st.integers(0, 4))
def test_one_padding_gives_sorted_names_and_consecutive_numbers_one_range(
    prefix: str, numbers: set[int], pad: int
) -> None:
    names = [f"{prefix}{n:0{pad}d}" for n in numbers]
    assert expand(compress(names)) == [f"{prefix}{n:0{pad}d}" for n in sorted(numbers)]
    runs = sum(1 for n in numbers if n - 1 not in numbers)  # each run of consecutive numbers: one range
    text = compress(names)
    assert len(text.split(",")) == runs if numbers else text == ""


# --- live: Slurm's scontrol, where installed (Debian: slurm-client) -----------------------------


def _scontrol(*args: str, conf: Path) -> str | None:
    run = subprocess.run(
        ["scontrol", "show", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": str(conf)},
    )
    out = run.stdout.strip()
    return None if run.returncode or "Invalid hostlist" in out + run.stderr else out


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="scontrol (Debian slurm-client) is not installed")
def test_random_cases_against_the_installed_scontrol(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\n")  # show hostnames reads no more
    if _scontrol("hostnames", "n[1-2]", conf=conf) != "n1\nn2":
        pytest.skip("scontrol does not answer show hostnames here")
    rng = random.Random(27)
    for _ in range(40):
        numbers = rng.sample(range(120), rng.randint(1, 12))
        names = [f"{rng.choice(['n', 'gpu-a', 'r1n'])}{n:0{rng.choice([0, 0, 2, 3])}d}" for n in numbers]
        text = compress(names)
        assert _scontrol("hostnames", text, conf=conf).split("\n") == expand(text), text
    for expr in ("rack[1-2]-node[01-02]", "a[1-2]b[3-4]c[5-6]", "n[8-10],m[08-10]"):
        assert _scontrol("hostnames", expr, conf=conf).split("\n") == expand(expr), expr


def test_module_utils_stays_python_310_and_stdlib_only() -> None:
    source = Path(hostlist.__file__).read_text()
    imports = set(re.findall(r"^(?:from|import) ([a-z_.]+)", source, re.M))
    assert imports <= {"__future__", "itertools", "re", "collections.abc", "dataclasses"}, imports
    ast.parse(source, feature_version=(3, 10))
