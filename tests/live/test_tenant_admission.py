"""The tenants' admission policies asked of the real API server (kube-apiserver 1.34). Issue 15, item 5: the
queue policy keeps a tenant's PodGroups and Volcano jobs in the tenant's own Volcano queue, and the pod policy
holds a pod's queue annotation to the same rule. Issue 15, minors: the pod policy refuses more than one shared
(time-sliced or MPS) GPU per container, as the API server hands it quantities, and holds the pod templates of
Deployments and CronJobs to the pods' rules.

The tenants are the example's, their namespaces rendered by the cluster layer under a prefix (so nothing
here meets the namespaces `tests/live/test_pulumi_path.py` keeps). Volcano itself cannot run here (no
images), so its CRDs are stand-ins written below from the fields of upstream's (volcano-sh/volcano,
config/crd/volcano/bases: PodGroup's `spec.queue` defaults to `default`, as upstream's does); Volcano's
webhooks do not run, so a PodGroup without a queue reaches the policy as `default` (on a real cluster the
PodGroup webhook first gives it the queue its namespace names). Every request is a dry run: admission
runs in full, nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.cluster import networking, tenancy
from infra.cluster.concerns import build_concerns, system_namespaces
from infra.cluster.nodes import POOL_LABEL
from infra.cluster.objects import SYSTEM_NAMESPACE, Obj
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import ApiError, Kube, wait_for
from infra.model.capacity import SHARED_GPU
from infra.model.resolve import resolve
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
ENV = load_environment(ROOT / "inventories" / "example")
PREFIX = "vq-"
BATCH, TRAINING, INFERENCE = (f"{PREFIX}{name}" for name in ("batch", "training", "inference"))
QUEUE_POLICY = tenancy.QUEUE_POLICY_NAME
VIEW = resolve(ENV)
EXEMPT = system_namespaces(VIEW, build_concerns(VIEW))  # as the example's stack binds them


def crd(group: str, version: str, kind: str, plural: str, spec: Obj) -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": spec,
                                                                   "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


CRDS = [
    crd("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups", {
        "minMember": {"type": "integer", "format": "int32"},
        "priorityClassName": {"type": "string"},
        "queue": {"type": "string", "default": "default"}}),
    crd("batch.volcano.sh", "v1alpha1", "Job", "jobs", {
        "minAvailable": {"type": "integer", "format": "int32"},
        "priorityClassName": {"type": "string"},
        "queue": {"type": "string"}}),
]


def volcano(kind: str, namespace: str, queue: str | None = None, priority: str | None = None) -> Obj:
    group = {"PodGroup": "scheduling.volcano.sh/v1beta1", "Job": "batch.volcano.sh/v1alpha1"}[kind]
    spec: Obj = {"minMember": 1} if kind == "PodGroup" else {"minAvailable": 1}
    if queue is not None:
        spec["queue"] = queue
    if priority is not None:
        spec["priorityClassName"] = priority
    return {"apiVersion": group, "kind": kind, "metadata": {"name": "probe", "namespace": namespace}, "spec": spec}


def pod(namespace: str, queue: str | None = None, pool: str = "cpu_general", limits: Obj | None = None) -> Obj:
    container: Obj = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    if limits is not None:
        container["resources"] = {"limits": limits}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace,
                         "annotations": {} if queue is None else {tenancy.QUEUE_ANNOTATION: queue}},
            "spec": {"nodeSelector": {POOL_LABEL: pool}, "containers": [container]}}


def refusal(kube: Kube, o: Obj) -> str | None:
    """The API server's message when it refuses the dry-run create, None when it admits it."""
    try:
        kube.create(kube.path(o, name=False), o, dry_run=True)
    except ApiError as error:
        return error.message
    return None


def served(kube: Kube, definition: Obj) -> bool | None:
    """True once the CRD is Established and its objects can be listed (a new CRD's storage answers 429 at first)."""
    spec = definition["spec"]
    try:
        kube.get(f"/apis/{spec['group']}/{spec['versions'][0]['name']}/{spec['names']['plural']}")
    except ApiError as error:
        if error.code in (404, 429, 503):
            return None
        raise
    return True


def refused_by_policy(kube: Kube) -> bool:
    """Whether the queue policy (not a schema or a storage error) refuses a batch PodGroup in training's queue."""
    return QUEUE_POLICY in (refusal(kube, volcano("PodGroup", BATCH, TRAINING)) or "")


@pytest.fixture(scope="module")
def kube(cluster: LocalCluster) -> Iterator[Kube]:
    api = cluster.api()
    tenants = ENV.cluster.tenants
    namespaces = [tenancy.namespace(f"{PREFIX}{name}", tenants[name], ENV.cluster.kube_minor)
                  for name in ("batch", "training", "inference")]
    policies = [o for policy in tenancy.policies() for o in (policy, tenancy.binding(policy, EXEMPT))]
    created: list[Obj] = []
    try:
        for o in [*CRDS, *namespaces, networking.system_namespace(), *policies]:
            if not api.exists(api.path(o)):
                api.create(api.path(o, name=False), o)
                created.append(o)
        for definition in CRDS:
            wait_for(f"the {definition['metadata']['name']} CRD served", lambda d=definition: served(api, d))
        for where in (BATCH, SYSTEM_NAMESPACE):
            wait_for(f"{where}'s default ServiceAccount (pods need it)",
                     lambda w=where: True if api.exists(f"/api/v1/namespaces/{w}/serviceaccounts/default") else None)
        # The API server's policy cache takes a moment to see new policies and bindings.
        wait_for("the queue policy to refuse", lambda: True if refused_by_policy(api) else None, timeout=30)
        yield api
    finally:
        for o in reversed(created):
            api.delete(api.path(o))


