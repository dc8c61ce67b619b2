"""`infra fit`: place every declared workload on the pools as the cluster would, and what one lost host does.

The environment becomes the objects a cluster would hold: one Node per host (the cluster layer's pool
labels and taints, kubelet's hostname label, allocatable as infra.model.kubelet computes it), local
PersistentVolumes for the pools' disks, a ResourceQuota per tenant, and per workload its Pods (with
node affinity to the pools that can serve it and tolerations of exactly those pools' taints),
PersistentVolumeClaims and, for gangs, a Volcano PodGroup; before them, the pods of the DaemonSets the
cluster layer declares, one per node they select. Quota admission (infra.planning.admission) and
placement (infra.planning.scheduler) then run over those objects only, so a real API server and kube-scheduler
can be given the same objects and their answers compared.

N-1: for each pool, its biggest host (most GPU resources, then CPU, then memory, then pods bound) is
lost; the pods bound there, with the rest of their gang, are placed again on what is left, and
every pod that no longer fits is reported. The data on lost local volumes is assumed re-created
elsewhere (the claim is re-created and binds a free volume), as replicated stores such as
Elasticsearch do.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from infra.cluster.concerns import build_concerns
from infra.cluster.nodes import GPU_MODEL_LABEL, POOL_LABEL, node, pool_taints
from infra.cluster.placement import pool_affinity
from infra.cluster.scheduling import queues
from infra.knowledge.chart_values import chart_values, daemonsets_of
from infra.knowledge.units import GIB
from infra.model.capacity import host_capacity
from infra.model.resolve import Resolved, resolve
from infra.model.scheduler import Scoring, scheduler_configuration_of, scoring_of
from infra.model.workloads import Demand, demands, pool_offers
from infra.planning.admission import Quotas, printed_quantity
from infra.planning.filters import Obj, matches, pod_requests, tolerates
from infra.planning.scheduler import (
    DEFAULT_QUEUE,
    GROUP_ANNOTATION,
    NO_PROVISIONER,
    Cluster,
    Outcome,
    key_of,
)
from infra.spec import Environment, Pool

HOSTNAME_LABEL = "kubernetes.io/hostname"
OS_LABEL = "kubernetes.io/os"  # the kubelet sets it on every node ("linux"); agents' node selectors name it
CONTROL_PLANE_TAINT: Obj = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
PROBE_IMAGE = "registry.k8s.io/pause:3.10"


# ---------------------------------------------------------------- the environment as cluster objects


def _cpu(cores: Decimal) -> str:
    return f"{int((cores * 1000).to_integral_value(rounding=ROUND_CEILING))}m"


def _round_up(value: Decimal) -> Decimal:
    return value.to_integral_value(rounding=ROUND_CEILING)


def _count(value: Decimal) -> str:
    return str(int(_round_up(value)))


def node_objects(view: Resolved) -> list[Obj]:
    """One Node per kubelet: pool hosts with their labels, taints and allocatable; control-plane hosts
    outside the pools with the control-plane taint (they count in "0/N nodes")."""
    env = view.env
    nodes = []
    kinds: dict[tuple[str, object], Obj] = {}
    for pool in env.pools.values():
        for resolved in view.of_pool(pool):
            if resolved.machine is None:
                continue
            kind = (pool.name, resolved.machine)
            if kind not in kinds:
                one = host_capacity(env.cluster, pool, resolved.machine)
                allocatable = {"cpu": _cpu(max(one.allocatable_cpu, Decimal(0))),
                               "memory": _count(max(one.allocatable_memory_gib, Decimal(0)) * GIB),
                               "ephemeral-storage": _count(max(one.allocatable_ephemeral_storage, Decimal(0))),
                               "pods": str(one.max_pods)}
                allocatable.update({name: _count(amount) for name, amount in one.hugepages.items()})
                allocatable.update({name: str(count) for name, count in sorted(one.gpu_resources.items())})
                kinds[kind] = allocatable
            item = node(resolved, pool)
            item["metadata"]["labels"].update({HOSTNAME_LABEL: resolved.name, OS_LABEL: "linux"})
            if pool.vars.gpu_sharing is not None and pool.vars.gpu_sharing.mode == "mps":
                # GFD labels the nodes whose device plugin shares cards by MPS; the MPS control daemon selects them.
                item["metadata"]["labels"][chart_values().nvidia_device_plugin.mps_capable_label] = "true"
            item["status"] = {"allocatable": dict(kinds[kind]), "capacity": dict(kinds[kind])}
            nodes.append(item)
    for host in env.control_plane:
        if not host.pool:
            nodes.append({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": host.name, "labels": {HOSTNAME_LABEL: host.name, OS_LABEL: "linux"}},
                          "spec": {"taints": [dict(CONTROL_PLANE_TAINT)]}, "status": {"allocatable": {}}})
    return nodes


def storage_objects(env: Environment) -> tuple[list[Obj], list[Obj]]:
    """StorageClasses, and one local PersistentVolume per disk of the pools a local class names (what the
    local static provisioner creates: one volume per mount, pinned to its host)."""
    classes, volumes = [], []
    for name, spec in env.cluster.storage_classes.items():
        provisioner = NO_PROVISIONER if spec.type == "local" else spec.provisioner
        classes.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                        "provisioner": provisioner, "volumeBindingMode": spec.volume_binding_mode})
        if spec.type != "local":
            continue
        for pool_name in spec.pools:
            pool = env.pools.get(pool_name)
            for host in pool.hosts if pool else ():
                for disk in pool.vars.local_disks if pool else ():
                    volumes.append({
                        "apiVersion": "v1", "kind": "PersistentVolume",
                        "metadata": {"name": f"{name}-{host.name}-{disk.mount.rstrip('/').rsplit('/', 1)[-1]}"
                                     .lower().replace("_", "-").replace(".", "-")},
                        "spec": {"capacity": {"storage": f"{disk.size_gib}Gi"}, "storageClassName": name,
                                 "accessModes": ["ReadWriteOnce"], "local": {"path": disk.mount},
                                 "persistentVolumeReclaimPolicy": spec.reclaim_policy,
                                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                     {"key": HOSTNAME_LABEL, "operator": "In", "values": [host.name]}]}]}}},
                    })
    return classes, volumes


@dataclass(frozen=True)
class Objects:
    """A workload set as the API objects its controllers would create, in creation order."""

    pods: list[Obj]
    claims: list[Obj]
    quotas: list[Obj]
    pod_groups: list[Obj]
    owner: dict[str, Demand]  # pod key -> its workload


# The built-in PriorityClasses the cluster layer's agents use (kube-apiserver creates them).
SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def daemon_pods(view: Resolved, nodes: list[Obj]) -> list[tuple[str, Obj]]:
    """The pods of the node agents the cluster layer runs: the DaemonSets it declares (infra.render writes the same
    objects) and those its Helm releases run (their charts' DaemonSets as chart_values.yml records them, with the
    tolerations, affinity and node selectors the release's values set). One on each node whose labels and taints
    the pod template admits, pinned to it by the node's name as the DaemonSet controller pins them; each takes a
    pod slot and its requests before any workload. Returns (node, pod) pairs."""
    templates: list[tuple[str, str, Obj]] = []  # (DaemonSet, namespace, pod spec)
    for concern in build_concerns(view, helm_releases=False):
        templates += [(item["metadata"]["name"], item["metadata"].get("namespace", ""),
                       item["spec"]["template"]["spec"]) for item in concern.objects if item["kind"] == "DaemonSet"]
        for release in concern.releases:
            for daemonset in daemonsets_of(release.component):
                if (spec := daemonset.pod_spec(release.values)) is not None:
                    templates.append((f"{release.name}-{daemonset.name}", release.namespace, spec))
    pods = []
    for daemonset_name, namespace, template in templates:
        tolerations = template.get("tolerations") or []
        priority_class = template.get("priorityClassName", "")
        priority = SYSTEM_PRIORITIES.get(priority_class) or getattr(
            view.env.cluster.priority_classes.get(priority_class), "value", 0)
        for node_object in nodes:
            name = node_object["metadata"]["name"]
            taints = node_object["spec"].get("taints") or []
            if not matches(template, node_object["metadata"]["labels"], name) or not all(
                    tolerates(tolerations, taint) for taint in taints
                    if taint.get("effect") in ("NoSchedule", "NoExecute")):
                continue
            pinned = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [name]}]}]}}
            pods.append((name, {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": f"{daemonset_name}-{name}", "namespace": namespace},
                                "spec": {**template, "priority": priority,
                                         "affinity": {**(template.get("affinity") or {}), "nodeAffinity": pinned}}}))
    return pods


def agent_overhead(view: Resolved) -> dict[str, dict[str, Decimal]]:
    """Per pool, what the DaemonSet pods take on each of its nodes (its nodes are alike): "pods" (a count),
    "cpu" (cores), and the other requests in bytes or counts."""
    nodes = node_objects(view)
    pool_of = {item["metadata"]["name"]: item["metadata"]["labels"].get(POOL_LABEL, "") for item in nodes}
    first: dict[str, str] = {}  # pool -> the node read for it
    found: dict[str, Counter[str]] = {}
    for name, pod in daemon_pods(view, nodes):
        pool = pool_of[name]
        if first.setdefault(pool, name) != name:
            continue
        taken = found.setdefault(pool, Counter())
        taken["pods"] += 1
        taken.update(pod_requests(pod))
    return {pool: {resource: Decimal(amount) / 1000 if resource == "cpu" else Decimal(amount)
                   for resource, amount in taken.items()} for pool, taken in found.items()}


def workload_objects(env: Environment, found: list[Demand]) -> Objects:
    """Pods (highest priority first, then as written), claims, quotas and PodGroups for the demands."""
    pods, claims, groups = [], [], []
    owner: dict[str, Demand] = {}
    ordered = sorted(enumerate(found), key=lambda pair: (-pair[1].priority, pair[0]))
    for _, item in ordered:
        pools = [env.pools[name] for name in item.pools]
        affinity = pool_affinity(pools)
        if item.spec.gpu is not None and item.spec.gpu.model:
            term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            term["matchExpressions"].append({"key": GPU_MODEL_LABEL, "operator": "In", "values": [item.spec.gpu.model]})
        resources: Obj = {"requests": _quantities(item.requests), "limits": _quantities(item.limits)}
        spec: Obj = {"priority": item.priority, "affinity": affinity, "tolerations": pod_tolerations(pools),
                     "containers": [{"name": item.name, "image": PROBE_IMAGE, "resources": resources}]}
        if item.priority_class:
            spec["priorityClassName"] = item.priority_class
            # what the Priority admission plugin copies from the class, with the priority
            spec["preemptionPolicy"] = env.cluster.priority_classes[item.priority_class].preemption_policy
        annotations = {}
        if item.spec.gang is not None:
            spec["schedulerName"] = "volcano"
            annotations[GROUP_ANNOTATION] = item.name
            # in the queue Volcano's podgroup mutation gives it: the one its namespace names, else `default`
            tenant = env.cluster.tenants[item.tenant]
            groups.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": item.name, "namespace": item.tenant},
                           "spec": {"minMember": item.spec.gang,
                                    "queue": item.tenant if tenant.queue is not None else DEFAULT_QUEUE}})
        for ordinal in range(item.spec.replicas):
            name = f"{item.name}-{ordinal}"
            pod_spec = dict(spec)
            if item.spec.storage is not None:
                claim = f"data-{name}"
                claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                               "metadata": {"name": claim, "namespace": item.tenant},
                               "spec": {"storageClassName": item.spec.storage.storage_class,
                                        "accessModes": ["ReadWriteOnce"],
                                        "resources": {"requests": {"storage": item.spec.storage.size}}}})
                pod_spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
            metadata: Obj = {"name": name, "namespace": item.tenant,
                             "labels": {"app.kubernetes.io/name": item.name}}
            if annotations:
                metadata["annotations"] = dict(annotations)
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec})
            owner[f"{item.tenant}/{name}"] = item
    quotas = [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": name},
               "spec": {"hard": dict(tenant.quota)}}
              for name, tenant in env.cluster.tenants.items() if tenant.quota]
    return Objects(pods, claims, quotas, groups, owner)


def pod_tolerations(pools: list[Pool]) -> list[Obj]:
    """Exactly the taints of these pools, value included: a pod for the T4 pool tolerates
    workload-profile=gpu-offline, not the memory pool's workload-profile=memory."""
    found: dict[tuple[str, str, str], Obj] = {}
    for pool in pools:
        for taint in pool_taints(pool):
            value = taint.get("value", "")
            toleration = ({"key": taint["key"], "operator": "Equal", "value": value, "effect": taint["effect"]}
                          if value else {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]})
            found[(taint["key"], value, taint["effect"])] = toleration
    return [found[key] for key in sorted(found)]


