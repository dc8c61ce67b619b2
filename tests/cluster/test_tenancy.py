"""Tenancy: a namespace per tenant with its quota and limit range, the priority classes, and the
admission policy that keeps a tenant's pods on its pools, whose CEL is evaluated here as written.

The CEL runs in cel-expr-python (Google's CEL C++ runtime) with the strings extension, the one
extension beyond the standard library that Kubernetes 1.30 gives admission policies and that the
policy uses. What it does not reproduce of Kubernetes: the expressions are compiled against dyn
(Kubernetes type-checks them against the Pod and Namespace OpenAPI schemas), variables are evaluated
eagerly, in order (Kubernetes lazily; the same results, since no variable errors on any case here),
and there is no cost accounting. A test below also holds the expressions to the functions Kubernetes
1.30 offers, which the evaluator alone would not catch (it has more).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

import pytest
from cel_expr_python import cel
from cel_expr_python.ext import ext_strings
from inventory_builder import ROOT, SHIPPED
from pydantic import ValidationError

from infra.checks import run_checks
from infra.cluster import tenancy
from infra.cluster.concerns import build_concerns
from infra.cluster.nodes import POOL_LABEL
from infra.cluster.objects import MANAGED_BY, key
from infra.knowledge.platform import Platform, platform
from infra.knowledge.units import parse_quantity
from infra.model.capacity import SHARED_GPU, WHOLE_GPU
from infra.model.resolve import resolve
from infra.model.workloads import ephemeral_storage_defaults
from infra.spec import load_environment
from infra.spec.loader import SpecError
from infra.spec.models import LimitRangeSpec

# ---------------------------------------------------------------- helpers


@cache
def shipped(name: str):
    env = load_environment(ROOT / "inventories" / name)
    return env, tenancy.build(resolve(env))


def built(write, data):
    env = load_environment(write(data))
    return env, tenancy.build(resolve(env))


def of_kind(concern, kind, namespace=None):
    return [o for o in concern.objects if o["kind"] == kind
            and (namespace is None or o["metadata"].get("namespace") == namespace)]


def one(concern, kind, name):
    found = [o for o in of_kind(concern, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def q(text):
    return parse_quantity(text)


# ---------------------------------------------------------------- namespaces, quotas, limit ranges


@pytest.mark.parametrize("inventory_name", SHIPPED)
def test_every_tenant_namespace_has_exactly_one_quota_and_one_limit_range(inventory_name):
    env, concern = shipped(inventory_name)
    tenants = env.cluster.tenants
    assert tenants, "the shipped inventories define tenants"
    assert {o["metadata"]["name"] for o in of_kind(concern, "Namespace")} == set(tenants)
    for name in tenants:
        assert [o["metadata"]["name"] for o in of_kind(concern, "ResourceQuota", name)] == [name]
        assert [o["metadata"]["name"] for o in of_kind(concern, "LimitRange", name)] == [name]
    # and nothing namespaced lands outside the tenants' namespaces
    namespaced = [o for o in concern.objects if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == set(tenants)


def test_a_tenant_without_quota_or_limit_range_still_gets_both(inventory, write):
    tenant = inventory["group_vars"]["all"]["tenants"]["svc"]
    del tenant["quota"], tenant["limit_range"]
    _, concern = built(write, inventory)
    assert one(concern, "ResourceQuota", "svc")["spec"] == {"hard": {}}
    limits = one(concern, "LimitRange", "svc")["spec"]["limits"]
    facts = platform().tenant_ephemeral_storage
    assert limits == [{"type": "Container", "default": {"ephemeral-storage": facts.default},
                       "defaultRequest": {"ephemeral-storage": facts.default_request}}]


@pytest.mark.parametrize("inventory_name", SHIPPED)
def test_quota_is_the_specs_quota_verbatim(inventory_name):
    env, concern = shipped(inventory_name)
    for name, tenant in env.cluster.tenants.items():
        hard = one(concern, "ResourceQuota", name)["spec"]["hard"]
        assert hard == {k: str(v) for k, v in tenant.quota.items()}
        assert all(isinstance(v, str) for v in hard.values())
        assert list(hard) == sorted(hard)


def test_quota_keeps_mig_resources_storage_per_class_and_object_counts():
    _, concern = shipped("example")
    hard = one(concern, "ResourceQuota", "inference")["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-3g.40gb"] == "16"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "32"
    assert hard["checkpoints.storageclass.storage.k8s.io/requests.storage"] == "5Ti"
    assert hard["pods"] == "500"
    assert one(concern, "ResourceQuota", "web")["spec"]["hard"]["services"] == "200"


def _shared_gpu_keys_of_guaranteed_tenants(env, concern):
    """Quota keys of production and inference tenants that name anything but MIG or whole GPUs."""
    bad = []
    for name, tenant in env.cluster.tenants.items():
        if tenant.tier not in ("production", "inference"):
            continue
        for k in one(concern, "ResourceQuota", name)["spec"]["hard"]:
            resource = k.removeprefix("requests.")
            if resource.startswith("nvidia.com/") and not (
                    resource == WHOLE_GPU or resource.startswith("nvidia.com/mig-")):
                bad.append((name, k))
    return bad


@pytest.mark.parametrize("inventory_name", SHIPPED)
def test_guaranteed_tenants_quotas_name_only_mig_or_whole_gpus(inventory_name):
    env, concern = shipped(inventory_name)
    assert _shared_gpu_keys_of_guaranteed_tenants(env, concern) == []


def test_a_shared_gpu_quota_for_inference_would_be_seen(inventory, write):
    """The failing case: the spec's checks refuse it, and the invariant above would catch it rendered."""
    tenants = inventory["group_vars"]["all"]["tenants"]
    tenants["infer"]["pools"] = ["t4"]
    tenants["infer"]["quota"] = {"requests.cpu": 4, "requests.memory": "8Gi", f"requests.{SHARED_GPU}": 2}
    path = write(inventory)
    assert "TEN-SHARED-GPU" in {f.code for f in run_checks(load_environment(path))}
    env = load_environment(path)
    assert _shared_gpu_keys_of_guaranteed_tenants(env, tenancy.build(resolve(env))) == [
        ("infer", f"requests.{SHARED_GPU}")]


