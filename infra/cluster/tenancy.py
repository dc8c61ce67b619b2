"""Tenants: one namespace each, with its quota, container defaults, priority and the pools it may use.

Per tenant: a Namespace named after it (Pod Security labels by tier, the tenant label, and annotations
naming its pools and priority class), a ResourceQuota whose `hard` is the spec's quota verbatim, and a
LimitRange with the spec's container defaults plus ephemeral-storage defaults (platform.yml) so that
no container runs without a scratch-space request and limit. Cluster-wide: one PriorityClass per
spec class, and a ValidatingAdmissionPolicy with its binding that confines every tenant pod to its
tenant's pools, and another that keeps its PodGroups and Volcano jobs in its own Volcano queue.

Confinement has two sides. The pods' side (nodeSelector or node affinity on the pool label,
tolerations for tainted pools) is the tenants' to write; the cluster's side is the admission policy,
which refuses at CREATE a pod in a tenant namespace that does not pin itself to pools, or that names a
pool its tenant may not use (a `batch` pod aimed at `gpu_a100`). Built-in admission, no webhook to run:
ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1) and on by default since Kubernetes
1.30. The PodNodeSelector admission plugin was not used: it is off by default and can only AND one
fixed selector into pods, so it cannot offer a tenant a choice of several pools.

Why CREATE only: a pod's nodeSelector and node affinity are immutable once created, except while the
pod still has scheduling gates, and then Kubernetes only lets them narrow (nodeSelector entries may be
added, never changed; expressions may be added to existing terms, which AND). A pod admitted at CREATE
stays confined, so checking UPDATE adds nothing, and would deny metadata updates (labels, finalizers)
of pods created before the policy existed. A pod bound with spec.nodeName skips the scheduler, not the
kubelet: the kubelet refuses a pod whose nodeSelector or affinity its node does not match.

Volcano: a tenant with a queue has it named on its namespace (QUEUE_ANNOTATION), which routes the
PodGroups created there without a queue; the queue policy refuses, at CREATE and whenever an UPDATE
changes them, a PodGroup or Volcano job whose queue is not the tenant's (so never `default`, which
Volcano creates uncapped, nor another tenant's) or whose priority class is not the tenant's. A tenant
without a queue may not use Volcano at all. A pod's own queue annotation is held to the same rule.

RDMA: a pod attaching one of its tenant's RDMA networks (RDMA_NETWORKS_ANNOTATION on the namespace) must
ask for that network's device resource in a container's limits; without it, it would get the interface
but no HCA and fall back to TCP unnoticed (no resources injector is deployed to add the request).

DaemonSets in tenant namespaces must pin with nodeSelector: their controller replaces each pod's
required node affinity with a term on the node's name, and the policy would refuse those pods.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from infra.cluster.networking import nad_name, rdma_pools, rdma_resource
from infra.cluster.nodes import POOL_LABEL
from infra.cluster.objects import LABEL_PREFIX, SYSTEM_NAMESPACE, Concern, Obj, key, obj
from infra.knowledge.chart_values import chart_values
from infra.knowledge.platform import platform
from infra.model.capacity import SHARED_GPU
from infra.model.resolve import Resolved
from infra.model.workloads import ephemeral_storage_defaults
from infra.spec.models import PriorityClass, Tenant

TENANT_LABEL = f"{LABEL_PREFIX}/tenant"
TIER_LABEL = f"{LABEL_PREFIX}/tier"
# Comma-separated pool names, read by the admission policy (pool names are [a-z0-9_], so ',' is free).
POOLS_ANNOTATION = f"{LABEL_PREFIX}/pools"
PRIORITY_CLASS_ANNOTATION = f"{LABEL_PREFIX}/priority-class"
# Volcano's own key: on a namespace, the queue its PodGroup webhook gives PodGroups created without one;
# on a pod, the queue of the PodGroup Volcano's controller makes for it.
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# The RDMA networks of the tenant's pools, `<network>=<resource>` comma-separated (rdma-gpu-a100=rdma/gpu_a100).
RDMA_NETWORKS_ANNOTATION = f"{LABEL_PREFIX}/rdma-networks"
POLICY_NAME = "k8s-node-pools-tenant-placement"
QUEUE_POLICY_NAME = "k8s-node-pools-tenant-queues"
EPHEMERAL_STORAGE = "ephemeral-storage"

# Namespaces Kubernetes or this project own: a tenant named so would take them over (and confine the
# control plane's own pods to the tenant's pools). Names starting with kube- are Kubernetes' too.
RESERVED_NAMESPACES = frozenset({"default", *platform().system_namespaces["kubernetes"], SYSTEM_NAMESPACE})

# Pod Security Standards level enforced per tier. Services and inference are long-running and
# reachable from outside: `restricted` (non-root, no privilege escalation, all capabilities dropped,
# RuntimeDefault seccomp), which GPU containers meet too, since the device plugin hands them the
# devices without privileges. Training, offline and dev run researchers' images, which often run as
# root: `baseline` still refuses privileged containers, host namespaces and hostPath. Every tier
# audits and warns at `restricted`, so each pod that would fail it is visible before tightening.
# Neither level allows added capabilities such as IPC_LOCK, which RDMA pods often ask for to register
# memory: on RDMA pools the hosts' containerd runs with an unlimited locked-memory limit instead, which
# its containers inherit (infra/hosts/hostvars.py; no tier is ever enforced at `privileged`).
POD_SECURITY_ENFORCE = {"production": "restricted", "inference": "restricted",
                        "training": "baseline", "offline": "baseline", "dev": "baseline"}
POD_SECURITY_AUDIT = "restricted"
_POD_SECURITY = "pod-security.kubernetes.io"


def check_tenant_name(name: str) -> None:
    """Raise ValueError if the tenant's namespace would be one Kubernetes or the project owns."""
    if name in RESERVED_NAMESPACES or name.startswith("kube-"):
        raise ValueError(f"tenant {name!r} would take over the namespace {name}, which Kubernetes or this project "
                         "owns; rename the tenant")


