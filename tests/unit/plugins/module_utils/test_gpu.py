"""nvidia-smi parsers and the plan-versus-hardware check (module_utils/gpu.py).

Recorded samples in tests/data/nvidia-smi (lines verbatim from the public outputs the
dossier cites; header and Temperature section kept, other sections of -q/-a dropped):
- h800-525-temperature.txt: dossier 1.2, "H800 SXM5 (= H100 SXM5 board family), driver
  525.105.17" [S2]: the absolute form (GPU Shutdown/Slowdown/Max Operating Temp) that this
  driver prints together with the T.Limit headroom line.
- h100-545-temperature.txt: dossier 1.2, "H100 SXM, driver 545.23.08" [S1]: T.Limit form.
- h200-550-temperature.txt: dossier 1.2, "H200 SXM, driver 550.90.12" [S4]: T.Limit form.
- a100-525-temperature.txt: dossier 1.2, "A100-SXM4-80GB, driver 525.60.13" [S5]:
  `nvidia-smi -q -d temperature` verbatim, the first two of its eight GPUs (the source
  elides the other six).
- no-driver.txt, no-devices.txt: nvidia-smi's messages on a host without a loaded driver
  and without a GPU, as public logs record them (the dossier holds no such text).
- *-query.txt: the --query-gpu CSV of the same GPUs. No public recording of this exact
  field list was found, so each row is assembled from the values of that GPU's recorded
  -q/-a report (dossier 1.1 rows H100 SXM5, A100 SXM4; [S1], [S2], [S5]) in the
  csv,noheader,nounits layout; "[N/A]" is how nvidia-smi's CSV prints a missing value
  (seen in [S5]'s --query-gpu output); the H800 of [S2] has ECC disabled.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT

from ansible_collections.gpucluster.tiers.plugins.module_utils.gpu import (
    GpuParseError,
    check_plan_against_hardware,
    merge_facts,
    no_gpu_reason,
    parse_query_csv,
    parse_temperature,
)
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.catalog import gpu_model
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan.assembly import cluster_plan

DATA = ROOT / "tests" / "data" / "nvidia-smi"


def sample(name: str) -> str:
    return (DATA / name).read_text()


def test_absolute_form_h800_driver_525() -> None:
    driver, (t,) = parse_temperature(sample("h800-525-temperature.txt"))
    assert driver == "525.105.17"
    assert t.pci_bus_id == "00000000:18:00.0"
    assert t.form == "absolute"
    assert (t.shutdown_c, t.slowdown_c, t.max_operating_c) == (92, 89, 87)
    assert (t.current_c, t.memory_current_c, t.memory_max_operating_c) == (35, 44, 95)
    assert t.tlimit_headroom_c == 51  # printed beside the absolute values by this driver
    assert t.shutdown_tlimit_c is None


def test_absolute_form_agrees_with_the_catalog() -> None:
    """The catalog's H100 SXM thermal limits are the ones this driver printed (dossier 1.2)."""
    _, (t,) = parse_temperature(sample("h800-525-temperature.txt"))
    h100 = gpu_model("h100_sxm")
    assert (h100.temp_shutdown_c, h100.temp_slowdown_c, h100.temp_max_operating_c) == (
        t.shutdown_c,
        t.slowdown_c,
        t.max_operating_c,
    )


@pytest.mark.parametrize(
    ("name", "driver", "bus", "current", "headroom"),
    [
        ("h100-545-temperature.txt", "545.23.08", "00000000:19:00.0", 33, 54),
        ("h200-550-temperature.txt", "550.90.12", "00000000:03:00.0", 28, 59),
    ],
)
def test_tlimit_form(name: str, driver: str, bus: str, current: int, headroom: int) -> None:
    got_driver, (t,) = parse_temperature(sample(name))
    assert got_driver == driver
    assert t.pci_bus_id == bus
    assert t.form == "tlimit"
    assert (t.current_c, t.tlimit_headroom_c) == (current, headroom)
    assert (t.shutdown_tlimit_c, t.slowdown_tlimit_c, t.max_operating_tlimit_c) == (-8, -2, 0)
    assert t.memory_max_operating_tlimit_c == 0
    # "GPU Shutdown T.Limit Temp" must not be read as the absolute "GPU Shutdown Temp"
    assert (t.shutdown_c, t.slowdown_c, t.max_operating_c, t.memory_max_operating_c) == (None, None, None, None)


def test_a100_two_gpus_absolute() -> None:
    driver, temps = parse_temperature(sample("a100-525-temperature.txt"))
    assert driver == "525.60.13"
    assert [t.pci_bus_id for t in temps] == ["00000000:07:00.0", "00000000:0B:00.0"]
    assert [t.current_c for t in temps] == [28, 30]
    assert {(t.form, t.shutdown_c, t.slowdown_c, t.max_operating_c) for t in temps} == {("absolute", 92, 89, 85)}


