"""Scheduling and admission proofs on a cluster the stack was applied to (issue 8, item 5).

Probe pods per tenant, chosen from the environment (no tenant or pool is named here): each probe says
what it expects, creates its pods through the API, reads what the API server, the scheduler and the
controllers did (kwok stands in for the kubelets: pods become Running, deletions finish) and removes its
pods again. A probe returns a ProbeResult whose `detail` names the pods and where they landed, or why it
failed; each one fails when the thing it proves is broken (tests/live show one sabotage per group).

    no_gpu_without_toleration   a pod without the GPU pool's tolerations never lands on a GPU node
    mig_lands_on_mig_pool       a pod asking a MIG profile lands on the pool that advertises it
    foreign_pool_refused        a pod aimed at a pool its tenant may not use is refused at admission
    limit_range_defaults        a pod without requests gets the tenant's LimitRange defaults
    over_quota_refused          a pod over its tenant's quota is refused with the quota's message
    preemption                  when the pool is full, the higher class preempts pods of the lowest one
    custom_resources            Volcano Queues and NetworkAttachmentDefinitions are checked against the
                                CRD schemas the project installs (a valid one accepted, a broken one refused)
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from infra.cluster.nodes import POOL_LABEL, pool_taints
from infra.cluster.objects import LABEL_PREFIX, SYSTEM_NAMESPACE, Obj
from infra.knowledge.units import parse_quantity
from infra.live.kubeapi import ApiError, Kube, wait_for
from infra.model.capacity import host_capacity
from infra.model.resolve import Resolved
from infra.spec.loader import Pool
from infra.spec.models import Tenant

PROBE_LABEL = f"{LABEL_PREFIX}/probe"
FILLER_NAMESPACE = SYSTEM_NAMESPACE
"""Where the preemption probe's low-priority filler pods run: the stack's own namespace, which the tenant
policies exempt, so no tenant's quota or placement rule stands in the way of filling the pool."""
IMAGE = "registry.k8s.io/pause:3.10"
SCHEDULE_TIMEOUT = 60.0


@dataclass(frozen=True)
class ProbeResult:
    name: str
    ok: bool
    detail: str
    placed: int = 0  # probe pods the scheduler bound


# --------------------------------------------------------------------------------------- helpers


def probe_pod(name: str, namespace: str, *, pools: list[str] | None = None, node_selector_pool: str | None = None,
              tolerations: list[Obj] | None = None, resources: Obj | None = None,
              priority_class: str | None = None) -> Obj:
    """A pod that passes Pod Security `restricted` (the strictest tier), pinned by nodeSelector to one pool
    or by required node affinity to several; the image is never pulled (no kubelet)."""
    container: Obj = {"name": "probe", "image": IMAGE,
                      "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    if resources is not None:
        container["resources"] = resources
    spec: Obj = {"containers": [container], "automountServiceAccountToken": False,
                 "terminationGracePeriodSeconds": 0,
                 "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                     "seccompProfile": {"type": "RuntimeDefault"}}}
    if node_selector_pool is not None:
        spec["nodeSelector"] = {POOL_LABEL: node_selector_pool}
    if pools is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": pools}]}]}}}
    if tolerations:
        spec["tolerations"] = tolerations
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {PROBE_LABEL: "true"}}, "spec": spec}


def tolerations_of(pool: Pool) -> list[Obj]:
    return [{k: v for k, v in {"key": t["key"], "operator": "Equal" if t.get("value") else "Exists",
                               "value": t.get("value"), "effect": t["effect"]}.items() if v is not None}
            for t in pool_taints(pool)]


def create_pod(kube: Kube, pod: Obj) -> Obj:
    created: Obj = kube.create(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)
    return created


def placement(kube: Kube, namespace: str, name: str, timeout: float = SCHEDULE_TIMEOUT) -> tuple[str, str]:
    """("bound", node) once the scheduler binds the pod; ("unschedulable", the scheduler's message) once it
    has tried and failed; TimeoutError if it does neither."""

    def probe() -> tuple[str, str] | None:
        pod = kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if pod["spec"].get("nodeName"):
            return "bound", str(pod["spec"]["nodeName"])
        for condition in pod["status"].get("conditions", []):
            if condition["type"] == "PodScheduled" and condition["status"] == "False" and \
                    condition.get("reason") == "Unschedulable":
                return "unschedulable", str(condition.get("message", ""))
        return None

    return wait_for(f"pod {namespace}/{name} scheduled or found unschedulable", probe, timeout)


