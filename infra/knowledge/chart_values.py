"""Chart values facts (chart_values.yml): the values keys and formats the cluster layer sets per
component, checked against the components versions.yml pins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, model_validator

from infra.knowledge.base import Fact, load
from infra.knowledge.versions import Component, versions

_VALUES_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

_VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "bool": (bool,),
    "int": (int,),
    "map": (dict,),
    "list": (list, tuple),
    "null": (type(None),),
}


class ValueKey(Fact):
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


class ChartDaemonSet(Fact):
    """A DaemonSet the chart renders (or, for an operator's chart, the operator creates): the pod each selected
    node runs, at the chart's defaults unless the release's values set the keys named here."""

    name: str
    requests: dict[str, str] = Field(default_factory=dict, description="the pod's effective requests")
    tolerations: tuple[dict[str, str], ...] = ()
    node_selector: dict[str, str] = Field(default_factory=dict, description="hard-coded in the template")
    priority_class: str = ""
    tolerations_key: str | None = Field(None, description="values path whose list replaces `tolerations`")
    affinity_key: str | None = Field(None, description="values path of the pod's affinity")
    node_selector_key: str | None = Field(None, description="values path merged into `node_selector`")
    enabled_key: str | None = Field(None, description="values path that renders the DaemonSet when true")
    enabled_default: bool = True

    @staticmethod
    def value(values: Mapping[str, Any], key: str | None) -> Any:
        """The release's value at the dotted path KEY, or None."""
        if key is None:
            return None
        found: Any = values
        for part in key.split("."):
            if not isinstance(found, Mapping):
                return None
            found = found.get(part)
        return found

    def pod_spec(self, values: Mapping[str, Any]) -> dict[str, Any] | None:
        """The pod template the DaemonSet has with VALUES, or None when VALUES leave it out."""
        enabled = self.value(values, self.enabled_key)
        if not (self.enabled_default if enabled is None else enabled):
            return None
        tolerations = self.value(values, self.tolerations_key)
        affinity = self.value(values, self.affinity_key)
        spec: dict[str, Any] = {
            "containers": [{"name": self.name, "resources": {"requests": dict(self.requests)}}],
            "tolerations": [dict(t) for t in (self.tolerations if tolerations is None else tolerations)],
            "nodeSelector": {**self.node_selector, **(self.value(values, self.node_selector_key) or {})},
        }
        if affinity:
            spec["affinity"] = affinity
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        return spec


class _ComponentValues(Fact):
    keys: dict[str, ValueKey]
    daemonsets: tuple[ChartDaemonSet, ...] = ()

    @model_validator(mode="after")
    def _paths(self) -> _ComponentValues:
        bad = [path for path in self.keys if not _VALUES_PATH.match(path)]
        bad += [path for daemonset in self.daemonsets
                for path in (daemonset.tolerations_key, daemonset.affinity_key, daemonset.node_selector_key,
                             daemonset.enabled_key) if path is not None and not _VALUES_PATH.match(path)]
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


class VolcanoQueue(Fact):
    api_version: str
    kind: Literal["Queue"]
    spec_fields: tuple[str, ...]
    proportion_reads: tuple[str, ...]


class VolcanoValues(_ComponentValues):
    scheduler_name: str
    scheduler_conf_key: str
    job_pod_label: str
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


class DeschedulerPlugin(Fact):
    extension_points: tuple[str, ...]
    args: tuple[str, ...]
    note: str = ""


class DeschedulerPolicyShape(Fact):
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


class CalicoIpPool(Fact):
    fields: tuple[str, ...]
    encapsulations: tuple[str, ...]
    nat_outgoing: tuple[str, ...]
    default_block_size_ipv4: int = Field(ge=0, le=32)
    max_pools: int = Field(ge=1)


class CalicoValues(_ComponentValues):
    ip_pool: CalicoIpPool


class LocalStorageClass(Fact):
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


class ChartValues(Fact):
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


def validate_chart_values(raw: object, components: Mapping[str, Component]) -> ChartValues:
    """Validate the parsed chart_values.yml against the components versions.yml pins."""
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - set(components))
        if unknown:
            raise ValueError(f"chart values for components versions.yml does not pin: {unknown}")
    return ChartValues.model_validate(raw)


def daemonsets_of(component: str) -> tuple[ChartDaemonSet, ...]:
    """The DaemonSets the pinned chart of COMPONENT runs (none for a component without such facts)."""
    facts = getattr(chart_values(), component.replace("-", "_"), None)
    return facts.daemonsets if facts is not None else ()


@cache
def chart_values() -> ChartValues:
    """The chart values keys and formats the cluster layer sets, per component."""
    return validate_chart_values(load("chart_values.yml"), versions())
