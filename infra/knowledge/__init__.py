"""Facts as data: GPU models and platform defaults, loaded from the YAML files beside this module.

The files are validated on load, so a typo in a new GPU entry fails the unit tests, not a plan.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra.knowledge.units import parse_quantity

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


class EphemeralStorageDefaults(_Fact):
    """LimitRange ephemeral-storage defaults for tenant containers (limit and request)."""

    default: str = Field(description="default limit")
    default_request: str

    @model_validator(mode="after")
    def _request_within_limit(self) -> EphemeralStorageDefaults:
        if parse_quantity(self.default_request) > parse_quantity(self.default):
            raise ValueError(f"default_request {self.default_request} exceeds the default limit {self.default}")
        return self


class CudaRelease(_Fact):
    label: str = Field(description="NVIDIA's name for the release, e.g. 12.4 Update 1")
    min_driver: str = Field(description="oldest Linux x86_64 driver that fully supports the release")
    ga: bool = Field(False, description="the release a bare X.Y means")

    @field_validator("min_driver")
    @classmethod
    def _dotted(cls, value: str) -> str:
        version_key(value)
        return value


_CRON_FIELD = re.compile(r"^[0-9*/,-]+$")


def _cron(value: str) -> str:
    fields = value.split(" ")
    if len(fields) != 5 or not all(_CRON_FIELD.match(field) for field in fields):
        raise ValueError(f"{value!r} is not a five-field cron schedule such as */10 * * * *")
    return value


class LowNodeUtilizationDefaults(_Fact):
    """Descheduler LowNodeUtilization percentages, by resource (cpu, memory, pods)."""

    thresholds: dict[str, int]
    target_thresholds: dict[str, int]

    @model_validator(mode="after")
    def _under_below_over(self) -> LowNodeUtilizationDefaults:
        if set(self.thresholds) != set(self.target_thresholds):
            raise ValueError("thresholds and target_thresholds must name the same resources")
        for resource, low in self.thresholds.items():
            high = self.target_thresholds[resource]
            if not 0 <= low < high <= 100:
                raise ValueError(f"{resource}: need 0 <= threshold {low} < target threshold {high} <= 100")
        return self


class DeschedulerDefaults(_Fact):
    schedule: str = Field(description="CronJob schedule of the job evicting pods that violate pool taints or affinity")
    balance_schedule: str = Field(description="CronJob schedule of the job rebalancing the CPU pools")
    low_node_utilization: LowNodeUtilizationDefaults

    @field_validator("schedule", "balance_schedule")
    @classmethod
    def _schedules(cls, value: str) -> str:
        return _cron(value)


class SchedulingDefaults(_Fact):
    volcano_reserved_queues: tuple[str, ...] = Field(description="queues Volcano creates itself")
    descheduler: DeschedulerDefaults


class Platform(_Fact):
    kubernetes: KubernetesRange
    kube_proxy_conntrack: KubeProxyConntrack
    kubelet: KubeletDefaults
    service_cidr_min_prefix_ipv4: int
    cuda_releases: dict[str, CudaRelease]
    cuda_minor_compat_floor: dict[str, str]
    host_per_gpu: dict[str, HostPerGpu]
    scheduling: SchedulingDefaults
    tenant_ephemeral_storage: EphemeralStorageDefaults

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
        """CUDA minor ("12.4") -> its GA release's minimum driver: a per-minor view of `cuda_releases`
        (the checks judge with infra.model.drivers.driver_verdict, which also knows updates and the floors)."""
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


# --- Pinned cluster component versions (versions.yml) and chart values facts (chart_values.yml) ---
#
# versions.yml pins each component the cluster layer deploys: chart, application version, images.
# The rules below hold every entry to a reproducible pin: release versions only (no pre-release,
# no floating name), images as registry/repository:tag with an optional digest, and no branch in
# anything that names content (image tags, manifest URLs, source links). A chart repository is an
# index location, not content; one kept on a branch (csi-driver-nfs publishes its index on master)
# must carry the chart digest so the content is still pinned.

_RELEASE = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_HTTPS = re.compile(r"^https://[A-Za-z0-9.-]+(:\d+)?(/\S*)?$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_TAG_STARTS_WITH_VERSION = re.compile(r"^v?\d+\.\d+")
_REPOSITORY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
_CHART_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
_COMPONENT_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_VALUES_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

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


def _https(value: str, what: str) -> str:
    if not _HTTPS.match(value):
        raise ValueError(f"{what} {value!r} is not an https URL")
    return value


def _no_branch(url: str, what: str) -> str:
    segments = {segment.lower() for segment in url.split("/")}
    moving = segments & FLOATING_NAMES
    if moving:
        raise ValueError(f"{what} {url!r} names a branch or moving ref ({', '.join(sorted(moving))})")
    return url


class Image(_Fact):
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


class Chart(_Fact):
    name: str
    repository: str
    version: str
    digest: str | None = Field(default=None, description="sha256 of the chart archive, as the repository index has it")
    kube_version: str | None = Field(default=None, description="the chart's kubeVersion constraint")

    @model_validator(mode="after")
    def _pinned(self) -> Chart:
        if not _CHART_NAME.match(self.name):
            raise ValueError(f"chart name {self.name!r} is not a valid chart name")
        _https(self.repository, "chart repository")
        _release(self.version, f"chart {self.name} version")
        if self.digest is not None and not _DIGEST.match(self.digest):
            raise ValueError(f"chart digest {self.digest!r} is not sha256:<64 hex>")
        if self.digest is None:
            _no_branch(self.repository, f"chart {self.name} repository (without a digest)")
        return self


SupportStatus = Literal["tested", "untested", "unsupported"]


class KubernetesSupport(_Fact):
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


class Component(_Fact):
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
        _no_branch(_https(self.source, "source"), "source")
        if self.chart is None and not self.manifests:
            raise ValueError("a component without a chart must name its upstream manifests")
        bare = self.app_version.removeprefix("v")
        for url in self.manifests:
            _no_branch(_https(url, "manifest"), "manifest")
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


# --- chart values facts ---

_VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "bool": (bool,),
    "int": (int,),
    "map": (dict,),
    "list": (list, tuple),
    "null": (type(None),),
}


class ValueKey(_Fact):
    """One chart values key: its shape, the chart's default (None where unset) and what it does."""

    type: str = Field(description="'|'-separated of string, bool, int, map, list, null")
    default: Any = None
    note: str = ""

    @model_validator(mode="after")
    def _default_fits(self) -> ValueKey:
        kinds = self.type.split("|")
        unknown = [kind for kind in kinds if kind not in _VALUE_TYPES]
        if unknown:
            raise ValueError(f"unknown value type(s) {unknown}")
        if self.default is None:
            return self
        for kind in kinds:
            fits = isinstance(self.default, _VALUE_TYPES[kind])
            if kind == "int" and isinstance(self.default, bool):
                fits = False
            if fits:
                return self
        raise ValueError(f"default {self.default!r} is not a {self.type}")