def delete_probe_pods(kube: Kube, namespaces: list[str]) -> None:
    """Every probe pod of those namespaces deleted, and gone (kwok finishes the deletion)."""
    for namespace in namespaces:
        kube.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?labelSelector={PROBE_LABEL}%3Dtrue",
                  {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})

    def gone() -> bool | None:
        for namespace in namespaces:
            if kube.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={PROBE_LABEL}%3Dtrue")["items"]:
                return None
        return True

    wait_for("probe pods deleted", gone, timeout=60)


def _refusal(kube: Kube, pod: Obj) -> str | None:
    """The API server's message when it refuses the pod; None (and the pod deleted again) when it admits it."""
    try:
        create_pod(kube, pod)
    except ApiError as error:
        return error.message
    delete_probe_pods(kube, [pod["metadata"]["namespace"]])
    return None


def _pools_of(view: Resolved, tenant: Tenant) -> list[Pool]:
    return [view.env.pools[p] for p in tenant.pools if p in view.env.pools]


def _nodes_of(view: Resolved, pool: Pool) -> list[str]:
    return [h.name for h in pool.hosts if h.name in view.hosts]


def _advertised(view: Resolved, pool: Pool) -> dict[str, int]:
    """The extended GPU resources the pool's nodes advertise in total (as tools/make_nodes.py registers them)."""
    total: dict[str, int] = {}
    for host in view.of_pool(pool):
        if host.machine is None:
            continue
        for resource, count in host_capacity(view.env.cluster, pool, host.machine).gpu_resources.items():
            total[resource] = total.get(resource, 0) + count
    return total


def _is_mig(pool: Pool) -> bool:
    return pool.vars.is_gpu and pool.vars.sharing.mode == "mig"


def _mig_choice(view: Resolved) -> tuple[str, Tenant, Pool, str] | None:
    """(tenant, its MIG pool, the profile whose pool total is smallest) for the MIG and preemption probes."""
    for name, tenant in sorted(view.env.cluster.tenants.items()):
        for pool in _pools_of(view, tenant):
            if _is_mig(pool):
                advertised = {r: n for r, n in _advertised(view, pool).items() if r.startswith("nvidia.com/mig-")}
                if advertised:
                    resource = min(sorted(advertised), key=lambda r: advertised[r])
                    return name, tenant, pool, resource
    return None


def _first_tenant(view: Resolved, fits: Callable[[Tenant], bool]) -> tuple[str, Tenant] | None:
    """The first tenant (by name) that `fits`."""
    return next(((n, t) for n, t in sorted(view.env.cluster.tenants.items()) if fits(t)), None)


def _not_applicable(name: str, why: str) -> ProbeResult:
    return ProbeResult(name, False, f"not applicable to this environment: {why}")


# ------------------------------------------------------------------------------------------ probes


def gpu_probe_choice(view: Resolved) -> tuple[str, Tenant, list[Pool], list[Pool]] | None:
    """(tenant, its tainted GPU pools, its non-GPU pools) for the first tenant that may use both."""
    found = _first_tenant(view, lambda t: any(p.vars.is_gpu and pool_taints(p) for p in _pools_of(view, t))
                          and any(not p.vars.is_gpu for p in _pools_of(view, t)))
    if found is None:
        return None
    name, tenant = found
    pools = _pools_of(view, tenant)
    return (name, tenant, [p for p in pools if p.vars.is_gpu and pool_taints(p)],
            [p for p in pools if not p.vars.is_gpu])


