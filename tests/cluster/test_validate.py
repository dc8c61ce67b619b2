"""Offline validation of rendered Kubernetes objects: valid objects of every kind the cluster layer renders
pass; each broken one yields the Problem expected, from the layer expected.

For the project's own checks (infra/cluster/validation/) each case also shows the schema layer alone passes
the object: the own check is what catches it, so removing the check fails its case.
"""

import copy
import json
import random

import jsonschema
import pytest

from infra.cluster.validation import rules
from infra.cluster.validation import validate as validation
from infra.cluster.validation.syntax import label_value, parse_quantity, qualified_name
from infra.cluster.validation.validate import (
    Problem,
    crd_definitions,
    project_problems,
    schema_problems,
    strict_json_schema,
    supported_versions,
    validate,
)

KUBE = "1.34.2"
GPU_NODE_LABELS = {
    "kubernetes.io/hostname": "gpu-a100-01",
    "node.kubernetes.io/instance-type": "dgx-a100",
    "pools.example.com/pool": "gpu_a100",  # '_' is allowed inside a label value
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/mig.config": "all-1g.10gb",
}


def container(**extra):
    return {
        "name": "app",
        "image": "registry.example.com/app:1.2.3",
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
        **extra,
    }


def pod_spec(**extra):
    return {
        "containers": [container()],
        "nodeSelector": {"pools.example.com/pool": "cpu_general"},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "pools.example.com/dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
        ],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pools.example.com/pool", "operator": "In", "values": ["gpu_a100"]},
                                  {"key": "pools.example.com/generation", "operator": "Gt", "values": ["3"]}]}]}}},
        "priorityClassName": "gpu-training",
        "serviceAccountName": "node-agent",
        **extra,
    }