def _quantities(amounts: dict[str, Decimal]) -> dict[str, str]:
    """A container's requests or limits written as a user or a LimitRange writes them ("256Mi", not the byte
    count): the API server prints them so in its quota messages."""
    return {name: _cpu(value) if name == "cpu" else printed_quantity(_round_up(value), name)
            for name, value in sorted(amounts.items())}


# ---------------------------------------------------------------- placement and N-1


@dataclass
class Result:
    """What fit found: the placement, the refusals, and N-1 per pool."""

    env: Environment
    nodes: list[Obj]
    objects: Objects
    cluster: Cluster
    outcome: Outcome
    n_minus_1: dict[str, tuple[str, list[str], Outcome]]  # pool -> (lost host, pods re-placed, their outcome)


@dataclass(frozen=True)
class Inputs:
    """The environment as objects, built once however many times they are placed (read, never changed)."""

    objects: Objects
    nodes: list[Obj]
    classes: list[Obj]
    volumes: list[Obj]
    agents: list[tuple[str, Obj]]  # (node, DaemonSet pod)
    scoring: Scoring  # the environment's scheduler configuration, as the simulation reads it
    queues: list[Obj]  # the Volcano Queues the cluster layer declares (their capabilities bound gangs)


def inputs(env: Environment) -> Inputs:
    view = resolve(env)
    offers = [offer for pool in env.pools.values() for offer in pool_offers(view, pool)]
    nodes = node_objects(view)
    classes, volumes = storage_objects(env)
    return Inputs(workload_objects(env, demands(env, offers)), nodes, classes, volumes, daemon_pods(view, nodes),
                  scoring_of(scheduler_configuration_of(view)), queues(view))