@pytest.mark.parametrize("inventory_name", SHIPPED)
def test_namespace_labels_and_annotations(inventory_name):
    env, concern = shipped(inventory_name)
    version = f"v1.{env.cluster.kube_minor}"
    for name, tenant in env.cluster.tenants.items():
        metadata = one(concern, "Namespace", name)["metadata"]
        labels, annotations = metadata["labels"], metadata["annotations"]
        assert "namespace" not in metadata
        assert labels[tenancy.TENANT_LABEL] == name
        assert labels[tenancy.TIER_LABEL] == tenant.tier
        assert labels["app.kubernetes.io/managed-by"] == MANAGED_BY["app.kubernetes.io/managed-by"]
        enforce = "restricted" if tenant.tier in ("production", "inference") else "baseline"
        assert labels["pod-security.kubernetes.io/enforce"] == enforce
        assert labels["pod-security.kubernetes.io/audit"] == "restricted"
        assert labels["pod-security.kubernetes.io/warn"] == "restricted"
        for mode in ("enforce", "audit", "warn"):
            assert labels[f"pod-security.kubernetes.io/{mode}-version"] == version
        assert annotations[tenancy.POOLS_ANNOTATION].split(",") == sorted(tenant.pools)
        assert annotations.get(tenancy.PRIORITY_CLASS_ANNOTATION) == tenant.priority_class


def test_every_tier_has_a_pod_security_level():
    from typing import get_args

    from infra.spec.models import Tenant
    tiers = get_args(Tenant.model_fields["tier"].annotation)
    assert set(tenancy.POD_SECURITY_ENFORCE) == set(tiers)
    assert set(tenancy.POD_SECURITY_ENFORCE.values()) <= {"restricted", "baseline"}  # never privileged


def test_a_tenant_without_priority_class_has_no_priority_annotation(inventory, write):
    del inventory["group_vars"]["all"]["tenants"]["svc"]["priority_class"]
    _, concern = built(write, inventory)
    assert tenancy.PRIORITY_CLASS_ANNOTATION not in one(concern, "Namespace", "svc")["metadata"]["annotations"]


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease", "kube-anything",
                                  "k8s-node-pools-system"])
def test_a_tenant_named_like_a_system_namespace_is_refused(inventory, write, name):
    tenants = inventory["group_vars"]["all"]["tenants"]
    tenants[name] = tenants.pop("svc")
    env = load_environment(write(inventory))
    with pytest.raises(ValueError, match="owns; rename the tenant"):
        tenancy.build(resolve(env))


def test_an_ordinary_tenant_name_passes_the_guard():
    tenancy.check_tenant_name("kubeflow")  # only the kube- prefix is reserved
    tenancy.check_tenant_name("team-a")


@pytest.mark.parametrize("inventory_name", SHIPPED)
def test_limit_range_carries_the_spec_and_ephemeral_storage(inventory_name):
    env, concern = shipped(inventory_name)
    for name, tenant in env.cluster.tenants.items():
        [item] = one(concern, "LimitRange", name)["spec"]["limits"]
        spec = tenant.limit_range or LimitRangeSpec()
        assert item["type"] == "Container"
        assert {k: v for k, v in item["default"].items() if k != "ephemeral-storage"} == spec.default
        assert {k: v for k, v in item["defaultRequest"].items() if k != "ephemeral-storage"} == spec.default_request
        assert item.get("max", {}) == spec.max
        assert item.get("maxLimitRequestRatio", {}) == spec.max_limit_request_ratio
        assert q(item["defaultRequest"]["ephemeral-storage"]) <= q(item["default"]["ephemeral-storage"])


def test_limit_range_writes_max_and_ratio_only_when_the_spec_has_them():
    _, concern = shipped("example")
    cache_item = one(concern, "LimitRange", "cache")["spec"]["limits"][0]
    assert cache_item["maxLimitRequestRatio"] == {"memory": "1"}
    web_item = one(concern, "LimitRange", "web")["spec"]["limits"][0]
    assert "max" not in web_item and "maxLimitRequestRatio" not in web_item


PLATFORM_LIMIT = platform().tenant_ephemeral_storage.default
PLATFORM_REQUEST = platform().tenant_ephemeral_storage.default_request


@pytest.mark.parametrize("spec, expected", [
    (None, (PLATFORM_LIMIT, PLATFORM_REQUEST)),
    ({}, (PLATFORM_LIMIT, PLATFORM_REQUEST)),
    ({"default": {"ephemeral-storage": "20Gi"}}, ("20Gi", PLATFORM_REQUEST)),
    ({"default": {"ephemeral-storage": "100Mi"}}, ("100Mi", "100Mi")),        # request kept under the limit
    ({"default_request": {"ephemeral-storage": "1Gi"}}, (PLATFORM_LIMIT, "1Gi")),
    ({"default_request": {"ephemeral-storage": "10Gi"}}, ("10Gi", "10Gi")),  # limit raised to the request
    ({"max": {"ephemeral-storage": "1Gi"}}, ("1Gi", PLATFORM_REQUEST)),        # limit kept under the max
    ({"max": {"ephemeral-storage": "100Gi"}}, (PLATFORM_LIMIT, PLATFORM_REQUEST)),
    ({"max_limit_request_ratio": {"ephemeral-storage": 2}}, (PLATFORM_LIMIT, PLATFORM_LIMIT)),
    ({"max_limit_request_ratio": {"ephemeral-storage": 100}}, (PLATFORM_LIMIT, PLATFORM_REQUEST)),
    ({"default": {"ephemeral-storage": "8Gi"}, "default_request": {"ephemeral-storage": "2Gi"}}, ("8Gi", "2Gi")),
    ({"default": {"cpu": "1"}, "max": {"memory": "1Gi"}}, (PLATFORM_LIMIT, PLATFORM_REQUEST)),  # other resources
])
def test_ephemeral_storage_defaults(spec, expected):
    model = None if spec is None else LimitRangeSpec.model_validate(spec)
    limit, request = ephemeral_storage_defaults(model)
    assert (limit, request) == expected
    # what the API server demands of a LimitRange: defaultRequest <= default <= max, default/defaultRequest <= ratio
    assert q(request) <= q(limit)
    if model and "ephemeral-storage" in model.max:
        assert q(limit) <= q(model.max["ephemeral-storage"])
    if model and "ephemeral-storage" in model.max_limit_request_ratio:
        assert q(limit) <= q(model.max_limit_request_ratio["ephemeral-storage"]) * q(request)


def test_platform_ephemeral_defaults_are_a_request_within_a_limit():
    facts = platform().tenant_ephemeral_storage
    assert Decimal(0) < q(facts.default_request) <= q(facts.default)
    raw = platform().model_dump()
    raw["tenant_ephemeral_storage"] = {"default": "1Gi", "default_request": "2Gi"}
    with pytest.raises(ValidationError, match="exceeds the default limit"):
        Platform.model_validate(raw)
    raw["tenant_ephemeral_storage"] = {"default": "lots", "default_request": "2Gi"}
    with pytest.raises(ValidationError, match="not a Kubernetes quantity"):
        Platform.model_validate(raw)


