"""Does an NVIDIA driver run a CUDA release on a GPU model? A pure verdict from the knowledge tables.

NVIDIA publishes two facts per CUDA release family (infra/knowledge/platform.yml):

* each release's own minimum driver (release notes, Table 3): at or above it the release is fully
  supported, e.g. 12.4.0 (GA) needs 550.54.14 and 12.4.1 (Update 1) needs 550.54.15;
* one floor per major (Table 2, minor-version compatibility): between the floor and the release's minimum
  the release still runs, with a limited feature set (no PTX JIT of code newer than the driver), e.g.
  any 12.x on 525.60.13 or newer. Below the floor it does not run at all.

A driver also has to know the card: a driver branch older than the card's (gpus.yml min_driver_branch)
does not drive it, whatever CUDA asks for.

`driver_verdict` answers with one status, the most severe that applies, in this order:
gpu-unsupported, unknown-cuda, too-old, minor-compat, ok.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from infra.knowledge.base import version_key
from infra.knowledge.gpus import gpu_models
from infra.knowledge.platform import platform

Status = Literal["ok", "minor-compat", "too-old", "unknown-cuda", "gpu-unsupported"]

CUDA_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
DRIVER_VERSION = re.compile(r"^\d+(\.\d+){1,2}$")


@dataclass(frozen=True)
class DriverVerdict:
    """What a driver does for a CUDA release on a card.

    status        ok | minor-compat | too-old | unknown-cuda | gpu-unsupported
    cuda          the release judged: "12.4" is read as its GA ("12.4.0"); an unknown version as given
    driver        the driver judged, as given
    gpu_model     the card judged, or None when no card was given (or the card is not in gpus.yml)
    needed        the driver the finding names, None for ok and unknown-cuda:
                    minor-compat     the release's own minimum (full support)
                    too-old          the lowest driver the release runs on at all (the major's
                                     compatibility floor, or the release's minimum if that is lower)
                    gpu-unsupported  the card's oldest driver branch, written "R520"
    full_support  the release's own minimum driver, None when the release is unknown
    detail        one sentence for a report
    """

    status: Status
    cuda: str
    driver: str
    gpu_model: str | None
    needed: str | None
    full_support: str | None
    detail: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def driver_verdict(cuda_version: str, driver: str, gpu_model: str | None = None) -> DriverVerdict:
    """Judge `driver` (e.g. "550.54.14") for CUDA `cuda_version` ("12.4" or "12.4.1") on `gpu_model`.

    `gpu_model` is a gpus.yml name ("H100-80GB"); None or a model the knowledge does not list skips the
    card check. Raises ValueError for a version that is not dotted numbers.
    """
    if not CUDA_VERSION.match(cuda_version):
        raise ValueError(f"CUDA version {cuda_version!r} is not like 12.4 or 12.4.1")
    if not DRIVER_VERSION.match(driver):
        raise ValueError(f"driver version {driver!r} is not like 550.54.14")
    facts = platform()
    release = facts.cuda_ga(cuda_version) if cuda_version.count(".") == 1 else cuda_version
    judged, full = cuda_version, None
    if release is not None and release in facts.cuda_releases:
        judged, full = release, facts.cuda_releases[release].min_driver
    card = gpu_models().get(gpu_model) if gpu_model is not None else None
    model = gpu_model if card is not None else None

    def verdict(status: Status, needed: str | None, detail: str) -> DriverVerdict:
        return DriverVerdict(status, judged, driver, model, needed, full, detail)

    if card is not None and version_key(driver)[0] < card.min_driver_branch:
        branch = f"R{card.min_driver_branch}"
        return verdict("gpu-unsupported", branch,
                       f"driver {driver} predates {gpu_model}: the card needs driver branch {branch} or newer")
    if full is None:
        return verdict("unknown-cuda", None, f"CUDA {cuda_version} is not in NVIDIA's driver table "
                       f"({_known_near(cuda_version)}); its minimum driver is unknown")
    major = judged.split(".")[0]
    floor = facts.cuda_minor_compat_floor[major]
    runs_from = min(floor, full, key=version_key)
    if version_key(driver) >= version_key(full):
        return verdict("ok", None, f"driver {driver} fully supports CUDA {judged}")
    if version_key(driver) >= version_key(floor):
        return verdict("minor-compat", full,
                       f"CUDA {judged} runs on driver {driver} only under minor-version compatibility "
                       f"(no PTX JIT of newer code); driver {full} supports it fully")
    return verdict("too-old", runs_from,
                   f"driver {driver} cannot run CUDA {judged}: it needs {runs_from} or newer "
                   f"({full} for full support)")


def _known_near(cuda_version: str) -> str:
    releases = platform().cuda_releases
    minor = ".".join(cuda_version.split(".")[:2])
    same_minor = sorted((r for r in releases if r.startswith(f"{minor}.")), key=version_key)
    if same_minor:
        return f"known {minor} releases: {', '.join(same_minor)}"
    newest = max(releases, key=version_key)
    return f"it lists CUDA {min(releases, key=version_key)} to {newest}"
