"""Facts as data: GPU models and platform defaults, loaded from the YAML files beside this module.

The files are validated on load, so a typo in a new GPU entry fails the unit tests, not a plan.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

HERE = Path(__file__).parent


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MigProfile(_Fact):
    compute: int = Field(ge=1, le=8, description="compute slices the instance takes")
    memory: int = Field(ge=1, le=8, description="consecutive memory slices the instance takes")
    starts: tuple[int, ...] = Field(min_length=1, description="memory slices it may start at")


class MigGeometry(_Fact):
    compute_slices: int = Field(ge=1, le=8)
    memory_slices: int = Field(ge=1, le=8)
    profiles: dict[str, MigProfile]

    @model_validator(mode="after")
    def _profiles_fit_the_card(self) -> "MigGeometry":
        for name, profile in self.profiles.items():
            if profile.compute > self.compute_slices:
                raise ValueError(f"profile {name} needs more compute slices than the card has")
            for start in profile.starts:
                if start + profile.memory > self.memory_slices:
                    raise ValueError(f"profile {name} starting at {start} runs past the last memory slice")
        return self


class GpuModel(_Fact):
    memory_gib: int = Field(ge=1)
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


class Platform(_Fact):
    kubernetes: KubernetesRange
    kube_proxy_conntrack: KubeProxyConntrack
    kubelet: KubeletDefaults
    service_cidr_min_prefix_ipv4: int
    cuda_min_driver: dict[str, str]
    host_per_gpu: dict[str, HostPerGpu]


def _load(name: str) -> object:
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
