"""infra.model.drivers: NVIDIA's per-release minimums, per-major compatibility floors and per-card driver branches."""

import pytest

from infra.knowledge.gpus import gpu_models
from infra.knowledge.platform import platform
from infra.model.drivers import DriverVerdict, driver_verdict


def status(cuda, driver, gpu=None):
    return driver_verdict(cuda, driver, gpu).status


# --- the cases the issue names ---

def test_cuda_11_2_on_nvidias_own_minimum_is_ok():
    verdict = driver_verdict("11.2", "460.27.03")
    assert verdict.status == "ok"
    assert verdict.ok
    assert verdict.cuda == "11.2.0"
    assert verdict.needed is None


def test_cuda_11_5_on_470_runs_only_under_minor_compatibility():
    verdict = driver_verdict("11.5", "470.82.01")
    assert verdict.status == "minor-compat"
    assert verdict.needed == "495.29.05"
    assert "495.29.05" in verdict.detail


def test_cuda_13_2_on_the_first_r580_driver_is_minor_compat():
    # 13.2 is in NVIDIA's table (GA needs 595.45.04), so it is judged, not unknown
    verdict = driver_verdict("13.2", "580.65.06")
    assert verdict.status == "minor-compat"
    assert verdict.needed == "595.45.04"


@pytest.mark.parametrize("cuda", ["13.4", "13.5", "12.7", "12.3.2", "12.4.2", "14.0", "10.2", "11.0.0"])
def test_a_release_not_in_the_table_is_unknown(cuda):
    verdict = driver_verdict(cuda, "610.43.02")
    assert verdict.status == "unknown-cuda"
    assert verdict.cuda == cuda
    assert verdict.needed is None and verdict.full_support is None
    assert "not in NVIDIA's driver table" in verdict.detail


def test_unknown_update_names_the_known_releases_of_its_minor():
    assert "12.3.0, 12.3.1" in driver_verdict("12.3.2", "545.23.08").detail


@pytest.mark.parametrize("driver", ["470.82.01", "470.256.02"])
def test_h100_on_driver_470_is_unsupported(driver):
    verdict = driver_verdict("12.4", driver, "H100-80GB")
    assert verdict.status == "gpu-unsupported"
    assert verdict.needed == "R520"
    assert verdict.gpu_model == "H100-80GB"


@pytest.mark.parametrize("driver", ["535.54.03", "535.104.05", "535.216.03"])
def test_cuda_12_4_on_535_is_minor_compat(driver):
    verdict = driver_verdict("12.4", driver)
    assert verdict.status == "minor-compat"
    assert verdict.needed == "550.54.14"


@pytest.mark.parametrize("cuda", ["12.0", "12.4", "12.4.1", "12.9.1"])
def test_cuda_12_on_driver_470_is_too_old(cuda):
    verdict = driver_verdict(cuda, "470.256.02")
    assert verdict.status == "too-old"
    assert verdict.needed == "525.60.13"  # runs from the 12.x floor, under minor-version compatibility
    assert verdict.full_support == platform().cuda_releases[verdict.cuda].min_driver


# --- boundaries ---

@pytest.mark.parametrize("cuda, driver, expected", [
    # release minimums: exactly at them is ok, one step below is not
    ("12.4", "550.54.14", "ok"),
    ("12.4", "550.54.13", "minor-compat"),
    ("12.4.0", "550.54.14", "ok"),
    ("12.4.1", "550.54.14", "minor-compat"),  # Update 1 needs 550.54.15
    ("12.4.1", "550.54.15", "ok"),
    ("12.0", "525.60.13", "ok"),
    ("12.0.1", "525.60.13", "minor-compat"),
    ("12.8", "570.26", "ok"),                  # a two-part driver version
    ("12.8", "570.25.99", "minor-compat"),
    ("12.8.1", "570.26", "minor-compat"),
    ("13.3", "610.43.02", "ok"),
    ("13.3.1", "610.43.01", "minor-compat"),
    # per-major floors
    ("12.9.1", "525.60.13", "minor-compat"),
    ("12.9.1", "525.60.12", "too-old"),
    ("11.8", "450.80.02", "minor-compat"),
    ("11.8", "450.80.01", "too-old"),
    ("13.1", "580.65.06", "minor-compat"),
    ("13.1", "575.57.08", "too-old"),
    # CUDA 11.0 shipped below the 11.x floor: its own minimums hold
    ("11.0", "450.51.05", "ok"),                # 11.0 means 11.0.2, the GA
    ("11.0.1", "450.36.06", "ok"),
    ("11.0.3", "450.51.05", "too-old"),
    ("11.1", "450.51.06", "too-old"),
    # newer drivers run older releases (backward compatibility), across majors too
    ("11.8", "580.65.06", "ok"),
    ("12.2", "610.43.02", "ok"),
])
def test_boundaries(cuda, driver, expected):
    assert status(cuda, driver) == expected


