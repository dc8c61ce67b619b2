"""fit against the real thing (issue 16): for each scenario, the Nodes, quotas, agent pods and workload pods fit
builds are given to the local control plane (kube-apiserver 1.34 with its quota admission, kube-scheduler 1.34
with the inventory's configuration, kwok for the kubelets; infra/live/replay.py), and per workload the two must
agree on how many replicas each pool runs, how many stay unplaced and how many quota refuses, with the same
words. Exact nodes may differ only between alike nodes, which the per-pool counts do not see.

Where fit says a placement depends on the scheduler's tie-breaking, it must say so, and agree with the real
scheduler once given the node the real one drew.
Gangs are compared with Volcano's own scheduler and queue controller (infra/live/volcano.py: v1.14.1, built
from its Go module; the pinned chart's v1.15.1 cannot be built here) running the scheduler configuration the
cluster layer deploys. Not here: volumes (no provisioner; local volumes bind through the PersistentVolume
controller, which fit's VolumeBinding model stands in for)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from inventory_builder import add_control_plane, base_inventory, write_inventory

from infra.checks import has_errors, run_checks
from infra.cluster.nodes import POOL_LABEL
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube
from infra.live.replay import Replayed, clear, replay
from infra.live.volcano import Volcano
from infra.planning.fit import Inputs, fit, inputs, place
from infra.planning.scheduler import Outcome
from infra.spec import Environment, load_environment

Mutation = Callable[[dict[str, Any]], None]


def setting(path: str, value: Any) -> Mutation:
    """Set a dotted path under group_vars (first part: the file)."""
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = data["group_vars"]
        for part in parents:
            target = target[part]
        target[last] = value
    return mutate


def quota(tenant: str, key: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data["group_vars"]["all"]["tenants"][tenant]["quota"][key] = value
    return mutate


def workloads(declared: dict[str, Any]) -> Mutation:
    return setting("all.workloads", declared)


TINY = {"requests": {"cpu": "10m", "memory": "1Mi"}}
MIG = {"type": "mig", "profile": "1g.10gb"}

# name -> the changes to the base inventory (tests/inventory_builder.py: two cpu nodes, a mem node, an A100 node cut
# into 56 1g.10gb MIG instances, a T4 node time-sliced into 4 shared GPUs; quotas per tenant)
SCENARIOS: dict[str, list[Mutation]] = {
    # 2 GiB root disks: 1.8 GiB allocatable, seven of the LimitRange's 256Mi per node
    "ephemeral storage": [setting("all.machines.small.root_disk_gib", 2),
                          workloads({"svc": {"w": {"replicas": 16, **TINY}}})],
    # ten pods per node, one of them the Multus agent's
    "agents and max pods": [setting("cpu.kubelet_max_pods", 10), quota("svc", "pods", 100),
                            workloads({"svc": {"w": {"replicas": 21, **TINY}}})],
    "MIG exhaustion": [quota("infer", "requests.nvidia.com/mig-1g.10gb", 63),
                       workloads({"infer": {"llm": {"replicas": 9, "gpu": {**MIG, "count": 7}}}})],
    "shared GPU exhaustion": [quota("batch", "requests.nvidia.com/gpu.shared", 8),
                              workloads({"batch": {"sim": {"replicas": 5, "gpu": {"type": "shared"}}}})],
    "hugepages": [setting("mem.hugepages", {"1Gi": 3}),
                  workloads({"cache": {"w": {"replicas": 2, "requests": {"hugepages-1Gi": "2Gi", "memory": "1Gi"},
                                             "limits": {"hugepages-1Gi": "2Gi"}}}})],
    # svc's quota: 8 CPUs; and 1Gi of scratch space, four of the LimitRange's 256Mi
    "quota refusals": [setting("all.tenants.svc.quota", {"requests.cpu": 8, "requests.memory": "16Gi",
                                                         "requests.ephemeral-storage": "1Gi"}),
                       workloads({"svc": {"w": {"replicas": 6, **TINY}},
                                  "cache": {"big": {"replicas": 3, "requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}})],
    # a control-plane host outside the pools: a Node with the control-plane taint, one more in "0/N nodes"
    "control-plane nodes": [lambda data: add_control_plane(data, {"cp-1": {}}),
                            workloads({"svc": {"w": {"replicas": 3, "requests": {"cpu": "8"},
                                                     "limits": {"cpu": "8"}}}}),
                            setting("all.tenants.svc.quota", {"requests.cpu": 64, "requests.memory": "16Gi"})],
    # small pods first, then large ones: packing leaves a whole node for one large pod
    "packing order": [setting("all.tenants.svc.quota", {"requests.cpu": 64, "requests.memory": "16Gi"}),
                      workloads({"svc": {"small": {"replicas": 4, "requests": {"cpu": "3"}, "limits": {"cpu": "3"}},
                                         "large": {"replicas": 2, "requests": {"cpu": "12"},
                                                   "limits": {"cpu": "12"}}}})],
}


def gang(replicas: int, minimum: int, cpu: str) -> dict[str, Any]:
    return {"kind": "job", "replicas": replicas, "gang": minimum, "requests": {"cpu": cpu}, "limits": {"cpu": cpu}}


def roomy(data: dict[str, Any]) -> None:
    """svc may run gangs (a queue of its own: WORKLOAD-GANG-QUEUE) of 128 CPUs."""
    data["group_vars"]["all"]["tenants"]["svc"]["queue"] = {"weight": 1}
    data["group_vars"]["all"]["tenants"]["svc"]["quota"]["requests.cpu"] = 128
# Gangs, placed by Volcano's scheduler: the cpu pool's two nodes (15.8 CPUs allocatable) hold one 10-CPU pod each.
GANG_SCENARIOS: dict[str, list[Mutation]] = {
    # three members must run together and only two fit: none is bound (kube-scheduler would bind two)
    "gang too big": [roomy, workloads({"svc": {"train": gang(3, 3, "10")}})],
    # minMember 2 of 4: the two that fit run, the others wait
    "gang above its minimum": [roomy, workloads({"svc": {"train": gang(4, 2, "10")}})],
    # two gangs want the whole pool: the one of higher priority runs, whichever is declared first
    "gangs by priority": [roomy, setting("all.tenants.batch.pools", ["cpu", "t4"]),
                          quota("batch", "requests.cpu", 128), setting("all.tenants.batch.queue", {"weight": 2}),
                          workloads({"batch": {"sweep": gang(2, 2, "10")}, "svc": {"train": gang(2, 2, "10")}})],
    # batch's queue may hold 8 CPUs (its capability): a gang of 3 x 3 CPUs fits the nodes, not the queue
    "queue capability": [setting("all.tenants.batch.pools", ["cpu", "t4"]), quota("batch", "requests.cpu", 64),
                         workloads({"batch": {"sweep": gang(3, 3, "3")}})],
}


@pytest.fixture(scope="module")
def kube(cluster: LocalCluster) -> Iterator[Kube]:
    yield cluster.api()


@pytest.fixture(scope="module")
def volcano(cluster: LocalCluster) -> Iterator[Volcano]:
    with Volcano(cluster) as running:
        yield running


def environment(tmp_path: Path, changes: list[Mutation]) -> Environment:
    data = base_inventory()
    for change in changes:
        change(data)
    return load_environment(write_inventory(tmp_path / "env", data))


def on_the_cluster(kube: Kube, env: Environment, built: Inputs, volcano: bool = False) -> Replayed:
    try:
        return replay(kube, env, built, volcano=volcano)
    finally:
        clear(kube, env, built)


def per_workload(built: Inputs, bound: dict[str, str], unplaced: dict[str, str],
                 refused: dict[str, str]) -> dict[str, Any]:
    """workload -> placed per pool, and the unplaced and refused pods with their messages."""
    pool_of = {node["metadata"]["name"]: node["metadata"]["labels"].get(POOL_LABEL) for node in built.nodes}
    out: dict[str, Any] = {}
    for pod, owner in built.objects.owner.items():
        entry = out.setdefault(f"{owner.tenant}/{owner.name}", {"pools": Counter(), "unplaced": {}, "refused": {}})
        if pod in bound:
            entry["pools"][pool_of[bound[pod]]] += 1
        elif pod in unplaced:
            entry["unplaced"][pod] = unplaced[pod]
        elif pod in refused:
            entry["refused"][pod] = refused[pod]
    return out


def differences(real: dict[str, Any], simulated: dict[str, Any]) -> str:
    """Per workload and part, what the real cluster did and what fit said, where they differ."""
    return "\n".join(f"{workload} {part}:\n  real: {real.get(workload, {}).get(part)}\n  fit:  {entry[part]}"
                     for workload, entry in simulated.items() for part in entry
                     if real.get(workload, {}).get(part) != entry[part])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fit_and_the_real_scheduler_agree(kube: Kube, tmp_path: Path, scenario: str) -> None:
    env = environment(tmp_path, SCENARIOS[scenario])
    assert not has_errors(run_checks(env)), "a scenario the checks accept, as `fit` runs only on those"
    built = inputs(env)
    simulated: Outcome = place(env, n_minus_1=False, given=built).outcome
    real = on_the_cluster(kube, env, built)
    want = per_workload(built, simulated.bound, simulated.unschedulable, simulated.refused)
    got = per_workload(built, real.bound, real.unschedulable, real.refused)
    assert got == want, differences(got, want)
    assert any(entry["unplaced"] or entry["refused"] for entry in want.values()) or scenario == "packing order", \
        "each scenario but the packing one runs something out"


def test_where_ties_decide_fit_says_so_and_agrees_with_the_real_draw(kube: Kube, tmp_path: Path) -> None:
    """The cpu and mem nodes are alike: svc's one-replica job may take either, and if it takes the mem node the
    cache's large pod no longer fits there. fit marks the cache only possible; and given the node the real
    scheduler drew for the job first, fit's placement is the real one, reasons included."""
    env = environment(tmp_path, [
        setting("all.tenants.svc.pools", ["cpu", "mem"]), quota("cache", "requests.cpu", 16),
        workloads({"svc": {"job": {"replicas": 1, "requests": {"cpu": "6"}, "limits": {"cpu": "6"}}},
                   "cache": {"db": {"replicas": 1, "requests": {"cpu": "12", "memory": "2Gi"},
                                    "limits": {"cpu": "12", "memory": "2Gi"}}}})])
    report = {f"{w['tenant']}/{w['name']}": w for w in fit(env, n_minus_1=False)["workloads"]}
    assert report["cache/db"]["placed_range"] == [0, 1] and not report["cache/db"]["guaranteed"]
    assert report["svc/job"]["guaranteed"]
    built = inputs(env)
    real = on_the_cluster(kube, env, built)
    drawn = real.bound["svc/job-0"]
    first = replace(built, nodes=sorted(built.nodes, key=lambda node: node["metadata"]["name"] != drawn))
    simulated = place(env, n_minus_1=False, given=first).outcome
    assert simulated.bound["svc/job-0"] == drawn
    got = per_workload(first, real.bound, real.unschedulable, real.refused)
    want = per_workload(first, simulated.bound, simulated.unschedulable, simulated.refused)
    assert got == want, differences(got, want)