def namespace(name: str, tenant: Tenant, kube_minor: int, rdma: Mapping[str, str] | None = None) -> Obj:
    """The tenant's Namespace. Pod Security versions are pinned to the cluster's minor, so an upgrade
    changes the rules only when the spec's kube_version does. RDMA maps each RDMA network of the tenant's
    pools to the device resource a pod attaching it must ask for."""
    check_tenant_name(name)
    version = f"v1.{kube_minor}"
    levels = {"enforce": POD_SECURITY_ENFORCE[tenant.tier], "audit": POD_SECURITY_AUDIT, "warn": POD_SECURITY_AUDIT}
    labels = {TENANT_LABEL: name, TIER_LABEL: tenant.tier}
    for mode, level in levels.items():
        labels[f"{_POD_SECURITY}/{mode}"] = level
        labels[f"{_POD_SECURITY}/{mode}-version"] = version
    annotations = {POOLS_ANNOTATION: ",".join(sorted(tenant.pools))}
    if tenant.priority_class:
        annotations[PRIORITY_CLASS_ANNOTATION] = tenant.priority_class
    if tenant.queue is not None:
        annotations[QUEUE_ANNOTATION] = name  # the tenant's Queue is named after it (scheduling.py)
    if rdma:
        annotations[RDMA_NETWORKS_ANNOTATION] = ",".join(f"{network}={resource}"
                                                         for network, resource in sorted(rdma.items()))
    return obj("v1", "Namespace", name, labels=dict(sorted(labels.items())), annotations=annotations)


def resource_quota(name: str, tenant: Tenant) -> Obj:
    """The tenant's ResourceQuota: spec.hard is the spec's quota, keys and quantities as written.

    Not scoped (no scopeSelector): it counts every pod of the namespace. A priority-class scope would
    only let pods of other classes escape it, and the admission policy already keeps the tenant's
    pods to its own class.
    """
    hard = {k: str(v) for k, v in sorted(tenant.quota.items())}
    return obj("v1", "ResourceQuota", name, namespace=name, labels={TENANT_LABEL: name}, spec={"hard": hard})


def limit_range(name: str, tenant: Tenant) -> Obj:
    """The tenant's LimitRange: one Container item with the spec's defaults, max and ratios, plus
    ephemeral-storage defaults so no container runs without a scratch-space request and limit."""
    spec = tenant.limit_range
    limit, request = ephemeral_storage_defaults(spec)
    item: Obj = {"type": "Container"}
    fields = {
        "default": {**(spec.default if spec else {}), EPHEMERAL_STORAGE: limit},
        "defaultRequest": {**(spec.default_request if spec else {}), EPHEMERAL_STORAGE: request},
        "max": dict(spec.max) if spec else {},
        "maxLimitRequestRatio": dict(spec.max_limit_request_ratio) if spec else {},
    }
    for field, values in fields.items():
        if values:
            item[field] = {k: str(v) for k, v in sorted(values.items())}
    return obj("v1", "LimitRange", name, namespace=name, labels={TENANT_LABEL: name}, spec={"limits": [item]})


