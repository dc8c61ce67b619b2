"""The GPU facts are data; these tests hold them to NVIDIA's published geometry."""

import pytest
from pydantic import ValidationError

from infra.knowledge import GpuModel, gpu_models, platform
from infra.mig import memory_fraction, placement

MIG_MODELS = ["A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"]
NO_MIG = ["T4-16GB", "L4-24GB", "L40S-48GB", "V100-32GB", "RTX3090-24GB", "RTX4090-24GB"]


def test_the_models_the_issue_names_are_known():
    assert set(MIG_MODELS + NO_MIG) <= set(gpu_models())
    assert all(gpu_models()[m].mig is not None for m in MIG_MODELS)
    assert all(gpu_models()[m].mig is None for m in NO_MIG)


@pytest.mark.parametrize("model", MIG_MODELS)
def test_profile_names_follow_nvidia_naming_and_memory(model):
    facts = gpu_models()[model]
    for name, profile in facts.mig.profiles.items():
        compute, memory = name.split(".")
        assert compute == f"{profile.compute}g"
        assert memory.endswith("gb")
    # the full-card profile covers all memory slices and is named after the card's memory
    full = max(facts.mig.profiles.values(), key=lambda p: p.memory)
    assert full.memory == facts.mig.memory_slices


@pytest.mark.parametrize("model, layout, fits", [
    ("A100-40GB", {"1g.5gb": 7}, True),
    ("A100-40GB", {"1g.5gb": 8}, False),
    ("A100-40GB", {"3g.20gb": 2}, True),
    ("A100-40GB", {"3g.20gb": 2, "1g.5gb": 1}, False),  # 7 compute slices, no memory placement
    ("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1}, True),
    ("A100-40GB", {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}, True),
    ("A100-40GB", {"2g.10gb": 3, "1g.5gb": 1}, True),
    ("A100-40GB", {"1g.10gb": 4}, True),
    ("A100-40GB", {"1g.10gb": 4, "1g.5gb": 1}, False),
    ("A100-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, True),
    ("A100-80GB", {"4g.40gb": 2}, False),
    ("H100-80GB", {"7g.80gb": 1}, True),
    ("H100-80GB", {"7g.80gb": 1, "1g.10gb": 1}, False),
    ("H200-141GB", {"1g.18gb": 7}, True),
    ("H200-141GB", {"2g.35gb": 3, "1g.35gb": 1}, True),
    ("A30-24GB", {"2g.12gb": 1, "1g.6gb": 2}, True),
    ("A30-24GB", {"2g.12gb": 2, "1g.6gb": 1}, False),
    ("T4-16GB", {"1g.5gb": 1}, False),
])
def test_mig_placement(model, layout, fits):
    found = placement(model, layout)
    assert (found is not None) == fits
    if found:
        geometry = gpu_models()[model].mig
        used = set()
        for name, start in found:
            profile = geometry.profiles[name]
            assert start in profile.starts
            slices = set(range(start, start + profile.memory))
            assert not used & slices
            used |= slices
        assert sorted(name for name, _ in found) == sorted(n for n, c in layout.items() for _ in range(c))


def test_memory_fraction_counts_memory_slices():
    assert memory_fraction("A100-80GB", {"1g.10gb": 7}) == 7 / 8
    assert memory_fraction("A100-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}) == 1.0


def test_a_profile_past_the_last_slice_is_refused():
    with pytest.raises(ValidationError, match="runs past the last memory slice"):
        GpuModel.model_validate({"memory_gib": 8, "mig": {"compute_slices": 2, "memory_slices": 2, "profiles": {
            "1g.4gb": {"compute": 1, "memory": 1, "starts": [0, 2]}}}})


def test_platform_facts_load():
    facts = platform()
    assert facts.kube_proxy_conntrack.max_per_core == 32768
    assert facts.kube_proxy_conntrack.min == 131072
    assert facts.kubernetes.oldest_minor <= facts.kubernetes.newest_minor
    assert set(facts.host_per_gpu) <= set(gpu_models())