class _ComponentValues(_Fact):
    keys: dict[str, ValueKey]

    @model_validator(mode="after")
    def _paths(self) -> _ComponentValues:
        bad = [path for path in self.keys if not _VALUES_PATH.match(path)]
        if bad:
            raise ValueError(f"not dotted values paths: {bad}")
        return self


class DevicePluginValues(_ComponentValues):
    node_config_label: str = Field(description="node label naming the config a node's plugin uses")
    config_version: Literal["v1"]
    mig_strategies: tuple[str, ...]
    gpu_resource: str
    mig_resource_prefix: str
    shared_suffix: str
    min_replicas: int = Field(ge=2)
    mps_capable_label: str
    sharing_strategy_label: str
    rules: tuple[str, ...]
    config_examples: dict[str, str]

    @model_validator(mode="after")
    def _examples_follow_the_format(self) -> DevicePluginValues:
        for name, text in self.config_examples.items():
            config = yaml.safe_load(text)
            if config.get("version") != self.config_version:
                raise ValueError(f"config example {name} is not version {self.config_version}")
            strategy = config.get("flags", {}).get("migStrategy")
            if strategy not in self.mig_strategies:
                raise ValueError(f"config example {name} has migStrategy {strategy!r}")
            sharing = config.get("sharing", {})
            if len(sharing) > 1:
                raise ValueError(f"config example {name} combines sharing strategies {sorted(sharing)}")
            for strategy_name, shared in sharing.items():
                if strategy_name not in ("timeSlicing", "mps"):
                    raise ValueError(f"config example {name} has unknown sharing {strategy_name!r}")
                for resource in shared["resources"]:
                    if resource["replicas"] < self.min_replicas:
                        raise ValueError(f"config example {name} has fewer than {self.min_replicas} replicas")
        return self

    def mig_resource(self, profile: str) -> str:
        """The resource the mixed MIG strategy advertises for a profile: 1g.10gb+me -> nvidia.com/mig-1g.10gb.me."""
        return self.mig_resource_prefix + profile.replace("+", ".")

    def shared_resource(self, resource: str) -> str:
        """The name a shared resource is advertised under with renameByDefault: true."""
        return resource + self.shared_suffix


