"""verify's GPU report reads real nvidia-smi output: model, driver, MIG mode, PCIe width, and warns
on a narrowed link, a driver other than the pool's and a MIG mode other than the layout's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from infra.hosts.gpu_report import QUERY, host_report, parse

ROOT = Path(__file__).resolve().parents[2]

# `nvidia-smi --query-gpu=name,driver_version,mig.mode.current,pcie.link.width.current,pcie.link.width.max
# --format=csv,noheader` as the cards print it (a T4 has no MIG: [N/A]).
T4_X8 = "Tesla T4, 535.261.03, [N/A], 8, 16\n"
A100_MIG = "NVIDIA A100-SXM4-80GB, 535.216.03, Enabled, 16, 16\n"
A30_TWO = "NVIDIA A30, 535.261.03, Enabled, 16, 16\nNVIDIA A30, 535.261.03, Disabled, 16, 16\n"
NVML_FAILED = "Failed to initialize NVML: Unknown Error\n"


def test_the_query_is_the_documented_one() -> None:
    assert " ".join(QUERY) == ("nvidia-smi --query-gpu=name,driver_version,mig.mode.current,"
                               "pcie.link.width.current,pcie.link.width.max --format=csv,noheader")


def test_a_x16_card_at_x8_is_warned() -> None:
    [gpu] = parse(T4_X8)
    assert (gpu.name, gpu.driver, gpu.mig_mode, gpu.link_width, gpu.link_width_max) == ("Tesla T4", "535.261.03", None, 8, 16)
    assert len(gpu.warnings) == 1 and "x8 of the card's x16" in gpu.warnings[0]


def test_a_full_width_mig_card_has_no_warning() -> None:
    [gpu] = parse(A100_MIG, expected_driver="535.216.03", expected_mig=True)
    assert gpu.mig_mode == "Enabled" and gpu.warnings == []
    assert gpu.line() == "GPU 0: NVIDIA A100-SXM4-80GB, driver 535.216.03, MIG Enabled, PCIe x16 of x16"


@pytest.mark.parametrize(("text", "driver", "mig", "warned"), [
    (A100_MIG, "535.261.03", None, ["driver 535.216.03 is not the pool's pinned 535.261.03"]),
    (A100_MIG, None, False, ["MIG mode is Enabled, the pool's layout wants it disabled"]),
    (T4_X8.replace(", 8,", ", 16,"), None, False, []),
    (T4_X8.replace(", 8,", ", 16,"), None, True, ["MIG mode is not supported, the pool's layout wants it enabled"]),
])
def test_driver_and_mig_mode_are_checked_against_the_pool(text: str, driver: str | None, mig: bool | None,
                                                          warned: list[str]) -> None:
    [gpu] = parse(text, expected_driver=driver, expected_mig=mig)
    assert gpu.warnings == warned


def test_every_card_of_a_host_is_reported_by_index() -> None:
    report = host_report("gpu-1", 0, A30_TWO, expected_mig=True)
    assert report["usable"] is True
    assert [g["mig_mode"] for g in report["gpus"]] == ["Enabled", "Disabled"]
    assert report["warnings"] == ["GPU 1: MIG mode is Disabled, the pool's layout wants it enabled"]
    assert report["lines"][1].startswith("gpu-1: GPU 1: NVIDIA A30, driver 535.261.03, MIG Disabled")


@pytest.mark.parametrize(("rc", "stdout", "stderr", "reason"), [
    (9, NVML_FAILED, "", "no usable GPU: nvidia-smi failed (Failed to initialize NVML: Unknown Error, exit code 9)"),
    (2, "", "[Errno 2] No such file or directory: b'nvidia-smi'", "No such file or directory"),
    (0, "", "", "nvidia-smi lists no card"),
    (0, "Tesla T4, 535.261.03\n", "", "unreadable nvidia-smi output"),
    (0, "Tesla T4, 535.261.03, [N/A], wide, 16\n", "", "PCIe link width 'wide' is not a number"),
])
def test_a_host_without_a_usable_gpu_is_reported_not_raised(rc: int, stdout: str, stderr: str, reason: str) -> None:
    report = host_report("sb-gpu-1", rc, stdout, stderr)
    assert report["usable"] is False and report["gpus"] == []
    assert reason in report["lines"][0]


def test_the_playbook_filter_reads_a_registered_result() -> None:
    spec = importlib.util.spec_from_file_location("gpu_report_filter", ROOT / "ansible" / "filter_plugins" / "gpu_report.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gpu_report = module.FilterModule().filters()["gpu_report"]
    missing = gpu_report({"rc": 2, "stdout": "", "stderr": "", "msg": "[Errno 2] No such file or directory"}, "h")
    assert missing["lines"] == ["h: no usable GPU: nvidia-smi failed ([Errno 2] No such file or directory, exit code 2)"]
    assert gpu_report({"rc": 0, "stdout": T4_X8, "stderr": ""}, "h", "535.261.03", False)["warnings"] == [
        "GPU 0: PCIe link runs at x8 of the card's x16: check the slot, riser and BIOS lane settings "
        "(host-to-device bandwidth is cut accordingly)"]
