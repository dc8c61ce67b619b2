"""The GPU facts are data; these tests hold them to NVIDIA's published geometry."""


import pytest
from pydantic import ValidationError

from infra.knowledge.gpus import GpuModel, gpu_models
from infra.knowledge.platform import Platform, platform

MIG_MODELS = ["A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB"]
NO_MIG = ["T4-16GB", "L4-24GB", "L40S-48GB", "V100-32GB", "RTX3090-24GB", "RTX4090-24GB"]


def test_the_models_the_issue_names_are_known():
    assert set(MIG_MODELS + NO_MIG) <= set(gpu_models())
    assert all(gpu_models()[m].mig is not None for m in MIG_MODELS)
    assert all(gpu_models()[m].mig is None for m in NO_MIG)


@pytest.mark.parametrize("model", MIG_MODELS)
def test_profile_names_follow_nvidia_naming_and_memory(model):
    facts = gpu_models()[model]
    for name, profile in facts.mig.profiles.items():
        compute, memory = name.removesuffix("+me").split(".")
        assert compute == f"{profile.compute}g"
        assert memory.endswith("gb")
    # the full-card profile covers all memory slices and is named after the card's memory
    full = max(facts.mig.profiles.values(), key=lambda p: p.memory)
    assert full.memory == facts.mig.memory_slices


def test_a_profile_past_the_last_slice_is_refused():
    with pytest.raises(ValidationError, match="runs past the last memory slice"):
        GpuModel.model_validate({"memory_gib": 8, "min_driver_branch": 550, "mps_max_clients": 48,
                                 "mig": {"compute_slices": 2, "memory_slices": 2, "profiles": {
            "1g.4gb": {"compute": 1, "memory": 1, "starts": [0, 2]}}}})


def test_platform_facts_load():
    facts = platform()
    assert facts.kube_proxy_conntrack.max_per_core == 32768
    assert facts.kube_proxy_conntrack.min == 131072
    assert facts.kubernetes.oldest_minor <= facts.kubernetes.newest_minor
    assert set(facts.host_per_gpu) <= set(gpu_models())


# --- CUDA releases and their drivers (NVIDIA release notes, Tables 2 and 3) ---

CUDA_MINORS = [f"11.{n}" for n in range(9)] + [f"12.{n}" for n in (0, 1, 2, 3, 4, 5, 6, 8, 9)] + \
    [f"13.{n}" for n in range(4)]


def test_every_cuda_minor_from_11_0_has_exactly_its_ga():
    facts = platform()
    assert sorted({r.rsplit(".", 1)[0] for r in facts.cuda_releases}, key=lambda m: tuple(map(int, m.split(".")))) \
        == CUDA_MINORS  # 12.7 was never released
    assert facts.cuda_ga("11.0") == "11.0.2"  # 11.0.1 was the RC
    assert facts.cuda_ga("12.4") == "12.4.0"
    assert facts.cuda_ga("12.7") is None


@pytest.mark.parametrize("release, driver", [
    ("11.0.2", "450.51.05"), ("11.1.0", "455.23"), ("11.2.0", "460.27.03"), ("11.3.0", "465.19.01"),
    ("11.4.0", "470.42.01"), ("11.4.3", "470.82.01"), ("11.5.0", "495.29.05"), ("11.8.0", "520.61.05"),
    ("12.0.0", "525.60.13"), ("12.0.1", "525.85.12"), ("12.2.2", "535.104.05"),
    ("12.4.0", "550.54.14"), ("12.4.1", "550.54.15"), ("12.8.0", "570.26"), ("12.9.1", "575.57.08"),
    ("13.0.0", "580.65.06"), ("13.1.0", "590.44.01"), ("13.2.0", "595.45.04"), ("13.3.1", "610.43.02"),
])
def test_release_minimums_are_nvidias(release, driver):
    assert platform().cuda_releases[release].min_driver == driver


def test_minor_compatibility_floors_are_nvidias():
    assert platform().cuda_minor_compat_floor == {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}


def test_the_per_minor_view_keeps_the_ga_minimums():
    table = platform().cuda_min_driver
    assert table["12.4"] == "550.54.14"
    assert table["11.0"] == "450.51.05"
    assert "12.7" not in table


def _platform_with(releases, floors=None):
    raw = platform().model_dump()
    raw["cuda_releases"] = releases
    raw["cuda_minor_compat_floor"] = floors or {"12": "525.60.13"}
    return Platform.model_validate(raw)


@pytest.mark.parametrize("releases, floors, message", [
    ({"12.4.0": {"label": "GA", "min_driver": "550.54.14"}}, None, "exactly one GA"),
    ({"12.4.0": {"label": "GA", "min_driver": "550.54.14", "ga": True},
      "12.4.1": {"label": "U1", "min_driver": "550.54.15", "ga": True}}, None, "exactly one GA"),
    ({"12.4": {"label": "GA", "min_driver": "550.54.14", "ga": True}}, None, "written in full"),
    ({"12.4.0": {"label": "GA", "min_driver": "550.54.14", "ga": True},
      "12.4.1": {"label": "U1", "min_driver": "550.54.13"}}, None, "older driver"),
    ({"12.4.0": {"label": "GA", "min_driver": "550.54.14", "ga": True}}, {"11": "450.80.02"}, "no cuda_minor_compat"),
    ({"12.4.0": {"label": "GA", "min_driver": "550.54.14", "ga": True}}, {"12": "560.1.1"}, "outside"),
    ({"12.4.0": {"label": "GA", "min_driver": "550.54.x", "ga": True}}, None, "dotted version"),
])
def test_an_inconsistent_cuda_table_is_refused(releases, floors, message):
    with pytest.raises(ValidationError, match=message):
        _platform_with(releases, floors)