class DcgmExporterValues(_ComponentValues):
    service_port_name: str
    service_port: int = Field(ge=1, le=65535)


class VolcanoQueue(_Fact):
    api_version: str
    kind: Literal["Queue"]
    spec_fields: tuple[str, ...]
    proportion_reads: tuple[str, ...]


class VolcanoValues(_ComponentValues):
    scheduler_name: str
    scheduler_conf_key: str
    required_plugins: tuple[str, ...]
    default_scheduler_conf: str
    queue: VolcanoQueue

    @staticmethod
    def conf_plugins(conf: str) -> set[str]:
        """The plugin names a scheduler configuration text enables, over all tiers."""
        parsed = yaml.safe_load(conf)
        return {plugin["name"] for tier in parsed.get("tiers", []) for plugin in tier.get("plugins", [])}

    @model_validator(mode="after")
    def _default_has_required(self) -> VolcanoValues:
        missing = set(self.required_plugins) - self.conf_plugins(self.default_scheduler_conf)
        if missing:
            raise ValueError(f"default scheduler conf lacks {sorted(missing)}")
        return self


class DeschedulerPlugin(_Fact):
    extension_points: tuple[str, ...]
    args: tuple[str, ...]
    note: str = ""


class DeschedulerPolicyShape(_Fact):
    api_version: str
    kind: Literal["DeschedulerPolicy"]
    top_level: tuple[str, ...]
    node_selector_note: str
    profile_fields: tuple[str, ...]
    extension_points: tuple[str, ...]
    plugins: dict[str, DeschedulerPlugin]

    @model_validator(mode="after")
    def _known_extension_points(self) -> DeschedulerPolicyShape:
        for name, plugin in self.plugins.items():
            unknown = set(plugin.extension_points) - set(self.extension_points)
            if unknown:
                raise ValueError(f"plugin {name} names unknown extension points {sorted(unknown)}")
        return self


class DeschedulerValues(_ComponentValues):
    policy: DeschedulerPolicyShape


class CiliumValues(_ComponentValues):
    pass


class CalicoIpPool(_Fact):
    fields: tuple[str, ...]
    encapsulations: tuple[str, ...]
    nat_outgoing: tuple[str, ...]
    default_block_size_ipv4: int = Field(ge=0, le=32)
    max_pools: int = Field(ge=1)


class CalicoValues(_ComponentValues):
    ip_pool: CalicoIpPool


class LocalStorageClass(_Fact):
    provisioner: str
    volume_binding_mode: Literal["WaitForFirstConsumer", "Immediate"]
    default_reclaim_policy: Literal["Delete", "Retain"]


class LocalStaticProvisionerValues(_ComponentValues):
    supports_snapshots: bool
    storage_class: LocalStorageClass


class CsiDriverNfsValues(_ComponentValues):
    supports_snapshots: bool
    snapshot_api_version: str


class SnapshotCrdValues(_ComponentValues):
    group: str
    served_version: str


class MultusValues(_ComponentValues):
    nad_api_version: str
    nad_kind: Literal["NetworkAttachmentDefinition"]
    pod_networks_annotation: str
    nad_resource_name_annotation: str
    daemon_config: dict[str, Any]
    conf_dir: str = Field(description="where a NAD without spec finds its CNI config, by the config's name")
    daemon_resources: dict[str, dict[str, str]] = Field(description="the upstream DaemonSet's container resources")


