"""Pinned cluster components (versions.yml): each chart, application version and image the cluster
layer deploys.

The rules below hold every entry to a reproducible pin: release versions only (no pre-release,
no floating name), images as registry/repository:tag with an optional digest, and no branch in
anything that names content (image tags, manifest URLs, source links). A chart repository is an
index location, not content; one kept on a branch (csi-driver-nfs publishes its index on master)
must carry the chart digest so the content is still pinned.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from pydantic import Field, model_validator

from infra.knowledge.base import Fact, load

_RELEASE = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_HTTPS = re.compile(r"^https://[A-Za-z0-9.-]+(:\d+)?(/\S*)?$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_TAG_STARTS_WITH_VERSION = re.compile(r"^v?\d+\.\d+")
_REPOSITORY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
_CHART_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
_COMPONENT_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# Names that move: an image tag, manifest URL or source link carrying one of these as a word does
# not pin anything.
FLOATING_NAMES = frozenset(
    {"latest", "stable", "snapshot", "master", "main", "trunk", "head", "edge", "nightly", "canary",
     "dev", "devel", "develop", "next"}
)


def _words(text: str) -> set[str]:
    return {word for word in re.split(r"[^A-Za-z0-9]+", text.lower()) if word}


def _release(value: str, what: str) -> str:
    if not _RELEASE.match(value):
        raise ValueError(f"{what} {value!r} is not a release version (MAJOR.MINOR.PATCH, optional leading v)")
    return value


def https_url(value: str, what: str) -> str:
    if not _HTTPS.match(value):
        raise ValueError(f"{what} {value!r} is not an https URL")
    return value


def no_branch(url: str, what: str) -> str:
    segments = {segment.lower() for segment in url.split("/")}
    moving = segments & FLOATING_NAMES
    if moving:
        raise ValueError(f"{what} {url!r} names a branch or moving ref ({', '.join(sorted(moving))})")
    return url


class Image(Fact):
    """A container image pinned by tag (and optionally digest): registry/repository:tag[@sha256:...]."""

    registry: str
    repository: str
    tag: str
    digest: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _parse_reference(cls, data: object) -> object:
        if not isinstance(data, str):
            return data
        reference, _, digest = data.partition("@")
        name, colon, tag = reference.rpartition(":")
        if not colon or "/" in tag:
            raise ValueError(f"image {data!r} has no tag")
        registry, slash, repository = name.partition("/")
        if not slash:
            raise ValueError(f"image {data!r} names no registry")
        return {"registry": registry, "repository": repository, "tag": tag, "digest": digest or None}

    @model_validator(mode="after")
    def _pinned(self) -> Image:
        if not ("." in self.registry or ":" in self.registry or self.registry == "localhost"):
            raise ValueError(f"image registry {self.registry!r} is not a registry host")
        if not _REPOSITORY.match(self.repository):
            raise ValueError(f"image repository {self.repository!r} is not a valid repository path")
        if not _TAG.match(self.tag):
            raise ValueError(f"image tag {self.tag!r} is not a valid tag")
        if not _TAG_STARTS_WITH_VERSION.match(self.tag):
            raise ValueError(f"image tag {self.tag!r} does not start with a version")
        moving = _words(self.tag) & FLOATING_NAMES
        if moving:
            raise ValueError(f"image tag {self.tag!r} names a moving ref ({', '.join(sorted(moving))})")
        if self.digest is not None and not _DIGEST.match(self.digest):
            raise ValueError(f"image digest {self.digest!r} is not sha256:<64 hex>")
        return self

    @property
    def reference(self) -> str:
        """The full reference, as a pod spec's image field takes it."""
        pinned = f"{self.registry}/{self.repository}:{self.tag}"
        return f"{pinned}@{self.digest}" if self.digest else pinned


class Chart(Fact):
    name: str
    repository: str
    version: str
    digest: str | None = Field(default=None, description="sha256 of the chart archive, as the repository index has it")
    kube_version: str | None = Field(default=None, description="the chart's kubeVersion constraint")

    @model_validator(mode="after")
    def _pinned(self) -> Chart:
        if not _CHART_NAME.match(self.name):
            raise ValueError(f"chart name {self.name!r} is not a valid chart name")
        https_url(self.repository, "chart repository")
        _release(self.version, f"chart {self.name} version")
        if self.digest is not None and not _DIGEST.match(self.digest):
            raise ValueError(f"chart digest {self.digest!r} is not sha256:<64 hex>")
        if self.digest is None:
            no_branch(self.repository, f"chart {self.name} repository (without a digest)")
        return self


SupportStatus = Literal["tested", "untested", "unsupported"]


class KubernetesSupport(Fact):
    """What upstream states about Kubernetes minors (1.x); None where it states nothing."""

    min_minor: int | None = Field(default=None, ge=0)
    tested: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> KubernetesSupport:
        if self.tested is not None:
            low, high = self.tested
            if low > high:
                raise ValueError(f"tested range {low}-{high} is reversed")
            if self.min_minor is not None and self.min_minor > low:
                raise ValueError(f"tested range starts at {low}, below the stated minimum {self.min_minor}")
        return self

    def status(self, minor: int) -> SupportStatus:
        """unsupported: below the stated minimum; tested: in the stated tested range; else untested."""
        if self.min_minor is not None and minor < self.min_minor:
            return "unsupported"
        if self.tested is not None and self.tested[0] <= minor <= self.tested[1]:
            return "tested"
        return "untested"


class Component(Fact):
    chart: Chart | None
    manifests: tuple[str, ...] = Field(default=(), description="upstream manifests, pinned to the release tag")
    app_version: str
    crds_only: bool = Field(default=False, description="installs only CRDs, so runs no image")
    images: dict[str, Image]
    kubernetes: KubernetesSupport
    source: str

    @model_validator(mode="after")
    def _pinned(self) -> Component:
        _release(self.app_version, "app_version")
        no_branch(https_url(self.source, "source"), "source")
        if self.chart is None and not self.manifests:
            raise ValueError("a component without a chart must name its upstream manifests")
        bare = self.app_version.removeprefix("v")
        for url in self.manifests:
            no_branch(https_url(url, "manifest"), "manifest")
            if bare not in url:
                raise ValueError(f"manifest {url!r} is not pinned to release {self.app_version}")
        if self.crds_only:
            if self.images:
                raise ValueError("a CRD-only component runs no images")
        elif not self.images:
            raise ValueError("no images pinned")
        elif not any(bare in image.tag for image in self.images.values()):
            raise ValueError(f"no image tag carries the app version {self.app_version}")
        return self


def validate_versions(raw: object) -> dict[str, Component]:
    """Validate the parsed versions.yml (a map of component name to entry)."""
    if not isinstance(raw, dict):
        raise ValueError("versions.yml must map component names to entries")
    bad = [name for name in raw if not _COMPONENT_NAME.match(str(name))]
    if bad:
        raise ValueError(f"component names must be kebab-case: {bad}")
    return {name: Component.model_validate(entry) for name, entry in raw.items()}


@cache
def versions() -> dict[str, Component]:
    """Every cluster component's pinned chart, app version and images, by component name."""
    return validate_versions(load("versions.yml"))