# ---------------------------------------------------------------- priority classes


@pytest.mark.parametrize("inventory_name", SHIPPED)
def test_one_priority_class_per_spec_class(inventory_name):
    env, concern = shipped(inventory_name)
    classes = {o["metadata"]["name"]: o for o in of_kind(concern, "PriorityClass")}
    assert set(classes) == set(env.cluster.priority_classes)
    for name, spec in env.cluster.priority_classes.items():
        rendered = classes[name]
        assert rendered["apiVersion"] == "scheduling.k8s.io/v1"
        assert "namespace" not in rendered["metadata"]
        assert rendered["value"] == spec.value
        assert rendered["preemptionPolicy"] == spec.preemption_policy
        assert rendered["globalDefault"] is False
        assert rendered.get("description", "") == spec.description


def test_the_offline_class_never_preempts():
    _, concern = shipped("example")
    assert one(concern, "PriorityClass", "offline-low")["preemptionPolicy"] == "Never"
    assert one(concern, "PriorityClass", "inference-high")["preemptionPolicy"] == "PreemptLowerPriority"


# ---------------------------------------------------------------- the whole concern


@pytest.mark.parametrize("inventory_name", SHIPPED)
def test_build_is_sorted_and_deterministic(inventory_name):
    env, concern = shipped(inventory_name)
    again = tenancy.build(resolve(env))
    assert concern.name == "tenancy"
    assert json.dumps(concern.objects, sort_keys=True) == json.dumps(again.objects, sort_keys=True)
    assert [key(o) for o in concern.objects] == sorted(key(o) for o in concern.objects)
    assert len({key(o) for o in concern.objects}) == len(concern.objects)
    assert concern.releases == [] and concern.files == {}
    assert all(o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-node-pools"
               for o in concern.objects)


# ---------------------------------------------------------------- the admission policy: its shape


def test_the_policy_checks_pod_creation_and_workload_templates_and_fails_closed():
    spec = tenancy.placement_policy()["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
        *({"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": [resource]}
          for group, resource in (("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"),
                                  ("apps", "replicasets"), ("batch", "jobs"), ("batch", "cronjobs")))]
    assert all(v["reason"] == "Forbidden" and v["message"] for v in spec["validations"])


def _selector_matches(selector, labels):
    for requirement in selector.get("matchExpressions", []):
        present = requirement["key"] in labels
        value = labels.get(requirement["key"])
        ok = {"Exists": present, "DoesNotExist": not present,
              "In": present and value in requirement.get("values", []),
              "NotIn": not present or value not in requirement.get("values", [])}[requirement["operator"]]
        if not ok:
            return False
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def bindings(env):
    """The policies' bindings as the whole cluster layer builds them (they need every concern's namespaces)."""
    concern = next(c for c in build_concerns(resolve(env)) if c.name == "tenancy")
    found = of_kind(concern, "ValidatingAdmissionPolicyBinding")
    assert sorted(b["spec"]["policyName"] for b in found) == sorted(p["metadata"]["name"] for p in tenancy.policies())
    return found


def bound(binding, namespace: str, labels=None) -> bool:
    """Whether the binding holds a namespace, its labels as the API server sets them."""
    selector = binding["spec"]["matchResources"]["namespaceSelector"]
    return _selector_matches(selector, {**(labels or {}), tenancy.NAMESPACE_NAME_LABEL: namespace})


@pytest.mark.parametrize("inventory_name, system", [
    ("example", ["kube-system", "kube-public", "kube-node-lease", "k8s-node-pools-system", "nvidia-gpu",
                 "volcano-system"]),
    ("sandbox", ["kube-system", "k8s-node-pools-system", "tigera-operator", "calico-system", "calico-apiserver"]),
], ids=["cilium", "calico"])
def test_the_bindings_deny_everywhere_but_in_system_namespaces(inventory_name, system):
    env, concern = shipped(inventory_name)
    for binding in bindings(env):
        assert binding["spec"]["validationActions"] == ["Deny"]
        for ns in of_kind(concern, "Namespace"):
            assert bound(binding, ns["metadata"]["name"], ns["metadata"]["labels"])
        for stray in ("default", "scratch", "calico-system" if "calico-system" not in system else "cilium-test"):
            assert bound(binding, stray)  # a namespace of no tenant is held: its pods are refused
        for name in system:
            assert not bound(binding, name), name


def test_a_namespace_the_spec_names_system_is_exempt_and_cannot_be_a_tenant(inventory, write):
    inventory["group_vars"]["all"]["system_namespaces"] = ["ingress-nginx"]
    env = load_environment(write(inventory))
    assert all(not bound(b, "ingress-nginx") and bound(b, "svc") for b in bindings(env))
    inventory["group_vars"]["all"]["system_namespaces"] = ["svc"]
    with pytest.raises(SpecError, match=r"all.yml: system_namespaces: \['svc'\] are also tenants"):
        load_environment(write(inventory))


def test_a_tenant_named_like_a_components_namespace_is_refused(inventory, write):
    tenants = inventory["group_vars"]["all"]["tenants"]
    tenants["calico-system"] = tenants.pop("svc")
    inventory["group_vars"]["all"]["kube_network_plugin"] = "calico"
    with pytest.raises(ValueError, match=r"tenants \['calico-system'\] would take over namespaces where the "
                                         "cluster runs its own components"):
        build_concerns(resolve(load_environment(write(inventory))))


# ---------------------------------------------------------------- the admission policy: its CEL, evaluated