def priority_class(name: str, spec: PriorityClass) -> Obj:
    """A PriorityClass of the spec. Never the global default: a pod that names no class gets priority 0
    rather than silently inheriting one (and the admission policy refuses other tenants' classes)."""
    fields: Obj = {"value": spec.value, "globalDefault": False, "preemptionPolicy": spec.preemption_policy}
    if spec.description:
        fields["description"] = spec.description
    return obj("scheduling.k8s.io/v1", "PriorityClass", name, **fields)


# ---------------------------------------------------------------- the admission policy, in CEL
#
# Only what Kubernetes 1.30 offers new expressions (its CEL environment at compatibility version 1.29):
# the CEL standard library and macros (has, in, size, all, exists, filter, map) and the strings
# extension (split, join). Every optional field is guarded with has(): reading an absent field is an
# error, and with failurePolicy Fail an error denies the pod. Required fields (a requirement's key and
# operator) are read directly; API validation has run before admission policies, so they are there.


def _lit(text: str) -> str:
    """A CEL string literal of a label key or annotation name (no quotes or backslashes to escape)."""
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", text):
        raise ValueError(f"{text!r} cannot be written as a plain CEL string literal")
    return f"'{text}'"


_ANNOTATIONS = "namespaceObject.metadata.annotations"
_NETWORKS = chart_values().multus.pod_networks_annotation
_SPEC = "variables.pod.spec"  # the pod's spec, or its workload's pod template's
_POD_ANNOTATIONS = "variables.podAnnotations"
_REQUIRED = f"{_SPEC}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def _annotation(name: str, otherwise: str) -> str:
    return f"has({_ANNOTATIONS}) && {_lit(name)} in {_ANNOTATIONS} ? {_ANNOTATIONS}[{_lit(name)}] : {otherwise}"


def _field(owner: str, name: str) -> str:
    """A string field of owner (a metadata or spec map), '' where absent."""
    return f"has({owner}) && has({owner}.{name}) ? {owner}.{name} : ''"


_LABELS = "namespaceObject.metadata.labels"
# the tenant the namespace belongs to (its tenant label); '' for a namespace of no tenant
_OWNER = ("tenant", f"has({_LABELS}) && {_lit(TENANT_LABEL)} in {_LABELS} ? {_LABELS}[{_lit(TENANT_LABEL)}] : ''")
_QUEUE = ("queue", _annotation(QUEUE_ANNOTATION, "''"))  # the tenant's Volcano queue; '' if it has none
_PRIORITY_CLASS = ("priorityClass", _annotation(PRIORITY_CLASS_ANNOTATION, "''"))  # '' if it has none