class RdmaSharedDevicePluginValues(_ComponentValues):
    config_map: str
    config_key: str
    config_path: str = Field(description="where the plugin reads its config file")
    resource_name_pattern: str = Field(description="what a configList resourceName must match")
    default_resource_prefix: str
    config_fields: tuple[str, ...]
    resource_fields: tuple[str, ...]
    selector_fields: tuple[str, ...]
    rules: tuple[str, ...]

    def resource(self, resource_name: str, prefix: str | None = None) -> str:
        """The extended resource a configList entry advertises, e.g. rdma/hca_shared_devices_a."""
        return f"{prefix or self.default_resource_prefix}/{resource_name}"


class MigManagerValues(_ComponentValues):
    config_label: str
    state_label: str
    config_version: Literal["v1"]
    entry_fields: tuple[str, ...]


class ChartValues(_Fact):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=lambda name: name.replace("_", "-"))

    nvidia_device_plugin: DevicePluginValues
    dcgm_exporter: DcgmExporterValues
    volcano: VolcanoValues
    descheduler: DeschedulerValues
    cilium: CiliumValues
    calico: CalicoValues
    local_static_provisioner: LocalStaticProvisionerValues
    csi_driver_nfs: CsiDriverNfsValues
    external_snapshotter_crds: SnapshotCrdValues
    multus: MultusValues
    rdma_shared_device_plugin: RdmaSharedDevicePluginValues
    nvidia_mig_manager: MigManagerValues


def validate_versions(raw: object) -> dict[str, Component]:
    """Validate the parsed versions.yml (a map of component name to entry)."""
    if not isinstance(raw, dict):
        raise ValueError("versions.yml must map component names to entries")
    bad = [name for name in raw if not _COMPONENT_NAME.match(str(name))]
    if bad:
        raise ValueError(f"component names must be kebab-case: {bad}")
    return {name: Component.model_validate(entry) for name, entry in raw.items()}


def validate_chart_values(raw: object, components: Mapping[str, Component]) -> ChartValues:
    """Validate the parsed chart_values.yml against the components versions.yml pins."""
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - set(components))
        if unknown:
            raise ValueError(f"chart values for components versions.yml does not pin: {unknown}")
    return ChartValues.model_validate(raw)


@cache
def versions() -> dict[str, Component]:
    """Every cluster component's pinned chart, app version and images, by component name."""
    return validate_versions(_load("versions.yml"))


@cache
def chart_values() -> ChartValues:
    """The chart values keys and formats the cluster layer sets, per component."""
    return validate_chart_values(_load("chart_values.yml"), versions())


# --- CSI drivers (csi_drivers.yml): which pinned component deploys a driver, and whether it snapshots ---

_CSI_DRIVER_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")


class CsiDriver(_Fact):
    component: str | None = Field(description="the versions.yml component that deploys the driver; None if external")
    snapshots: bool = Field(description="the controller implements CREATE_DELETE_SNAPSHOT")
    source: str


def validate_csi_drivers(raw: object, components: Mapping[str, Component]) -> dict[str, CsiDriver]:
    """Validate the parsed csi_drivers.yml: driver names as CSI names them, components that versions.yml pins."""
    if not isinstance(raw, dict):
        raise ValueError("csi_drivers.yml must map CSI driver names to entries")
    drivers: dict[str, CsiDriver] = {}
    for name, entry in raw.items():
        if not _CSI_DRIVER_NAME.match(str(name)) or len(str(name)) > 63:
            raise ValueError(f"{name!r} is not a CSI driver name (a DNS-1123 subdomain of at most 63 characters)")
        driver = CsiDriver.model_validate(entry)
        if driver.component is not None and driver.component not in components:
            raise ValueError(f"CSI driver {name}: component {driver.component!r} is not pinned in versions.yml")
        _no_branch(_https(driver.source, "source"), "source")
        drivers[str(name)] = driver
    return drivers


@cache
def csi_drivers() -> dict[str, CsiDriver]:
    """Known CSI drivers by driver name (a StorageClass's provisioner)."""
    return validate_csi_drivers(_load("csi_drivers.yml"), versions())