@pytest.mark.parametrize("kind, namespace, queue, priority, expected", [
    ("PodGroup", BATCH, BATCH, None, None),
    ("Job", TRAINING, TRAINING, "training-normal", None),
    ("PodGroup", BATCH, TRAINING, None,
     f"tenant {BATCH} may only use Volcano queue {BATCH}, not {TRAINING}: set spec.queue: {BATCH} in the PodGroup"),
    ("PodGroup", BATCH, None, None,  # the CRD's default; Volcano's PodGroup webhook would route it first
     f"tenant {BATCH} may only use Volcano queue {BATCH}, not default: set spec.queue: {BATCH} in the PodGroup"),
    ("Job", BATCH, "default", None,
     f"tenant {BATCH} may only use Volcano queue {BATCH}, not default: set spec.queue: {BATCH} in the Job"),
    ("Job", BATCH, BATCH, "inference-high",
     f"tenant {BATCH} may only use priority class offline-low (or none), not inference-high"),
    ("Job", INFERENCE, INFERENCE, None, f"tenant {INFERENCE} has no Volcano queue, so it may not create a Job"),
], ids=["own-queue", "own-queue-and-class", "another-tenants-queue", "no-queue", "default-queue", "higher-class",
        "tenant-without-queue"])
def test_the_api_server_keeps_volcano_objects_in_their_tenants_queue(kube: Kube, kind, namespace, queue, priority,
                                                                      expected):
    message = refusal(kube, volcano(kind, namespace, queue, priority))
    if expected is None:
        assert message is None
    else:
        assert message is not None and expected in message, message
        assert QUEUE_POLICY in message  # the policy's own refusal, not a schema error


def test_the_api_server_holds_a_pods_queue_annotation_to_its_tenant(kube: Kube):
    assert refusal(kube, pod(BATCH, BATCH)) is None
    message = refusal(kube, pod(BATCH, TRAINING))
    assert message is not None
    assert f"tenant {BATCH} may only use Volcano queue {BATCH}: the pod names {TRAINING}" in message


def test_without_the_binding_another_tenants_queue_is_admitted(kube: Kube):
    binding = tenancy.binding(tenancy.queue_policy(), EXEMPT)
    kube.delete(kube.path(binding))
    try:
        wait_for("another tenant's queue admitted", lambda: True if refusal(
            kube, volcano("PodGroup", BATCH, TRAINING)) is None else None, timeout=30)
    finally:
        kube.create(kube.path(binding, name=False), binding)
    wait_for("the refusal back", lambda: True if refused_by_policy(kube) else None, timeout=30)


@pytest.mark.parametrize("quantity, refused", [("1", False), ("1000m", False), ("2", True), ("2000m", True)])
def test_the_api_server_refuses_more_than_one_shared_gpu_per_container(kube: Kube, quantity: str, refused: bool):
    message = refusal(kube, pod(BATCH, pool="gpu_t4_offline", limits={SHARED_GPU: quantity}))
    if not refused:
        assert message is None
    else:
        assert message is not None and tenancy.POLICY_NAME in message
        assert f"a shared GPU ({SHARED_GPU}) is one replica of a time-sliced or MPS card" in message
        assert "main asks for 2: ask for 1, or for a whole or MIG GPU" in message  # as the API server writes it


def workload(kind: str, pool: str) -> Obj:
    """A Deployment or CronJob of the batch tenant whose pods go to POOL."""
    template = {"metadata": {"labels": {"app": "probe"}},
                "spec": {**pod(BATCH, pool=pool)["spec"], "restartPolicy": "Always" if kind == "Deployment" else "Never"}}
    if kind == "Deployment":
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "probe", "namespace": BATCH},
                "spec": {"selector": {"matchLabels": {"app": "probe"}}, "template": template}}
    return {"apiVersion": "batch/v1", "kind": kind, "metadata": {"name": "probe", "namespace": BATCH},
            "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}}


@pytest.mark.parametrize("kind", ["Deployment", "CronJob"])
def test_the_api_server_holds_a_workloads_pod_template_to_its_tenant(kube: Kube, kind: str):
    assert refusal(kube, workload(kind, "gpu_t4_offline")) is None
    message = refusal(kube, workload(kind, "gpu_a100"))
    assert message is not None and tenancy.POLICY_NAME in message
    assert f"tenant {BATCH} may not use pool gpu_a100" in message


def test_the_api_server_refuses_pods_in_a_namespace_of_no_tenant_and_admits_them_in_system_ones(kube: Kube):
    """Issue 15, minor: the policies bind everywhere but the system's namespaces, so a stray pod in `default`
    cannot reach a pool; the stack's own namespace and Kubernetes' are exempt (the failing case: an unpinned
    pod that the tenant rules would refuse is admitted there)."""
    message = refusal(kube, pod("default"))
    assert message is not None and tenancy.POLICY_NAME in message
    assert "namespace default belongs to no tenant, so nothing in it may use the node pools" in message
    assert "may not use pool" not in message  # the API server reports the first validation that fails
    podgroup = refusal(kube, volcano("PodGroup", "default", "default"))
    assert podgroup is not None and "namespace default belongs to no tenant" in podgroup
    for system in ("kube-system", SYSTEM_NAMESPACE):
        assert system in EXEMPT
        unpinned = pod(system)
        del unpinned["spec"]["nodeSelector"]
        assert refusal(kube, unpinned) is None, system