def _environment(*names):
    """A CEL environment declaring these of the admission request's variables (and `variables`)."""
    declared = {name: cel.Type.DYN for name in names}
    return cel.NewEnv(variables={**declared, "variables": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
                      extensions=[ext_strings.ExtStrings()])


CEL = _environment("object", "namespaceObject")  # the pod policy reads only these
QUEUE_CEL = _environment("object", "oldObject", "namespaceObject", "request")  # the queue policy checks UPDATEs too


class CelError(Exception):
    pass


@cache
def _compiled(expression, queue_policy=False):
    return (QUEUE_CEL if queue_policy else CEL).compile(expression)


def _eval(expression, data):
    result = _compiled(expression, "request" in data).eval(data=data)
    if result.type() == cel.Type.ERROR:
        raise CelError(f"{expression}: {result.value()}")
    return result.plain_value()


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    messages: tuple[str, ...]


def admit(policy, pod, namespace, old=None) -> Verdict:
    """What the API server answers a CREATE (an UPDATE from OLD where given): each variable in order, then
    every validation; the messageExpression of each that fails. An evaluation error raises (Kubernetes
    would deny). The queue policy also gets `request` and `oldObject`, which the pod policy never reads."""
    spec = policy["spec"]
    request = {}
    if policy["metadata"]["name"] == tenancy.QUEUE_POLICY_NAME:
        request = {"oldObject": old, "request": {"operation": "CREATE" if old is None else "UPDATE"}}
    variables: dict = {}
    for variable in spec["variables"]:
        variables[variable["name"]] = _eval(variable["expression"], {
            "object": pod, "namespaceObject": namespace, "variables": dict(variables), **request})
    data = {"object": pod, "namespaceObject": namespace, "variables": variables, **request}
    messages = []
    for validation in spec["validations"]:
        holds = _eval(validation["expression"], data)
        assert isinstance(holds, bool), validation["expression"]
        if not holds:
            message = _eval(validation["messageExpression"], data)
            assert isinstance(message, str)
            messages.append(message)
    return Verdict(not messages, tuple(messages))


def req(key, operator, *values):
    requirement = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


def pool_in(*pools):
    return req(POOL_LABEL, "In", *pools)


def term(*expressions, fields=None):
    t = {}
    if expressions:
        t["matchExpressions"] = list(expressions)
    if fields:
        t["matchFields"] = fields
    return t


def pod(selector=None, terms=None, priority=None, affinity=None, queue=None):
    """A pod as the API server hands it to admission: fields left out are absent, not empty."""
    spec = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
    metadata = {"name": "p"}
    if queue is not None:
        metadata["annotations"] = {tenancy.QUEUE_ANNOTATION: queue}
    if selector is not None:
        spec["nodeSelector"] = selector
    if terms is not None:
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    if affinity is not None:
        spec["affinity"] = affinity
    if priority is not None:
        spec["priorityClassName"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


HOST = "kubernetes.io/hostname"
PREFERRED = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [pool_in("cpu_general")]}}]}}
ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": HOST}]}}
DAEMONSET_TERM = term(fields=[req("metadata.name", "In", "cpu-1")])

# The `batch` tenant of the example inventory: pools cpu_general and gpu_t4_offline, class offline-low.
# (id, pod, admitted, pools the refusal must name as forbidden, or None)
CASES = [
    ("selector-allowed", pod({POOL_LABEL: "gpu_t4_offline"}), True, None),
    ("selector-allowed-with-other-labels", pod({POOL_LABEL: "cpu_general", "disk": "ssd"}), True, None),
    ("selector-forbidden", pod({POOL_LABEL: "gpu_a100"}), False, "gpu_a100"),
    ("selector-unknown-pool", pod({POOL_LABEL: "gpu_a10"}), False, "gpu_a10"),
    ("selector-substring-of-allowed", pod({POOL_LABEL: "cpu"}), False, "cpu"),
    ("selector-empty-value", pod({POOL_LABEL: ""}), False, None),
    ("no-placement", pod(), False, None),
    ("selector-without-pool", pod({"disk": "ssd"}), False, None),
    ("affinity-allowed", pod(terms=[term(pool_in("cpu_general", "gpu_t4_offline"))]), True, None),
    ("affinity-allowed-and-another-key", pod(terms=[term(req(HOST, "In", "t4-1"), pool_in("gpu_t4_offline"))]), True, None),
    ("affinity-forbidden", pod(terms=[term(pool_in("gpu_a100"))]), False, "gpu_a100"),
    ("affinity-mixed", pod(terms=[term(pool_in("cpu_general", "gpu_a100"))]), False, "gpu_a100"),
    ("affinity-two-forbidden", pod(terms=[term(pool_in("gpu_a100", "cpu_general", "gpu_h100_bigmem"))]), False,
     "gpu_a100,gpu_h100_bigmem"),
    ("terms-all-allowed", pod(terms=[term(pool_in("cpu_general")), term(pool_in("gpu_t4_offline"))]), True, None),
    ("terms-second-forbidden", pod(terms=[term(pool_in("cpu_general")), term(pool_in("gpu_h100_bigmem"))]), False,
     "gpu_h100_bigmem"),
    ("terms-one-unpinned", pod(terms=[term(pool_in("cpu_general")), term(req(HOST, "In", "gpu-a100-1"))]), False, None),
    ("two-pool-requirements-one-forbidden", pod(terms=[term(pool_in("cpu_general"), pool_in("gpu_a100"))]), False,
     "gpu_a100"),
    ("notin-only", pod(terms=[term(req(POOL_LABEL, "NotIn", "gpu_a100"))]), False, None),
    ("exists-only", pod(terms=[term(req(POOL_LABEL, "Exists"))]), False, None),
    ("pinned-and-notin", pod(terms=[term(pool_in("cpu_general", "gpu_t4_offline"), req(POOL_LABEL, "NotIn", "gpu_t4_offline"))]),
     True, None),
    ("term-without-expressions", pod(terms=[DAEMONSET_TERM]), False, None),
    ("daemonset-pod-with-selector", pod({POOL_LABEL: "cpu_general"}, terms=[DAEMONSET_TERM]), True, None),
    ("selector-allowed-affinity-forbidden", pod({POOL_LABEL: "cpu_general"}, terms=[term(pool_in("gpu_a100"))]), False,
     "gpu_a100"),
    ("selector-forbidden-affinity-allowed", pod({POOL_LABEL: "gpu_a100"}, terms=[term(pool_in("cpu_general"))]), False,
     "gpu_a100"),
    ("empty-terms", pod(terms=[]), False, None),
    ("preferred-only", pod(affinity=PREFERRED), False, None),
    ("pod-anti-affinity-only", pod(affinity=ANTI_AFFINITY), False, None),
    ("node-affinity-empty", pod(affinity={"nodeAffinity": {}}), False, None),
    ("selector-with-anti-affinity", pod({POOL_LABEL: "cpu_general"}, affinity=ANTI_AFFINITY), True, None),
    ("own-priority-class", pod({POOL_LABEL: "cpu_general"}, priority="offline-low"), True, None),
    ("higher-priority-class", pod({POOL_LABEL: "cpu_general"}, priority="inference-high"), False, None),
    ("system-priority-class", pod({POOL_LABEL: "cpu_general"}, priority="system-cluster-critical"), False, None),
    ("own-queue-annotation", pod({POOL_LABEL: "cpu_general"}, queue="batch"), True, None),
    ("other-queue-annotation", pod({POOL_LABEL: "cpu_general"}, queue="training"), False, None),
    ("default-queue-annotation", pod({POOL_LABEL: "cpu_general"}, queue="default"), False, None),
]


@cache
def example_namespaces():
    _, concern = shipped("example")
    return {ns["metadata"]["name"]: ns for ns in of_kind(concern, "Namespace")}


def policy():
    return tenancy.placement_policy()


