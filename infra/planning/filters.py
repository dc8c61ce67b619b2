"""What kube-scheduler reads of one pod and one node, and how it words a refusal.

A pod's requests as the scheduler sums them (resourcehelper.PodRequests) and counts them for scoring,
whether its tolerations tolerate a node's taint (TaintToleration), whether a node's labels and name
match its nodeSelector and required node affinity (NodeAffinity), and the reasons and FitError message
the scheduler prints. Plain objects in, plain values out: infra.planning.scheduler builds on these.
"""

from __future__ import annotations

from collections import Counter
from decimal import ROUND_CEILING
from functools import lru_cache
from typing import Any

from infra.knowledge.units import parse_quantity

Obj = dict[str, Any]

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_VOLUMES = "node(s) didn't find available persistent volumes to bind"
REASON_PODS = "Too many pods"
REASON_TAINT = "node(s) had untolerated taint(s)"  # since 1.32 one reason, whatever the taint
# DefaultPreemption's reasons, per node, when its dry run finds nothing to evict (kube-scheduler 1.34)
REASON_NO_VICTIMS = "No preemption victims found for incoming pod"
REASON_PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
# DynamicResources' PostFilter, which 1.34 runs before DefaultPreemption (DRA is on by default), for a pod with no
# ResourceClaim: its reason comes first in every message of an unschedulable pod
REASON_NO_CLAIMS = "no new claims to deallocate"

def no_nodes_message(nodes: int, reasons: Counter[str], post_filter: str = "") -> str:
    """kube-scheduler's FitError: "0/9 nodes are available: 2 Insufficient cpu, 7 node(s) had ...", then
    what the PostFilter plugins said (post_filter_message)."""
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{nodes} nodes are available: {', '.join(histogram)}." + (f" {post_filter}" if post_filter else "")


def post_filter_message(policy: str | None, nodes: int, without_victims: int) -> str:
    """What the PostFilter plugins say when none helps, their reasons joined by ", " in the profile's order:
    DynamicResources has no claim to deallocate; DefaultPreemption evicts nothing - a pod with preemptionPolicy
    Never is not eligible, otherwise its dry run ran on the nodes that failed only for want of resources the
    node has (WITHOUT_VICTIMS of them, none holding a pod of lower priority) and the others are not helped."""
    if policy == "Never":
        return f"{REASON_NO_CLAIMS}, preemption: not eligible due to preemptionPolicy=Never."
    reasons = Counter({REASON_NO_VICTIMS: without_victims, REASON_PREEMPTION_NOT_HELPFUL: nodes - without_victims})
    return f"{REASON_NO_CLAIMS}, preemption: " + no_nodes_message(nodes, +reasons)


# ---------------------------------------------------------------- quantities


@lru_cache(maxsize=4096)
def amount_of(resource: str, quantity: str) -> int:
    """A quantity in the scheduler's integer units: millicores for cpu, else the value rounded up."""
    value = parse_quantity(quantity)
    if resource == "cpu":
        value *= 1000
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def amounts_of(resources: dict[str, Any] | None) -> dict[str, int]:
    return {name: amount_of(name, str(value)) for name, value in (resources or {}).items()}


def pod_requests(pod: Obj) -> dict[str, int]:
    """What the pod asks of a node: its containers' requests summed, at least each init container's,
    plus its overhead (resourcehelper.PodRequests)."""
    spec = pod.get("spec", {})
    total: Counter[str] = Counter()
    for container in spec.get("containers", []):
        total.update(amounts_of(container.get("resources", {}).get("requests")))
    for container in spec.get("initContainers", []):
        for name, value in amounts_of(container.get("resources", {}).get("requests")).items():
            total[name] = max(total[name], value)
    total.update(amounts_of(spec.get("overhead")))
    return {name: value for name, value in total.items() if value}


def non_zero_request(pod: Obj, resource: str, default: int) -> int:
    """The scheduler's non-zero request for scoring: a container without a request counts `default`."""
    total = 0
    for container in pod.get("spec", {}).get("containers", []):
        requests = container.get("resources", {}).get("requests") or {}
        total += amount_of(resource, str(requests[resource])) if resource in requests else default
    return total


# ---------------------------------------------------------------- filters on labels and taints


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        operator = toleration.get("operator", "Equal")
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def requirement(labels: dict[str, str], expression: Obj) -> bool:
    key, operator, values = str(expression.get("key")), expression.get("operator"), expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def matches_term(labels: dict[str, str], name: str, term: Obj) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches nothing
    return (all(requirement(labels, e) for e in expressions)
            and all(requirement({"metadata.name": name}, f) for f in fields))


def matches(pod_spec: Obj, labels: dict[str, str], name: str) -> bool:
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    return any(matches_term(labels, name, term) for term in required.get("nodeSelectorTerms") or [])


def selector_keys(pod_spec: Obj) -> tuple[set[str], bool]:
    """The node label keys a pod's selectors read, and whether they read the node's name."""
    keys = set((pod_spec.get("nodeSelector") or {}).keys())
    by_name = False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution")) or {}
    for term in required.get("nodeSelectorTerms") or []:
        keys.update(e.get("key") for e in term.get("matchExpressions") or [])
        by_name = by_name or bool(term.get("matchFields"))
    return keys, by_name