def place(env: Environment, n_minus_1: bool = True, ties: int | None = None, given: Inputs | None = None) -> Result:
    """Admit, schedule and (optionally) lose each pool's biggest host, over the environment's objects (GIVEN,
    or built here). Ties between equally scored nodes go to the first, or with TIES (a seed) to a random one."""
    built = given or inputs(env)
    objects, nodes = built.objects, built.nodes
    cluster = Cluster(nodes, built.volumes, built.classes, ties, built.scoring)
    for name, agent in built.agents:  # the agents are on their nodes before any workload
        cluster.pin(agent, name)
    quotas = Quotas(objects.quotas)
    claims_of = defaultdict(list)
    for claim in objects.claims:
        claims_of[claim["metadata"]["namespace"]].append(claim)
    outcome = Outcome()
    admitted = []
    claim_by_key = {key_of(claim): claim for claim in objects.claims}
    for pod in objects.pods:
        refusal = None
        for volume in pod["spec"].get("volumes", []):
            claim = claim_by_key[f"{pod['metadata']['namespace']}/{volume['persistentVolumeClaim']['claimName']}"]
            refusal = quotas.admit(claim)
        refusal = refusal or quotas.admit(pod)
        if refusal:
            outcome.refused[key_of(pod)] = refusal
        else:
            admitted.append(pod)
    placed = cluster.schedule(admitted, objects.claims, objects.pod_groups, built.queues)
    outcome.bound, outcome.unschedulable, outcome.claims = placed.bound, placed.unschedulable, placed.claims
    losses = {}
    if n_minus_1:
        order = {key_of(pod): n for n, pod in enumerate(admitted)}
        gangs: dict[str, list[str]] = defaultdict(list)
        gang_of = {}
        for pod in admitted:
            group = pod["metadata"].get("annotations", {}).get(GROUP_ANNOTATION)
            if group:
                gang_of[key_of(pod)] = f"{pod['metadata']['namespace']}/{group}"
                gangs[gang_of[key_of(pod)]].append(key_of(pod))
        for pool in env.pools:
            lost = _biggest(cluster, nodes, pool)
            if lost is None:
                continue
            trial = cluster.clone()
            moved = set(trial.remove_node(lost))
            for group in {gang_of[name] for name in moved if name in gang_of}:
                for mate in gangs[group]:  # a gang that lost a member is placed again whole
                    if mate not in moved and trial.node_of(mate):
                        trial.unbind(mate)
                        moved.add(mate)
            again = [admitted[n] for n in sorted(order[name] for name in moved if name in order)]  # agents stay
            losses[pool] = (lost, [key_of(pod) for pod in again],
                            trial.schedule(again, objects.claims, objects.pod_groups, built.queues))
    return Result(env, nodes, objects, cluster, outcome, losses)