def no_gpu_without_toleration(kube: Kube, view: Resolved) -> ProbeResult:
    """A tenant that may use a tainted GPU pool and other pools: a pod aimed at the GPU pool without its
    tolerations stays unscheduled on the taint; pods allowed on all its pools, tolerating only the
    non-GPU pools' taints, land on non-GPU nodes, one per non-GPU node and one more."""
    name = "no-gpu-without-toleration"
    found = gpu_probe_choice(view)
    if found is None:
        return _not_applicable(name, "no tenant may use both a tainted GPU pool and a non-GPU pool")
    tenant_name, tenant, gpu, other = found
    pools = _pools_of(view, tenant)
    try:
        aimed = create_pod(kube, probe_pod("probe-gpu-untolerated", tenant_name, node_selector_pool=gpu[0].name))
        outcome, where = placement(kube, tenant_name, aimed["metadata"]["name"])
        if outcome == "bound" or "untolerated taint" not in where:
            return ProbeResult(name, False, f"{tenant_name}: a pod aimed at {gpu[0].name} without tolerations was "
                                            f"{outcome} ({where}); expected unschedulable on its taint")
        tolerated = [t for p in other for t in tolerations_of(p)]
        count = sum(len(_nodes_of(view, p)) for p in other) + 1
        gpu_nodes = {n for p in gpu for n in _nodes_of(view, p)}
        landed = []
        for i in range(count):
            pod = create_pod(kube, probe_pod(f"probe-any-pool-{i}", tenant_name, pools=[p.name for p in pools],
                                             tolerations=tolerated))
            landed.append(placement(kube, tenant_name, pod["metadata"]["name"]))
        wrong = [f"{o}: {w}" for o, w in landed if o != "bound" or w in gpu_nodes]
        if wrong:
            return ProbeResult(name, False, f"{tenant_name}: pods without GPU tolerations: {'; '.join(wrong)}")
        return ProbeResult(name, True, f"{tenant_name}: untolerated pod refused by {gpu[0].name}'s taint; "
                                       f"{count} pods on {sorted({w for _, w in landed})}", placed=count)
    finally:
        delete_probe_pods(kube, [tenant_name])


def mig_lands_on_mig_pool(kube: Kube, view: Resolved) -> ProbeResult:
    name = "mig-lands-on-mig-pool"
    choice = _mig_choice(view)
    if choice is None:
        return _not_applicable(name, "no tenant may use a MIG pool")
    tenant_name, tenant, pool, resource = choice
    one = {"requests": {resource: "1"}, "limits": {resource: "1"}}
    pod = probe_pod("probe-mig", tenant_name, node_selector_pool=pool.name, tolerations=tolerations_of(pool),
                    resources=one, priority_class=tenant.priority_class)
    try:
        create_pod(kube, pod)
        outcome, where = placement(kube, tenant_name, "probe-mig")
        if outcome != "bound" or where not in _nodes_of(view, pool):
            return ProbeResult(name, False, f"{tenant_name}: a pod asking {resource} was {outcome} ({where}); "
                                            f"expected a node of {pool.name}")
        return ProbeResult(name, True, f"{tenant_name}: {resource} pod on {where} ({pool.name})", placed=1)
    finally:
        delete_probe_pods(kube, [tenant_name])


def foreign_pool_refused(kube: Kube, view: Resolved) -> ProbeResult:
    name = "foreign-pool-refused"
    found = _first_tenant(view, lambda t: any(p not in t.pools for p in view.env.pools))
    if found is None:
        return _not_applicable(name, "every tenant may use every pool")
    tenant_name, tenant = found
    pool = view.env.pools[sorted(p for p in view.env.pools if p not in tenant.pools)[0]]
    message = _refusal(kube, probe_pod("probe-foreign-pool", tenant_name, node_selector_pool=pool.name,
                                       tolerations=tolerations_of(pool)))
    return _refused_with(name, f"a {tenant_name} pod aimed at {pool.name}", message,
                         f"tenant {tenant_name} may not use pool {pool.name}")


def _refused_with(name: str, pod: str, message: str | None, expected: str) -> ProbeResult:
    """The probe's result for a pod the API server must refuse with a message containing EXPECTED."""
    if message is None or expected not in message:
        return ProbeResult(name, False, f"{pod}: {'admitted' if message is None else 'refused: ' + message}; "
                                        f"expected refusal '{expected}'")
    return ProbeResult(name, True, f"refused: {message}")


