"""Platform defaults (platform.yml): the supported Kubernetes minors, kubelet and kube-proxy defaults, the
nodes' cgroup driver and CNI folder, NVIDIA's CUDA release -> driver table, host resources per GPU and the
scheduling defaults.
"""

from __future__ import annotations

import re
from functools import cache
from itertools import pairwise
from typing import Literal

from pydantic import Field, field_validator, model_validator

from infra.knowledge.base import Fact, load, version_key
from infra.knowledge.units import parse_quantity


class HostPerGpu(Fact):
    cores: int = Field(ge=1)
    memory_gib: int = Field(ge=1)


class KubeProxyConntrack(Fact):
    max_per_core: int
    min: int
    buckets_divisor: int


class KubernetesRange(Fact):
    oldest_minor: int
    newest_minor: int


class KubeletDefaults(Fact):
    max_pods: int
    eviction_hard: dict[str, str]


class NodeRuntime(Fact):
    """What the container runtime and the kubelet of every node agree on."""

    cgroup_driver: Literal["systemd", "cgroupfs"]
    cni_bin_dir: str = Field(pattern=r"^/")


class GpuIsolation(Fact):
    """How the device plugin hands a container its GPUs, and the toolkit settings that make it the only way."""

    device_list_strategy: Literal["volume-mounts"]
    toolkit_settings: dict[str, bool]

    @model_validator(mode="after")
    def _the_toolkit_takes_only_the_plugins_list(self) -> GpuIsolation:
        wanted = {"accept-nvidia-visible-devices-envvar-when-unprivileged": False,
                  "accept-nvidia-visible-devices-as-volume-mounts": True}
        wrong = {key: value for key, value in wanted.items() if self.toolkit_settings.get(key) is not value}
        if wrong:
            raise ValueError(f"device_list_strategy {self.device_list_strategy} needs the toolkit settings {wrong}")
        return self


class EphemeralStorageDefaults(Fact):
    """LimitRange ephemeral-storage defaults for tenant containers (limit and request)."""

    default: str = Field(description="default limit")
    default_request: str

    @model_validator(mode="after")
    def _request_within_limit(self) -> EphemeralStorageDefaults:
        if parse_quantity(self.default_request) > parse_quantity(self.default):
            raise ValueError(f"default_request {self.default_request} exceeds the default limit {self.default}")
        return self


class CudaRelease(Fact):
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


class LowNodeUtilizationDefaults(Fact):
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


class DeschedulerDefaults(Fact):
    schedule: str = Field(description="CronJob schedule of the job evicting pods that violate pool taints or affinity")
    balance_schedule: str = Field(description="CronJob schedule of the job rebalancing the CPU pools")
    low_node_utilization: LowNodeUtilizationDefaults

    @field_validator("schedule", "balance_schedule")
    @classmethod
    def _schedules(cls, value: str) -> str:
        return _cron(value)


class SchedulingDefaults(Fact):
    volcano_reserved_queues: tuple[str, ...] = Field(description="queues Volcano creates itself")
    descheduler: DeschedulerDefaults


class Platform(Fact):
    kubernetes: KubernetesRange
    kube_proxy_conntrack: KubeProxyConntrack
    kubelet: KubeletDefaults
    node_runtime: NodeRuntime
    gpu_isolation: GpuIsolation
    service_cidr_min_prefix_ipv4: int
    cuda_releases: dict[str, CudaRelease]
    cuda_minor_compat_floor: dict[str, str]
    host_per_gpu: dict[str, HostPerGpu]
    scheduling: SchedulingDefaults
    system_namespaces: dict[str, tuple[str, ...]] = Field(
        description="namespaces of the cluster's own pods that no object of the stack names: Kubernetes' "
                    "and each CNI's (by kube_network_plugin)")
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


@cache
def platform() -> Platform:
    return Platform.model_validate(load("platform.yml"))