def _biggest(cluster: Cluster, nodes: list[Obj], pool: str) -> str | None:
    """The pool's host whose loss costs most: GPU resources, CPU, memory, then pods bound on it."""
    best: tuple[Any, ...] | None = None
    found = None
    extended = [slot for slot, name in enumerate(cluster.resources) if "/" in name]
    cpu, memory = cluster.resources.index("cpu"), cluster.resources.index("memory")
    for i, item in enumerate(nodes):
        if item["metadata"]["labels"].get(POOL_LABEL) != pool or not cluster.alive[i]:
            continue
        allocatable = cluster.allocatable[i]
        rank = (sum(allocatable[slot] for slot in extended), allocatable[cpu], allocatable[memory],
                len(cluster.pods_on[i]), -i)
        if best is None or rank > best:
            best, found = rank, cluster.names[i]
    return found


# ---------------------------------------------------------------- the report


_SHOWN = ("cpu", "memory")


def _figure(resource: str, amount: int) -> float | int:
    if resource == "cpu":
        value = amount / 1000
    elif resource == "memory" or resource.startswith("hugepages-"):
        value = amount / 2**30
    else:
        return amount
    rounded = round(value, 1)
    return int(rounded) if rounded == int(rounded) else rounded


_NAMED = re.compile(r'^(pods|persistentvolumeclaims) "[^"]*" is forbidden: ')


