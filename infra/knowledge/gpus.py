"""GPU models (gpus.yml): memory, the oldest driver branch, the MPS client limit and the MIG geometry of
each card NVIDIA publishes.
"""

from __future__ import annotations

import re
from functools import cache

from pydantic import Field, model_validator

from infra.knowledge.base import Fact, load

MEDIA_EXTENSIONS = "+me"
PROFILE_NAME = re.compile(r"^(?P<compute>[1-8])g\.(?P<memory>\d+)gb(?:\+me)?$")


class MigProfile(Fact):
    compute: int = Field(ge=1, le=8, description="compute slices the instance takes")
    memory: int = Field(ge=1, le=8, description="consecutive memory slices the instance takes")
    starts: tuple[int, ...] = Field(min_length=1, description="memory slices it may start at")
    max_count: int | None = Field(None, ge=1, description="instances of this profile one card can hold")


class MigGeometry(Fact):
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


class GpuModel(Fact):
    memory_gib: int = Field(ge=1)
    min_driver_branch: int = Field(ge=100, le=9999, description="oldest driver branch driving the card (R520: 520)")
    mps_max_clients: int = Field(ge=1, description="MPS client CUDA contexts per card")
    mig: MigGeometry | None = None


@cache
def gpu_models() -> dict[str, GpuModel]:
    """Every GPU model the planner knows, by the name inventories use (e.g. "A100-80GB")."""
    raw = load("gpus.yml")
    return {name: GpuModel.model_validate(entry) for name, entry in raw.items()}