def limit_range_defaults(kube: Kube, view: Resolved) -> ProbeResult:
    name = "limit-range-defaults"
    found = _first_tenant(view, lambda t: bool(t.limit_range and t.limit_range.default_request))
    if found is None or found[1].limit_range is None:
        return _not_applicable(name, "no tenant has LimitRange default requests")
    tenant_name, tenant = found
    assert tenant.limit_range is not None
    pool = _pools_of(view, tenant)[0]
    try:
        created = create_pod(kube, probe_pod("probe-no-requests", tenant_name, node_selector_pool=pool.name,
                                             tolerations=tolerations_of(pool)))
    except ApiError as error:
        return ProbeResult(name, False, f"{tenant_name}: a pod without requests was refused: {error.message}")
    try:
        got = created["spec"]["containers"][0].get("resources", {})
        wrong = []
        for field, want in (("requests", tenant.limit_range.default_request), ("limits", tenant.limit_range.default)):
            for resource, quantity in want.items():
                live = got.get(field, {}).get(resource)
                if live is None or parse_quantity(str(live)) != parse_quantity(str(quantity)):
                    wrong.append(f"{field}.{resource}: {live} (want {quantity})")
        if wrong:
            return ProbeResult(name, False, f"{tenant_name}: a pod without requests got {'; '.join(wrong)}")
        outcome, where = placement(kube, tenant_name, "probe-no-requests")
        return ProbeResult(name, True, f"{tenant_name}: defaults {got} applied; pod {outcome} on {where}",
                           placed=int(outcome == "bound"))
    finally:
        delete_probe_pods(kube, [tenant_name])


