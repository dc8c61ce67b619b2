"""GPU sharing: the NVIDIA device plugin's per-pool configs, the mig-parted layouts, and GPU metrics.

Every GPU pool gets one named device-plugin config, derived from its `gpu_sharing` alone, so what a
node advertises is a function of its pool: whole cards (exclusive), MIG instances under the `mixed`
strategy (nvidia.com/mig-<profile>), or cards replicated for time-slicing or MPS and renamed to
nvidia.com/gpu.shared so a pod never mistakes a slice for a card. The configs travel in one Helm
release of the pinned nvidia-device-plugin chart (with GPU feature discovery); the plugin's
config-manager picks a node's config by its `nvidia.com/device-plugin.config` label, which the nodes
concern sets from the same pool (nodes.device_plugin_config_name).

The MIG layouts live in one mig-parted config file derived from the pools' `mig_devices`. The host
layer applies it (`host_mig_parted`) and the same text is rendered as a file. A layout changes in
place through the host layer alone: the mig role drains the node, pauses the GPU clients
(GPU_CLIENTS_LABEL), applies and resumes them, so the device plugin starts again on the new layout.
No NVIDIA MIG manager is deployed, so nothing in the cluster would read a mig-parted ConfigMap or an
nvidia.com/mig.config node label: neither is published, and no one can set one expecting a change.

dcgm-exporter runs on the GPU pools with its Service on; its ServiceMonitor stays off until the
stack knows the Prometheus Operator's CRDs are installed (the chart renders it unconditionally
otherwise, and the install fails without them).

Chart facts are read from infra/knowledge/chart_values.yml and versions.yml. Values keys set here
that chart_values.yml does not record are named in UNRECORDED_KEYS with their source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from infra.cluster import rollout
from infra.cluster.nodes import device_plugin_config_name
from infra.cluster.objects import LABEL_PREFIX, Concern, HelmRelease, Obj, obj
from infra.cluster.placement import gpu_pools, on_pools
from infra.knowledge.chart_values import chart_values
from infra.knowledge.platform import platform
from infra.knowledge.versions import Image, versions
from infra.model.resolve import Resolved
from infra.spec import Environment, Pool

GPU_NAMESPACE = "nvidia-gpu"
"""Own namespace, labelled privileged for Pod Security Admission: the device plugin mounts hostPath
volumes and adds SYS_ADMIN (the chart does whenever the configs come from a ConfigMap), GFD runs
privileged, dcgm-exporter adds SYS_ADMIN. The baseline and restricted levels refuse all three, so
these pods must not share a namespace whose level another concern may tighten."""
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"

DEVICE_PLUGIN = "nvidia-device-plugin"  # component in versions.yml, and the release name
DCGM_EXPORTER = "dcgm-exporter"  # component in versions.yml, and the release name

GPU_CLIENTS_LABEL = f"{LABEL_PREFIX}/gpu-clients"
GPU_CLIENTS_PAUSED = "paused-for-mig-change"
"""A node labelled GPU_CLIENTS_LABEL=GPU_CLIENTS_PAUSED loses the pods that hold its cards open: the device
plugin, GFD, the MPS control daemon and dcgm-exporter require the label to be anything else, so the DaemonSet
controller deletes them when it is set and recreates them when it is removed. The host layer's mig role
sets it around a repartition (a GPU reset fails while a client holds the card, and a plugin that outlives
the change keeps advertising the old layout), as NVIDIA's own MIG manager pauses these components with its
nvidia.com/gpu.deploy.* labels."""

MIG_DISABLED = "all-disabled"  # the mig-parted config of GPU pools without MIG: MIG off where the card has it

FALLBACK_CONFIG = "unlabelled.isolated"
"""The config of a node in a GPU pool that lacks its config label (config.default). Pool config names
are DNS labels (no '.'), so this name never collides with a pool's. It is `mixed` without sharing:
whole cards where MIG is off, the cards' real MIG instances where it is on, never a replicated card,
so a node that lost its label still advertises only hardware-isolated resources."""

"""The mig-parted config for GPU pools that do not use MIG: a card left in MIG mode by an earlier
pool would otherwise be advertised (strategy none) as a whole nvidia.com/gpu that no CUDA program can
use. mig-parted skips cards without MIG, so it is safe on a T4."""
MIG_PARTED_FILE = "mig-parted.yaml"  # the rendered file, in Concern.files

UNRECORDED_KEYS: Mapping[str, Mapping[str, str]] = {
    DEVICE_PLUGIN: {
        "nfd.image.repository": "packaged node-feature-discovery-0.19.0 values.yaml image.repository",
        "nfd.image.tag": "same file, image.tag (null means the subchart's appVersion v0.19.0)",
        "nfd.worker.affinity": "same file, worker.affinity (default {}), templates/worker.yaml",
        "nfd.worker.tolerations": "same file, worker.tolerations; the parent chart's values.yaml sets it to "
                                  "master and nvidia.com/gpu=present (Equal), missing any other GPU pool taint",
    },
    DCGM_EXPORTER: {},
}
"""Values keys set here that chart_values.yml does not record, with the file they were read from
(k8s-device-plugin tag v0.20.0, deployments/helm/nvidia-device-plugin/)."""


def gpu_client_placement(env: Environment) -> Obj:
    """Affinity and tolerations for a pod that holds the cards open: the GPU pools, unless paused."""
    placement = on_pools(gpu_pools(env))
    paused = {"key": GPU_CLIENTS_LABEL, "operator": "NotIn", "values": [GPU_CLIENTS_PAUSED]}
    for term in placement["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]:
        term["matchExpressions"].append(dict(paused))
    return placement


# --- the device plugin's config file, per pool ---


def device_plugin_config(pool: Pool) -> Obj:
    """The pool's config in the plugin's config-file format (api/config/v1), as a dict.

    exclusive: whole cards; mig: the `mixed` strategy, one resource per profile (the spec's MIG
    resources carry the profile, which `single` would drop); time-slicing / mps: nvidia.com/gpu
    replicated `replicas` times and renamed (renameByDefault) to nvidia.com/gpu.shared.
    failRequestsGreaterThanOne: a request for 2 replicas buys no more of the card than 1, so it is
    refused instead of silently granted (MPS defaults to this; time-slicing does not).
    """
    if not pool.vars.is_gpu:
        raise ValueError(f"pool {pool.name} is not a GPU pool and has no device-plugin config")
    facts = chart_values().nvidia_device_plugin
    sharing = pool.vars.sharing
    config: Obj = {"version": facts.config_version,
                   "flags": {"migStrategy": "mixed" if sharing.mode == "mig" else "none"}}
    if sharing.shared:
        assert sharing.replicas is not None  # the spec refuses shared modes without replicas
        strategy = "timeSlicing" if sharing.mode == "time-slicing" else "mps"
        config["sharing"] = {strategy: {
            "renameByDefault": True,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": facts.gpu_resource, "replicas": sharing.replicas}],
        }}
    return config


def fallback_config() -> Obj:
    """The config of a GPU node without the config label (see FALLBACK_CONFIG)."""
    return {"version": chart_values().nvidia_device_plugin.config_version, "flags": {"migStrategy": "mixed"}}


def device_plugin_configs(env: Environment) -> dict[str, Obj]:
    """Every named config: one per GPU pool, plus the fallback; sorted by name."""
    configs = {device_plugin_config_name(pool): device_plugin_config(pool) for pool in gpu_pools(env)}
    if FALLBACK_CONFIG in configs:
        raise ValueError(f"a GPU pool's config is named {FALLBACK_CONFIG!r}, the fallback's name")
    configs[FALLBACK_CONFIG] = fallback_config()
    return dict(sorted(configs.items()))


def device_plugin_values(env: Environment) -> Obj:
    """Helm values for the device plugin + GFD release.

    config.map (not config.name): the chart builds the ConfigMap inside the release and stamps its
    checksum on the pods (podAnnotations checksum/config), so a changed config rolls the plugin.
    config.default names the fallback: with more than one config and no default the chart refuses to
    render (templates/validation.yml). The global migStrategy stays unset, since as env MIG_STRATEGY it
    would override every pool's flags.migStrategy. affinity and tolerations replace the chart's
    (NFD-label affinity, nvidia.com/gpu toleration) with exactly the GPU pools' (less a node whose
    GPU clients are paused); they apply to the plugin, GFD and MPS control daemon alike. NFD stays
    on: GFD writes its labels (among them nvidia.com/mps.capable, which the MPS control daemon's
    nodeSelector needs) to NFD's features.d, and only the NFD worker turns them into node labels, so
    the worker must reach every GPU pool.
    deviceListStrategy is the platform's (volume-mounts): a container's GPUs arrive as mounts only the
    kubelet makes, and the host layer sets NVIDIA's toolkit to ignore NVIDIA_VISIBLE_DEVICES in
    unprivileged containers, so an image that sets it cannot see cards outside its quota.
    """
    plugin, worker = gpu_client_placement(env), on_pools(gpu_pools(env))  # the NFD worker holds no card
    pinned = versions()[DEVICE_PLUGIN]
    return {
        "config": {
            "map": {name: _yaml(config) for name, config in device_plugin_configs(env).items()},
            "default": FALLBACK_CONFIG,
        },
        "gfd": {"enabled": True},
        "nfd": {
            "enabled": True,
            "image": _image_values(pinned.images["node-feature-discovery"]),
            "worker": {"affinity": worker["affinity"], "tolerations": worker["tolerations"]},
        },
        "image": _image_values(pinned.images["device-plugin"]),
        "deviceListStrategy": platform().gpu_isolation.device_list_strategy,
        "affinity": plugin["affinity"],
        "tolerations": plugin["tolerations"],
        "updateStrategy": rollout.strategy(env),
    }


# --- mig-parted ---


def mig_config_name(pool: Pool) -> str | None:
    """The mig-parted config a pool's hosts apply: its MIG layout, all-disabled for other GPU pools (an
    exclusive H100 pool must not keep partitions someone left on the cards), None for pools without GPUs
    (mig-parted does not run there)."""
    if not pool.vars.is_gpu:
        return None
    sharing = pool.vars.sharing
    return sharing.mig_config if sharing.mode == "mig" and sharing.mig_config else MIG_DISABLED


def mig_parted_config(env: Environment) -> Obj:
    """The mig-parted config file (version v1): one entry per MIG layout, named by the pools' mig_config,
    plus all-disabled. One name with two layouts is refused (checks report it as GPU-MIG-CONFIG-CONFLICT)."""
    facts = chart_values().nvidia_mig_manager
    configs: dict[str, list[Obj]] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    owners: dict[str, str] = {}
    for pool in gpu_pools(env):
        sharing = pool.vars.sharing
        if sharing.mode != "mig":
            continue
        name = mig_config_name(pool)
        assert name is not None
        if name == MIG_DISABLED:
            raise ValueError(f"pool {pool.name} names its MIG layout {MIG_DISABLED!r}, the name of MIG off")
        entry = [{"devices": "all", "mig-enabled": True, "mig-devices": dict(sorted(sharing.mig_devices.items()))}]
        if name in configs and configs[name] != entry:
            raise ValueError(f"pools {owners[name]} and {pool.name} give mig_config {name!r} different layouts")
        configs[name] = entry
        owners.setdefault(name, pool.name)
    return {"version": facts.config_version, "mig-configs": dict(sorted(configs.items()))}


def mig_parted_text(env: Environment) -> str:
    """The mig-parted config file as deterministic YAML: the rendered file and the hosts get this text."""
    return _yaml(mig_parted_config(env))


@dataclass(frozen=True)
class MigPartedSelection:
    """What the host layer gives `nvidia-mig-parted apply -f <file> -c <config>` on one pool's hosts."""

    config: str  # the entry of mig-configs to apply
    text: str  # the whole config file, identical on every host and in the rendered file