def valid_objects():
    """One valid object of every kind the cluster layer renders."""
    def labels():
        return {"app.kubernetes.io/name": "node-agent", "app.kubernetes.io/part-of": "k8s-node-pools"}

    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-ml", "labels": {
            "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.34",
            "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest",
            "pod-security.kubernetes.io/audit": "restricted"}}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "team-ml"},
         "spec": {"hard": {"requests.cpu": "256", "requests.memory": "2Ti", "limits.memory": "2Ti",
                           "requests.nvidia.com/gpu": "16", "pods": "500", "persistentvolumeclaims": 50}}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "team-ml"},
         "spec": {"limits": [
             {"type": "Container", "default": {"cpu": "1", "memory": "1Gi"},
              "defaultRequest": {"cpu": "250m", "memory": "256Mi"}, "max": {"memory": "512Gi"},
              "min": {"cpu": "10m"}, "maxLimitRequestRatio": {"cpu": "4", "nvidia.com/gpu": "1.5"}},
             {"type": "PersistentVolumeClaim", "max": {"storage": "2Ti"}, "min": {"storage": "1Gi"}}]}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "gpu-training"},
         "value": 100000, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority",
         "description": "Training jobs on GPU pools."},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local-nvme"},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
         "reclaimPolicy": "Delete", "allowVolumeExpansion": False},
        {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass", "metadata": {"name": "ceph-rbd"},
         "driver": "rbd.csi.ceph.com", "deletionPolicy": "Delete", "parameters": {"clusterID": "ceph-1"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "scratch", "namespace": "team-ml"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-nvme", "volumeMode": "Filesystem",
                  "resources": {"requests": {"storage": "500Gi"}}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mig-parted-config", "namespace": "gpu-operator"},
         "data": {"config.yaml": "version: v1\n"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "node-agent", "namespace": "kube-system",
                                                                    "labels": labels()}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-agent", "namespace": "kube-system",
                                                                    "labels": labels()},
         "spec": {"selector": {"matchLabels": labels()},
                  "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
                  "template": {"metadata": {"labels": labels(), "annotations": {"example.com/checksum": "abc123"}},
                               "spec": pod_spec(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": "team-ml"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "trainer"},
                                              "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                  "strategy": {"type": "RollingUpdate"},
                  "template": {"metadata": {"labels": {"app": "trainer", "tier": "gpu"}},
                               "spec": pod_spec(containers=[container(resources={
                                   "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                                   "limits": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": 1}})])}}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "mig-reconcile", "namespace": "gpu-operator"},
         "spec": {"schedule": "*/15 * * * *", "concurrencyPolicy": "Forbid",
                  "jobTemplate": {"spec": {"backoffLimit": 2, "template": {"spec": pod_spec(restartPolicy="OnFailure")}}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "node-agent-metrics", "namespace": "kube-system"},
         "spec": {"type": "ClusterIP", "selector": labels(), "sessionAffinity": "None",
                  "ports": [{"name": "metrics", "port": 9100, "targetPort": "http", "protocol": "TCP"}]}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "k8s-node-pools:node-agent"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "k8s-node-pools:node-agent"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "k8s-node-pools:node-agent"},
         "subjects": [{"kind": "ServiceAccount", "name": "node-agent", "namespace": "kube-system"}]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": "gpu-pods-need-a-queue"},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": [
                      {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                  "validations": [{"expression": "has(object.metadata.annotations)",
                                   "message": "GPU pods name their Volcano queue"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": "gpu-pods-need-a-queue"},
         "spec": {"policyName": "gpu-pods-need-a-queue", "validationActions": ["Deny", "Audit"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {"pools.example.com/gpu": "true"}}}}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a100-01.dc1.example.com", "labels": GPU_NODE_LABELS},
         "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                             {"key": "pools.example.com/dedicated", "value": "gpu", "effect": "NoExecute"}]},
         "status": {"capacity": {"cpu": "128", "memory": "2113509376Ki", "nvidia.com/gpu": "8", "pods": "110",
                                 "hugepages-1Gi": "0", "ephemeral-storage": "7Ti"},
                    "allocatable": {"cpu": "126500m", "memory": "2000Gi", "nvidia.com/gpu": "8", "pods": "110",
                                    "hugepages-1Gi": "0", "ephemeral-storage": "6.5Ti"}}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "team-ml"},
         "spec": {"weight": 4, "reclaimable": True, "priority": 10, "parent": "root",
                  "capability": {"cpu": "512", "memory": "4Ti", "nvidia.com/gpu": 32},
                  "deserved": {"cpu": "256", "memory": "2Ti", "nvidia.com/gpu": 16},
                  "guarantee": {"resource": {"cpu": "64", "nvidia.com/gpu": 8}}}},
        {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
         "metadata": {"name": "rdma-net", "namespace": "team-ml"},
         "spec": {"config": json.dumps({"cniVersion": "1.0.0", "name": "rdma-net", "type": "macvlan",
                                        "master": "ens1f0", "ipam": {"type": "whereabouts", "range": "10.56.0.0/16"}})}},
        {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
         "metadata": {"name": "sriov-net", "namespace": "team-ml",
                      "annotations": {"k8s.v1.cni.cncf.io/resourceName": "nvidia.com/rdma_vf"}},
         "spec": {"config": json.dumps({"cniVersion": "0.4.0", "name": "sriov-net",
                                        "plugins": [{"type": "sriov"}, {"type": "tuning", "sysctl": {}}]})}},
    ]


def by_kind(kind, name=None):
    """A fresh copy of the valid object of that kind (and name, where a kind has two)."""
    return copy.deepcopy(next(o for o in valid_objects() if o["kind"] == kind
                              and (name is None or o["metadata"]["name"] == name)))


def test_the_valid_set_covers_every_kind_the_cluster_layer_renders():
    assert {o["kind"] for o in valid_objects()} >= {
        "Namespace", "ResourceQuota", "LimitRange", "PriorityClass", "StorageClass", "VolumeSnapshotClass",
        "ConfigMap", "ServiceAccount", "DaemonSet", "Deployment", "CronJob", "Service", "ClusterRole",
        "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Node", "Queue",
        "NetworkAttachmentDefinition"}


@pytest.mark.parametrize("kube_version", [f"{minor}.0" for minor in supported_versions()])
def test_valid_objects_have_no_problems(kube_version):
    minor = int(kube_version.split(".")[1])
    objects = [o for o in valid_objects()  # admissionregistration.k8s.io/v1 policies are GA from 1.30
               if minor >= 30 or not o["kind"].startswith("ValidatingAdmissionPolicy")]
    assert [str(p) for p in validate(objects, kube_version)] == []


def test_the_projects_crds_are_valid_crds_and_name_themselves():
    crds = crd_definitions()
    assert {crd["spec"]["names"]["kind"] for crd in crds} == {"Queue", "NetworkAttachmentDefinition", "VolumeSnapshotClass"}
    assert all(crd["apiVersion"] == "apiextensions.k8s.io/v1" for crd in crds)
    assert [str(p) for p in validate(crds, KUBE)] == []


# --- the schema layer ---------------------------------------------------------------------------------


def node_with(mutate):
    node = by_kind("Node")
    mutate(node)
    return node


def obj_with(kind, mutate, name=None):
    obj = by_kind(kind, name)
    mutate(obj)
    return obj


SCHEMA_CASES = [
    ("unknown field", node_with(lambda n: n["spec"].update(taintz=[])), "spec.taintz", "unknown field 'taintz'"),
    ("unknown field deep in a container", obj_with("Deployment", lambda d: d["spec"]["template"]["spec"]["containers"][0]
                                                   .update(imagePullPolicyy="Always")),
     "spec.template.spec.containers[0].imagePullPolicyy", "unknown field 'imagePullPolicyy'"),
    ("wrong type", obj_with("Deployment", lambda d: d["spec"].update(replicas="2")), "spec.replicas",
     "'2' is not of type 'integer', 'null'"),
    ("quantity of the wrong type", node_with(lambda n: n["status"]["capacity"].update(cpu=[1])), "status.capacity.cpu",
     "[1] is not of type 'string', 'number'"),
    ("required field", obj_with("StorageClass", lambda s: s.pop("provisioner")), "",
     "'provisioner' is a required property"),
    ("Queue weight 0", obj_with("Queue", lambda q: q["spec"].update(weight=0)), "spec.weight",
     "0 is less than the minimum of 1"),
    ("Queue weight above 65535", obj_with("Queue", lambda q: q["spec"].update(weight=65536)), "spec.weight",
     "65536 is greater than the maximum of 65535"),
    ("Queue unknown field", obj_with("Queue", lambda q: q["spec"].update(weigth=2)), "spec.weigth",
     "unknown field 'weigth'"),
    ("Queue capability not a quantity", obj_with("Queue", lambda q: q["spec"]["capability"].update(cpu="lots")),
     "spec.capability.cpu", "'lots' does not match the pattern"),
    ("Queue reclaimable not a bool", obj_with("Queue", lambda q: q["spec"].update(reclaimable="yes")),
     "spec.reclaimable", "'yes' is not of type 'boolean'"),
    ("Queue metadata is a strict ObjectMeta", obj_with("Queue", lambda q: q["metadata"].update(lables={})),
     "metadata.lables", "unknown field 'lables'"),
    ("NAD config not a string", obj_with("NetworkAttachmentDefinition", lambda n: n["spec"].update(config={"type": "x"}),
                                         "rdma-net"),
     "spec.config", "{'type': 'x'} is not of type 'string'"),
    ("VolumeSnapshotClass enum", obj_with("VolumeSnapshotClass", lambda v: v.update(deletionPolicy="Keep")),
     "deletionPolicy", "'Keep' is not one of ['Delete', 'Retain']"),
    ("VolumeSnapshotClass required driver", obj_with("VolumeSnapshotClass", lambda v: v.pop("driver")), "",
     "'driver' is a required property"),
    ("unknown kind", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}, "",
     "no schema for example.com/v1 Widget"),
    ("a built-in kind under another group", obj_with("PriorityClass", lambda p: p.update(apiVersion="scheduling.volcano.sh/v1")),
     "", "no schema for scheduling.volcano.sh/v1 PriorityClass"),
    ("a version the kind does not have", obj_with("Deployment", lambda d: d.update(apiVersion="apps/v1beta1")), "",
     "no schema for apps/v1beta1 Deployment"),
    ("no apiVersion", obj_with("ConfigMap", lambda c: c.pop("apiVersion")), "", "apiVersion and kind are required"),
]