# (name, expression), in order: a variable may read the ones before it.
POLICY_VARIABLES: tuple[tuple[str, str], ...] = (
    # the pod, or the pod template of a workload (a CronJob's is one level further down)
    ("pod", "object.kind == 'Pod' ? object : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template "
            ": object.spec.template"),
    # its annotations; {} if it has none (a template may even lack metadata)
    ("podAnnotations", "has(variables.pod.metadata) && has(variables.pod.metadata.annotations) ? "
                       "variables.pod.metadata.annotations : {}"),
    _OWNER,
    # the pools the tenant may use, from its namespace's annotation; [] if it is missing or empty
    ("allowed", f"has({_ANNOTATIONS}) && {_lit(POOLS_ANNOTATION)} in {_ANNOTATIONS} ? "
                f"{_ANNOTATIONS}[{_lit(POOLS_ANNOTATION)}].split(',').filter(p, p != '') : []"),
    _PRIORITY_CLASS,
    _QUEUE,
    # the RDMA networks the pod attaches (Multus' annotation: names or JSON, read as text) whose device
    # resource none of its containers asks for, as `<network>=<resource>`
    ("rdmaWithoutDevice", f"has({_ANNOTATIONS}) && {_lit(RDMA_NETWORKS_ANNOTATION)} in {_ANNOTATIONS} && "
                          f"{_lit(_NETWORKS)} in {_POD_ANNOTATIONS} ? "
                          f"{_ANNOTATIONS}[{_lit(RDMA_NETWORKS_ANNOTATION)}].split(',').filter(n, n != '' && "
                          f"{_POD_ANNOTATIONS}[{_lit(_NETWORKS)}].contains(n.split('=')[0]) && "
                          f"!{_SPEC}.containers.exists(c, has(c.resources) && has(c.resources.limits) && "
                          "n.split('=')[1] in c.resources.limits)) : []"),
    # the containers (init containers too) asking for more than one replica of a time-sliced or MPS card,
    # as `<container> asks for <quantity>`; the API server hands admission canonical quantities, so one is '1'
    ("sharedOverOne", f"({_SPEC}.containers + (has({_SPEC}.initContainers) ? {_SPEC}.initContainers : []))"
                      ".filter(c, has(c.resources) && [has(c.resources.limits) ? c.resources.limits : {}, "
                      "has(c.resources.requests) ? c.resources.requests : {}].exists(r, "
                      f"{_lit(SHARED_GPU)} in r && !(r[{_lit(SHARED_GPU)}] in ['0', '1'])))"
                      ".map(c, c.name + ' asks for ' + (has(c.resources.limits) && "
                      f"{_lit(SHARED_GPU)} in c.resources.limits ? c.resources.limits[{_lit(SHARED_GPU)}] : "
                      f"c.resources.requests[{_lit(SHARED_GPU)}]))"),
    # the Volcano queue the pod's annotation names; '' if none
    ("podQueue", f"{_lit(QUEUE_ANNOTATION)} in {_POD_ANNOTATIONS} ? {_POD_ANNOTATIONS}[{_lit(QUEUE_ANNOTATION)}] : ''"),
    # the pool the pod's nodeSelector names; '' if none
    ("selected", f"has({_SPEC}.nodeSelector) && {_lit(POOL_LABEL)} in {_SPEC}.nodeSelector ? "
                 f"{_SPEC}.nodeSelector[{_lit(POOL_LABEL)}] : ''"),
    # the required node affinity's terms (ORed); [] if none
    ("terms", f"has({_SPEC}.affinity) && has({_SPEC}.affinity.nodeAffinity) && has({_REQUIRED}) && "
              f"has({_REQUIRED}.nodeSelectorTerms) ? {_REQUIRED}.nodeSelectorTerms : []"),
    # per term, its requirements `pool In [...]`: a term with none lets the pod onto any node
    ("poolRequirements", "variables.terms.map(t, has(t.matchExpressions) ? "
                         f"t.matchExpressions.filter(e, e.key == {_lit(POOL_LABEL)} && e.operator == 'In') : [])"),
    # for messages only: the pools the pod names that the tenant may not use, comma-separated
    ("forbidden", "(((variables.selected != '' && !(variables.selected in variables.allowed)) ? "
                  "[variables.selected] : []) + variables.poolRequirements.map(rs, rs.map(r, has(r.values) ? "
                  "r.values.filter(v, !(v in variables.allowed)).join(',') : '').filter(s, s != '').join(',')))"
                  ".filter(s, s != '').join(',')"),
)

_TENANT = "namespaceObject.metadata.name"
# First in both policies: the API server reports the first validation that fails.
_SOME_TENANTS = (
    "variables.tenant != ''",
    f"'namespace ' + {_TENANT} + ' belongs to no tenant, so nothing in it may use the node pools: run it in the "
    "namespace of a tenant (cluster.tenants in the spec), or, for a cluster component the stack does not deploy, "
    "name the namespace in system_namespaces of the spec and run pulumi up'",
    "the namespace belongs to no tenant")
_ALLOWED_TEXT = "variables.allowed.join(', ')"
_HOW = (f"set spec.nodeSelector {POOL_LABEL}: <pool>, or a required node affinity whose every "
        f"nodeSelectorTerm has {POOL_LABEL} In [<pools>]")