def host_mig_parted(env: Environment, pool: Pool) -> MigPartedSelection | None:
    """The mig-parted file and selection for a pool's hosts; None for pools without GPUs."""
    name = mig_config_name(pool)
    return None if name is None else MigPartedSelection(name, mig_parted_text(env))


# --- dcgm-exporter ---


def dcgm_service_labels() -> dict[str, str]:
    """The labels the chart puts on the exporter's Service (templates/_helpers.tpl selectorLabels, with
    no nameOverride): what a ServiceMonitor's selector.matchLabels names to scrape it."""
    chart = versions()[DCGM_EXPORTER].chart
    assert chart is not None
    return {"app.kubernetes.io/name": chart.name, "app.kubernetes.io/instance": DCGM_EXPORTER,
            "app.kubernetes.io/component": chart.name}


def dcgm_exporter_values(env: Environment, service_monitor: bool = False,
                         service_monitor_labels: Mapping[str, str] | None = None) -> Obj:
    """Helm values for dcgm-exporter on exactly the GPU pools, Service on at the chart_values port.

    `service_monitor` is for a stack that has the Prometheus Operator CRDs (off by default: the chart
    would render a monitoring.coreos.com/v1 ServiceMonitor and fail without them);
    `service_monitor_labels` are the labels a Prometheus serviceMonitorSelector matches.
    """
    facts = chart_values().dcgm_exporter
    placement = gpu_client_placement(env)
    monitor: Obj = {"enabled": service_monitor}
    if service_monitor_labels:
        monitor["additionalLabels"] = dict(sorted(service_monitor_labels.items()))
    return {
        "image": _image_values(versions()[DCGM_EXPORTER].images["dcgm-exporter"]),
        "service": {"enable": True, "port": facts.service_port},
        "serviceMonitor": monitor,
        "affinity": placement["affinity"],
        "tolerations": placement["tolerations"],
        "rollingUpdate": {"maxUnavailable": rollout.max_unavailable(env), "maxSurge": 0},
    }