def test_query_h100() -> None:
    (g,) = parse_query_csv(sample("h100-545-query.txt"))
    assert g.index == 0 and g.name == "NVIDIA H100 80GB HBM3"
    assert g.uuid == "GPU-10f35015-e921-bfab-2eb8-4e9b6664d5f1"
    assert g.pci_bus_id == "00000000:19:00.0"
    assert (g.max_sm_mhz, g.max_mem_mhz) == (1980, 2619)
    assert (g.power_min_w, g.power_default_w, g.power_max_w) == (200.0, 700.0, 700.0)
    assert (g.temperature_c, g.ecc_uncorrected_volatile) == (33, 0)


def test_query_not_available_values_are_none() -> None:
    (g,) = parse_query_csv(sample("h800-525-query.txt"))
    assert g.ecc_uncorrected_volatile is None  # ECC disabled on that H800
    row = "1, NVIDIA H100 80GB HBM3, [N/A], 00000000:1A:00.0, [Not Supported], [N/A], [N/A], [N/A], [N/A], 40, [N/A]"
    (g,) = parse_query_csv(row)
    assert (g.uuid, g.max_sm_mhz, g.power_max_w, g.temperature_c) == (None, None, None, 40)


def test_query_rejects_other_output() -> None:
    with pytest.raises(GpuParseError, match="expected 11 fields"):
        parse_query_csv("0, NVIDIA H100 80GB HBM3, 1980")
    with pytest.raises(GpuParseError, match=r"clocks\.max\.sm"):
        parse_query_csv(sample("h100-545-query.txt").replace(", 1980,", ", fast,"))


def test_no_gpu_messages() -> None:
    assert no_gpu_reason(sample("no-driver.txt")).startswith("NVIDIA-SMI has failed because it couldn't communicate")
    assert no_gpu_reason(sample("no-devices.txt")) == "No devices were found"
    assert no_gpu_reason(sample("h100-545-query.txt")) is None


def test_merge_matches_thermal_by_bus_id() -> None:
    gpus = parse_query_csv(sample("a100-525-query.txt"))
    _, temps = parse_temperature(sample("a100-525-temperature.txt"))
    (merged,) = merge_facts(gpus, temps)
    assert merged["thermal"]["max_operating_c"] == 85 and merged["thermal"]["form"] == "absolute"
    (alone,) = merge_facts(parse_query_csv(sample("h100-545-query.txt")), temps)
    assert alone["thermal"] is None


@pytest.fixture
def h100_plan_gpu(tier3: tuple[dict[str, Any], dict[str, list[str]]]) -> dict[str, Any]:
    site, groups = tier3
    return cluster_plan(site, groups)["gpu"]  # H100 SXM, max_performance: -lgc 1980, -lmc 2619, -pl 700


def _gpus(name: str) -> list[dict[str, Any]]:
    return [g.as_dict() for g in parse_query_csv(sample(name))]


def test_plan_fits_the_h100_it_was_made_for(h100_plan_gpu: dict[str, Any]) -> None:
    assert check_plan_against_hardware(h100_plan_gpu, _gpus("h100-545-query.txt")) == []


def test_clock_and_power_above_the_hardware(h100_plan_gpu: dict[str, Any]) -> None:
    problems = check_plan_against_hardware(h100_plan_gpu, _gpus("a100-525-query.txt"))
    assert problems == [
        "GPU 0 (NVIDIA A100-SXM4-80GB): planned SM clock lock 1980 MHz is above the GPU's clocks.max.sm 1410 MHz",
        "GPU 0 (NVIDIA A100-SXM4-80GB): planned memory clock lock 2619 MHz is above the GPU's clocks.max.mem 1593 MHz",
        "GPU 0 (NVIDIA A100-SXM4-80GB): planned power limit 700 W is above the GPU's power.max_limit 400 W",
    ]


def test_power_below_minimum_and_unknown_limits() -> None:
    plan_gpu = {"clocks": {"lock_gpu_clocks": None, "lock_memory_clocks": None, "power_limit_w": 150}}
    assert check_plan_against_hardware(plan_gpu, _gpus("h100-545-query.txt")) == [
        "GPU 0 (NVIDIA H100 80GB HBM3): planned power limit 150 W is below the GPU's power.min_limit 200 W"
    ]
    unknown = [{**_gpus("h100-545-query.txt")[0], "power_min_w": None, "index": 3}]
    assert check_plan_against_hardware(plan_gpu, unknown) == []