# (expression that must hold, messageExpression when it does not, static message)
POLICY_VALIDATIONS: tuple[tuple[str, str, str], ...] = (
    _SOME_TENANTS,
    ("variables.tenant == '' || variables.allowed.size() > 0",
     f"'namespace ' + {_TENANT} + ' has no pools in its annotation {POOLS_ANNOTATION}, so none of its pods "
     "may be placed; the cluster layer sets it from the tenant spec: run pulumi up'",
     f"the namespace has no pools in its annotation {POOLS_ANNOTATION}"),
    ("variables.selected != '' || (variables.poolRequirements.size() > 0 && "
     "variables.poolRequirements.all(rs, rs.size() > 0))",
     f"'pods of tenant ' + {_TENANT} + ' must choose their node pools among ' + {_ALLOWED_TEXT} + ': {_HOW} "
     "(DaemonSets: use nodeSelector, their controller replaces required node affinity)'",
     f"pods of a tenant must choose their node pools: {_HOW}"),
    ("(variables.selected == '' || variables.selected in variables.allowed) && "
     "variables.poolRequirements.all(rs, rs.all(r, !has(r.values) || r.values.all(v, v in variables.allowed)))",
     f"'tenant ' + {_TENANT} + ' may not use pool ' + variables.forbidden + '; its pods may use ' + "
     f"{_ALLOWED_TEXT} + ' (spec.nodeSelector or required node affinity on {POOL_LABEL})'",
     "the pod names a node pool its tenant may not use"),
    (f"!has({_SPEC}.priorityClassName) || {_SPEC}.priorityClassName == variables.priorityClass",
     f"variables.priorityClass == '' ? 'tenant ' + {_TENANT} + ' has no priority class: leave "
     f"spec.priorityClassName unset (not ' + {_SPEC}.priorityClassName + ')' : 'tenant ' + "
     f"{_TENANT} + ' may only use priority class ' + variables.priorityClass + ' (or none), not ' + "
     f"{_SPEC}.priorityClassName",
     "the pod names a priority class other than its tenant's"),
    ("variables.rdmaWithoutDevice.size() == 0",
     "'a pod attaching an RDMA network must ask for its device in resources.limits of a container (' + "
     "variables.rdmaWithoutDevice.map(n, n.split('=')[0] + ': ' + n.split('=')[1] + ': 1').join(', ') + '): "
     "without it the pod gets the interface but no HCA, and its traffic falls back to TCP'",
     "a pod attaching an RDMA network must ask for its device"),
    ("variables.sharedOverOne.size() == 0",
     f"'a shared GPU ({SHARED_GPU}) is one replica of a time-sliced or MPS card: more than one per container "
     "buys no more of the card, and the device plugin refuses it at the node; ' + "
     "variables.sharedOverOne.join(', ') + ': ask for 1, or for a whole or MIG GPU'",
     "a container asks for more than one shared GPU"),
    ("variables.podQueue == '' || variables.podQueue == variables.queue",
     f"(variables.queue == '' ? 'tenant ' + {_TENANT} + ' has no Volcano queue' : 'tenant ' + {_TENANT} + "
     "' may only use Volcano queue ' + variables.queue) + ': the pod names ' + variables.podQueue + "
     f"' in its annotation {QUEUE_ANNOTATION}'",
     "the pod names a Volcano queue other than its tenant's"),
)

# The queue policy: the queue and priority class a PodGroup or Volcano job asks for, and whether an
# UPDATE leaves them as they were (objects made before the policy, or by Volcano's controller from an
# admitted job, update freely as long as they do not move).
QUEUE_POLICY_VARIABLES: tuple[tuple[str, str], ...] = (
    _OWNER,
    _QUEUE,
    _PRIORITY_CLASS,
    ("askedQueue", _field("object.spec", "queue")),
    ("askedClass", _field("object.spec", "priorityClassName")),
    ("queueKept", f"request.operation == 'UPDATE' && ({_field('oldObject.spec', 'queue')}) == variables.askedQueue"),
    ("classKept", f"request.operation == 'UPDATE' && "
                  f"({_field('oldObject.spec', 'priorityClassName')}) == variables.askedClass"),
)

