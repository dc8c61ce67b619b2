"""fit's own objects on a live cluster: the real API server admits them and the real kube-scheduler places them.

The Nodes, ResourceQuotas, the pinned agent pods and the workload pods `fit` builds for an environment
(infra.planning.fit.inputs) are created on the local control plane as they are, the PriorityClasses as the
cluster layer renders them. Pods are created one at a time, in fit's order (priority first, then as
declared), and each is decided - bound, or marked unschedulable with the scheduler's message - before the
next, so the real scheduler sees the same sequence fit simulates. kwok stands in for the kubelets: it keeps
the Nodes Ready and runs the pods; nothing else differs from a cluster's own path. A gang (pods naming a
Volcano PodGroup) is created whole - its pods, then its PodGroup (in the queue Volcano's podgroup mutation
would give it, as fit writes it) - and decided whole by vc-scheduler, which `replay` then needs
running (infra.live.volcano, volcano=True; the cluster layer's Queues are created too). Volumes need a
provisioner, which the local control plane has not: `replay` refuses inputs with claims.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from infra.cluster.scheduling import queues
from infra.cluster.tenancy import priority_class
from infra.knowledge.units import parse_quantity
from infra.live.kubeapi import ApiError, Kube, wait_for
from infra.live.volcano import QUEUES, VOLCANO_API
from infra.model.resolve import resolve
from infra.planning.fit import Inputs
from infra.planning.scheduler import GROUP_ANNOTATION, key_of
from infra.spec import Environment

Obj = dict[str, Any]
AGENTS = "replay-agents"  # the namespace of the pinned agent pods
_MERGE = "application/merge-patch+json"


@dataclass
class Replayed:
    """What the live cluster did with each pod, keyed "namespace/name" as fit keys them."""

    bound: dict[str, str] = field(default_factory=dict)  # pod -> node
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod -> the scheduler's first message
    refused: dict[str, str] = field(default_factory=dict)  # pod -> the API server's message


def replay(kube: Kube, env: Environment, built: Inputs, timeout: float = 60, volcano: bool = False) -> Replayed:
    """Create BUILT on the cluster behind KUBE and return where each pod went; `clear` undoes it. VOLCANO: Volcano's
    scheduler runs there, so gangs can be replayed."""
    if built.objects.claims:
        raise ValueError("replay needs a provisioner for volumes: give it inputs without claims")
    if built.objects.pod_groups and not volcano:
        raise ValueError("replay needs Volcano for gangs: start infra.live.volcano and pass volcano=True")
    if left := [node["metadata"]["name"] for node in kube.get("/api/v1/nodes")["items"]]:
        raise ValueError(f"replay wants a cluster without Nodes (they would count in every message); it has {left}")
    for name, spec in env.cluster.priority_classes.items():
        kube.create("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, spec))
    for item in built.nodes:
        register_node(kube, item, timeout)
    for namespace in sorted({AGENTS, *(o["metadata"]["namespace"] for o in [*built.objects.quotas,
                                                                             *built.objects.pods])}):
        kube.create_namespace(namespace, timeout)
    for quota in built.objects.quotas:
        collection = f"/api/v1/namespaces/{quota['metadata']['namespace']}/resourcequotas"
        kube.create(collection, quota)
        counted = f"{collection}/{quota['metadata']['name']}"
        # ResourceQuota admission refuses every pod until the quota controller has written status.hard
        wait_for(f"quota {key_of(quota)} counted", partial(_counted, kube, counted), timeout)
    for host, agent in built.agents:
        kube.create(f"/api/v1/namespaces/{AGENTS}/pods", _pinned(agent, host))
    if volcano:
        for queue in queues(resolve(env)):
            kube.create(QUEUES, queue)
    groups = {key_of(group): group for group in built.objects.pod_groups}
    out = Replayed()
    done: set[str] = set()
    for pod in built.objects.pods:
        group = _group_of(pod)
        if group is None:
            _decide(kube, [pod], out, timeout)
        elif group not in done:
            done.add(group)
            members = [p for p in built.objects.pods if _group_of(p) == group]
            _decide(kube, members, out, timeout, groups[group])
    return out


def _decide(kube: Kube, pods: list[Obj], out: Replayed, timeout: float, group: Obj | None = None) -> None:
    """Create PODS (then their PodGroup GROUP, so that Volcano first sees the gang whole) and wait until the
    scheduler has decided on each that the API server admitted."""
    created = []
    for pod in pods:
        try:
            kube.create(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", _admissible(pod))
            created.append(pod)
        except ApiError as error:
            out.refused[key_of(pod)] = error.message
    if group is not None:
        kube.create(f"{VOLCANO_API}/namespaces/{group['metadata']['namespace']}/podgroups", group)
    for pod in created:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        bound, message = wait_for(f"the scheduler's decision on {namespace}/{name}", partial(_decision, kube, path),
                                  timeout)
        if bound:
            out.bound[key_of(pod)] = bound
        else:
            out.unschedulable[key_of(pod)] = message


def _group_of(pod: Obj) -> str | None:
    name = (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)
    return f"{pod['metadata']['namespace']}/{name}" if name else None


def clear(kube: Kube, env: Environment, built: Inputs, timeout: float = 120) -> None:
    """Remove what `replay` created: the namespaces (and every pod, before a Node of the same name can return),
    the Nodes, the PriorityClasses."""
    namespaces = {AGENTS, *(o["metadata"]["namespace"] for o in [*built.objects.quotas, *built.objects.pods])}
    for namespace in namespaces:
        kube.delete(f"/api/v1/namespaces/{namespace}", grace_seconds=0)
    wait_for("the replayed namespaces gone", lambda: True if not any(
        kube.exists(f"/api/v1/namespaces/{namespace}") for namespace in namespaces) else None, timeout)
    for node in built.nodes:
        kube.delete(f"/api/v1/nodes/{node['metadata']['name']}")
    for name in env.cluster.priority_classes:
        kube.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
    for queue in queues(resolve(env)):  # 404 where Volcano's CRDs are not installed
        kube.delete(f"{QUEUES}/{queue['metadata']['name']}")


def register_node(kube: Kube, node: Obj, timeout: float = 60) -> None:
    """A Node as fit built it, Ready with fit's allocatable (kwok writes its own, cpu 1k, when it first sees a Node
    without one, so the status is written again until it holds)."""
    kube.create("/api/v1/nodes", {key: value for key, value in node.items() if key != "status"})
    path = f"/api/v1/nodes/{node['metadata']['name']}"
    status = {"capacity": node["status"].get("capacity") or {}, "allocatable": node["status"]["allocatable"]}

    def settled() -> bool | None:
        live = kube.get(path)["status"]
        if not any(c["type"] == "Ready" and c["status"] == "True" for c in live.get("conditions", [])):
            return None
        if _holds(live.get("allocatable") or {}, status["allocatable"]):
            return True
        kube.call("PATCH", f"{path}/status", {"status": status}, _MERGE)
        return None

    wait_for(f"{path} Ready with fit's allocatable", settled, timeout)


def _holds(live: Obj, want: Obj) -> bool:
    """LIVE has every quantity of WANT (a control-plane Node, which fit gives none, keeps kwok's)."""
    return all(k in live and parse_quantity(str(live[k])) == parse_quantity(str(want[k])) for k in want)


def _admissible(pod: Obj) -> Obj:
    """The pod as a user creates it: the Priority admission plugin computes spec.priority and preemptionPolicy from
    the class and refuses a pod that sets them itself."""
    spec = {key: value for key, value in pod["spec"].items() if key not in ("priority", "preemptionPolicy")}
    return {**pod, "spec": {**spec, "automountServiceAccountToken": False}}


def _pinned(agent: Obj, node: str) -> Obj:
    """An agent pod fit pins to NODE, reduced to what placement counts: its containers' requests (a pause
    image each), bound by name as the DaemonSet controller binds its pods."""
    spec = agent["spec"]

    def reduced(containers: Iterable[Obj]) -> list[Obj]:
        return [{"name": c["name"], "image": "registry.k8s.io/pause:3.10", "resources": c.get("resources") or {}}
                for c in containers]

    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": agent["metadata"]["name"], "namespace": AGENTS},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}], "automountServiceAccountToken": False,
                     "priorityClassName": spec.get("priorityClassName", "system-node-critical"),
                     "initContainers": reduced(spec.get("initContainers") or []),
                     "containers": reduced(spec["containers"])}}


def _counted(kube: Kube, path: str) -> bool | None:
    return True if kube.get(path).get("status", {}).get("hard") else None


def _decision(kube: Kube, path: str) -> tuple[str, str] | None:
    """(node, "") once the pod at PATH is bound, ("", message) once the scheduler has given up on it, else None."""
    pod = kube.get(path)
    if pod["spec"].get("nodeName"):
        return pod["spec"]["nodeName"], ""
    for condition in pod.get("status", {}).get("conditions", []):
        # vc-scheduler marks a gang member that would fit "Schedulable" (still unbound) when its gang does not
        if condition["type"] == "PodScheduled" and condition["status"] == "False" and \
                condition.get("reason") in ("Unschedulable", "Schedulable"):
            return "", str(condition.get("message", ""))
    return None