@pytest.mark.parametrize(("case", "obj", "path", "message"), SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES])
def test_the_schema_layer_catches(case, obj, path, message):
    problems = schema_problems([obj], KUBE)
    assert [(p.path, p.message[:len(message)]) for p in problems] == [(path, message)], problems
    assert any(p.path == path and p.message.startswith(message) for p in validate([obj], KUBE))


def test_a_kind_that_is_newer_than_the_target_version_has_no_schema():
    policy = by_kind("ValidatingAdmissionPolicy")  # admissionregistration.k8s.io/v1 since 1.30
    assert schema_problems([policy], "1.30.0") == []
    [problem] = schema_problems([policy], "1.29.5")
    assert "no schema for admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy" in problem.message
    assert "Kubernetes 1.29" in problem.message


# --- the project's own checks -------------------------------------------------------------------------


def dep_container(mutate):
    return obj_with("Deployment", lambda d: mutate(d["spec"]["template"]["spec"]["containers"][0]))


def dep_pod(mutate):
    return obj_with("Deployment", lambda d: mutate(d["spec"]["template"]["spec"]))


def psa(key, value):
    return obj_with("Namespace", lambda n: n["metadata"]["labels"].update({key: value}))


def crd_named(name):
    crd = next(crd for crd in crd_definitions() if crd["spec"]["names"]["kind"] == "Queue")
    crd["metadata"]["name"] = name
    return crd