def over_quota_refused(kube: Kube, view: Resolved) -> ProbeResult:
    name = "over-quota-refused"
    found = _first_tenant(view, lambda t: "requests.cpu" in t.quota
                          and not (t.limit_range and "cpu" in t.limit_range.max))
    if found is None:
        return _not_applicable(name, "no tenant has a requests.cpu quota without a LimitRange cpu maximum")
    tenant_name, tenant = found
    pool = _pools_of(view, tenant)[0]
    over = parse_quantity(str(tenant.quota["requests.cpu"])) + Decimal(1)
    cpu = f"{over.normalize():f}"
    message = _refusal(kube, probe_pod("probe-over-quota", tenant_name, node_selector_pool=pool.name,
                                       tolerations=tolerations_of(pool),
                                       resources={"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}))
    return _refused_with(name, f"a {tenant_name} pod requesting cpu {cpu}", message,
                         f"exceeded quota: {tenant_name}, requested: requests.cpu={cpu}")


def preemption(kube: Kube, view: Resolved, high_priority: bool = True) -> ProbeResult:
    """Fill the MIG pool's smallest profile with pods of the lowest PriorityClass (in the stack's own
    namespace), then ask for it from the MIG tenant with its class: the scheduler must preempt a filler
    and bind the tenant's pod. `high_priority=False` leaves the class out (the broken case)."""
    name = "preemption"
    choice = _mig_choice(view)
    classes = sorted(view.env.cluster.priority_classes.items(), key=lambda item: item[1].value)
    if choice is None or not classes:
        return _not_applicable(name, "no tenant may use a MIG pool, or no PriorityClass is declared")
    tenant_name, tenant, pool, resource = choice
    low = classes[0][0]
    high = tenant.priority_class
    if high is None or view.env.cluster.priority_classes[high].value <= classes[0][1].value:
        return _not_applicable(name, f"tenant {tenant_name}'s class is not above {low}")
    one = {"requests": {resource: "1", "cpu": "10m", "memory": "16Mi"},
           "limits": {resource: "1", "cpu": "10m", "memory": "16Mi"}}
    total = _advertised(view, pool)[resource]
    try:
        fillers = [f"filler-{i}" for i in range(total)]
        for filler in fillers:
            create_pod(kube, probe_pod(filler, FILLER_NAMESPACE, node_selector_pool=pool.name,
                                       tolerations=tolerations_of(pool), resources=one, priority_class=low))
        for filler in fillers:
            outcome, where = placement(kube, FILLER_NAMESPACE, filler)
            if outcome != "bound":
                return ProbeResult(name, False, f"filler {filler} ({low}) was not placed: {where}")
        _wait_running(kube, FILLER_NAMESPACE, fillers)
        pod = probe_pod("probe-preemptor", tenant_name, node_selector_pool=pool.name,
                        tolerations=tolerations_of(pool), resources={"requests": {resource: "1"},
                                                                     "limits": {resource: "1"}},
                        priority_class=high if high_priority else None)
        create_pod(kube, pod)
        began = time.monotonic()
        while time.monotonic() < began + SCHEDULE_TIMEOUT:
            live = kube.get(f"/api/v1/namespaces/{tenant_name}/pods/probe-preemptor")
            refused = [c for c in live["status"].get("conditions", []) if c["type"] == "PodScheduled"
                       and c.get("reason") == "Unschedulable"]
            if refused and not live["status"].get("nominatedNodeName") and time.monotonic() > began + 10:
                break  # tried, found no victim to preempt, and nominated no node: it stays pending
            if live["spec"].get("nodeName"):
                left = {p["metadata"]["name"] for p in kube.get(
                    f"/api/v1/namespaces/{FILLER_NAMESPACE}/pods")["items"] if "deletionTimestamp" not in p["metadata"]}
                evicted = sorted(set(fillers) - left)
                return ProbeResult(name, True, f"{tenant_name} ({high}) pod asking {resource} preempted {evicted} "
                                               f"({low}) and landed on {live['spec']['nodeName']}", placed=1)
            time.sleep(0.25)
        outcome, where = placement(kube, tenant_name, "probe-preemptor", timeout=1)
        return ProbeResult(name, False, f"{tenant_name} pod ({live['spec'].get('priorityClassName')}, priority "
                                        f"{live['spec'].get('priority')}) asking {resource} on a full {pool.name}: "
                                        f"{outcome} ({where}); no {low} pod was preempted")
    finally:
        delete_probe_pods(kube, [tenant_name, FILLER_NAMESPACE])


def _wait_running(kube: Kube, namespace: str, names: list[str]) -> None:
    def running() -> bool | None:
        pods = kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
        return True if all(phases.get(n) == "Running" for n in names) else None

    wait_for(f"pods {names} Running", running, timeout=SCHEDULE_TIMEOUT)


BROKEN_FIELDS: dict[str, tuple[list[str], Any]] = {
    "Queue": (["spec", "weight"], "heavy"),  # an integer in Volcano's schema
    "NetworkAttachmentDefinition": (["spec", "config"], {"cniVersion": "0.3.1"}),  # a JSON string in Multus'
}


def custom_resources(kube: Kube, declared: list[Obj]) -> ProbeResult:
    """Per kind of BROKEN_FIELDS the stack declares: a copy of a declared object under a new name is accepted
    (server-side dry run), and the same copy with a field of the wrong type is refused by the CRD's schema."""
    name = "custom-resources"
    checked, wrong = [], []
    for kind, (path, bad) in BROKEN_FIELDS.items():
        samples = [o for o in declared if o["kind"] == kind]
        if not samples:
            continue
        good = copy.deepcopy(samples[0])
        good["metadata"] = {k: v for k, v in good["metadata"].items() if k in ("namespace", "labels")}
        good["metadata"]["name"] = "probe-" + kind.lower()
        collection = kube.path(good, name=False)
        try:
            kube.create(collection, good, dry_run=True)
        except ApiError as error:
            wrong.append(f"a valid {kind} was refused: {error.message}")
            continue
        broken = copy.deepcopy(good)
        target = broken
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = bad
        try:
            kube.create(collection, broken, dry_run=True)
            wrong.append(f"a {kind} with {'.'.join(path)}={bad!r} was accepted")
        except ApiError as error:
            checked.append(f"{kind}: valid accepted, {'.'.join(path)}={bad!r} refused ({error.message})")
    if wrong or not checked:
        return ProbeResult(name, False, "; ".join(wrong) or "the stack declares none of " + ", ".join(BROKEN_FIELDS))
    return ProbeResult(name, True, "; ".join(checked))


POD_PROBES: tuple[Callable[[Kube, Resolved], ProbeResult], ...] = (
    no_gpu_without_toleration, mig_lands_on_mig_pool, foreign_pool_refused, limit_range_defaults,
    over_quota_refused, preemption,
)


def ready_for_pods(kube: Kube, view: Resolved, timeout: float = 60) -> None:
    """Each tenant namespace has its default ServiceAccount (ServiceAccount admission needs it) and its quota
    counted (until the controller manager fills status.hard, quota admission refuses every pod)."""

    def ready() -> bool | None:
        for tenant in view.env.cluster.tenants:
            if not kube.exists(f"/api/v1/namespaces/{tenant}/serviceaccounts/default"):
                return None
            for quota in kube.get(f"/api/v1/namespaces/{tenant}/resourcequotas")["items"]:
                if not quota.get("status", {}).get("hard"):
                    return None
        return True

    wait_for("tenant namespaces ready for pods", ready, timeout)


def run_all(kube: Kube, view: Resolved, declared: list[Obj]) -> list[ProbeResult]:
    ready_for_pods(kube, view)
    return [probe(kube, view) for probe in POD_PROBES] + [custom_resources(kube, declared)]