def test_gpu_isolation_is_volume_mounts_with_the_envvar_closed():
    facts = platform().gpu_isolation
    assert facts.device_list_strategy == "volume-mounts"
    assert facts.toolkit_settings == {"accept-nvidia-visible-devices-envvar-when-unprivileged": False,
                                      "accept-nvidia-visible-devices-as-volume-mounts": True}


@pytest.mark.parametrize("key", ["accept-nvidia-visible-devices-envvar-when-unprivileged",
                                 "accept-nvidia-visible-devices-as-volume-mounts"])
def test_toolkit_settings_that_reopen_the_envvar_are_refused(key):
    raw = platform().model_dump()
    raw["gpu_isolation"]["toolkit_settings"][key] = not raw["gpu_isolation"]["toolkit_settings"][key]
    with pytest.raises(ValidationError, match=f"needs the toolkit settings {{'{key}'"):
        Platform.model_validate(raw)


# --- GPU models: driver branch, MPS, media-extension profiles ---

def test_every_card_names_its_oldest_driver_branch_and_mps_limit():
    branches = {name: facts.min_driver_branch for name, facts in gpu_models().items()}
    assert branches["V100-32GB"] == 384
    assert branches["T4-16GB"] == 410
    assert branches["A100-80GB"] == 450
    assert branches["RTX3090-24GB"] == 455
    assert branches["H100-80GB"] == 520
    assert branches["H100-94GB"] == 535
    assert branches["H200-141GB"] == 550
    assert all(facts.mps_max_clients == 48 for facts in gpu_models().values())  # Volta and newer


@pytest.mark.parametrize("model, media", [
    ("A30-24GB", {"1g.6gb+me", "2g.12gb+me"}),
    ("A100-40GB", {"1g.5gb+me"}),
    ("A100-80GB", {"1g.10gb+me"}),
    ("H100-80GB", {"1g.10gb+me"}),
    ("H100-94GB", {"1g.12gb+me"}),
    ("H200-141GB", {"1g.18gb+me"}),
])
def test_media_extension_profiles_are_known_and_single(model, media):
    geometry = gpu_models()[model].mig
    assert {name for name in geometry.profiles if name.endswith("+me")} == media
    assert geometry.media_extension_instances == 1
    for name in media:
        profile, base = geometry.profiles[name], geometry.profiles[name.removesuffix("+me")]
        assert profile.max_count == 1
        assert (profile.compute, profile.memory, profile.starts) == (base.compute, base.memory, base.starts)


def test_h100_94gb_is_the_h100_nvl_geometry():
    facts = gpu_models()["H100-94GB"]
    assert facts.memory_gib == 94
    assert {name: p.max_count for name, p in facts.mig.profiles.items()} == {
        "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1}


def _card(profiles, **extra):
    return {"memory_gib": 8, "min_driver_branch": 550, "mps_max_clients": 48,
            "mig": {"compute_slices": 2, "memory_slices": 2, "profiles": profiles, **extra}}


@pytest.mark.parametrize("profiles, message", [
    ({"1g.4gb+me": {"compute": 1, "memory": 1, "starts": [0, 1], "max_count": 1}}, "no base profile"),
    ({"1g.4gb": {"compute": 1, "memory": 1, "starts": [0, 1]},
      "1g.4gb+me": {"compute": 1, "memory": 1, "starts": [0], "max_count": 1}}, "geometry of its base"),
    ({"1g.4gb": {"compute": 1, "memory": 1, "starts": [0, 1]},
      "1g.4gb+me": {"compute": 1, "memory": 1, "starts": [0, 1], "max_count": 2}}, "at most 1 \\+me"),
    ({"1g.4gb": {"compute": 1, "memory": 1, "starts": [0, 1], "max_count": 3}}, "at most 2 fit"),
    ({"1g.8gb": {"compute": 1, "memory": 2, "starts": [0], "max_count": 2}}, "at most 1 fit"),
    ({"2g.4gb": {"compute": 1, "memory": 1, "starts": [0]}}, "not the 2g its name says"),
    ({"one-slice": {"compute": 1, "memory": 1, "starts": [0]}}, "not named like"),
])
def test_a_wrong_profile_is_refused(profiles, message):
    with pytest.raises(ValidationError, match=message):
        GpuModel.model_validate(_card(profiles))


def test_a_card_needs_its_driver_branch_and_mps_limit():
    with pytest.raises(ValidationError, match="min_driver_branch"):
        GpuModel.model_validate({"memory_gib": 8, "mps_max_clients": 48})
    with pytest.raises(ValidationError, match="mps_max_clients"):
        GpuModel.model_validate({"memory_gib": 8, "min_driver_branch": 550})


def test_the_mig_profile_rules_example_is_true():
    """GPU-MIG-PROFILE's text names a profile of one card that the other card lacks: check it against the data."""
    from infra.checks import RULES

    guards = RULES["GPU-MIG-PROFILE"].guards
    assert "2g.20gb is an A100-80GB profile" in guards and "A100-40GB's is 2g.10gb" in guards
    profiles = {model: set(gpu_models()[model].mig.profiles) for model in ("A100-80GB", "A100-40GB")}
    assert "2g.20gb" in profiles["A100-80GB"] and "2g.20gb" not in profiles["A100-40GB"]
    assert "2g.10gb" in profiles["A100-40GB"]