@pytest.mark.parametrize("case_id, the_pod, admitted, forbidden", CASES, ids=[c[0] for c in CASES])
def test_batch_pods(case_id, the_pod, admitted, forbidden):
    verdict = admit(policy(), the_pod, example_namespaces()["batch"])
    assert verdict.admitted is admitted, verdict.messages
    if not admitted:
        assert all(m.strip() for m in verdict.messages)
    if forbidden is not None:
        [message] = [m for m in verdict.messages if "may not use pool" in m]
        assert f"tenant batch may not use pool {forbidden};" in message
        assert "its pods may use cpu_general, gpu_t4_offline" in message
    else:
        assert not any("may not use pool" in m for m in verdict.messages)


def test_a_batch_pod_aimed_at_gpu_a100_is_refused_with_how_to_fix():
    verdict = admit(policy(), pod({POOL_LABEL: "gpu_a100"}), example_namespaces()["batch"])
    assert verdict == Verdict(False, (
        "tenant batch may not use pool gpu_a100; its pods may use cpu_general, gpu_t4_offline "
        f"(spec.nodeSelector or required node affinity on {POOL_LABEL})",))


def test_an_unpinned_pod_is_told_how_to_pin():
    [message] = admit(policy(), pod(), example_namespaces()["batch"]).messages
    assert message.startswith("pods of tenant batch must choose their node pools among cpu_general, gpu_t4_offline: ")
    assert f"spec.nodeSelector {POOL_LABEL}: <pool>" in message
    assert "DaemonSets: use nodeSelector" in message


def test_the_priority_messages_name_the_tenants_class():
    namespaces = example_namespaces()
    [message] = admit(policy(), pod({POOL_LABEL: "cpu_general"}, priority="inference-high"), namespaces["batch"]).messages
    assert message == "tenant batch may only use priority class offline-low (or none), not inference-high"
    classless = copy.deepcopy(namespaces["batch"])
    del classless["metadata"]["annotations"][tenancy.PRIORITY_CLASS_ANNOTATION]
    [message] = admit(policy(), pod({POOL_LABEL: "cpu_general"}, priority="offline-low"), classless).messages
    assert message == "tenant batch has no priority class: leave spec.priorityClassName unset (not offline-low)"
    assert admit(policy(), pod({POOL_LABEL: "cpu_general"}), classless).admitted


def test_the_inference_tenant_uses_its_own_pools_only():
    namespace = example_namespaces()["inference"]
    assert admit(policy(), pod({POOL_LABEL: "gpu_a100"}, priority="inference-high"), namespace).admitted
    assert admit(policy(), pod(terms=[term(pool_in("gpu_a100", "cpu_general"))]), namespace).admitted
    refused = admit(policy(), pod({POOL_LABEL: "gpu_t4_offline"}), namespace)
    assert not refused.admitted
    assert "tenant inference may not use pool gpu_t4_offline;" in refused.messages[0]


@pytest.mark.parametrize("annotations", [None, {}, {tenancy.POOLS_ANNOTATION: ""}, {tenancy.POOLS_ANNOTATION: ","},
                                         {"other": "x"}])
def test_a_namespace_without_pools_admits_no_pod(annotations):
    namespace = copy.deepcopy(example_namespaces()["batch"])
    if annotations is None:
        del namespace["metadata"]["annotations"]
    else:
        namespace["metadata"]["annotations"] = annotations
    for candidate in (pod({POOL_LABEL: "cpu_general"}), pod(terms=[term(pool_in("cpu_general"))]),
                      pod(terms=[term(pool_in(""))])):
        verdict = admit(policy(), candidate, namespace)
        assert not verdict.admitted
        assert verdict.messages[0].startswith(
            f"namespace batch has no pools in its annotation {tenancy.POOLS_ANNOTATION}")


