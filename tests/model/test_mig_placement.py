"""MIG placement by NVIDIA's slice rules (infra.model.mig): layouts NVIDIA publishes as valid or invalid,
the per-profile and +me caps, memory fractions and the device plugin's resource names."""

import re

import pytest

from infra.knowledge.gpus import gpu_models
from infra.model.mig import memory_fraction, mig_resource_name, placement, within_counts

MIG_MODELS = ["A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB"]


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
    # per-profile maximum counts and the single media-extension (+me) instance per card
    ("A100-80GB", {"1g.20gb": 4}, True),
    ("A100-80GB", {"1g.20gb": 5}, False),
    ("H100-80GB", {"1g.10gb+me": 1, "1g.10gb": 6}, True),
    ("H100-80GB", {"1g.10gb+me": 2}, False),
    ("H100-80GB", {"1g.10gb+me": 2, "1g.10gb": 5}, False),
    ("A100-40GB", {"1g.5gb+me": 1, "3g.20gb": 1, "2g.10gb": 1}, True),
    ("A30-24GB", {"1g.6gb+me": 1, "1g.6gb": 1, "2g.12gb": 1}, True),
    ("A30-24GB", {"2g.12gb+me": 1, "2g.12gb": 1}, True),
    ("A30-24GB", {"1g.6gb+me": 1, "2g.12gb+me": 1}, False),  # one +me per card, whatever its size
    ("H200-141GB", {"1g.18gb+me": 1, "3g.71gb": 1, "2g.35gb": 1}, True),
    ("H200-141GB", {"1g.18gb+me": 2, "3g.71gb": 1}, False),
    # H100-94GB (H100 NVL)
    ("H100-94GB", {"1g.12gb": 7}, True),
    ("H100-94GB", {"1g.12gb": 8}, False),
    ("H100-94GB", {"1g.12gb+me": 1, "1g.12gb": 6}, True),
    ("H100-94GB", {"1g.24gb": 4}, True),
    ("H100-94GB", {"1g.24gb": 4, "1g.12gb": 1}, False),  # 5 compute slices, but all 8 memory slices taken
    ("H100-94GB", {"2g.24gb": 3, "1g.12gb": 1}, True),
    ("H100-94GB", {"3g.47gb": 1, "2g.24gb": 1, "1g.12gb": 2}, True),
    ("H100-94GB", {"4g.47gb": 1, "3g.47gb": 1}, True),
    ("H100-94GB", {"3g.47gb": 2}, True),
    ("H100-94GB", {"3g.47gb": 2, "1g.12gb": 1}, False),
    ("H100-94GB", {"4g.47gb": 2}, False),
    ("H100-94GB", {"7g.94gb": 1}, True),
    ("H100-94GB", {"7g.94gb": 1, "1g.12gb+me": 1}, False),
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
    assert memory_fraction("H100-94GB", {"1g.12gb+me": 1, "3g.47gb": 1}) == 5 / 8
    assert memory_fraction("A100-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}) == 1.0


def test_within_counts_caps_each_profile_and_the_media_extensions():
    geometry = gpu_models()["A30-24GB"].mig
    assert within_counts(geometry, {"1g.6gb": 4, "1g.6gb+me": 0})
    assert not within_counts(geometry, {"1g.6gb": 5})
    assert within_counts(geometry, {"2g.12gb+me": 1})
    assert not within_counts(geometry, {"1g.6gb+me": 1, "2g.12gb+me": 1})


@pytest.mark.parametrize("profile, resource", [
    ("1g.10gb", "nvidia.com/mig-1g.10gb"),
    ("7g.141gb", "nvidia.com/mig-7g.141gb"),
    ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
    ("2g.12gb+me", "nvidia.com/mig-2g.12gb.me"),
])
def test_mig_resource_name_is_the_device_plugins(profile, resource):
    assert mig_resource_name(profile) == resource


# Kubernetes extended resource names: a DNS-subdomain prefix, "/", then a qualified name of at most 63 characters.
RESOURCE_NAME = re.compile(r"^nvidia\.com/(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@pytest.mark.parametrize("model", MIG_MODELS)
def test_every_profile_has_a_valid_distinct_resource_name(model):
    names = [mig_resource_name(profile) for profile in gpu_models()[model].mig.profiles]
    assert all(RESOURCE_NAME.match(name) for name in names), names
    assert len(set(names)) == len(names)
