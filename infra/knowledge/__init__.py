"""Facts as data: GPU models and platform defaults, loaded from the YAML files beside this module.

The files are validated on load, so a typo in a new GPU entry fails the unit tests, not a plan.
"""

from __future__ import annotations

import re
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

HERE = Path(__file__).parent


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


MEDIA_EXTENSIONS = "+me"
PROFILE_NAME = re.compile(r"^(?P<compute>[1-8])g\.(?P<memory>\d+)gb(?:\+me)?$")
VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


def version_key(text: str) -> tuple[int, ...]:
    """Numeric sort key of a dotted version ("550.54.14" -> (550, 54, 14)); "570.26" sorts below "570.26.1"."""
    if not VERSION.match(text):
        raise ValueError(f"{text!r} is not a dotted version such as 550.54.14")
    return tuple(int(part) for part in text.split("."))


class MigProfile(_Fact):
    compute: int = Field(ge=1, le=8, description="compute slices the instance takes")
    memory: int = Field(ge=1, le=8, description="consecutive memory slices the instance takes")
    starts: tuple[int, ...] = Field(min_length=1, description="memory slices it may start at")
    max_count: int | None = Field(None, ge=1, description="instances of this profile one card can hold")


class MigGeometry(_Fact):
    compute_slices: int = Field(ge=1, le=8)
    memory_slices: int = Field(ge=1, le=8)
    media_extension_instances: int = Field(1, ge=0, description="+me instances one card can hold in total")
    profiles: dict[str, MigProfile]

    @model_validator(mode="after")
    def _profiles_fit_the_card(self) -> MigGeometry:
        for name, profile in self.profiles.items():
            match = PROFILE_NAME.match(name)
            if match is None:
                raise ValueError(f"profile {name} is not named like 1g.10gb or 1g.10gb+me")
            if int(match["compute"]) != profile.compute:
                raise ValueError(f"profile {name} takes {profile.compute} compute slices, not the {match['compute']}g "
                                 "its name says")
            if profile.compute > self.compute_slices:
                raise ValueError(f"profile {name} needs more compute slices than the card has")
            for start in profile.starts:
                if start + profile.memory > self.memory_slices:
                    raise ValueError(f"profile {name} starting at {start} runs past the last memory slice")
            fits = min(self.compute_slices // profile.compute, _disjoint_starts(profile))
            if profile.max_count is not None and profile.max_count > fits:
                raise ValueError(f"profile {name} claims {profile.max_count} instances per card; "
                                 f"at most {fits} fit")
            if name.endswith(MEDIA_EXTENSIONS):
                self._check_media_extension(name, profile)
        return self

    def _check_media_extension(self, name: str, profile: MigProfile) -> None:
        base = self.profiles.get(name.removesuffix(MEDIA_EXTENSIONS))
        if base is None:
            raise ValueError(f"profile {name} has no base profile {name.removesuffix(MEDIA_EXTENSIONS)}")
        if (base.compute, base.memory, base.starts) != (profile.compute, profile.memory, profile.starts):
            raise ValueError(f"profile {name} must have the geometry of its base profile")
        if (profile.max_count or self.media_extension_instances) > self.media_extension_instances:
            raise ValueError(f"profile {name}: a card holds at most {self.media_extension_instances} +me instances")


def _disjoint_starts(profile: MigProfile) -> int:
    """How many instances of `profile` fit side by side on the memory slices, ignoring compute."""
    count, end = 0, -1
    for start in sorted(profile.starts):
        if start >= end:
            count, end = count + 1, start + profile.memory
    return count


class GpuModel(_Fact):
    memory_gib: int = Field(ge=1)
    min_driver_branch: int = Field(ge=100, le=9999, description="oldest driver branch driving the card (R520: 520)")
    mps_max_clients: int = Field(ge=1, description="MPS client CUDA contexts per card")
    mig: MigGeometry | None = None


class HostPerGpu(_Fact):
    cores: int = Field(ge=1)
    memory_gib: int = Field(ge=1)


class KubeProxyConntrack(_Fact):
    max_per_core: int
    min: int
    buckets_divisor: int


class KubernetesRange(_Fact):
    oldest_minor: int
    newest_minor: int


class KubeletDefaults(_Fact):
    max_pods: int
    eviction_hard: dict[str, str]


class CudaRelease(_Fact):
    label: str = Field(description="NVIDIA's name for the release, e.g. 12.4 Update 1")
    min_driver: str = Field(description="oldest Linux x86_64 driver that fully supports the release")
    ga: bool = Field(False, description="the release a bare X.Y means")

    @field_validator("min_driver")
    @classmethod
    def _dotted(cls, value: str) -> str:
        version_key(value)
        return value


class Platform(_Fact):
    kubernetes: KubernetesRange
    kube_proxy_conntrack: KubeProxyConntrack
    kubelet: KubeletDefaults
    service_cidr_min_prefix_ipv4: int
    cuda_releases: dict[str, CudaRelease]
    cuda_minor_compat_floor: dict[str, str]
    host_per_gpu: dict[str, HostPerGpu]

    @model_validator(mode="after")
    def _cuda_table_is_consistent(self) -> Platform:
        majors: dict[str, list[str]] = {}
        ga_per_minor: dict[str, list[str]] = {}
        for release, facts in self.cuda_releases.items():
            if not re.match(r"^\d+\.\d+\.\d+$", release):
                raise ValueError(f"CUDA release {release} must be written in full, e.g. 12.4.0")
            major, minor, _ = release.split(".")
            majors.setdefault(major, []).append(release)
            ga_per_minor.setdefault(f"{major}.{minor}", [])
            if facts.ga:
                ga_per_minor[f"{major}.{minor}"].append(release)
        for minor, gas in ga_per_minor.items():
            if len(gas) != 1:
                raise ValueError(f"CUDA {minor} needs exactly one GA release, has {gas or 'none'}")
        ordered = sorted(self.cuda_releases, key=version_key)
        for older, newer in pairwise(ordered):
            if version_key(self.cuda_releases[newer].min_driver) < version_key(self.cuda_releases[older].min_driver):
                raise ValueError(f"CUDA {newer} cannot need an older driver than CUDA {older}")
        for major, releases in majors.items():
            floor = self.cuda_minor_compat_floor.get(major)
            if floor is None:
                raise ValueError(f"CUDA {major}.x has releases but no cuda_minor_compat_floor")
            drivers = sorted(version_key(self.cuda_releases[r].min_driver) for r in releases)
            if not drivers[0] <= version_key(floor) <= drivers[-1]:
                raise ValueError(f"the CUDA {major}.x compatibility floor {floor} lies outside its releases' minimums")
        return self

    def cuda_ga(self, minor: str) -> str | None:
        """The release a bare "X.Y" means (its GA), or None if the minor is not in the table."""
        return next((release for release, facts in self.cuda_releases.items()
                     if facts.ga and release.startswith(f"{minor}.")), None)

    @property
    def cuda_min_driver(self) -> dict[str, str]:
        """CUDA minor ("12.4") -> its GA release's minimum driver.

        Kept for infra/checks/gpu.py until it uses infra.drivers.driver_verdict, which also knows updates
        and the per-major compatibility floors.
        """
        return {release.rsplit(".", 1)[0]: facts.min_driver
                for release, facts in self.cuda_releases.items() if facts.ga}


def _load(name: str) -> Any:
    with open(HERE / name, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=yaml.CSafeLoader)


@cache
def gpu_models() -> dict[str, GpuModel]:
    """Every GPU model the planner knows, by the name inventories use (e.g. "A100-80GB")."""
    raw = _load("gpus.yml")
    return {name: GpuModel.model_validate(entry) for name, entry in raw.items()}


@cache
def platform() -> Platform:
    return Platform.model_validate(_load("platform.yml"))
