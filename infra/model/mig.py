"""MIG layout geometry: does a set of instances fit one card, by NVIDIA's placement rules?

Counting compute slices is not enough. Every instance occupies consecutive memory slices from one of a
few fixed start positions, so 3g.20gb + 3g.20gb + 1g.5gb adds up to 7 compute slices on an A100 yet
has no placement: the two 3g instances take all eight memory slices. The search below tries the
start positions exactly as the driver would, largest instances first. Counts are capped too: a card holds
at most `max_count` instances of a profile, and one "+me" (media extensions) instance in all.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from infra.knowledge.chart_values import chart_values
from infra.knowledge.gpus import MEDIA_EXTENSIONS, MigGeometry, gpu_models


def mig_resource_name(profile: str) -> str:
    """The extended resource the NVIDIA device plugin advertises for a MIG profile (mixed strategy).

    Resource names cannot contain "+", so the plugin writes "mig-" + the profile with every "+" replaced by
    ".": 1g.10gb -> nvidia.com/mig-1g.10gb, 1g.10gb+me -> nvidia.com/mig-1g.10gb.me. The naming is a fact of
    the pinned plugin, recorded once in infra/knowledge/chart_values.yml.
    """
    return chart_values().nvidia_device_plugin.mig_resource(profile)


def placement(model: str, layout: Mapping[str, int]) -> list[tuple[str, int]] | None:
    """Return one placement [(profile, start slice), ...] for `layout` on `model`, or None if none exists.

    `layout` maps profile names to counts per card; every name must be a profile of the model.
    """
    key = tuple(sorted((name, count) for name, count in layout.items() if count))
    return _placement(model, key)


@lru_cache(maxsize=1024)
def _placement(model: str, layout: tuple[tuple[str, int], ...]) -> list[tuple[str, int]] | None:
    geometry = gpu_models()[model].mig
    if geometry is None:
        return None
    if not within_counts(geometry, dict(layout)):
        return None
    instances = [name for name, count in layout for _ in range(count)]
    if sum(geometry.profiles[name].compute for name in instances) > geometry.compute_slices:
        return None
    instances.sort(key=lambda name: (-geometry.profiles[name].memory, name))
    return _place(geometry, instances, 0, [])


def within_counts(geometry: MigGeometry, layout: Mapping[str, int]) -> bool:
    """Whether `layout` respects each profile's max_count and the card's limit on "+me" instances."""
    for name, count in layout.items():
        limit = geometry.profiles[name].max_count
        if limit is not None and count > limit:
            return False
    media = sum(count for name, count in layout.items() if name.endswith(MEDIA_EXTENSIONS))
    return media <= geometry.media_extension_instances


def _place(
    geometry: MigGeometry, todo: list[str], used: int, done: list[tuple[str, int]]
) -> list[tuple[str, int]] | None:
    if not todo:
        return list(done)
    name, rest = todo[0], todo[1:]
    profile = geometry.profiles[name]
    for start in profile.starts:
        mask = ((1 << profile.memory) - 1) << start
        if used & mask:
            continue
        done.append((name, start))
        found = _place(geometry, rest, used | mask, done)
        if found is not None:
            return found
        done.pop()
    return None


def memory_fraction(model: str, layout: Mapping[str, int]) -> float:
    """Share of the card's memory slices that the layout's instances take (0..1)."""
    geometry = gpu_models()[model].mig
    assert geometry is not None, f"{model} has no MIG"
    used = sum(geometry.profiles[name].memory * count for name, count in layout.items())
    return used / geometry.memory_slices