_KIND = "object.kind"
QUEUE_POLICY_VALIDATIONS: tuple[tuple[str, str, str], ...] = (
    _SOME_TENANTS,
    ("variables.queueKept || variables.queue != ''",
     f"'tenant ' + {_TENANT} + ' has no Volcano queue, so it may not create a ' + {_KIND} + ' (Volcano would "
     "run it in its `default` queue, which no tenant may use): give the tenant a queue in the spec and run "
     "pulumi up'",
     "the tenant has no Volcano queue"),
    ("variables.queueKept || variables.queue == '' || variables.askedQueue == variables.queue",
     f"'tenant ' + {_TENANT} + ' may only use Volcano queue ' + variables.queue + ', not ' + "
     "(variables.askedQueue == '' ? 'none' : variables.askedQueue) + ': set spec.queue: ' + variables.queue + "
     f"' in the ' + {_KIND}",
     "the object names a Volcano queue other than its tenant's"),
    ("variables.classKept || variables.askedClass == '' || variables.askedClass == variables.priorityClass",
     f"(variables.priorityClass == '' ? 'tenant ' + {_TENANT} + ' has no priority class: leave "
     f"spec.priorityClassName unset' : 'tenant ' + {_TENANT} + ' may only use priority class ' + "
     "variables.priorityClass + ' (or none)') + ', not ' + variables.askedClass",
     "the object names a priority class other than its tenant's"),
)


def _policy(name: str, rules: list[Obj], variables: tuple[tuple[str, str], ...],
            validations: tuple[tuple[str, str, str], ...]) -> Obj:
    """A ValidatingAdmissionPolicy that fails closed: an evaluation error denies rather than admits."""
    return obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", name, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": rules},
        "variables": [{"name": name, "expression": expression} for name, expression in variables],
        "validations": [{"expression": expression, "messageExpression": message_expression,
                         "message": message, "reason": "Forbidden"}
                        for expression, message_expression, message in validations],
    })


# The built-in workloads whose pod template the pod policy checks: (API group, resource), all at v1.
WORKLOADS = (("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"), ("apps", "replicasets"),
             ("batch", "jobs"), ("batch", "cronjobs"))


def placement_policy() -> Obj:
    """The ValidatingAdmissionPolicy: at CREATE, a tenant pod must pin itself to pools, name only pools
    its tenant may use, and use its tenant's priority class or none (else a `batch` pod could name
    `inference-high` and preempt inference). Reads the namespace's annotations, so one policy serves
    every tenant; a pod's Volcano queue annotation, if any, must name its tenant's queue. The pod
    templates of the built-in workloads are held to the same rules at CREATE and UPDATE, so a
    Deployment that could never start a pod is refused at once instead of failing pod by pod."""
    rules: list[Obj] = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    rules += [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": [resource]}
              for group, resource in WORKLOADS]
    return _policy(POLICY_NAME, rules, POLICY_VARIABLES, POLICY_VALIDATIONS)


def queue_policy() -> Obj:
    """The ValidatingAdmissionPolicy for Volcano's PodGroups and jobs in tenant namespaces: its queue is
    the tenant's, its priority class the tenant's or none. It runs after Volcano's mutating webhooks, so
    a PodGroup's queue is already the one its namespace names; a job's `default` (what Volcano's job
    webhook gives a job without one) is refused with the queue to set."""
    rules: list[Obj] = [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                         "resources": [resource]}
                        for group, resource in (("scheduling.volcano.sh", "podgroups"), ("batch.volcano.sh", "jobs"))]
    return _policy(QUEUE_POLICY_NAME, rules, QUEUE_POLICY_VARIABLES, QUEUE_POLICY_VALIDATIONS)


# Set by the API server on every namespace (Kubernetes 1.22+): a selector can name namespaces by it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def binding(policy: Obj, exempt: Iterable[str]) -> Obj:
    """Binds a policy, denying, to every namespace but EXEMPT (the system's: concerns.system_namespaces).
    A namespace of no tenant is held too, and its pods refused: a stray workload in `default` or in a
    namespace someone made by hand would otherwise reach any pool whose taints it tolerates."""
    name = policy["metadata"]["name"]
    return obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", name, spec={
        "policyName": name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": sorted(set(exempt))}]}},
    })


def policies() -> list[Obj]:
    """The tenants' admission policies, unbound (concerns.py binds them once every namespace is known)."""
    return [placement_policy(), queue_policy()]


def build(view: Resolved) -> Concern:
    cluster = view.env.cluster
    objects: list[Obj] = [priority_class(name, spec) for name, spec in cluster.priority_classes.items()]
    for name, tenant in cluster.tenants.items():
        rdma = {nad_name(pool): rdma_resource(pool) for pool in rdma_pools(view.env) if pool.name in tenant.pools}
        objects += [namespace(name, tenant, cluster.kube_minor, rdma), resource_quota(name, tenant),
                    limit_range(name, tenant)]
    return Concern("tenancy", sorted(objects + policies(), key=key))