def test_too_old_names_the_lowest_driver_that_runs_the_release():
    # 11.0.3's own minimum (450.51.06) lies below the 11.x floor (450.80.02), so it is the one named
    assert driver_verdict("11.0.3", "450.51.05").needed == "450.51.06"
    assert driver_verdict("11.1", "450.51.06").needed == "450.80.02"
    assert driver_verdict("13.1", "575.57.08").needed == "580.65.06"


def test_a_bare_minor_means_its_ga():
    assert driver_verdict("11.0", "450.51.05").cuda == "11.0.2"
    assert driver_verdict("12.4", "550.54.14").cuda == "12.4.0"
    assert driver_verdict("12.4.1", "550.54.15").cuda == "12.4.1"


# --- the card's driver branch ---

@pytest.mark.parametrize("gpu, cuda, driver, expected", [
    ("H100-80GB", "11.8", "520.61.05", "ok"),
    ("H100-80GB", "11.8", "515.48.07", "gpu-unsupported"),
    ("H100-94GB", "12.1", "530.41.03", "gpu-unsupported"),
    ("H100-94GB", "12.2", "535.104.05", "ok"),
    ("H200-141GB", "12.2", "535.216.03", "gpu-unsupported"),
    ("H200-141GB", "12.4", "550.54.14", "ok"),
    ("L40S-48GB", "12.0", "525.85.12", "gpu-unsupported"),
    ("L4-24GB", "12.0", "525.60.13", "ok"),
    ("A100-80GB", "11.0", "450.51.05", "ok"),
    ("A100-40GB", "11.0", "440.33.01", "gpu-unsupported"),
    ("RTX3090-24GB", "11.0", "450.80.02", "gpu-unsupported"),
    ("RTX4090-24GB", "12.4", "550.54.14", "ok"),
    ("T4-16GB", "11.0", "450.51.05", "ok"),
    ("V100-32GB", "12.4", "550.54.14", "ok"),
])
def test_card_branches(gpu, cuda, driver, expected):
    assert status(cuda, driver, gpu) == expected


def test_an_unsupported_card_outranks_cuda_findings():
    assert status("12.4", "470.82.01", "H100-80GB") == "gpu-unsupported"  # would be too-old
    assert status("13.9", "470.82.01", "H100-80GB") == "gpu-unsupported"  # would be unknown-cuda
    assert status("12.4", "535.104.05", "H100-80GB") == "minor-compat"   # the card is fine


def test_without_a_known_card_only_cuda_is_judged():
    assert driver_verdict("12.4", "470.82.01", None).status == "too-old"
    verdict = driver_verdict("12.4", "550.54.14", "B300-288GB")  # not in gpus.yml: no card facts
    assert verdict.status == "ok"
    assert verdict.gpu_model is None


@pytest.mark.parametrize("gpu", sorted(gpu_models()))
def test_every_card_runs_the_newest_cuda_on_its_driver(gpu):
    newest = max(platform().cuda_releases, key=lambda r: tuple(map(int, r.split("."))))
    assert status(newest, platform().cuda_releases[newest].min_driver, gpu) == "ok"


# --- shape ---

@pytest.mark.parametrize("cuda, driver", [
    ("twelve", "550.54.14"), ("12", "550.54.14"), ("12.4.1.1", "550.54.14"), ("12.4", "550"),
    ("12.4", "r550"), ("12.4", "550.54.14.1"),
])
def test_malformed_versions_raise(cuda, driver):
    with pytest.raises(ValueError):
        driver_verdict(cuda, driver)


def test_the_verdict_is_a_frozen_value():
    verdict = driver_verdict("12.4", "535.104.05", "A100-80GB")
    assert verdict == DriverVerdict("minor-compat", "12.4.0", "535.104.05", "A100-80GB", "550.54.14",
                                    "550.54.14", verdict.detail)
    assert verdict == driver_verdict("12.4", "535.104.05", "A100-80GB")
    with pytest.raises(AttributeError):
        verdict.status = "ok"  # type: ignore[misc]