def no_tenants(name="scratch"):
    """A namespace someone made by hand (or `default`): only the name label the API server sets."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {tenancy.NAMESPACE_NAME_LABEL: name}}}


@pytest.mark.parametrize("name", ["default", "scratch"])
def test_a_namespace_of_no_tenant_admits_nothing_and_says_where_to_run(name):
    expected = (f"namespace {name} belongs to no tenant, so nothing in it may use the node pools: run it in the "
                "namespace of a tenant (cluster.tenants in the spec), or, for a cluster component the stack does "
                "not deploy, name the namespace in system_namespaces of the spec and run pulumi up")
    for a_policy, the_object in ((policy(), pod({POOL_LABEL: "cpu_general"})), (policy(), pod()),
                                 (tenancy.queue_policy(), volcano("PodGroup", "batch"))):
        verdict = admit(a_policy, the_object, no_tenants(name))
        assert not verdict.admitted and verdict.messages[0] == expected  # the first the API server reports
    # the failing case: the same objects with a tenant's label on the namespace are judged as its
    batch = copy.deepcopy(no_tenants(name))
    batch["metadata"]["labels"][tenancy.TENANT_LABEL] = "batch"
    batch["metadata"]["annotations"] = example_namespaces()["batch"]["metadata"]["annotations"]
    assert admit(policy(), pod({POOL_LABEL: "cpu_general"}), batch).admitted
    assert admit(tenancy.queue_policy(), volcano("PodGroup", "batch"), batch).admitted


@pytest.mark.parametrize("tenant", ["inference", "web", "cache", "training", "batch"])
def test_every_example_tenant_admits_each_of_its_pools_and_refuses_the_others(tenant):
    env, _ = shipped("example")
    namespace = example_namespaces()[tenant]
    own = set(env.cluster.tenants[tenant].pools)
    for pool in env.pools:
        assert admit(policy(), pod({POOL_LABEL: pool}), namespace).admitted is (pool in own), pool
        assert admit(policy(), pod(terms=[term(pool_in(pool))]), namespace).admitted is (pool in own), pool


# Each mutant breaks the rule in one place; the case named must then get another verdict, which shows
# that the case tests that part of the rule. (text in the expressions, replacement, case id)
MUTANTS = [
    ("r.values.all(v, v in variables.allowed)", "true", "affinity-forbidden"),
    ("r.values.all(v, v in variables.allowed)", "r.values.exists(v, v in variables.allowed)", "affinity-mixed"),
    ("|| variables.selected in variables.allowed)", "|| true)", "selector-forbidden"),
    ("variables.poolRequirements.all(rs, rs.size() > 0)", "variables.poolRequirements.exists(rs, rs.size() > 0)",
     "terms-one-unpinned"),
    ("variables.poolRequirements.size() > 0 && ", "", "empty-terms"),
    ("rs.all(r, ", "rs.exists(r, ", "two-pool-requirements-one-forbidden"),
    ("e.operator == 'In'", "true", "exists-only"),
    ("variables.selected != '' || ", "true || ", "no-placement"),
    ("requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms : []",
     "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms : [{'matchExpressions': "
     "[{'key': 'node-restriction.kubernetes.io/k8s-node-pools.pool', 'operator': 'In', 'values': ['cpu_general']}]}]", "preferred-only"),
    ("split(',').filter(p, p != '')", "split(',')", None),  # seen by the empty-annotation namespace below
    ("variables.pod.spec.priorityClassName == variables.priorityClass", "true", "higher-priority-class"),
    ("has(variables.pod.spec.affinity) && ", "", "no-placement"),  # a missing guard: evaluation error
    ("variables.podQueue == '' || ", "", "selector-allowed"),  # a pod without the annotation is refused
    ("variables.podQueue == variables.queue", "true", "other-queue-annotation"),
]


def _mutated(old, new):
    mutant = copy.deepcopy(policy())
    spec = mutant["spec"]
    places = [(item, "expression") for item in spec["variables"] + spec["validations"]]
    hits = [(item, field) for item, field in places if old in item[field]]
    assert len(hits) == 1 and hits[0][0][hits[0][1]].count(old) == 1, f"{old!r} must occur exactly once"
    item, field = hits[0]
    item[field] = item[field].replace(old, new)
    return mutant


def _outcome(a_policy, the_pod, namespace):
    try:
        verdict = admit(a_policy, the_pod, namespace)
    except CelError:
        return "error"
    return (verdict.admitted, len(verdict.messages))


@pytest.mark.parametrize("old, new, case_id", MUTANTS, ids=[f"{m[2]}:{m[0][:40]}" for m in MUTANTS])
def test_a_broken_rule_changes_a_verdict(old, new, case_id):
    mutant = _mutated(old, new)
    if case_id is None:  # the empty-annotation guard
        namespace = copy.deepcopy(example_namespaces()["batch"])
        namespace["metadata"]["annotations"][tenancy.POOLS_ANNOTATION] = ""
        the_pod = pod(terms=[term(pool_in(""))])
    else:
        [(_, the_pod, _, _)] = [c for c in CASES if c[0] == case_id]
        namespace = example_namespaces()["batch"]
    assert _outcome(policy(), the_pod, namespace) != _outcome(mutant, the_pod, namespace)
    assert _outcome(policy(), the_pod, namespace) != "error"


def test_the_mutated_policy_admits_the_forbidden_pod():
    """Spelled out for the case the issue names: without the membership test, batch reaches gpu_a100."""
    aimed = pod(terms=[term(pool_in("gpu_a100"))])
    batch = example_namespaces()["batch"]
    assert not admit(policy(), aimed, batch).admitted
    assert admit(_mutated("r.values.all(v, v in variables.allowed)", "true"), aimed, batch).admitted
    aimed = pod({POOL_LABEL: "gpu_a100"})
    assert not admit(policy(), aimed, batch).admitted
    assert admit(_mutated("|| variables.selected in variables.allowed)", "|| true)"), aimed, batch).admitted


# ---------------------------------------------------------------- RDMA: the network only with its device

NETWORKS = "k8s.v1.cni.cncf.io/networks"


def rdma_pod(networks, *limits_per_container, pool="gpu_a100"):
    """A pod on POOL (gpu_a100 is an RDMA pool) attaching NETWORKS, each container with the limits given."""
    the_pod = pod({POOL_LABEL: pool})
    the_pod["metadata"]["annotations"] = {NETWORKS: networks}
    the_pod["spec"]["containers"] = [{"name": f"c{i}", "image": "registry.example/app:1",
                                      **({"resources": {"limits": limits}} if limits is not None else {})}
                                     for i, limits in enumerate(limits_per_container or [None])]
    return the_pod


DEVICE = {"rdma/gpu_a100": "1", "nvidia.com/gpu": "1"}
# (id, tenant, pod, admitted)
RDMA_CASES = [
    ("network-and-device", "inference", rdma_pod("rdma-gpu-a100", DEVICE), True),
    ("device-in-the-second-container", "inference", rdma_pod("rdma-gpu-a100", None, DEVICE), True),
    ("network-without-device", "inference", rdma_pod("rdma-gpu-a100", {"nvidia.com/gpu": "1"}), False),
    ("network-without-resources", "inference", rdma_pod("rdma-gpu-a100"), False),
    ("network-by-namespace-and-name", "inference", rdma_pod("inference/rdma-gpu-a100"), False),
    ("network-as-json", "inference", rdma_pod('[{"name": "rdma-gpu-a100", "interface": "net1"}]'), False),
    ("another-network", "inference", rdma_pod("macvlan-storage"), True),
    ("tenant-without-rdma", "batch", rdma_pod("rdma-gpu-a100", pool="cpu_general"), True),  # no RDMA network is the batch tenant's
]


@pytest.mark.parametrize("case_id, tenant, the_pod, admitted", RDMA_CASES, ids=[c[0] for c in RDMA_CASES])
def test_rdma_pods(case_id, tenant, the_pod, admitted):
    verdict = admit(policy(), the_pod, example_namespaces()[tenant])
    assert verdict.admitted is admitted, verdict.messages
    if not admitted:
        assert verdict.messages == (
            "a pod attaching an RDMA network must ask for its device in resources.limits of a container "
            "(rdma-gpu-a100: rdma/gpu_a100: 1): without it the pod gets the interface but no HCA, and its "
            "traffic falls back to TCP",)


def test_a_namespace_names_the_rdma_networks_of_its_tenants_pools_only():
    namespaces = example_namespaces()
    assert namespaces["inference"]["metadata"]["annotations"][tenancy.RDMA_NETWORKS_ANNOTATION] == \
        "rdma-gpu-a100=rdma/gpu_a100"
    assert tenancy.RDMA_NETWORKS_ANNOTATION not in namespaces["batch"]["metadata"]["annotations"]


@pytest.mark.parametrize("old, new, case_id", [
    (" && !variables.pod.spec.containers.exists(c, has(c.resources) && has(c.resources.limits) && "
     "n.split('=')[1] in c.resources.limits)", "", "network-and-device"),
    ("contains(n.split('=')[0])", "contains('none')", "network-without-device"),
    ("variables.pod.spec.containers.exists(c, ", "variables.pod.spec.containers.all(c, ",
     "device-in-the-second-container"),
])
def test_a_broken_rdma_rule_changes_a_verdict(old, new, case_id):
    [(_, tenant, the_pod, admitted)] = [c for c in RDMA_CASES if c[0] == case_id]
    assert admit(_mutated(old, new), the_pod, example_namespaces()[tenant]).admitted is not admitted


# ---------------------------------------------------------------- workloads: their pod templates


def workload(kind, the_pod, template_metadata=True):
    """A workload of KIND whose pod template is THE_POD (its metadata left out if asked: a template may lack it)."""
    template = {"spec": the_pod["spec"]}
    if template_metadata:
        template["metadata"] = {k: v for k, v in the_pod["metadata"].items() if k != "name"}
    group = {"CronJob": "batch/v1", "Job": "batch/v1"}.get(kind, "apps/v1")
    spec = {"jobTemplate": {"spec": {"template": template}}} if kind == "CronJob" else {"template": template}
    return {"apiVersion": group, "kind": kind, "metadata": {"name": "w"}, "spec": spec}


KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case_id, the_pod, admitted, forbidden", CASES, ids=[c[0] for c in CASES])
def test_a_workloads_pod_template_gets_its_pods_verdict(kind, case_id, the_pod, admitted, forbidden):
    verdict = admit(policy(), workload(kind, the_pod), example_namespaces()["batch"])
    assert verdict == admit(policy(), the_pod, example_namespaces()["batch"])
    assert verdict.admitted is admitted


@pytest.mark.parametrize("kind", KINDS)
def test_a_template_without_metadata_is_read_as_without_annotations(kind):
    allowed = pod({POOL_LABEL: "gpu_t4_offline"})
    assert admit(policy(), workload(kind, allowed, template_metadata=False), example_namespaces()["batch"]).admitted
    elsewhere = pod({POOL_LABEL: "gpu_a100"})
    assert not admit(policy(), workload(kind, elsewhere, template_metadata=False),
                     example_namespaces()["batch"]).admitted


def test_a_policy_reading_the_workload_instead_of_its_template_admits_what_it_must_not():
    mutant = _mutated("object.kind == 'Pod' ? object : ", "true ? object : ")
    forbidden = workload("Deployment", pod({POOL_LABEL: "gpu_a100"}))
    with pytest.raises(CelError):  # a Deployment has no spec.containers: the check cannot even run
        admit(mutant, forbidden, example_namespaces()["batch"])
    assert not admit(policy(), forbidden, example_namespaces()["batch"]).admitted


# ---------------------------------------------------------------- shared GPUs: one replica per container


def shared_gpu_pod(*containers, init=None):
    """A batch pod on the time-sliced T4 pool; each container given as its (limits, requests), None for absent."""
    the_pod = pod({POOL_LABEL: "gpu_t4_offline"})

    def container(name, limits, requests=None):
        resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v is not None}
        return {"name": name, "image": "registry.example/app:1", **({"resources": resources} if resources else {})}

    the_pod["spec"]["containers"] = [container(f"c{i}", *c) for i, c in enumerate(containers)]
    if init is not None:
        the_pod["spec"]["initContainers"] = [container("init", *init)]
    return the_pod


ONE, TWO = {SHARED_GPU: "1"}, {SHARED_GPU: "2"}
# (id, pod, admitted)
SHARED_CASES = [
    ("one-replica", shared_gpu_pod((ONE,)), True),
    ("one-in-each-of-two-containers", shared_gpu_pod((ONE,), (ONE,)), True),
    ("no-gpu", shared_gpu_pod((None,)), True),
    ("whole-gpus-are-not-shared", shared_gpu_pod(({WHOLE_GPU: "2"},)), True),
    ("two-replicas", shared_gpu_pod((TWO,)), False),
    ("two-in-requests-only", shared_gpu_pod((None, TWO)), False),
    ("two-in-the-second-container", shared_gpu_pod((ONE,), (TWO,)), False),
    ("two-in-an-init-container", shared_gpu_pod((ONE,), init=(TWO,)), False),
]


@pytest.mark.parametrize("case_id, the_pod, admitted", SHARED_CASES, ids=[c[0] for c in SHARED_CASES])
def test_shared_gpu_pods(case_id, the_pod, admitted):
    verdict = admit(policy(), the_pod, example_namespaces()["batch"])
    assert verdict.admitted is admitted, verdict.messages
    if not admitted:
        (message,) = verdict.messages
        assert message.startswith(f"a shared GPU ({SHARED_GPU}) is one replica of a time-sliced or MPS card")
        assert re.search(r"; (c\d|init) asks for 2: ask for 1, or for a whole or MIG GPU$", message), message


@pytest.mark.parametrize("old, new, case_id", [
    ("!(r['nvidia.com/gpu.shared'] in ['0', '1'])", "false", "two-replicas"),
    ("has(c.resources.requests) ? c.resources.requests : {}", "{}", "two-in-requests-only"),
    ("(has(variables.pod.spec.initContainers) ? variables.pod.spec.initContainers : [])", "[]",
     "two-in-an-init-container"),
])
def test_a_broken_shared_gpu_rule_changes_a_verdict(old, new, case_id):
    [(_, the_pod, admitted)] = [c for c in SHARED_CASES if c[0] == case_id]
    assert admit(_mutated(old, new), the_pod, example_namespaces()["batch"]).admitted is not admitted


# ---------------------------------------------------------------- the queue policy: Volcano tied to tenants


def test_the_queue_policy_checks_podgroups_and_jobs_at_create_and_update_and_fails_closed():
    spec = tenancy.queue_policy()["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert {(r["apiGroups"][0], r["resources"][0]): r["operations"] for r in spec["matchConstraints"]["resourceRules"]} \
        == {("scheduling.volcano.sh", "podgroups"): ["CREATE", "UPDATE"], ("batch.volcano.sh", "jobs"): ["CREATE", "UPDATE"]}
    assert all(v["reason"] == "Forbidden" and v["message"] for v in spec["validations"])


def test_a_tenant_namespace_names_its_queue_and_only_tenants_with_a_queue_have_one():
    env, _ = shipped("example")
    namespaces = example_namespaces()
    for name, tenant in env.cluster.tenants.items():
        annotations = namespaces[name]["metadata"]["annotations"]
        assert annotations.get(tenancy.QUEUE_ANNOTATION) == (name if tenant.queue is not None else None), name


def volcano(kind, queue=None, priority=None, **spec):
    """A PodGroup (scheduling.volcano.sh) or a Volcano Job (batch.volcano.sh) as admission sees it."""
    if queue is not None:
        spec["queue"] = queue
    if priority is not None:
        spec["priorityClassName"] = priority
    group = {"PodGroup": "scheduling.volcano.sh/v1beta1", "Job": "batch.volcano.sh/v1alpha1"}[kind]
    return {"apiVersion": group, "kind": kind, "metadata": {"name": "g"}, "spec": spec}


# The example's batch tenant: queue batch, class offline-low; training: queue training; inference: no queue.
# (id, tenant, object, the old object of an UPDATE or None, the refusal's message or None)
QUEUE_CASES = [
    ("own-queue", "batch", volcano("PodGroup", "batch", minMember=2), None, None),
    ("own-queue-and-class", "batch", volcano("Job", "batch", "offline-low"), None, None),
    ("another-tenants-queue", "batch", volcano("PodGroup", "training"), None,
     "tenant batch may only use Volcano queue batch, not training: set spec.queue: batch in the PodGroup"),
    ("default-queue-of-a-job", "batch", volcano("Job", "default"), None,
     "tenant batch may only use Volcano queue batch, not default: set spec.queue: batch in the Job"),
    ("no-queue", "batch", volcano("PodGroup"), None,
     "tenant batch may only use Volcano queue batch, not none: set spec.queue: batch in the PodGroup"),
    ("higher-class", "batch", volcano("PodGroup", "batch", "inference-high"), None,
     "tenant batch may only use priority class offline-low (or none), not inference-high"),
    ("tenant-without-queue", "inference", volcano("Job", "inference"), None,
     "tenant inference has no Volcano queue, so it may not create a Job (Volcano would run it in its `default` "
     "queue, which no tenant may use): give the tenant a queue in the spec and run pulumi up"),
    ("update-keeps-an-old-queue", "batch", volcano("PodGroup", "default", minMember=3),
     volcano("PodGroup", "default", minMember=2), None),
    ("update-moves-the-queue", "batch", volcano("PodGroup", "training"), volcano("PodGroup", "batch"),
     "tenant batch may only use Volcano queue batch, not training: set spec.queue: batch in the PodGroup"),
    ("update-raises-the-class", "training", volcano("Job", "training", "inference-high"),
     volcano("Job", "training", "training-normal"),
     "tenant training may only use priority class training-normal (or none), not inference-high"),
]


@pytest.mark.parametrize("case_id, tenant, the_object, old, refusal", QUEUE_CASES, ids=[c[0] for c in QUEUE_CASES])
def test_volcano_objects(case_id, tenant, the_object, old, refusal):
    verdict = admit(tenancy.queue_policy(), the_object, example_namespaces()[tenant], old=old)
    assert verdict == (Verdict(True, ()) if refusal is None else Verdict(False, (refusal,)))


def test_a_pods_queue_annotation_is_its_tenants_queue():
    namespaces = example_namespaces()
    pinned = {POOL_LABEL: "cpu_general"}
    assert admit(policy(), pod(pinned, queue="batch"), namespaces["batch"]).admitted
    [message] = admit(policy(), pod(pinned, queue="training"), namespaces["batch"]).messages
    assert message == ("tenant batch may only use Volcano queue batch: the pod names training in its annotation "
                       f"{tenancy.QUEUE_ANNOTATION}")
    [message] = admit(policy(), pod({POOL_LABEL: "gpu_a100"}, queue="default"), namespaces["inference"]).messages
    assert message.startswith("tenant inference has no Volcano queue: the pod names default")


@pytest.mark.parametrize("old, new, case_id", [
    ("variables.askedQueue == variables.queue", "true", "another-tenants-queue"),
    ("variables.queueKept || variables.queue != ''", "true", "tenant-without-queue"),
    ("variables.askedClass == variables.priorityClass", "true", "higher-class"),
    ("(has(oldObject.spec) && has(oldObject.spec.queue) ? oldObject.spec.queue : '') == variables.askedQueue", "true",
     "update-moves-the-queue"),
    ("request.operation == 'UPDATE' && (has(oldObject.spec) && has(oldObject.spec.queue)",
     "(has(oldObject.spec) && has(oldObject.spec.queue)", "no-queue"),  # a CREATE's oldObject is null: an error
])
def test_a_broken_queue_rule_changes_a_verdict(old, new, case_id):
    [(_, tenant, the_object, old_object, _)] = [c for c in QUEUE_CASES if c[0] == case_id]
    mutant = copy.deepcopy(tenancy.queue_policy())
    places = [item for item in mutant["spec"]["variables"] + mutant["spec"]["validations"] if old in item["expression"]]
    assert len(places) == 1, f"{old!r} must occur exactly once"
    places[0]["expression"] = places[0]["expression"].replace(old, new)
    namespace = example_namespaces()[tenant]

    def outcome(a_policy):
        try:
            return admit(a_policy, the_object, namespace, old=old_object).admitted
        except CelError:
            return "error"

    assert outcome(mutant) != outcome(tenancy.queue_policy())


# ---------------------------------------------------------------- the CEL stays within Kubernetes 1.30

# Kubernetes 1.30 compiles new expressions in its CEL environment for 1.29: the standard library and
# macros, the strings extension v2, sets, and its own lists/regex/URL/quantity/IP/CIDR libraries. The
# policy needs only these; cel-expr-python knows more (math, encoders...), so the names are pinned here.
K8S_130_FUNCTIONS_USED = {"has", "size", "all", "exists", "filter", "map", "split", "join", "contains"}


POLICIES = {"pods": (tenancy.placement_policy(), {"object", "namespaceObject"}),
            "queues": (tenancy.queue_policy(), {"object", "oldObject", "namespaceObject", "request"})}


def _expressions(a_policy):
    spec = a_policy["spec"]
    yield from (v["expression"] for v in spec["variables"])
    for validation in spec["validations"]:
        yield validation["expression"]
        yield validation["messageExpression"]


def _without_strings(expression):
    return re.sub(r"'(?:[^'\\]|\\.)*'", "''", expression)


@pytest.mark.parametrize("name", POLICIES)
def test_the_expressions_call_only_what_kubernetes_1_30_offers(name):
    called = set()
    for expression in _expressions(POLICIES[name][0]):
        called |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", _without_strings(expression)))
    assert called <= K8S_130_FUNCTIONS_USED, called - K8S_130_FUNCTIONS_USED


@pytest.mark.parametrize("name", POLICIES)
def test_the_expressions_read_only_what_their_policy_is_given_and_earlier_variables(name):
    a_policy, given = POLICIES[name]
    spec = a_policy["spec"]
    defined: list[str] = []
    for variable in spec["variables"]:
        used = set(re.findall(r"variables\.([A-Za-z]+)", _without_strings(variable["expression"])))
        assert used <= set(defined), f"{variable['name']} reads {used - set(defined)} before it is defined"
        defined.append(variable["name"])
    for expression in _expressions(a_policy):
        _compiled(expression, "request" in given)  # type-checked against what the policy is given only
        roots = set(re.findall(r"(?<![.\w])(object|oldObject|namespaceObject|request|params|authorizer)\b",
                               _without_strings(expression)))
        assert roots <= given
    with pytest.raises(Exception, match="undeclared reference"):
        CEL.compile("oldObject.spec.nodeSelector")
