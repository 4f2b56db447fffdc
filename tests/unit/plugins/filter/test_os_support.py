"""The preflight's check (os_support) on facts of the supported system and of others (tests/data/os-facts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.filter.os_support import FilterModule, os_support
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.support import support_matrix

FACTS = ROOT / "tests" / "data" / "os-facts"
SUPPORT = support_matrix()


def _facts(name: str, *, short: bool = False) -> dict[str, Any]:
    facts = json.loads((FACTS / f"{name}.json").read_text())["ansible_facts"]
    # in a play, ansible_facts has the names without the prefix; setup's result has them with it
    return {k.removeprefix("ansible_"): v for k, v in facts.items()} if short else facts


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters()["os_support"] is os_support


@pytest.mark.parametrize("short", [False, True])
def test_debian_12_on_x86_64_is_supported(short: bool) -> None:
    verdict = os_support(_facts("debian-12-bookworm", short=short), SUPPORT, "dgx01")
    assert verdict["supported"] is True
    assert verdict["problems"] == []
    assert verdict["found"] == "Debian 12.11 (bookworm) x86_64, kernel 6.1.0-37-amd64, systemd 252, Python 3.11"


@pytest.mark.parametrize(
    ("name", "reasons"),
    [
        ("ubuntu-22.04-jammy", ["Ubuntu 22.04 (jammy) is not a supported system"]),
        (
            "rhel-9",
            ["RedHat 9.4 (Plow) is not a supported system", "Python 3.9 is older than 3.10"],
        ),
        (
            "debian-11-bullseye",
            [
                "Debian 11.11 (bullseye) is not a supported system",
                "kernel 5.10.0-32-amd64 is older than 5.12",
                "systemd 247 is older than 249",
                "Python 3.9 is older than 3.10",
            ],
        ),
        ("debian-13-trixie", ["Debian 13.8 (trixie) is not a supported system"]),
        ("debian-12-bookworm-arm64", ["architecture aarch64 is not supported (only x86_64)"]),
        ("debian-12-bookworm-no-systemd", ["service manager service is not systemd"]),
    ],
)
def test_other_systems_are_refused_with_each_reason(name: str, reasons: list[str]) -> None:
    verdict = os_support(_facts(name), SUPPORT, "node07")
    assert verdict["supported"] is False
    assert verdict["problems"] == reasons
    message = verdict["message"]
    # the host, what it runs, every reason and the supported list, in one message
    assert message.startswith(f"node07 is not supported: it runs {verdict['found']}; ")
    assert all(reason in message for reason in reasons)
    assert "Supported: Debian 12 (bookworm) x86_64; kernel >= 5.12, systemd >= 249, Python >= 3.10" in message


def test_a_newer_kernel_and_systemd_on_debian_12_still_pass() -> None:
    facts = _facts("debian-12-bookworm")
    facts["ansible_kernel"] = "6.12.9+bpo-amd64"  # a bookworm-backports kernel
    facts["ansible_systemd"] = {"version": 254, "features": ""}  # bookworm-backports systemd
    assert os_support(facts, SUPPORT, "dgx01")["supported"] is True


def test_facts_that_say_nothing_are_refused_not_passed() -> None:
    verdict = os_support({}, SUPPORT, "h")
    assert verdict["supported"] is False
    assert verdict["problems"][0] == "an unknown distribution ? is not a supported system"
    assert "kernel ? is older than 5.12" in verdict["problems"]


def test_bad_arguments_name_what_is_expected() -> None:
    with pytest.raises(AnsibleFilterError, match="ansible_facts"):
        os_support("Debian", SUPPORT)  # type: ignore[arg-type]
    with pytest.raises(AnsibleFilterError, match=r"plan\.support"):
        os_support(_facts("debian-12-bookworm"), {"kernel_min": "5.12"})


def test_the_recorded_facts_are_setup_output() -> None:
    """Each file is ansible.builtin.setup's result layout, with the facts the preflight gathers."""
    names = sorted(p.stem for p in FACTS.glob("*.json"))
    assert {"debian-12-bookworm", "debian-13-trixie", "ubuntu-22.04-jammy", "rhel-9", "debian-11-bullseye"} <= {*names}
    for name in names:
        facts = _facts(name)
        assert {"ansible_distribution", "ansible_distribution_major_version", "ansible_kernel"} <= set(facts), name
        assert {"ansible_architecture", "ansible_service_mgr", "ansible_python"} <= set(facts), name


def test_the_source_readme_names_every_file() -> None:
    readme = (FACTS / "README.md").read_text()
    assert all(f"{p.name}" in readme for p in FACTS.glob("*.json"))


def test_floors_are_those_of_the_engine() -> None:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.compute import bringup

    assert SUPPORT["kernel_min"] == ".".join(map(str, bringup.DMABUF_MIN_KERNEL))
    assert (
        Path(ROOT / "roles/common/templates/networkd-gpucluster.conf.j2")
        .read_text()
        .count("ManageForeignRoutingPolicyRules=no")
        == 1
    )  # the systemd 249 setting the floor stands for