C = "spec.template.spec.containers[0]"
OWN_CASES = [
    # taints and tolerations
    ("taint effect", node_with(lambda n: n["spec"]["taints"][0].update(effect="NoScheduel")), "spec.taints[0].effect",
     "'NoScheduel' is not one of ['NoSchedule', 'PreferNoSchedule', 'NoExecute']"),
    ("taint key", node_with(lambda n: n["spec"]["taints"][0].update(key="nvidia.com/gpu count")), "spec.taints[0].key",
     "'nvidia.com/gpu count': name part must consist of alphanumeric characters"),
    ("taint value", node_with(lambda n: n["spec"]["taints"][0].update(value="yes please")), "spec.taints[0].value",
     "'yes please': a valid label must be an empty string or"),
    ("taints repeat key and effect", node_with(lambda n: n["spec"]["taints"].append(
        {"key": "nvidia.com/gpu", "value": "other", "effect": "NoSchedule"})), "spec.taints[2]",
     "taints must be unique by key and effect"),
    ("toleration operator", dep_pod(lambda p: p["tolerations"][0].update(operator="Exist")),
     "spec.template.spec.tolerations[0].operator", "'Exist' is not one of ['Exists', 'Equal']"),
    ("toleration effect", dep_pod(lambda p: p["tolerations"][1].update(effect="NoScheduel")),
     "spec.template.spec.tolerations[1].effect", "'NoScheduel' is not one of"),
    ("toleration Exists with a value", dep_pod(lambda p: p["tolerations"][0].update(value="present")),
     "spec.template.spec.tolerations[0].value", "must be empty when `operator` is 'Exists'"),
    ("tolerationSeconds without NoExecute", dep_pod(lambda p: p["tolerations"][0].update(tolerationSeconds=60)),
     "spec.template.spec.tolerations[0].effect", "must be 'NoExecute' when `tolerationSeconds` is set"),
    ("toleration without key must be Exists", dep_pod(lambda p: p["tolerations"][1].pop("key")),
     "spec.template.spec.tolerations[1].operator", "must be 'Exists' when `key` is empty"),
    # quantities, wherever they occur
    ("container request", dep_container(lambda c: c["resources"]["requests"].update(cpu="1 core")),
     f"{C}.resources.requests.cpu", "'1 core' is not a quantity"),
    ("container limit", dep_container(lambda c: c["resources"]["limits"].update(memory="1GB")),
     f"{C}.resources.limits.memory", "'1GB' is not a quantity"),
    ("ResourceQuota hard", obj_with("ResourceQuota", lambda q: q["spec"]["hard"].update({"requests.memory": "2 TiB"})),
     "spec.hard[requests.memory]", "'2 TiB' is not a quantity"),
    ("ResourceQuota negative", obj_with("ResourceQuota", lambda q: q["spec"]["hard"].update({"requests.cpu": "-1"})),
     "spec.hard[requests.cpu]", "'-1' must be greater than or equal to 0"),
    ("LimitRange default", obj_with("LimitRange", lambda r: r["spec"]["limits"][0]["default"].update(cpu="1.2.3")),
     "spec.limits[0].default.cpu", "'1.2.3' is not a quantity"),
    ("LimitRange defaultRequest", obj_with("LimitRange", lambda r: r["spec"]["limits"][0]["defaultRequest"].update(memory="256mb")),
     "spec.limits[0].defaultRequest.memory", "'256mb' is not a quantity"),
    ("LimitRange max", obj_with("LimitRange", lambda r: r["spec"]["limits"][1]["max"].update(storage="2T B")),
     "spec.limits[1].max.storage", "'2T B' is not a quantity"),
    ("LimitRange min", obj_with("LimitRange", lambda r: r["spec"]["limits"][0]["min"].update(cpu="m10")),
     "spec.limits[0].min.cpu", "'m10' is not a quantity"),
    ("LimitRange maxLimitRequestRatio", obj_with("LimitRange", lambda r: r["spec"]["limits"][0]["maxLimitRequestRatio"].update(cpu="x4")),
     "spec.limits[0].maxLimitRequestRatio.cpu", "'x4' is not a quantity"),
    ("PVC request", obj_with("PersistentVolumeClaim", lambda c: c["spec"]["resources"]["requests"].update(storage="500 Gi")),
     "spec.resources.requests.storage", "'500 Gi' is not a quantity"),
    ("node capacity", node_with(lambda n: n["status"]["capacity"].update(cpu="128cores")), "status.capacity.cpu",
     "'128cores' is not a quantity"),
    ("node allocatable", node_with(lambda n: n["status"]["allocatable"].update(memory="2000G i")),
     "status.allocatable.memory", "'2000G i' is not a quantity"),
    ("a GPU count that is not whole", node_with(lambda n: n["status"]["capacity"].update({"nvidia.com/gpu": "0.5"})),
     "status.capacity[nvidia.com/gpu]", "'0.5' must be an integer: nvidia.com/gpu is counted in whole units"),
    ("request above limit", dep_container(lambda c: c["resources"]["requests"].update(memory="128Gi")),
     f"{C}.resources.requests.memory", "'128Gi' must be less than or equal to the limit '64Gi'"),
    ("GPU request without a limit", dep_container(lambda c: c["resources"]["limits"].pop("nvidia.com/gpu")),
     f"{C}.resources.limits[nvidia.com/gpu]", "a limit is required: nvidia.com/gpu cannot be overcommitted"),
    ("GPU request unequal to its limit", dep_container(lambda c: c["resources"]["limits"].update({"nvidia.com/gpu": 2})),
     f"{C}.resources.requests[nvidia.com/gpu]", "must be equal to the limit (2)"),
    # labels, annotations, selectors, names
    ("label value", node_with(lambda n: n["metadata"]["labels"].update({"pools.example.com/pool": "gpu a100"})),
     "metadata.labels[pools.example.com/pool]", "label value 'gpu a100': a valid label must be an empty string or"),
    ("label value too long", node_with(lambda n: n["metadata"]["labels"].update({"pools.example.com/pool": "a" * 64})),
     "metadata.labels[pools.example.com/pool]", f"label value '{'a' * 64}': must be no more than 63 characters"),
    ("label name too long", node_with(lambda n: n["metadata"]["labels"].update({"example.com/" + "n" * 64: "x"})),
     f"metadata.labels[example.com/{'n' * 64}]", "label key", ),
    ("label prefix not a DNS subdomain", node_with(lambda n: n["metadata"]["labels"].update({"Example.COM/pool": "x"})),
     "metadata.labels[Example.COM/pool]", "label key 'Example.COM/pool': prefix part a lowercase RFC 1123 subdomain"),
    ("label prefix too long", node_with(lambda n: n["metadata"]["labels"].update({"a" * 254 + "/pool": "x"})),
     f"metadata.labels[{'a' * 254}/pool]", "label key", ),
    ("template label", obj_with("DaemonSet", lambda d: d["spec"]["template"]["metadata"]["labels"].update(tier="-gpu")),
     "spec.template.metadata.labels.tier", "label value '-gpu'"),
    ("selector label", obj_with("DaemonSet", lambda d: d["spec"]["selector"]["matchLabels"].update(bad="a b")),
     "spec.selector.matchLabels.bad", "label value 'a b'"),
    ("selector operator", obj_with("Deployment", lambda d: d["spec"]["selector"]["matchExpressions"][0].update(operator="Exist")),
     "spec.selector.matchExpressions[0].operator", "'Exist' is not one of ['In', 'NotIn', 'Exists', 'DoesNotExist']"),
    ("node affinity operator", dep_pod(lambda p: p["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                                       ["nodeSelectorTerms"][0]["matchExpressions"][0].update(operator="in")),
     "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].operator", "'in' is not one of"),
    ("nodeSelector key", dep_pod(lambda p: p["nodeSelector"].update({"pools.example.com/": "x"})),
     "spec.template.spec.nodeSelector[pools.example.com/]", "label key 'pools.example.com/': name part must be non-empty"),
    ("service selector", obj_with("Service", lambda s: s["spec"]["selector"].update(app="node agent")),
     "spec.selector.app", "label value 'node agent'"),
    ("annotation key", obj_with("ConfigMap", lambda c: c["metadata"].update(annotations={"example.com/a b": "x"})),
     "metadata.annotations[example.com/a b]", "annotation key 'example.com/a b'"),
    ("annotations over 256 KiB", obj_with("ConfigMap", lambda c: c["metadata"].update(
        annotations={"example.com/blob": "x" * (256 * 1024)})),
     "metadata.annotations", "annotations take 262160 bytes: they must have at most 262144 bytes"),
    ("name not a DNS subdomain", obj_with("StorageClass", lambda s: s["metadata"].update(name="Local_NVMe")),
     "metadata.name", "'Local_NVMe': a lowercase RFC 1123 subdomain"),
    ("namespace name not a DNS label", obj_with("Namespace", lambda n: n["metadata"].update(name="team.ml")),
     "metadata.name", "'team.ml': a lowercase RFC 1123 label"),
    ("service name not a DNS-1035 label", obj_with("Service", lambda s: s["metadata"].update(name="9100-metrics")),
     "metadata.name", "'9100-metrics': a DNS-1035 label"),
    ("CronJob name over 52", obj_with("CronJob", lambda c: c["metadata"].update(name="c" * 53)),
     "metadata.name", f"'{'c' * 53}': must be no more than 52 characters"),
    ("RBAC names are path segments", obj_with("ClusterRole", lambda r: r["metadata"].update(name="pools/agent")),
     "metadata.name", "'pools/agent': may not contain '/'"),
    ("a name is required", obj_with("ConfigMap", lambda c: c["metadata"].pop("name")), "metadata.name",
     "a name is required (or metadata.generateName)"),
    ("metadata.namespace", obj_with("ConfigMap", lambda c: c["metadata"].update(namespace="GPU_Operator")),
     "metadata.namespace", "'GPU_Operator': a lowercase RFC 1123 label"),
    # enumerations the schemas leave as "a string"
    ("volumeBindingMode", obj_with("StorageClass", lambda s: s.update(volumeBindingMode="WaitForFirstConsumr")),
     "volumeBindingMode", "'WaitForFirstConsumr' is not one of ['Immediate', 'WaitForFirstConsumer']"),
    ("reclaimPolicy", obj_with("StorageClass", lambda s: s.update(reclaimPolicy="Recycle")),
     "reclaimPolicy", "'Recycle' is not one of ['Delete', 'Retain']"),
    ("preemptionPolicy", obj_with("PriorityClass", lambda p: p.update(preemptionPolicy="Never!")),
     "preemptionPolicy", "'Never!' is not one of ['PreemptLowerPriority', 'Never']"),
    ("Service type", obj_with("Service", lambda s: s["spec"].update(type="Loadbalancer")), "spec.type",
     "'Loadbalancer' is not one of ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName']"),
    ("port protocol", obj_with("Service", lambda s: s["spec"]["ports"][0].update(protocol="tcp")),
     "spec.ports[0].protocol", "'tcp' is not one of ['TCP', 'UDP', 'SCTP']"),
    ("container port protocol", dep_container(lambda c: c["ports"][0].update(protocol="HTTP")),
     f"{C}.ports[0].protocol", "'HTTP' is not one of ['TCP', 'UDP', 'SCTP']"),
    ("Deployment strategy", obj_with("Deployment", lambda d: d["spec"]["strategy"].update(type="Rollingupdate")),
     "spec.strategy.type", "'Rollingupdate' is not one of ['Recreate', 'RollingUpdate']"),
    ("imagePullPolicy", dep_container(lambda c: c.update(imagePullPolicy="IfNotPresnt")), f"{C}.imagePullPolicy",
     "'IfNotPresnt' is not one of ['Always', 'IfNotPresent', 'Never']"),
    ("pod restartPolicy", dep_pod(lambda p: p.update(restartPolicy="Sometimes")), "spec.template.spec.restartPolicy",
     "'Sometimes' is not one of ['Always', 'OnFailure', 'Never']"),
    ("a Deployment's pods restart Always", dep_pod(lambda p: p.update(restartPolicy="Never")),
     "spec.template.spec.restartPolicy", "'Never' is not one of ['Always'] for this workload"),
    ("a CronJob's pods name their restartPolicy", obj_with("CronJob", lambda c: c["spec"]["jobTemplate"]["spec"]["template"]
                                                           ["spec"].pop("restartPolicy")),
     "spec.jobTemplate.spec.template.spec.restartPolicy", "required: OnFailure or Never"),
    ("a DaemonSet's pods restart Always", obj_with("DaemonSet", lambda d: d["spec"]["template"]["spec"].update(
        restartPolicy="OnFailure")), "spec.template.spec.restartPolicy", "'OnFailure' is not one of ['Always'] for this workload"),
    ("PVC volume mode", obj_with("PersistentVolumeClaim", lambda c: c["spec"].update(volumeMode="Raw")),
     "spec.volumeMode", "'Raw' is not one of ['Filesystem', 'Block']"),
    ("dnsPolicy", obj_with("DaemonSet", lambda d: d["spec"]["template"]["spec"].update(dnsPolicy="HostNetwork")),
     "spec.template.spec.dnsPolicy", "'HostNetwork' is not one of"),
    ("DaemonSet update strategy", obj_with("DaemonSet", lambda d: d["spec"]["updateStrategy"].update(type="Rolling")),
     "spec.updateStrategy.type", "'Rolling' is not one of ['RollingUpdate', 'OnDelete']"),
    ("CronJob concurrencyPolicy", obj_with("CronJob", lambda c: c["spec"].update(concurrencyPolicy="Never")),
     "spec.concurrencyPolicy", "'Never' is not one of ['Allow', 'Forbid', 'Replace']"),
    ("LimitRange type", obj_with("LimitRange", lambda r: r["spec"]["limits"][0].update(type="container")),
     "spec.limits[0].type", "'container' is not one of ['Pod', 'Container', 'PersistentVolumeClaim']"),
    ("PVC access mode", obj_with("PersistentVolumeClaim", lambda c: c["spec"].update(accessModes=["RWO"])),
     "spec.accessModes[0]", "'RWO' is not one of"),
    ("Pod Security level", psa("pod-security.kubernetes.io/enforce", "strict"),
     "metadata.labels[pod-security.kubernetes.io/enforce]",
     "Pod Security level: 'strict' is not one of ['privileged', 'baseline', 'restricted']"),
    ("Pod Security version", psa("pod-security.kubernetes.io/enforce-version", "1.34"),
     "metadata.labels[pod-security.kubernetes.io/enforce-version]", "Pod Security version '1.34' must be 'latest' or 'v1.N'"),
    ("Pod Security mode", psa("pod-security.kubernetes.io/enforcce", "baseline"),
     "metadata.labels[pod-security.kubernetes.io/enforcce]", "unknown Pod Security label"),
    ("ValidatingAdmissionPolicy failurePolicy", obj_with("ValidatingAdmissionPolicy", lambda p: p["spec"].update(failurePolicy="Abort")),
     "spec.failurePolicy", "'Abort' is not one of ['Fail', 'Ignore']"),
    ("ValidatingAdmissionPolicy matchPolicy", obj_with("ValidatingAdmissionPolicy", lambda p: p["spec"]["matchConstraints"]
                                                       .update(matchPolicy="Exactly")),
     "spec.matchConstraints.matchPolicy", "'Exactly' is not one of ['Exact', 'Equivalent']"),
    ("validationActions value", obj_with("ValidatingAdmissionPolicyBinding", lambda b: b["spec"].update(validationActions=["Block"])),
     "spec.validationActions[0]", "'Block' is not one of ['Deny', 'Warn', 'Audit']"),
    ("validationActions Deny and Warn", obj_with("ValidatingAdmissionPolicyBinding", lambda b: b["spec"].update(
        validationActions=["Deny", "Warn"])), "spec.validationActions", "must not contain both 'Deny' and 'Warn'"),
    ("validationActions required", obj_with("ValidatingAdmissionPolicyBinding", lambda b: b["spec"].pop("validationActions")),
     "spec.validationActions", "at least one of ['Deny', 'Warn', 'Audit'] is required"),
    ("PriorityClass system- prefix", obj_with("PriorityClass", lambda p: p["metadata"].update(name="system-gpu")),
     "metadata.name", "'system-gpu': priority class names with 'system-' prefix are reserved for system use only"),
    ("PriorityClass value above user range", obj_with("PriorityClass", lambda p: p.update(value=2_000_000_000)),
     "value", "2000000000 is above the maximum allowed value of a user defined priority (1000000000)"),
    ("a CRD is named plural.group", crd_named("queue.volcano"), "metadata.name",
     "'queue.volcano' must be spec.names.plural + '.' + spec.group ('queues.scheduling.volcano.sh')"),
    # custom resources
    ("NAD config not JSON", obj_with("NetworkAttachmentDefinition", lambda n: n["spec"].update(config="{type: macvlan}"),
                                     "rdma-net"), "spec.config", "is not JSON"),
    ("NAD config without cniVersion", obj_with("NetworkAttachmentDefinition", lambda n: n["spec"].update(
        config='{"type": "macvlan"}'), "rdma-net"), "spec.config", "must name its cniVersion"),
    ("NAD config without a type", obj_with("NetworkAttachmentDefinition", lambda n: n["spec"].update(
        config='{"cniVersion": "1.0.0", "master": "ens1f0"}'), "rdma-net"), "spec.config", "must have a plugin type"),
    ("NAD plugin without a type", obj_with("NetworkAttachmentDefinition", lambda n: n["spec"].update(
        config='{"cniVersion": "1.0.0", "plugins": [{"mtu": 9000}]}'), "sriov-net"), "spec.config",
     "plugins[0] must be an object with a type"),
    ("NAD with an empty config", obj_with("NetworkAttachmentDefinition", lambda n: n["spec"].update(config=""),
                                          "rdma-net"), "spec.config", "is empty"),
    ("Queue negative capability", obj_with("Queue", lambda q: q["spec"]["capability"].update({"hugepages-1Gi": "-1Gi"})),
     "spec.capability.hugepages-1Gi", "'-1Gi' must be greater than or equal to 0"),
    ("Queue fractional GPU", obj_with("Queue", lambda q: q["spec"]["capability"].update({"nvidia.com/gpu": "32.5"})),
     "spec.capability[nvidia.com/gpu]", "'32.5' must be an integer"),
    ("Queue deserved above capability", obj_with("Queue", lambda q: q["spec"]["deserved"].update(cpu="600")),
     "spec.deserved.cpu", "deserved[cpu] must be <= capability[cpu]"),
    ("Queue guarantee above deserved", obj_with("Queue", lambda q: q["spec"]["guarantee"]["resource"].update(cpu="300")),
     "spec.deserved.cpu", "deserved[cpu] must be >= guarantee[cpu]"),
    ("Queue guarantee without deserved", obj_with("Queue", lambda q: q["spec"]["guarantee"]["resource"].update(memory="1Ti")
                                                  or q["spec"]["deserved"].pop("memory")),
     "spec.deserved.memory", "deserved[memory] must be set"),
    ("Queue metadata labels", obj_with("Queue", lambda q: q["metadata"].update(labels={"tier": "gold plated"})),
     "metadata.labels.tier", "label value 'gold plated'"),
]


@pytest.mark.parametrize(("case", "obj", "path", "message"), OWN_CASES, ids=[c[0] for c in OWN_CASES])
def test_the_projects_own_checks_catch(case, obj, path, message):
    assert schema_problems([obj], KUBE) == [], "the schema layer alone passes it: the own check is what catches it"
    problems = validate([obj], KUBE)
    assert [(p.path, p.message[:len(message)]) for p in problems] == [(path, message)], problems
    assert project_problems([obj], KUBE) == problems


# Checked definitions no kind the cluster layer renders contains (or only in an API version it does not use).
NOT_RENDERED = {
    "io.k8s.api.core.v1.EphemeralContainer", "io.k8s.api.core.v1.PersistentVolumeSpec",
    "io.k8s.api.apps.v1.StatefulSetSpec", "io.k8s.api.apps.v1.ReplicaSetSpec",
    "io.k8s.api.admissionregistration.v1.ValidatingWebhook",
    "io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicySpec",
    "io.k8s.api.admissionregistration.v1beta1.MatchResources",
    "io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyBindingSpec",
}
CHECKS = [(definition, index) for definition, checks in sorted(rules.DEFINITION_CHECKS.items())
          if definition not in NOT_RENDERED for index in range(len(checks))]


@pytest.fixture
def fresh_schemas():
    """Check plans are compiled once per minor; a test that changes the checks needs them compiled anew."""
    validation._schemas.cache_clear()
    yield
    validation._schemas.cache_clear()


def cases_caught():
    return {case for case, obj, path, message in OWN_CASES
            if any(p.path == path and p.message.startswith(message) for p in validate([obj], KUBE))}


def test_the_not_rendered_list_names_checked_definitions():
    assert rules.DEFINITION_CHECKS.keys() >= NOT_RENDERED


@pytest.mark.parametrize(("definition", "index"), CHECKS, ids=[f"{d.rpartition('.')[2]}-{i}" for d, i in CHECKS])
def test_removing_any_own_check_fails_a_case(definition, index, monkeypatch, fresh_schemas):
    checks = rules.DEFINITION_CHECKS[definition]
    monkeypatch.setitem(rules.DEFINITION_CHECKS, definition, checks[:index] + checks[index + 1:])
    assert cases_caught() < {case for case, *_ in OWN_CASES}


@pytest.mark.parametrize("custom", sorted(rules.CUSTOM_CHECKS), ids=lambda c: c[1])
def test_removing_a_custom_resource_check_fails_a_case(custom, monkeypatch):
    monkeypatch.setitem(rules.CUSTOM_CHECKS, custom, ())
    assert cases_caught() < {case for case, *_ in OWN_CASES}


# --- the Problem, versions, inputs --------------------------------------------------------------------


def test_a_problem_reads_kind_name_path_message():
    storage_class = obj_with("StorageClass", lambda s: s.update(volumeBindingMode="WaitForFirstConsumr"))
    [problem] = validate([storage_class], KUBE)
    assert problem == Problem("StorageClass", "", "local-nvme", "volumeBindingMode",
                              "'WaitForFirstConsumr' is not one of ['Immediate', 'WaitForFirstConsumer']")
    assert str(problem) == ("StorageClass/local-nvme: volumeBindingMode: "
                            "'WaitForFirstConsumr' is not one of ['Immediate', 'WaitForFirstConsumer']")


def test_a_namespaced_problem_names_its_namespace_and_a_whole_object_problem_has_no_path():
    config_map = obj_with("ConfigMap", lambda c: c.update(kind="ConfigMapp"))
    [problem] = validate([config_map], KUBE)
    assert str(problem).startswith("ConfigMapp/gpu-operator/mig-parted-config: no schema for v1 ConfigMapp")


def test_problems_come_in_object_order_and_any_iterable_will_do():
    broken = [obj_with("StorageClass", lambda s: s.update(reclaimPolicy="Keep")), by_kind("ConfigMap"),
              node_with(lambda n: n["spec"]["taints"][0].update(effect="NoScheduel"))]
    problems = validate((obj for obj in broken), KUBE)
    assert [p.kind for p in problems] == ["StorageClass", "Node"]


def test_generate_name_stands_in_for_a_name():
    config_map = obj_with("ConfigMap", lambda c: c["metadata"].pop("name") and c["metadata"].update(generateName="mig-"))
    assert validate([config_map], KUBE) == []


ODD_VALUES = [None, 0, -1, 1.5, True, "", "x y", [], {}, [None], {"a": None}, "1e2147483647", [1, "a"], {"key": 1},
              10**30, "Gt", [[]], [{}], {"": ""}]


def test_values_of_any_type_anywhere_yield_problems_not_exceptions():
    """The own checks meet whatever the schema layer reports; none may crash on it (seeded, 40 per object)."""
    rng = random.Random(20261202)

    def paths(value, path=()):
        yield path
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in children:
            yield from paths(child, (*path, key))

    for base in valid_objects() + crd_definitions():
        for _ in range(40):
            obj = copy.deepcopy(base)
            for _ in range(rng.randint(1, 3)):
                *parents, last = rng.choice(list(paths(obj))[1:])
                target = obj
                for key in parents:
                    target = target[key]
                target[last] = copy.deepcopy(rng.choice(ODD_VALUES))
            assert all(isinstance(p, Problem) for p in validate([obj], KUBE))


def test_something_that_is_not_an_object_is_a_problem():
    [problem] = validate([["not", "a", "mapping"]], KUBE)  # type: ignore[list-item]
    assert problem.message == "expected a mapping, got list"


def test_supported_versions_are_those_kubernetes_validate_ships():
    assert supported_versions() == [f"1.{minor}" for minor in range(25, 38)]


@pytest.mark.parametrize("version", ["1.34.2", "v1.34", "1.34", "1.34.0-rc.1", " 1.34.2 "])
def test_a_patch_release_uses_its_minors_schemas(version):
    assert validate(valid_objects(), version) == []


@pytest.mark.parametrize("version", ["1.24.9", "1.38.0", "2.0.0"])
def test_an_unknown_minor_is_refused_naming_the_supported_range(version):
    with pytest.raises(ValueError, match=r"no schemas for Kubernetes .*ships 1\.25 to 1\.37"):
        validate([], version)


@pytest.mark.parametrize("version", ["latest", "1", "one.two"])
def test_a_version_that_is_not_one_is_refused(version):
    with pytest.raises(ValueError, match=r"is not a Kubernetes version .* schemas exist for 1\.25 to 1\.37"):
        validate([], version)


def test_schemas_are_read_once_per_minor_and_validators_once_per_kind():
    validate(valid_objects(), KUBE)
    schemas = validation._schemas((1, 34))
    node_validator = schemas.validator("v1", "Node")
    validate([by_kind("Node")], "1.34.9")
    assert validation._schemas((1, 34)) is schemas and schemas.validator("v1", "Node") is node_validator


# --- the pieces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [
    ("1", "1"), ("1.", "1"), (".5", "0.5"), ("500m", "0.5"), ("1Gi", str(2**30)), ("1e3", "1000"), ("1E3", "1000"),
    ("2E", "2000000000000000000"), ("1e-3", "0.001"), ("-1", "-1"), ("+1.5k", "1500"), ("5n", "5E-9"), ("5u", "0.000005"),
    (2, "2"), (0.5, "0.5"), ("1Ki", "1024"), ("1.5Mi", str(int(1.5 * 2**20))),
])
def test_the_quantity_grammar_accepts(text, value):
    from decimal import Decimal

    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", ["", "1.2.3", "1GB", "1 Gi", "Gi", "1e", "1e2.5", "1ki", " 1", "1m ", "0x10", "1KiB",
                                  "--1", True, None, [1]])