@pytest.mark.parametrize("scenario", GANG_SCENARIOS)
def test_fit_and_volcano_agree_on_gangs(kube: Kube, volcano: Volcano, tmp_path: Path, scenario: str) -> None:
    env = environment(tmp_path, GANG_SCENARIOS[scenario])
    assert not has_errors(run_checks(env)), "a scenario the checks accept, as `fit` runs only on those"
    built = inputs(env)
    assert built.objects.pod_groups, "every gang scenario has a PodGroup"
    simulated: Outcome = place(env, n_minus_1=False, given=built).outcome
    real = on_the_cluster(kube, env, built, volcano=True)
    want = per_workload(built, simulated.bound, simulated.unschedulable, simulated.refused)
    got = per_workload(built, real.bound, real.unschedulable, real.refused)
    assert volcano_view(got) == volcano_view(want), differences(got, want)
    assert any(entry["unplaced"] for entry in want.values()) or scenario == "gangs by priority"


SHORTAGE = re.compile(r"\d+ Insufficient [\w./-]*\w")


def volcano_view(workloads: dict[str, Any]) -> dict[str, Any]:
    """Per workload what Volcano's words can be held to: placed per pool, refused, how many stay unplaced and
    the resources nodes are short of. Not the rest of the wording: vc-scheduler names the gang's pods and
    nodes ("Pod svc/train-1 can possibly be assigned to cpu-1, once ... minAvailable is satisfied"), and where
    a node fails two of its filters it reports one drawn at random (predicates.go runs them from a Go map and
    stops at the first that rules the node out), so "node(s) had untolerated taint {pool: mem}" and "node(s)
    didn't match Pod's node affinity/selector" take turns for the same node."""
    return {name: {"pools": entry["pools"], "refused": entry["refused"], "unplaced": len(entry["unplaced"]),
                   "short of": sorted({found for message in entry["unplaced"].values()
                                       for found in SHORTAGE.findall(message)})}
            for name, entry in workloads.items()}