# --- the concern ---


def namespace() -> Obj:
    return obj("v1", "Namespace", GPU_NAMESPACE, labels={POD_SECURITY_ENFORCE: "privileged"})


DEVICE_PLUGIN_FILE = "device-plugin-configs.yaml"  # every named config, as the release's config.map holds them


def build(view: Resolved) -> Concern:
    """The GPU namespace, the device plugin and dcgm-exporter releases;
    nothing when the spec has no GPU pool (an affinity onto no pool is not a valid object)."""
    env = view.env
    if not gpu_pools(env):
        return Concern("gpu")
    return Concern(
        "gpu",
        objects=[namespace()],
        releases=[HelmRelease(DEVICE_PLUGIN, GPU_NAMESPACE, DEVICE_PLUGIN, device_plugin_values(env),
                              rollout.timeout_seconds(env)),
                  HelmRelease(DCGM_EXPORTER, GPU_NAMESPACE, DCGM_EXPORTER, dcgm_exporter_values(env),
                              rollout.timeout_seconds(env))],
        files={MIG_PARTED_FILE: mig_parted_text(env), DEVICE_PLUGIN_FILE: _yaml(device_plugin_configs(env))},
    )


def _image_values(image: Image) -> dict[str, str]:
    """image.repository and image.tag as both charts join them (repository + ":" + tag); a digest, where
    versions.yml pins one, rides on the tag so the reference stays pinned by digest."""
    tag = f"{image.tag}@{image.digest}" if image.digest else image.tag
    return {"repository": f"{image.registry}/{image.repository}", "tag": tag}


def _yaml(data: Any) -> str:
    """Block YAML in the order the dicts are built (version first, names and profiles sorted), so the
    text is deterministic and reads like NVIDIA's own examples."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