def test_the_quantity_grammar_refuses(text):
    with pytest.raises(ValueError, match="is not a quantity"):
        parse_quantity(text)


def test_name_lengths_are_inclusive():
    assert qualified_name("n" * 63) == [] and qualified_name("n" * 64) == ["name part must be no more than 63 characters"]
    prefix = ".".join(["a" * 63] * 4)[:253]
    assert qualified_name(f"{prefix}/n") == []
    assert qualified_name(f"{prefix}a/n") == ["prefix part must be no more than 253 characters"]
    assert label_value("v" * 63) == [] and label_value("") == []
    assert label_value("v" * 64) == ["must be no more than 63 characters"]


@pytest.mark.parametrize("definition", ["io.k8s.apimachinery.pkg.api.resource.Quantity",
                                        "io.k8s.apimachinery.pkg.util.intstr.IntOrString"])
def test_compiling_a_type_only_one_of_keeps_its_verdict(definition):
    schemas = validation._schemas((1, 34))
    upstream = jsonschema.Draft202012Validator(schemas.definitions[definition])
    compiled = jsonschema.Draft202012Validator(schemas._inline(schemas.definitions[definition]))
    assert "oneOf" in schemas.definitions[definition] and "oneOf" not in schemas._inline(schemas.definitions[definition])
    for value in ["1", "", 1, 1.5, 1.0, 2**70, None, True, False, [], {}, [1]]:
        assert compiled.is_valid(value) == upstream.is_valid(value), value


