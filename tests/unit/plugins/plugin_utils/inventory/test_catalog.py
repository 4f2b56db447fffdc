"""Catalog entries (catalog.yml) against docs/sources.md §1 (nvidia-smi readings and NVIDIA specs)."""

from __future__ import annotations

import pytest

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import (
    GPUS,
    SOURCE,
    _load,
    gpu_model,
    gpu_model_as_dict,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import PlanError


@pytest.mark.parametrize(
    ("key", "max_sm", "max_mem", "power"),
    [
        ("h100_sxm", 1980, 2619, (200, 700, 700)),  # dossier 1.1 [S1][S2]
        ("h200_sxm", 1980, 3201, (200, 700, 700)),  # dossier 1.1 [S4]
        ("a100_sxm4", 1410, 1593, (100, 400, 400)),  # dossier 1.1 [S5]
        ("a100_pcie", 1410, 1512, (150, 300, 300)),  # dossier 1.1 [S6]
        ("l40s", 2520, 9001, (100, 350, 350)),  # dossier 1.1 [S7]
        ("h100_nvl", 1785, 2619, (200, 310, 400)),  # dossier 1.1 [S3]: observed default 310 W
    ],
)
def test_sourced_clocks_and_power(key: str, max_sm: int, max_mem: int, power: tuple[int, int, int]) -> None:
    m = gpu_model(key)
    assert (m.max_sm_mhz, m.max_mem_mhz) == (max_sm, max_mem)
    assert (m.power_min_w, m.power_default_w, m.power_max_w) == power


def test_h100_thermal_limits() -> None:
    """dossier 1.2 [S2]: shutdown 92, slowdown 89, max operating 87 C."""
    m = gpu_model("h100_sxm")
    assert (m.temp_shutdown_c, m.temp_slowdown_c, m.temp_max_operating_c) == (92, 89, 87)


def test_unsourced_values_are_none_not_guesses() -> None:
    """dossier 10: no thermal limits found for B200/RTX PRO 6000, no clocks for RTX PRO 6000."""
    assert gpu_model("b200").temp_max_operating_c is None
    assert gpu_model("rtx_pro_6000").max_sm_mhz is None
    assert gpu_model("b200").power_min_w is None


def test_every_model_has_sources_and_sane_limits() -> None:
    for m in GPUS.values():
        assert m.sources, m.key
        if m.power_min_w is not None:
            assert m.power_min_w <= m.power_default_w <= m.power_max_w
        assert gpu_model_as_dict(m)["key"] == m.key


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(PlanError, match=r"gpucluster_node\.gpu_model.*'h900'.*h100_sxm"):
        gpu_model("h900")


def test_catalog_yml_gives_every_model_a_source() -> None:
    """catalog.yml: every model has its ``source`` per field, naming fields the model has."""
    fields = set(gpu_model_as_dict(GPUS["h100_sxm"]))
    assert set(SOURCE) == set(GPUS)
    for key, per_field in SOURCE.items():
        assert per_field, key
        assert set(per_field) <= fields, (key, set(per_field) - fields)
        assert all(isinstance(text, str) and text for text in per_field.values()), key


def test_catalog_loader_names_the_entry_that_does_not_fit() -> None:
    with pytest.raises(ValueError, match=r"catalog\.yml: x9: missing \[.*'max_sm_mhz'"):
        _load(b"x9: {name: X, source: {name: here}}")
    with pytest.raises(ValueError, match=r"catalog\.yml: x9 has no source"):
        _load(b"x9: {name: X}")
