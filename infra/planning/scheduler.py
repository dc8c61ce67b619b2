"""kube-scheduler's placement over plain Kubernetes objects: where each admitted pod is bound, or why not.

Input and output are the objects a cluster holds (Node, Pod, PersistentVolumeClaim, PersistentVolume,
StorageClass, Volcano PodGroup) as dicts, so the same pods on the same Node objects can be handed to
a real kube-scheduler and the two answers compared (quota admission is infra.planning.admission; what
one pod asks and whether one node's labels and taints let it in, with the scheduler's wording, is
infra.planning.filters). What is mirrored:

- Queue order (PrioritySort): higher spec.priority first, then the order given.
- Filters, in the default profile's order, each node stopping at its first failing plugin:
  NodeUnschedulable, TaintToleration (NoSchedule and NoExecute taints), NodeAffinity (nodeSelector
  and required node affinity), NodeResourcesFit (pods, cpu, memory, ephemeral-storage, hugepages and
  extended resources: requests against allocatable minus what bound pods request; every shortfall
  is a reason), VolumeBinding (an unbound claim of a class without a provisioner needs a free
  PersistentVolume of that class and size on the node, the smallest such one is taken).
- Score: NodeResourcesFit alone, with the scoringStrategy of the configuration given (`Scoring`, read by
  infra.model.scheduler.scoring_of from a KubeSchedulerConfiguration, which disables every other score
  plugin): MostAllocated (packing) or LeastAllocated (spreading) over the resources it lists with their
  weights, cpu and memory with the non-zero defaults for pods without requests (100m / 200Mi), an
  extended resource only when the pod asks for it, integer arithmetic as the scheduler's. Ties go to the
  first node in the order given; kube-scheduler picks at random among ties, so given a seed a tie goes to
  a node drawn at random (per bucket below, whose nodes are interchangeable): fit tries several draws to
  tell a placement that holds whatever the draw from one that holds only with luck.
- Every feasible node is scored (percentageOfNodesToScore: 100).
- Gangs (Volcano's gang plugin): pods naming one PodGroup (annotation scheduling.k8s.io/group-name)
  are placed together when the first of them reaches the head of the queue; if fewer than its
  minMember fit, none is bound. Given a seed, gangs of one priority also take their turns in a drawn
  order, as Volcano runs jobs submitted in the same second in the order of their UIDs. A member that would
  take its PodGroup's queue past the queue's capability (proportion plugin) is passed over.
- Messages: "0/N nodes are available: " + the sorted histogram of reasons + ".", as FitError does,
  then what the PostFilter plugins say when none helps: DynamicResources "no new claims to deallocate", then
  DefaultPreemption ("preemption: 0/N nodes are available: K No preemption victims found for incoming
  pod, M Preemption is not helpful for scheduling." or "preemption: not eligible due to
  preemptionPolicy=Never."), joined by ", ".

Not mirrored: preemption (pods are placed highest priority first, so preemption has nothing to
undo; a pod placed again after a host is lost, in N-1, could evict pods of lower priority on a real
cluster, which fit does not do), inter-pod affinity and topology spread constraints (none are generated), and the NUMA
alignment the kubelet enforces after binding (a check, KUBELET-TOPOLOGY-FIT / WORKLOAD-NUMA).

For speed, nodes that look the same to the filters (same relevant labels, taints and allocatable)
form a class, and within a class nodes in the same state (same requests bound, same free volumes)
share a bucket: each pod is tried once per bucket, not once per node. Those caches are the state every
method of Cluster shares, so the class stays whole.
"""

from __future__ import annotations

import copy
import heapq
import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.model.scheduler import Scoring
from infra.planning.filters import (
    REASON_AFFINITY,
    REASON_PODS,
    REASON_TAINT,
    REASON_UNSCHEDULABLE,
    REASON_VOLUMES,
    Obj,
    amount_of,
    amounts_of,
    matches,
    matches_term,
    no_nodes_message,
    non_zero_request,
    pod_requests,
    post_filter_message,
    selector_keys,
    tolerates,
)

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # Volcano's: the PodGroup a pod belongs to
DEFAULT_QUEUE = "default"  # Volcano's queue for a PodGroup that names none
NO_PROVISIONER = "kubernetes.io/no-provisioner"
MAX_NODE_SCORE = 100
NON_ZERO_CPU_MILLI = 100  # the scheduler's defaults for pods without requests, in scoring only
NON_ZERO_MEMORY = 200 * 2**20