def _grouped(messages: dict[str, str], owner: dict[str, Demand], pods: list[str]) -> list[dict[str, Any]]:
    """Unplaced or refused pods, one entry per workload and reason; the API server's refusals name one
    object each, so they are grouped without the name and the first is kept as the example."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for pod in pods:
        if pod in messages:
            message = messages[pod]
            entry = groups.setdefault((owner[pod].key, _NAMED.sub("", message)),
                                      {"workload": owner[pod].key, "count": 0, "reason": message,
                                       "first": pod.split("/", 1)[1]})
            entry["count"] += 1
    return list(groups.values())


def report(result: Result) -> dict[str, Any]:
    """The fit as plain data (the JSON output): per pool utilisation and N-1, per workload where it went."""
    cluster, outcome, owner = result.cluster, result.outcome, result.objects.owner
    pods = [key_of(pod) for pod in result.objects.pods]
    pools = []
    for pool in result.env.pools:
        members = [i for i, item in enumerate(result.nodes) if item["metadata"]["labels"].get(POOL_LABEL) == pool]
        requested: Counter[str] = Counter()
        allocatable: Counter[str] = Counter()
        for i in members:
            for slot, name in enumerate(cluster.resources):
                requested[name] += cluster.used[i][slot]
                allocatable[name] += cluster.allocatable[i][slot]
        shown = [name for name in cluster.resources if allocatable[name] and (
            name in ("cpu", "memory", "pods") or "/" in name or name.startswith("hugepages-"))]
        entry: dict[str, Any] = {
            "name": pool, "nodes": len(members), "pods": requested["pods"],
            "requested": {name: _figure(name, requested[name]) for name in shown},
            "allocatable": {name: _figure(name, allocatable[name]) for name in shown},
            "percent": {name: round(100 * requested[name] / allocatable[name], 1) for name in shown},
        }
        if pool in result.n_minus_1:
            lost, again, trial = result.n_minus_1[pool]
            unplaced = [name for name in again if name not in trial.bound]
            # pods that may run here and are unplaced already: the pool is short before it loses anything
            short = sum(1 for name in outcome.unschedulable if pool in owner[name].pools)
            entry["n_minus_1"] = {"lost": lost, "pods_moved": len(again), "unplaced": len(unplaced),
                                  "short_now": short, "ok": not unplaced and not short,
                                  "failures": _grouped(trial.unschedulable, owner, unplaced)}
        pools.append(entry)
    workloads = []
    seen: dict[str, list[str]] = {}
    for pod in pods:
        seen.setdefault(owner[pod].key, []).append(pod)
    for replicas in seen.values():
        item = owner[replicas[0]]
        on: Counter[str] = Counter(outcome.bound[pod] for pod in replicas if pod in outcome.bound)
        workloads.append({
            "tenant": item.tenant, "name": item.name, "kind": item.spec.kind, "replicas": item.spec.replicas,
            "gang": item.spec.gang, "priority": item.priority, "gpu_resource": item.gpu_resource,
            "pools": list(item.pools), "placed": sum(on.values()), "nodes": dict(sorted(on.items())),
            "unplaced": [{key: entry[key] for key in ("count", "first", "reason")}
                         for entry in _grouped(outcome.unschedulable, owner, replicas)],
            "refused": [{key: entry[key] for key in ("count", "first", "reason")}
                        for entry in _grouped(outcome.refused, owner, replicas)],
        })
    placed = len(outcome.bound)
    n_minus_1 = [entry["n_minus_1"]["ok"] for entry in pools if "n_minus_1" in entry]
    return {
        "environment": result.env.name,
        "nodes": len(result.nodes),
        "scoring": {"strategy": cluster.scoring.strategy, "resources": dict(cluster.scoring.weights)},
        "workloads": workloads,
        "replicas": len(pods),
        "placed": placed,
        "unplaced": len(outcome.unschedulable),
        "refused": len(outcome.refused),
        "pools": pools,
        "fits": placed == len(pods),
        "n_minus_1_ok": all(n_minus_1),
    }


DRAWS = 4  # random tie orders tried besides the first-node one


def fit(env: Environment, n_minus_1: bool = True, draws: int = DRAWS) -> dict[str, Any]:
    """The report, each workload's placement marked guaranteed when every tie order tried (the first node,
    then DRAWS random ones, as kube-scheduler draws among equal scores) places as many of its replicas."""
    built = inputs(env)
    data = report(place(env, n_minus_1, given=built))
    counts = {(w["tenant"], w["name"]): [w["placed"]] for w in data["workloads"]}
    for seed in range(draws):
        drawn = place(env, n_minus_1=False, ties=seed, given=built)
        owner = drawn.objects.owner
        placed = Counter((owner[pod].tenant, owner[pod].name) for pod in drawn.outcome.bound)
        for key, seen in counts.items():
            seen.append(placed[key])
    for workload in data["workloads"]:
        seen = counts[(workload["tenant"], workload["name"])]
        workload["placed_range"] = [min(seen), max(seen)]
        workload["guaranteed"] = min(seen) == max(seen)
    data["tie_orders"] = 1 + draws
    data["guaranteed"] = all(w["guaranteed"] for w in data["workloads"])
    return data


def _used(pool: dict[str, Any], name: str) -> str:
    if name not in pool["allocatable"]:
        return ""
    return f"{pool['requested'][name]:g}/{pool['allocatable'][name]:g} ({pool['percent'][name]:.0f}%)"


def render(data: dict[str, Any]) -> str:
    """The fit for a terminal: pools with utilisation and N-1, then what does not fit and why."""
    lines = [f"Fit for {data['environment']}: {data['replicas']} replicas of {len(data['workloads'])} workloads "
             f"on {data['nodes']} nodes", f"(quota admission, then kube-scheduler's filters with the "
             f"{data['scoring']['strategy']} score; Volcano gangs all or none)", ""]
    header = ["POOL", "NODES", "PODS", "CPU req/alloc", "MEM GiB req/alloc", "GPU req/alloc", "N-1: LOSE", "N-1"]
    rows = []
    for pool in data["pools"]:
        requested, allocatable = pool["requested"], pool["allocatable"]
        gpus = ", ".join(f"{name.split('/', 1)[1]} {requested[name]}/{allocatable[name]}"
                         for name in allocatable if "/" in name)
        loss = pool.get("n_minus_1")
        verdict = "" if loss is None else ("ok" if loss["ok"] else f"short now: {loss['short_now']} unplaced"
                                           if loss["short_now"] else f"{loss['unplaced']} of {loss['pods_moved']} "
                                           "pods unplaced")
        rows.append([pool["name"], str(pool["nodes"]), str(pool["pods"]), _used(pool, "cpu"), _used(pool, "memory"),
                     gpus, loss["lost"] if loss else "", verdict])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    numeric = {1, 2, 3, 4}
    for row in [header, ["-" * w for w in widths], *rows]:
        lines.append("  ".join(cell.rjust(w) if i in numeric and row is not header else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    problems = [(w, entry) for w in data["workloads"] for entry in w["unplaced"]]
    refusals = [(w, entry) for w in data["workloads"] for entry in w["refused"]]
    if problems:
        lines += ["", "Not placed (the scheduler's reason):"]
        lines += [f"  {w['tenant']}/{w['name']}: {e['count']} of {w['replicas']}: {e['reason']}" for w, e in problems]
    if refusals:
        lines += ["", "Refused by quota (never created):"]
        lines += [f"  {w['tenant']}/{w['name']}: {e['count']} of {w['replicas']}, from {e['first']}: "
                  f"{_NAMED.sub('', e['reason'])}" for w, e in refusals]
    shortfalls = [pool for pool in data["pools"] if pool.get("n_minus_1") and pool["n_minus_1"]["unplaced"]]
    if shortfalls:
        lines += ["", "N-1 (the pool loses its biggest host; its pods and their gangs are placed again):"]
        for pool in shortfalls:
            loss = pool["n_minus_1"]
            lines.append(f"  {pool['name']} loses {loss['lost']}: {loss['unplaced']} of {loss['pods_moved']} pods "
                         "no longer fit")
            lines += [f"    {entry['workload']}: {entry['count']}: {entry['reason']}" for entry in loss["failures"]]
    fragile = [w for w in data["workloads"] if not w.get("guaranteed", True)]
    if fragile:
        lines += ["", f"Only possible (the count placed depends on how the scheduler breaks ties between equally "
                      f"scored nodes; {data['tie_orders']} orders tried):"]
        lines += [f"  {w['tenant']}/{w['name']}: {w['placed_range'][0]} to {w['placed_range'][1]} of "
                  f"{w['replicas']} placed" for w in fragile]
    checked = [pool for pool in data["pools"] if pool.get("n_minus_1")]
    survives = sum(pool["n_minus_1"]["ok"] for pool in checked)
    refused = f", {data['refused']} refused by quota" if data["refused"] else ""
    lines += ["", f"{data['placed']} of {data['replicas']} replicas placed{refused}; N-1: {survives} of "
                  f"{len(checked)} pools keep every pod placed when they lose their biggest host."]
    return "\n".join(lines)
