"""The pinned cluster component versions and chart values facts are data; these tests hold them to
reproducible pins: release versions, https repositories, images as registry/repository:tag, and
nothing that floats."""

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from infra.knowledge.base import HERE
from infra.knowledge.chart_values import ValueKey, chart_values, validate_chart_values
from infra.knowledge.platform import platform
from infra.knowledge.versions import FLOATING_NAMES, Component, Image, KubernetesSupport, validate_versions, versions

# What the cluster layer deploys (the list), by the names versions.yml uses.
EXPECTED = {
    "nvidia-device-plugin", "dcgm-exporter", "volcano", "descheduler", "cilium", "calico", "calico-crds",
    "multus", "rdma-shared-device-plugin", "local-static-provisioner", "csi-driver-nfs",
    "external-snapshotter-crds", "nvidia-mig-manager",
}
RELEASE = re.compile(r"^v?\d+\.\d+\.\d+$")


def raw(name: str) -> dict[str, Any]:
    with open(HERE / name, encoding="utf-8") as handle:
        data: dict[str, Any] = yaml.safe_load(handle)
    return data


def test_every_component_the_cluster_layer_deploys_is_pinned() -> None:
    assert set(versions()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_charts_and_images_are_pinned(name: str) -> None:
    component = versions()[name]
    assert RELEASE.match(component.app_version)
    if component.chart is not None:
        assert component.chart.name
        assert component.chart.repository.startswith("https://")
        assert RELEASE.match(component.chart.version)
    else:
        assert component.manifests, "chartless components name the upstream manifest they render"
    if not component.crds_only:
        assert component.images
    for image in component.images.values():
        assert "." in image.registry
        assert image.repository and image.tag
        assert image.reference.startswith(f"{image.registry}/{image.repository}:{image.tag}")


def test_image_references_round_trip() -> None:
    text = raw("versions.yml")
    for name, entry in text.items():
        for key, reference in entry["images"].items():
            assert versions()[name].images[key].reference == reference


def test_nothing_says_latest_or_names_a_branch() -> None:
    for name in ("versions.yml", "chart_values.yml"):
        assert not re.search(r"latest", (HERE / name).read_text(encoding="utf-8"), re.IGNORECASE), name
    for component in versions().values():
        for image in component.images.values():
            assert not set(re.split(r"[^a-z0-9]+", image.tag.lower())) & FLOATING_NAMES
        for url in (*component.manifests, component.source):
            assert not {segment.lower() for segment in url.split("/")} & FLOATING_NAMES


def test_a_chart_index_on_a_branch_is_pinned_by_digest() -> None:
    for component in versions().values():
        chart = component.chart
        if chart and {segment.lower() for segment in chart.repository.split("/")} & FLOATING_NAMES:
            assert chart.digest and chart.digest.startswith("sha256:")


def test_images_follow_the_charts_own_tag_rules() -> None:
    # charts that default the image tag to "v" + appVersion
    pinned = versions()
    assert pinned["nvidia-device-plugin"].images["device-plugin"].tag == "v" + pinned["nvidia-device-plugin"].app_version
    assert pinned["descheduler"].images["descheduler"].tag == "v" + pinned["descheduler"].app_version
    assert pinned["local-static-provisioner"].images["provisioner"].tag == "v" + pinned["local-static-provisioner"].app_version
    # charts whose values.yaml carries the tag: the pin matches the chart's default
    keys = chart_values()
    assert pinned["dcgm-exporter"].images["dcgm-exporter"].tag == keys.dcgm_exporter.keys["image.tag"].default
    assert all(
        image.tag == keys.volcano.keys["basic.image_tag_version"].default for image in pinned["volcano"].images.values()
    )
    assert pinned["calico"].images["tigera-operator"].tag == keys.calico.keys["tigeraOperator.version"].default


def test_nothing_pinned_is_stated_unsupported_on_the_targeted_kubernetes_range() -> None:
    span = platform().kubernetes
    for name, component in versions().items():
        for minor in range(span.oldest_minor, span.newest_minor + 1):
            assert component.kubernetes.status(minor) != "unsupported", (name, minor)


@pytest.mark.parametrize("support, minor, status", [
    ({"min_minor": 23, "tested": [23, 35]}, 22, "unsupported"),
    ({"min_minor": 23, "tested": [23, 35]}, 30, "tested"),
    ({"min_minor": 23, "tested": [23, 35]}, 37, "untested"),
    ({"min_minor": None, "tested": None}, 30, "untested"),
])
def test_kubernetes_support_status(support: dict[str, Any], minor: int, status: str) -> None:
    assert KubernetesSupport.model_validate(support).status(minor) == status


def test_kubernetes_support_rejects_a_reversed_or_inconsistent_range() -> None:
    with pytest.raises(ValidationError):
        KubernetesSupport.model_validate({"tested": [35, 23]})
    with pytest.raises(ValidationError):
        KubernetesSupport.model_validate({"min_minor": 30, "tested": [25, 35]})


DELETE = object()


def _set(entry: dict[str, Any], path: str, value: object) -> None:
    *parents, last = path.split(".")
    for part in parents:
        entry = entry[part]
    if value is DELETE:
        del entry[last]
    else:
        entry[last] = value


@pytest.mark.parametrize("component, path, value", [
    ("nvidia-device-plugin", "chart.version", "latest"),
    ("nvidia-device-plugin", "chart.version", "0.20.0-rc.1"),
    ("nvidia-device-plugin", "chart.version", "0.20"),
    ("nvidia-device-plugin", "chart.repository", "http://nvidia.github.io/k8s-device-plugin"),
    ("nvidia-device-plugin", "chart.repository", "oci://registry.k8s.io/nfd/charts"),
    ("nvidia-device-plugin", "chart.name", ""),
    ("nvidia-device-plugin", "chart.name", DELETE),
    ("nvidia-device-plugin", "chart.digest", "sha256:abc"),
    ("nvidia-device-plugin", "app_version", "latest"),
    ("nvidia-device-plugin", "app_version", DELETE),
    ("nvidia-device-plugin", "images.device-plugin", "nvcr.io/nvidia/k8s-device-plugin:latest"),
    ("nvidia-device-plugin", "images.device-plugin", "nvcr.io/nvidia/k8s-device-plugin"),
    ("nvidia-device-plugin", "images.device-plugin", "k8s-device-plugin:v0.20.0"),
    ("nvidia-device-plugin", "images.device-plugin", "nvidia/k8s-device-plugin:v0.20.0"),
    ("nvidia-device-plugin", "images.device-plugin", "nvcr.io/nvidia/k8s-device-plugin:main"),
    ("nvidia-device-plugin", "images.device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0-latest"),
    ("nvidia-device-plugin", "images.device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:abc"),
    ("nvidia-device-plugin", "images.device-plugin", "nvcr.io/nvidia/K8s-Device-Plugin:v0.20.0"),
    ("nvidia-device-plugin", "images", {}),
    ("nvidia-device-plugin", "images.node-feature-discovery", "registry.k8s.io/nfd/node-feature-discovery:v0.19.0-devel"),
    ("nvidia-device-plugin", "source", "https://github.com/NVIDIA/k8s-device-plugin/tree/main"),
    ("nvidia-device-plugin", "kubernetes.tested", [35, 30]),
    ("nvidia-device-plugin", "surprise", True),
    ("multus", "images.multus", "ghcr.io/k8snetworkplumbingwg/multus-cni:snapshot-thick"),
    ("multus", "images.multus", "ghcr.io/k8snetworkplumbingwg/multus-cni:stable-thick"),
    ("multus", "images.multus", "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.2.4-thick"),  # not the app version
    ("multus", "manifests", [
        "https://raw.githubusercontent.com/k8snetworkplumbingwg/multus-cni/master/deployments/multus-daemonset-thick.yml"]),
    ("multus", "manifests", []),
    ("csi-driver-nfs", "chart.digest", DELETE),  # its index is on a branch: only the digest pins it
    ("calico-crds", "images", {"x": "quay.io/calico/ctl:v3.32.1"}),  # CRD-only components run nothing
])
def test_a_modified_copy_fails_validation(component: str, path: str, value: object) -> None:
    data = copy.deepcopy(raw("versions.yml"))
    _set(data[component], path, value)
    with pytest.raises((ValidationError, ValueError)):
        validate_versions(data)


def test_component_names_are_kebab_case() -> None:
    data = copy.deepcopy(raw("versions.yml"))
    data["Nvidia_Device_Plugin"] = data.pop("nvidia-device-plugin")
    with pytest.raises(ValueError):
        validate_versions(data)


def test_the_unmodified_copy_validates() -> None:
    assert set(validate_versions(copy.deepcopy(raw("versions.yml")))) == EXPECTED


@pytest.mark.parametrize("reference", [
    "quay.io/cilium/cilium:v1.20.0@sha256:383968cd5e8873f7976fa76aa6196045643558f4cc9518a207b9335cb24a0e93",
    "localhost:5000/mirror/dcgm-exporter:4.5.3-4.8.2-distroless",
])
def test_image_accepts_digests_and_registry_ports(reference: str) -> None:
    assert Image.model_validate(reference).reference == reference


def test_components_are_frozen() -> None:
    component = versions()["volcano"]
    assert isinstance(component, Component)
    with pytest.raises(ValidationError):
        component.app_version = "1.16.0"  # type: ignore[misc]


# --- chart values ---

def test_chart_values_cover_every_pinned_component() -> None:
    covered = {name.replace("_", "-") for name in type(chart_values()).model_fields}
    assert covered <= set(versions())
    # Calico's CRD chart is applied as it is (helm template | kubectl apply --server-side): no values.
    assert set(versions()) - covered == {"calico-crds"}


def test_chart_values_for_an_unpinned_component_are_refused() -> None:
    data = copy.deepcopy(raw("chart_values.yml"))
    data["kube-ovn"] = {"keys": {}}
    with pytest.raises(ValueError):
        validate_chart_values(data, versions())


@pytest.mark.parametrize("section, key, field, value", [
    ("dcgm-exporter", "service.port", "default", "9400"),
    ("dcgm-exporter", "service.enable", "type", "boolean"),
    ("cilium", "cni.exclusive", "default", "false"),
    ("volcano", "custom.scheduler_name", "default", 1),
])
def test_a_value_key_whose_default_does_not_fit_its_type_fails(section: str, key: str, field: str, value: object) -> None:
    data = copy.deepcopy(raw("chart_values.yml"))
    data[section]["keys"][key][field] = value
    with pytest.raises(ValidationError):
        validate_chart_values(data, versions())


def test_value_key_bool_is_not_an_int() -> None:
    with pytest.raises(ValidationError):
        ValueKey.model_validate({"type": "int", "default": True})
    assert ValueKey.model_validate({"type": "string|null", "default": None}).default is None


def test_value_paths_are_dotted_names() -> None:
    data = copy.deepcopy(raw("chart_values.yml"))
    data["cilium"]["keys"]["ipam operator"] = {"type": "map"}
    with pytest.raises(ValidationError):
        validate_chart_values(data, versions())


def test_device_plugin_facts() -> None:
    facts = chart_values().nvidia_device_plugin
    assert facts.node_config_label == "nvidia.com/device-plugin.config"
    assert facts.config_version == "v1"
    assert facts.mig_strategies == ("none", "single", "mixed")
    assert facts.mig_resource("1g.5gb") == "nvidia.com/mig-1g.5gb"
    assert facts.mig_resource("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert facts.shared_resource("nvidia.com/gpu") == "nvidia.com/gpu.shared"
    assert facts.shared_resource(facts.mig_resource("3g.40gb")) == "nvidia.com/mig-3g.40gb.shared"
    # the global migStrategy value overrides every per-pool config, so it must stay unset
    assert facts.keys["migStrategy"].default is None
    assert set(facts.config_examples) == {"exclusive", "mig-mixed", "time-slicing", "mps"}


@pytest.mark.parametrize("example, change", [
    ("time-slicing", lambda c: c["sharing"]["timeSlicing"]["resources"][0].update(replicas=1)),
    ("mps", lambda c: c["sharing"].update(timeSlicing=c["sharing"]["mps"])),
    ("exclusive", lambda c: c.update(version="v2")),
    ("mig-mixed", lambda c: c["flags"].update(migStrategy="both")),
])
def test_device_plugin_config_examples_are_checked(example: str, change: Callable[[dict[str, Any]], object]) -> None:
    data = copy.deepcopy(raw("chart_values.yml"))
    config = yaml.safe_load(data["nvidia-device-plugin"]["config_examples"][example])
    change(config)
    data["nvidia-device-plugin"]["config_examples"][example] = yaml.safe_dump(config)
    with pytest.raises(ValidationError):
        validate_chart_values(data, versions())


def test_volcano_default_conf_enables_the_plugins_the_cluster_layer_relies_on() -> None:
    facts = chart_values().volcano
    assert facts.scheduler_name == "volcano"
    assert {"gang", "priority", "proportion", "predicates"} <= facts.conf_plugins(facts.default_scheduler_conf)
    data = copy.deepcopy(raw("chart_values.yml"))
    data["volcano"]["default_scheduler_conf"] = "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n"
    with pytest.raises(ValidationError):
        validate_chart_values(data, versions())


def test_descheduler_policy_shape() -> None:
    policy = chart_values().descheduler.policy
    assert policy.api_version == "descheduler/v1alpha2"
    assert "nodeSelector" in policy.top_level
    assert policy.plugins["LowNodeUtilization"].extension_points == ("balance",)
    assert {"thresholds", "targetThresholds"} <= set(policy.plugins["LowNodeUtilization"].args)
    assert policy.plugins["RemovePodsViolatingNodeTaints"].extension_points == ("deschedule",)
    assert "nodeAffinityType" in policy.plugins["RemovePodsViolatingNodeAffinity"].args
    data = copy.deepcopy(raw("chart_values.yml"))
    data["descheduler"]["policy"]["plugins"]["LowNodeUtilization"]["extension_points"] = ["rebalance"]
    with pytest.raises(ValidationError):
        validate_chart_values(data, versions())


def test_network_and_storage_facts() -> None:
    values = chart_values()
    assert values.cilium.keys["cni.exclusive"].default is True  # the chart default the Multus setup must flip
    assert {"ipam.mode", "ipam.operator.clusterPoolIPv4PodCIDRList", "ipam.operator.clusterPoolIPv4MaskSize",
            "kubeProxyReplacement"} <= set(values.cilium.keys)
    assert {"cidr", "blockSize", "encapsulation"} <= set(values.calico.ip_pool.fields)
    assert values.rdma_shared_device_plugin.resource("hca_shared_devices_a") == "rdma/hca_shared_devices_a"
    assert values.local_static_provisioner.storage_class.provisioner == "kubernetes.io/no-provisioner"
    assert values.csi_driver_nfs.supports_snapshots
    assert not values.local_static_provisioner.supports_snapshots
    assert values.multus.nad_api_version == "k8s.cni.cncf.io/v1"