DEFAULT_SCORING = Scoring()  # MostAllocated over cpu and memory
_BASE_RESOURCES = ("pods", "cpu", "memory", "ephemeral-storage")
_STATIC_FIELDS = ("tolerations", "nodeSelector", "affinity")  # what the label and taint filters read
_TEMPLATE_FIELDS = (*_STATIC_FIELDS, "containers", "initContainers", "overhead")  # all the scheduler reads


# ---------------------------------------------------------------- the cluster's state


@dataclass
class _Volume:
    name: str
    storage_class: str
    size: int


@dataclass
class Outcome:
    """Where each pod went, or why not. Keys are "namespace/name"."""

    bound: dict[str, str] = field(default_factory=dict)  # pod -> node
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod -> the scheduler's message
    refused: dict[str, str] = field(default_factory=dict)  # pod -> the API server's message (quota)
    claims: dict[str, str] = field(default_factory=dict)  # claim -> the volume it bound


def key_of(item: Obj) -> str:
    metadata = item.get("metadata", {})
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


class Cluster:
    """Nodes with what is bound to them; pods are admitted, then scheduled, then possibly evicted."""

    def __init__(self, nodes: Sequence[Obj], volumes: Sequence[Obj] = (), storage_classes: Sequence[Obj] = (),
                 ties: int | None = None, scoring: Scoring = DEFAULT_SCORING):
        # Ties between equally scored nodes go to the first in the order given, or with TIES (a seed) to a node
        # drawn at random, as kube-scheduler draws (selectHost's reservoir sampling among the top scores).
        self._ties = None if ties is None else random.Random(ties)
        self.names = [str(node["metadata"]["name"]) for node in nodes]
        self._index_of = {name: i for i, name in enumerate(self.names)}
        self._labels = [dict(node["metadata"].get("labels") or {}) for node in nodes]
        self._taints = [list((node.get("spec") or {}).get("taints") or []) for node in nodes]
        self._cordoned = [bool((node.get("spec") or {}).get("unschedulable")) for node in nodes]
        allocatable = [amounts_of((node.get("status") or {}).get("allocatable")) for node in nodes]
        others = {name for amounts in allocatable for name in amounts} - set(_BASE_RESOURCES)
        self.resources = [*_BASE_RESOURCES, *sorted(others)]
        self._slot = {name: i for i, name in enumerate(self.resources)}
        self.allocatable = [tuple(a.get(name, 0) for name in self.resources) for a in allocatable]
        self.used: list[tuple[int, ...]] = [(0,) * len(self.resources) for _ in nodes]
        self.pods_on: list[list[str]] = [[] for _ in nodes]
        self.alive = [True] * len(nodes)
        self._static_classes = {str(sc["metadata"]["name"]) for sc in storage_classes
                                if sc.get("provisioner") == NO_PROVISIONER}
        self._free: list[tuple[tuple[str, int, str], ...]] = [() for _ in nodes]
        self._volumes: dict[str, tuple[int, _Volume]] = {}
        self._place_volumes(volumes)
        self.scoring = scoring
        weights = dict(scoring.weights)
        self._most = scoring.strategy == "MostAllocated"
        self._base_weights = [(self._slot[name], index, weights[name]) for index, name in enumerate(("cpu", "memory"))
                              if name in weights]
        self._extended = {self._slot[name]: weight for name, weight in weights.items() if name in self._slot
                          and "/" in name}  # scored when asked for
        self.non_zero: list[tuple[int, int]] = [(0, 0) for _ in nodes]  # cpu, memory as scoring counts them
        self._node_of: dict[str, int] = {}  # bound pod -> node
        self._requests: dict[str, tuple[dict[int, int], tuple[int, int]]] = {}  # bound pod -> what it holds
        self._pod_claims: dict[str, list[tuple[str, str]]] = {}  # bound pod -> [(claim, volume)]
        self._classes: list[int] = []
        self._buckets: list[dict[tuple[Any, ...], list[int]]] = []
        self._class_members: list[list[int]] = []
        self._class_key: tuple[frozenset[str], bool] | None = None
        self._templates: dict[str, tuple[list[int], dict[int, str]]] = {}
        self._by_identity: dict[tuple[Any, ...], str] | None = None  # see _signature
        self._version = 0  # counts binds and unbinds: an unchanged count means an unchanged cluster
        self._capability: dict[str, dict[str, int]] = {}  # Volcano queue -> its capability (schedule's queues)
        self._queued: dict[str, tuple[str, dict[str, int]]] = {}  # bound gang member -> (its queue, its requests)
        # (class, state, what a pod asks) -> (score or None, reasons, volumes): a bucket's answer to a kind of pod
        self._verdicts: dict[tuple[Any, ...], tuple[int | None, tuple[str, ...], tuple[str, ...]]] = {}

    # -------------------------------------------------------------- volumes

    def _place_volumes(self, volumes: Sequence[Obj]) -> None:
        by_label: dict[tuple[str, str], list[int]] = {}
        for i, labels in enumerate(self._labels):
            for pair in labels.items():
                by_label.setdefault(pair, []).append(i)
        free: list[list[tuple[str, int, str]]] = [[] for _ in self.names]
        for volume in volumes:
            spec = volume.get("spec") or {}
            if spec.get("claimRef"):
                continue
            size = amount_of("storage", str((spec.get("capacity") or {}).get("storage", 0)))
            item = _Volume(str(volume["metadata"]["name"]), str(spec.get("storageClassName", "")), size)
            for i in self._volume_nodes(spec, by_label):
                free[i].append((item.storage_class, item.size, item.name))
                self._volumes[item.name] = (i, item)
                break  # a local volume lives on one node
        self._free = [tuple(sorted(entries)) for entries in free]

    def _volume_nodes(self, spec: Obj, by_label: dict[tuple[str, str], list[int]]) -> list[int]:
        terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
        found: list[int] = []
        for term in terms:
            expressions = term.get("matchExpressions") or []
            if len(expressions) == 1 and expressions[0].get("operator") == "In" and not term.get("matchFields"):
                candidates = sorted({i for value in expressions[0].get("values") or []
                                     for i in by_label.get((expressions[0].get("key"), value), [])})
            else:
                candidates = list(range(len(self.names)))
            found += [i for i in candidates if matches_term(self._labels[i], self.names[i], term)]
        return sorted(set(found))

    # -------------------------------------------------------------- classes and buckets

    def _classify(self, pods: Iterable[Obj]) -> None:
        """Group nodes by what the pods' filters can see; rebuilt only when the pods read new labels."""
        keys: set[str] = set(self._class_key[0]) if self._class_key else set()
        by_name = self._class_key[1] if self._class_key else False
        for pod in pods:
            more, named = selector_keys(pod.get("spec") or {})
            keys |= more
            by_name = by_name or named
        wanted = (frozenset(keys), by_name)
        if wanted == self._class_key:
            return
        self._class_key = wanted
        ordered = sorted(keys)
        ids: dict[Any, int] = {}
        self._classes = []
        self._class_members = []
        for i, name in enumerate(self.names):
            signature = (tuple(self._labels[i].get(k) for k in ordered), json.dumps(self._taints[i], sort_keys=True),
                         self._cordoned[i], self.allocatable[i], name if by_name else None)
            if signature not in ids:
                ids[signature] = len(ids)
                self._class_members.append([])
            self._classes.append(ids[signature])
            self._class_members[ids[signature]].append(i)
        self._buckets = [{} for _ in self._class_members]
        for i in range(len(self.names)):
            if self.alive[i]:
                self._bucket_add(i)
        self._templates = {}
        self._verdicts = {}

    def _state(self, i: int) -> tuple[Any, ...]:
        return (self.used[i], self.non_zero[i], self._free[i])

    def _bucket_add(self, i: int) -> None:
        heapq.heappush(self._buckets[self._classes[i]].setdefault(self._state(i), []), i)

    def _bucket_remove(self, i: int) -> None:
        buckets = self._buckets[self._classes[i]]
        state = self._state(i)
        members = buckets[state]
        if members[0] == i:
            heapq.heappop(members)
        else:
            members.remove(i)
            heapq.heapify(members)
        if not members:
            del buckets[state]

    def _signature(self, pod_spec: Obj, fields: tuple[str, ...]) -> str:
        """The pod spec's fields as canonical JSON. During one schedule() call its pods are alive, so a repeat
        of the very same field objects (replicas share them) is found by identity without encoding again."""
        values = [pod_spec.get(name) for name in fields]
        if self._by_identity is None:
            return json.dumps(values, sort_keys=True)
        identity = (fields, *map(id, values))
        found = self._by_identity.get(identity)
        if found is None:
            found = self._by_identity[identity] = json.dumps(values, sort_keys=True)
        return found

    def _static(self, pod_spec: Obj) -> tuple[list[int], dict[int, str]]:
        """Classes that pass the label and taint filters, and the first failing filter's reason for the rest."""
        signature = self._signature(pod_spec, _STATIC_FIELDS)
        cached = self._templates.get(signature)
        if cached is not None:
            return cached
        feasible: list[int] = []
        reasons: dict[int, str] = {}
        tolerations = pod_spec.get("tolerations") or []
        for c, members in enumerate(self._class_members):
            i = members[0]
            if self._cordoned[i]:
                reasons[c] = REASON_UNSCHEDULABLE
                continue
            if any(t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)
                   for t in self._taints[i]):
                reasons[c] = REASON_TAINT
            elif not matches(pod_spec, self._labels[i], self.names[i]):
                reasons[c] = REASON_AFFINITY
            else:
                feasible.append(c)
        self._templates[signature] = (feasible, reasons)
        return feasible, reasons

    # -------------------------------------------------------------- one pod

    def _vector(self, pod: Obj) -> tuple[list[tuple[int, int]], list[str]]:
        """The pod's requests as (slot, amount), pods included; names no node has are returned apart."""
        requests = pod_requests(pod)
        vector = [(self._slot["pods"], 1)]
        unknown = []
        for name, amount in requests.items():
            if name in self._slot:
                vector.append((self._slot[name], amount))
            else:
                unknown.append(name)
        return vector, unknown

    def _claims_of(self, pod: Obj, claims: dict[str, Obj]) -> list[tuple[str, str, int]]:
        """(claim, class, size) of the pod's unbound claims that need a local volume on the node."""
        found = []
        namespace = pod.get("metadata", {}).get("namespace", "")
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            claim = claims.get(f"{namespace}/{name}") if name else None
            if claim is None:
                continue
            spec = claim.get("spec") or {}
            storage_class = str(spec.get("storageClassName", ""))
            if spec.get("volumeName") or storage_class not in self._static_classes:
                continue  # bound already, or provisioned on demand
            size = amount_of("storage", str(((spec.get("resources") or {}).get("requests") or {}).get("storage", 0)))
            found.append((f"{namespace}/{name}", storage_class, size))
        return found

    @staticmethod
    def _pick_volumes(free: tuple[tuple[str, int, str], ...],
                      wanted: tuple[tuple[str, int], ...]) -> tuple[str, ...] | None:
        """The smallest free volume of its class for each claim, as the volume binder picks; None if one lacks it."""
        chosen: list[str] = []
        for storage_class, size in wanted:
            match = next((entry for entry in free if entry[0] == storage_class and entry[1] >= size
                          and entry[2] not in chosen), None)
            if match is None:
                return None
            chosen.append(match[2])
        return tuple(chosen)

    def _score(self, i: int, vector: list[tuple[int, int]], non_zero: tuple[int, int]) -> int:
        """NodeResourcesFit: the weighted mean over the scored resources of (requested + pod) * 100 / allocatable
        (MostAllocated) or what stays free of it (LeastAllocated, 0 when over), in integers; cpu and memory with
        the non-zero defaults, an extended resource only when the pod asks and the node has it."""
        allocatable, used, held = self.allocatable[i], self.used[i], self.non_zero[i]
        total = weights = 0
        scored = [(slot, held[index] + non_zero[index], weight) for slot, index, weight in self._base_weights]
        scored += [(slot, used[slot] + asked, self._extended[slot]) for slot, asked in vector if slot in self._extended]
        for slot, requested, weight in scored:
            capacity = allocatable[slot]
            if capacity:
                if self._most:
                    total += min(requested, capacity) * MAX_NODE_SCORE // capacity * weight
                elif requested <= capacity:
                    total += (capacity - requested) * MAX_NODE_SCORE // capacity * weight
                weights += weight
        return total // weights if weights else 0

    def place(self, pod: Obj, claims: dict[str, Obj]) -> str | None:
        """Bind one pod to the best node; return the failure message instead when no node fits."""
        spec = pod.get("spec") or {}
        feasible, static_reasons = self._static(spec)
        vector, unknown = self._vector(pod)
        claimed = self._claims_of(pod, claims)
        wanted = tuple((storage_class, size) for _, storage_class, size in claimed)
        non_zero = (non_zero_request(pod, "cpu", NON_ZERO_CPU_MILLI), non_zero_request(pod, "memory", NON_ZERO_MEMORY))
        asked = (tuple(vector), non_zero, tuple(unknown), wanted)
        best: tuple[int, float, int] | None = None  # score, tie-break, node
        best_volumes: tuple[str, ...] = ()
        failures: Counter[str] = Counter()
        resolvable = 0  # nodes short only of what they have: where DefaultPreemption's dry run looks
        for c in feasible:
            for state, members in self._buckets[c].items():
                memo = (c, state, asked)
                verdict = self._verdicts.get(memo)
                if verdict is None:
                    verdict = self._verdicts[memo] = self._judge(members[0], vector, unknown, non_zero, wanted)
                score, reasons, volumes = verdict
                if score is None:
                    for reason in reasons:
                        failures[reason] += len(members)
                    if reasons != (REASON_VOLUMES,) and not unknown and all(
                            amount <= self.allocatable[members[0]][slot] for slot, amount in vector):
                        resolvable += len(members)
                    continue
                draw = -members[0] if self._ties is None else self._ties.random()
                candidate = (score, draw, members[0])
                if best is None or candidate > best:
                    best, best_volumes = candidate, volumes
        if best is None:
            for c, reason in static_reasons.items():
                failures[reason] += sum(1 for i in self._class_members[c] if self.alive[i])
            # Pods are placed highest priority first, so no node holds a pod of lower priority: no victims.
            return no_nodes_message(sum(self.alive), failures,
                                    post_filter_message(spec.get("preemptionPolicy"), sum(self.alive), resolvable))
        bound_volumes = [(claim, volume) for (claim, _, _), volume in zip(claimed, best_volumes, strict=True)]
        self._bind(key_of(pod), best[2], dict(vector), non_zero, bound_volumes)
        return None

    def _judge(self, i: int, vector: list[tuple[int, int]], unknown: list[str], non_zero: tuple[int, int],
               wanted: tuple[tuple[str, int], ...]) -> tuple[int | None, tuple[str, ...], tuple[str, ...]]:
        """NodeResourcesFit and VolumeBinding on one node (every node of its bucket alike): the score, or the
        reasons it fails; and the volumes its claims would bind."""
        allocatable, used = self.allocatable[i], self.used[i]
        short = [REASON_PODS if self.resources[slot] == "pods" else f"Insufficient {self.resources[slot]}"
                 for slot, amount in vector if used[slot] + amount > allocatable[slot]]
        short += [f"Insufficient {name}" for name in unknown]
        if short:
            return None, tuple(short), ()
        chosen = self._pick_volumes(self._free[i], wanted) if wanted else ()
        if chosen is None:
            return None, (REASON_VOLUMES,), ()
        return self._score(i, vector, non_zero), (), chosen

    def _bind(self, pod: str, i: int, vector: dict[int, int], non_zero: tuple[int, int],
              volumes: list[tuple[str, str]]) -> None:
        self._bucket_remove(i)
        used = list(self.used[i])
        for slot, amount in vector.items():
            used[slot] += amount
        self.used[i] = tuple(used)
        self.non_zero[i] = (self.non_zero[i][0] + non_zero[0], self.non_zero[i][1] + non_zero[1])
        taken = {name for _, name in volumes}
        self._free[i] = tuple(entry for entry in self._free[i] if entry[2] not in taken)
        self._bucket_add(i)
        self.pods_on[i].append(pod)
        self._version += 1
        self._requests[pod] = (vector, non_zero)
        self._pod_claims[pod] = volumes
        self._node_of[pod] = i

    def unbind(self, pod: str) -> None:
        """Take a bound pod off its node (a gang rolled back, or a pod evicted), freeing what it held."""
        i = self._node_of.pop(pod)
        self._queued.pop(pod, None)
        vector, non_zero = self._requests.pop(pod)
        volumes = self._pod_claims.pop(pod)
        if self.alive[i]:
            self._bucket_remove(i)
        used = list(self.used[i])
        for slot, amount in vector.items():
            used[slot] -= amount
        self.used[i] = tuple(used)
        self.non_zero[i] = (self.non_zero[i][0] - non_zero[0], self.non_zero[i][1] - non_zero[1])
        if volumes:
            returned = [(volume.storage_class, volume.size, volume.name)
                        for volume in (self._volumes[name][1] for _, name in volumes)]
            self._free[i] = tuple(sorted(self._free[i] + tuple(returned)))
        self.pods_on[i].remove(pod)
        self._version += 1
        if self.alive[i]:
            self._bucket_add(i)

    def remove_node(self, name: str) -> list[str]:
        """A node is lost: it leaves the cluster with its volumes; returns the pods that were bound to it."""
        i = self._index_of[name]
        evicted = list(self.pods_on[i])
        for pod in evicted:
            self.unbind(pod)
        if self._class_key is not None:
            self._bucket_remove(i)
        self.alive[i] = False
        self._free[i] = ()
        self._version += 1
        return evicted

    def clone(self) -> Cluster:
        """An independent copy of the state (what is bound where), sharing the nodes' fixed facts."""
        other = copy.copy(self)
        other.used, other.non_zero, other.alive, other._free = (list(self.used), list(self.non_zero),
                                                                list(self.alive), list(self._free))
        other.pods_on = [list(pods) for pods in self.pods_on]
        other._node_of, other._requests, other._pod_claims = (dict(self._node_of), dict(self._requests),
                                                              dict(self._pod_claims))
        other._queued = dict(self._queued)
        other._buckets = [{state: list(members) for state, members in buckets.items()} for buckets in self._buckets]
        other._templates = dict(self._templates)
        other._verdicts = dict(self._verdicts)
        return other

    def pin(self, pod: Obj, node: str) -> bool:
        """Bind a pod to the named node without a search, as the DaemonSet controller's pods are (one per node,
        placed by name); False, and nothing bound, where the node lacks what the pod asks."""
        if self._class_key is None:
            self._classify(())
        i = self._index_of[node]
        vector, unknown = self._vector(pod)
        if unknown or any(self.used[i][slot] + amount > self.allocatable[i][slot] for slot, amount in vector):
            return False
        non_zero = (non_zero_request(pod, "cpu", NON_ZERO_CPU_MILLI), non_zero_request(pod, "memory", NON_ZERO_MEMORY))
        self._bind(key_of(pod), i, dict(vector), non_zero, [])
        return True

    def node_of(self, pod: str) -> str | None:
        i = self._node_of.get(pod)
        return None if i is None else self.names[i]

    # -------------------------------------------------------------- many pods

    def schedule(self, pods: Sequence[Obj], claims: Sequence[Obj] = (), pod_groups: Sequence[Obj] = (),
                 queues: Sequence[Obj] = ()) -> Outcome:
        """Place pods highest priority first (then in the order given), gangs all or nothing and within their
        PodGroup's queue's capability (QUEUES: Volcano Queues)."""
        outcome = Outcome()
        if not pods:
            return outcome
        self._by_identity = {}
        self._capability = {str(q["metadata"]["name"]): amounts_of((q.get("spec") or {}).get("capability"))
                            for q in queues}
        try:
            self._schedule_all(pods, claims, pod_groups, outcome)
        finally:
            self._by_identity = None
        return outcome

    def _schedule_all(self, pods: Sequence[Obj], claims: Sequence[Obj], pod_groups: Sequence[Obj],
                      outcome: Outcome) -> None:
        self._classify(pods)
        by_claim = {key_of(claim): claim for claim in claims}
        min_member = {key_of(group): int((group.get("spec") or {}).get("minMember", 1)) for group in pod_groups}
        queue_of = {key_of(group): str((group.get("spec") or {}).get("queue") or DEFAULT_QUEUE) for group in pod_groups}
        order = sorted(range(len(pods)), key=lambda n: (-int((pods[n].get("spec") or {}).get("priority", 0)), n))
        gangs: dict[str, list[Obj]] = {}
        for n in order:
            group = _group_of(pods[n])
            if group is not None:
                gangs.setdefault(group, []).append(pods[n])
        turn = self._gang_turns(gangs)
        done: set[str] = set()
        last_failure: dict[str, tuple[int, str]] = {}  # template -> (version, message): same cluster, same answer
        for n in order:
            pod = pods[n]
            group = _group_of(pod)
            if group is None:
                self._schedule_one(pod, by_claim, outcome, last_failure)
            elif group not in done:
                done.add(group)
                group = turn[group]
                self._schedule_gang(group, gangs[group], min_member.get(group, len(gangs[group])),
                                    queue_of.get(group, DEFAULT_QUEUE), by_claim, outcome)

    def _gang_turns(self, gangs: dict[str, list[Obj]]) -> dict[str, str]:
        """Which gang takes each gang's turn: its own, or with TIES a draw among the gangs of its priority. Volcano
        orders jobs that tie on every plugin by creationTimestamp, of one-second resolution, then by UID, so gangs
        of one priority submitted in the same second run in a random order."""
        turns = {group: group for group in gangs}
        if self._ties is None:
            return turns
        by_priority: dict[int, list[str]] = {}
        for group, members in gangs.items():
            by_priority.setdefault(int((members[0].get("spec") or {}).get("priority", 0)), []).append(group)
        for groups in by_priority.values():
            drawn = list(groups)
            self._ties.shuffle(drawn)
            turns.update(zip(groups, drawn, strict=True))
        return turns

    def _schedule_one(self, pod: Obj, claims: dict[str, Obj], outcome: Outcome,
                      last_failure: dict[str, tuple[int, str]]) -> bool:
        name = key_of(pod)
        template = "" if self._claims_of(pod, claims) else self._signature(pod.get("spec") or {}, _TEMPLATE_FIELDS)
        if template and template in last_failure and last_failure[template][0] == self._version:
            outcome.unschedulable[name] = last_failure[template][1]
            return False
        failure = self.place(pod, claims)
        if failure is None:
            outcome.bound[name] = self.names[self._node_of[name]]
            for claim, volume in self._pod_claims[name]:
                outcome.claims[claim] = volume
            return True
        outcome.unschedulable[name] = failure
        if template:
            last_failure[template] = (self._version, failure)
        return False

    def _schedule_gang(self, group: str, members: list[Obj], minimum: int, queue: str, claims: dict[str, Obj],
                       outcome: Outcome) -> None:
        trial = Outcome()
        capability = self._capability.get(queue) or {}
        allocated: Counter[str] = Counter()
        for member, (its_queue, requests) in self._queued.items():
            if its_queue == queue and member in self._node_of:
                allocated.update(requests)
        for pod in members:
            requests = pod_requests(pod)
            # Volcano's proportion plugin: a task that would take its queue past the capability, in a resource the
            # task asks for, is passed over (allocate: "Queue <q> is overused when considering task <t>, ignore it").
            over = sorted(r for r, amount in requests.items()
                          if r in capability and allocated[r] + amount > capability[r])
            if over:
                trial.unschedulable[key_of(pod)] = (f"queue {queue} is overused: its capability has no room for "
                                                    f"{', '.join(over)}")
                continue
            if self._schedule_one(pod, claims, trial, {}):
                allocated.update(requests)
        if len(trial.bound) >= minimum:
            for member in trial.bound:
                self._queued[member] = (queue, pod_requests(next(p for p in members if key_of(p) == member)))
            outcome.bound.update(trial.bound)
            outcome.unschedulable.update(trial.unschedulable)
            outcome.claims.update(trial.claims)
            return
        for bound in trial.bound:
            self.unbind(bound)
        if len(members) < minimum:
            admitted = f"{len(members)} pod{'s' if len(members) != 1 else ''}"
            message = (f"gang {group}: {admitted} admitted for minMember {minimum} (the others were refused), so "
                       "none is bound (Volcano gang scheduling)")
        else:
            first = next(iter(trial.unschedulable.values()))
            message = (f"gang {group}: {len(trial.bound)} of minMember {minimum} pods fit, so none is bound "
                       f"(Volcano gang scheduling); {first}")
        for pod in members:
            outcome.unschedulable[key_of(pod)] = message


def _group_of(pod: Obj) -> str | None:
    name = ((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION)
    return f"{pod['metadata'].get('namespace', '')}/{name}" if name else None