def test_a_crd_schema_becomes_a_strict_json_schema():
    schema = strict_json_schema({
        "type": "object",
        "properties": {
            "size": {"x-kubernetes-int-or-string": True, "description": "d"},
            "note": {"type": "string", "nullable": True},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "map": {"type": "object", "additionalProperties": {"type": "integer", "format": "int32", "minimum": 0}},
            "open": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
        },
    })
    assert schema == {
        "type": "object", "additionalProperties": False,
        "properties": {
            "size": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "note": {"type": ["string", "null"]},
            "free": {"type": "object"},
            "map": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}},
            "open": {"type": "integer", "exclusiveMinimum": 0},
        },
    }


def test_crds_of_protected_groups_carry_the_api_approval_annotation():
    """The API server refuses a CRD of a *.k8s.io or *.kubernetes.io group without
    api-approved.kubernetes.io (found by the real `pulumi up` of the example, issue 8)."""
    from infra.cluster.validation.validate import crd_definitions

    protected = [crd for crd in crd_definitions()
                 if crd["spec"]["group"].endswith((".k8s.io", ".kubernetes.io"))]
    assert protected, "the snapshot CRD is in a protected group"
    for crd in protected:
        annotation = crd["metadata"].get("annotations", {}).get("api-approved.kubernetes.io", "")
        assert annotation.startswith("https://github.com/"), crd["metadata"]["name"]
