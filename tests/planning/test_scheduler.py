"""The scheduler and quota admission over plain Kubernetes objects: each filter failing and passing, the
score, gangs, volumes, the API server's messages, and the bucketed fast path against a per-node reference."""

import random

import pytest

from infra.model.scheduler import Scoring, scheduler_configuration, scoring_of
from infra.planning.admission import Quotas
from infra.planning.scheduler import (
    GROUP_ANNOTATION,
    NO_PROVISIONER,
    Cluster,
    no_nodes_message,
)

# What DefaultPreemption appends when it evicts nothing, on one node: the node failed for want of more than it
# has (or on a filter preemption cannot change), or for want of what pods of no lower priority hold.
NOT_HELPFUL = " no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
NO_VICTIMS = " no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."


def node(name, cpu="4", memory="8Gi", pods="110", labels=None, taints=None, unschedulable=False, extra=None):
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    item = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"taints": list(taints or [])}, "status": {"allocatable": allocatable}}
    if unschedulable:
        item["spec"]["unschedulable"] = True
    return item


def pod(name, cpu="1", memory="1Gi", namespace="t", priority=0, tolerations=None, selector=None, terms=None,
        limits=None, claim=None, group=None, extra=None):
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    requests.update(extra or {})
    spec = {"priority": priority, "containers": [{"name": "c", "resources": {"requests": requests, "limits": limits or {}}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    if selector:
        spec["nodeSelector"] = selector
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    metadata = {"name": name, "namespace": namespace}
    if group:
        metadata["annotations"] = {GROUP_ANNOTATION: group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def one(nodes, item, claims=(), **kwargs):
    """Schedule one pod; the node it lands on, or the scheduler's message."""
    outcome = Cluster(nodes, **kwargs).schedule([item], claims)
    return outcome.bound.get("t/" + item["metadata"]["name"]) or outcome.unschedulable["t/" + item["metadata"]["name"]]


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


# ---------------------------------------------------------------- NodeResourcesFit


@pytest.mark.parametrize("asked, fits, reason", [
    ({"cpu": "4"}, True, ""),
    ({"cpu": "4001m"}, False, "1 Insufficient cpu"),
    ({"memory": "8Gi"}, True, ""),
    ({"memory": "8193Mi"}, False, "1 Insufficient memory"),
    ({"nvidia.com/mig-3g.40gb": "2"}, True, ""),
    ({"nvidia.com/mig-3g.40gb": "3"}, False, "1 Insufficient nvidia.com/mig-3g.40gb"),
    ({"hugepages-1Gi": "4Gi"}, True, ""),
    ({"hugepages-1Gi": "5Gi"}, False, "1 Insufficient hugepages-1Gi"),
    ({"nvidia.com/gpu": "1"}, False, "1 Insufficient nvidia.com/gpu"),  # a resource the node does not have at all
    ({"cpu": "5", "memory": "9Gi"}, False, "1 Insufficient cpu, 1 Insufficient memory"),  # every shortfall counts
])
def test_node_resources_fit(asked, fits, reason):
    target = node("n1", extra={"nvidia.com/mig-3g.40gb": "2", "hugepages-1Gi": "4Gi"})
    asked = {"cpu": "1", "memory": "1Gi", **asked}
    item = pod("p", cpu=asked.pop("cpu"), memory=asked.pop("memory"), extra=asked)
    assert one([target], item) == ("n1" if fits else f"0/1 nodes are available: {reason}.{NOT_HELPFUL}")


def test_max_pods_is_a_resource_too():
    cluster = Cluster([node("n1", pods="2")])
    outcome = cluster.schedule([pod(f"p{i}", cpu="10m", memory="1Mi") for i in range(3)])
    assert sorted(outcome.bound) == ["t/p0", "t/p1"]
    assert outcome.unschedulable == {"t/p2": "0/1 nodes are available: 1 Too many pods." + NO_VICTIMS}


def test_requests_add_up_across_pods_on_a_node():
    outcome = Cluster([node("n1", cpu="4")]).schedule([pod("a", cpu="3"), pod("b", cpu="1"), pod("c", cpu="1m")])
    assert outcome.bound == {"t/a": "n1", "t/b": "n1"}
    assert outcome.unschedulable["t/c"] == "0/1 nodes are available: 1 Insufficient cpu." + NO_VICTIMS


def test_init_containers_count_at_their_largest_and_overhead_on_top():
    item = pod("p", cpu="1")
    item["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "3"}}}]
    item["spec"]["overhead"] = {"cpu": "1"}
    assert one([node("n1", cpu="4")], item) == "n1"
    item["spec"]["overhead"] = {"cpu": "1001m"}
    assert one([node("n1", cpu="4")], item) == "0/1 nodes are available: 1 Insufficient cpu." + NOT_HELPFUL


# ---------------------------------------------------------------- TaintToleration, NodeAffinity, NodeUnschedulable


@pytest.mark.parametrize("taint, toleration, fits", [
    (GPU_TAINT, None, False),
    (GPU_TAINT, {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
    (GPU_TAINT, {"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent", "effect": "NoSchedule"}, False),
    (GPU_TAINT, {"key": "nvidia.com/gpu", "operator": "Exists"}, True),  # no effect: every effect
    (GPU_TAINT, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    (GPU_TAINT, {"operator": "Exists"}, True),  # no key: every taint
    ({**GPU_TAINT, "effect": "NoExecute"}, None, False),
    ({**GPU_TAINT, "effect": "PreferNoSchedule"}, None, True),  # scored, never filtered
])
def test_taint_toleration(taint, toleration, fits):
    item = pod("p", tolerations=[toleration] if toleration else None)
    expected = "n1" if fits else "0/1 nodes are available: 1 node(s) had untolerated taint(s)." + NOT_HELPFUL
    assert one([node("n1", taints=[taint])], item) == expected


LABELS = {"k8s-node-pools.io/pool": "gpu_a100", "generation": "4"}


@pytest.mark.parametrize("selector, terms, fits", [
    ({"k8s-node-pools.io/pool": "gpu_a100"}, None, True),
    ({"k8s-node-pools.io/pool": "cpu_general"}, None, False),
    (None, [{"matchExpressions": [{"key": "k8s-node-pools.io/pool", "operator": "In", "values": ["x", "gpu_a100"]}]}], True),
    (None, [{"matchExpressions": [{"key": "k8s-node-pools.io/pool", "operator": "In", "values": ["x"]}]}], False),
    (None, [{"matchExpressions": [{"key": "k8s-node-pools.io/pool", "operator": "NotIn", "values": ["x"]}]}], True),
    (None, [{"matchExpressions": [{"key": "generation", "operator": "Gt", "values": ["3"]}]}], True),
    (None, [{"matchExpressions": [{"key": "generation", "operator": "Gt", "values": ["4"]}]}], False),
    (None, [{"matchExpressions": [{"key": "generation", "operator": "Lt", "values": ["5"]}]}], True),
    (None, [{"matchExpressions": [{"key": "gone", "operator": "DoesNotExist"}]}], True),
    (None, [{"matchExpressions": [{"key": "gone", "operator": "Exists"}]}], False),
    (None, [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], True),
    (None, [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}], False),
    # terms are ORed, expressions within a term ANDed; an empty term matches nothing
    (None, [{"matchExpressions": [{"key": "gone", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "generation", "operator": "In", "values": ["4"]}]}], True),
    (None, [{"matchExpressions": [{"key": "generation", "operator": "In", "values": ["4"]},
                                  {"key": "gone", "operator": "Exists"}]}], False),
    (None, [{}], False),
])
def test_node_affinity_and_selector(selector, terms, fits):
    item = pod("p", selector=selector, terms=terms)
    expected = "n1" if fits else "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector." + NOT_HELPFUL
    assert one([node("n1", labels=LABELS)], item) == expected


def test_node_unschedulable():
    assert one([node("n1", unschedulable=True)], pod("p")) == ("0/1 nodes are available: 1 node(s) were unschedulable."
                                                               + NOT_HELPFUL)
    assert one([node("n1", unschedulable=False)], pod("p")) == "n1"


def test_each_node_reports_its_first_failing_filter_in_the_default_order():
    """Unschedulable, then taints, then affinity, then resources: a node fails once, for its first reason."""
    nodes = [node("cordoned", unschedulable=True, taints=[GPU_TAINT]), node("tainted", taints=[GPU_TAINT], cpu="1"),
             node("elsewhere", cpu="1"), node("small", cpu="1", labels={"pool": "a"})]
    assert one(nodes, pod("p", cpu="2", selector={"pool": "a"})) == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. no new claims to deallocate, preemption: 0/4 nodes are available: "
        "4 Preemption is not helpful for scheduling.")


def test_the_message_is_kube_schedulers_sorted_histogram():
    mig = [node(f"mig-{i}", taints=[GPU_TAINT], extra={"nvidia.com/mig-3g.40gb": "0"}) for i in range(2)]
    others = [node(f"gpu-{i}", taints=[GPU_TAINT]) for i in range(7)]
    item = pod("p", extra={"nvidia.com/mig-3g.40gb": "1"}, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
               terms=[{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["mig-0", "mig-1"]}]}])
    for n in mig + others:
        n["metadata"]["labels"]["kubernetes.io/hostname"] = n["metadata"]["name"]
    item["spec"]["tolerations"] = []
    assert one(mig + others, item) == ("0/9 nodes are available: 9 node(s) had untolerated taint(s). no new claims to deallocate, preemption: "
                                       "0/9 nodes are available: 9 Preemption is not helpful for scheduling.")
    item["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    for n in others:
        n["spec"]["taints"] = [GPU_TAINT, {"key": "workload-profile", "value": "training", "effect": "NoSchedule"}]
    assert one(mig + others, item) == (  # one reason for any taint, as kube-scheduler 1.32 and later word it
        "0/9 nodes are available: 2 Insufficient nvidia.com/mig-3g.40gb, 7 node(s) had untolerated taint(s). "
        "no new claims to deallocate, preemption: 0/9 nodes are available: 9 Preemption is not helpful for scheduling.")
    assert no_nodes_message(9, {"node(s) had untolerated taint(s)": 7, "Insufficient nvidia.com/mig-3g.40gb": 2}) == (
        "0/9 nodes are available: 2 Insufficient nvidia.com/mig-3g.40gb, 7 node(s) had untolerated taint(s).")


def test_preemption_says_where_it_found_no_victims_and_where_it_cannot_help():
    """Nodes short of what bound pods of no lower priority hold are where DefaultPreemption's dry run looks and
    finds no victims; a node short of more than it has, or failing another filter, is not helped."""
    nodes = [node("a", cpu="4"), node("b", cpu="4"), node("c", cpu="1"), node("gpu", taints=[GPU_TAINT])]
    cluster = Cluster(nodes)
    outcome = cluster.schedule([pod("x", cpu="3"), pod("y", cpu="3"), pod("z", cpu="2")])
    assert outcome.unschedulable == {"t/z": (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/4 nodes are available: 2 No preemption victims found for incoming pod, 2 Preemption is not helpful "
        "for scheduling.")}
    never = pod("w", cpu="2")
    never["spec"]["preemptionPolicy"] = "Never"  # what the Priority admission copies from a class that says so
    assert Cluster(nodes).schedule([pod("x", cpu="3"), pod("y", cpu="3"), never]).unschedulable == {"t/w": (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient cpu. "
        "no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never.")}


# ---------------------------------------------------------------- score, queue order


def test_most_allocated_packs_onto_the_fuller_node():
    cluster = Cluster([node("empty", cpu="8"), node("busy", cpu="8", labels={"h": "busy"})])
    cluster.schedule([pod("first", cpu="4", selector={"h": "busy"})])
    assert cluster.schedule([pod("second", cpu="1")]).bound == {"t/second": "busy"}


def test_ties_go_to_the_first_node_in_order():
    assert Cluster([node("b"), node("a")]).schedule([pod("p")]).bound == {"t/p": "b"}


def test_pods_without_requests_count_the_non_zero_defaults_when_scoring():
    # both nodes have 1 CPU free by requests; the one holding a pod without requests looks fuller
    cluster = Cluster([node("x", cpu="2", labels={"h": "x"}), node("y", cpu="2", labels={"h": "y"})])
    cluster.schedule([pod("none", cpu=None, memory=None, selector={"h": "y"})])
    assert cluster.schedule([pod("p", cpu="1", memory=None)]).bound == {"t/p": "y"}


def test_higher_priority_pods_are_placed_first_whatever_the_order_given():
    outcome = Cluster([node("n1", cpu="2")]).schedule([pod("low", cpu="2", priority=1), pod("high", cpu="2", priority=9)])
    assert outcome.bound == {"t/high": "n1"}
    assert "t/low" in outcome.unschedulable


def test_the_configuration_to_run_kube_scheduler_with_reads_back_as_its_scoring():
    scoring = Scoring("LeastAllocated", (("cpu", 2), ("memory", 1), ("nvidia.com/gpu", 5)))
    config = scheduler_configuration(scoring)
    [profile] = config["profiles"]
    assert config["percentageOfNodesToScore"] == 100
    assert profile["plugins"]["score"] == {"disabled": [{"name": "*"}],
                                           "enabled": [{"name": "NodeResourcesFit", "weight": 1}]}
    assert profile["pluginConfig"][0]["args"]["scoringStrategy"] == {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 5}]}
    assert scoring_of(config) == scoring


def _strategy(config):
    return config["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]


@pytest.mark.parametrize("change, refusal", [
    (lambda c: c.pop("percentageOfNodesToScore"), "percentageOfNodesToScore must be 100"),
    (lambda c: c["profiles"].append({"schedulerName": "volcano"}), "one profile, default-scheduler"),
    (lambda c: c["profiles"][0].update(schedulerName="other"), "one profile, default-scheduler"),
    (lambda c: c["profiles"][0]["plugins"]["score"]["enabled"].append({"name": "ImageLocality"}),
     "enable NodeResourcesFit alone"),
    (lambda c: c["profiles"][0]["plugins"].pop("score"), "enable NodeResourcesFit alone"),
    (lambda c: _strategy(c).update(type="RequestedToCapacityRatio"), "fit simulates MostAllocated and LeastAllocated"),
    (lambda c: _strategy(c).update(resources=[]), "resources is empty"),
    (lambda c: _strategy(c)["resources"].append({"name": "ephemeral-storage"}), "'ephemeral-storage': fit scores"),
    (lambda c: _strategy(c)["resources"][0].update(weight=0), "weight 0 is not from 1 to 100"),
])
def test_a_configuration_fit_cannot_simulate_is_refused_naming_what(change, refusal):
    config = scheduler_configuration(Scoring())
    assert scoring_of(config) == Scoring()
    change(config)
    with pytest.raises(ValueError, match=refusal):
        scoring_of(config)


@pytest.mark.parametrize("strategy, chosen", [("MostAllocated", "busy"), ("LeastAllocated", "idle")])
def test_the_strategy_packs_or_spreads(strategy, chosen):
    cluster = Cluster([node("busy", cpu="8"), node("idle", cpu="8")], scoring=Scoring(strategy, (("cpu", 1),)))
    assert cluster.pin(pod("there", cpu="4"), "busy")
    assert cluster.schedule([pod("p", cpu="1")]).bound == {"t/p": chosen}


def test_weights_decide_between_resources():
    """busy-cpu is fuller in cpu, busy-gpu in GPUs: the heavier weight wins (MostAllocated)."""
    nodes = [node("busy-cpu", cpu="8", extra={"nvidia.com/gpu": "8"}),
             node("busy-gpu", cpu="8", extra={"nvidia.com/gpu": "8"})]
    for weights, chosen in (((("cpu", 10), ("nvidia.com/gpu", 1)), "busy-cpu"),
                            ((("cpu", 1), ("nvidia.com/gpu", 10)), "busy-gpu"),
                            ((("cpu", 1),), "busy-cpu")):  # a resource not listed is not scored
        cluster = Cluster(nodes, scoring=Scoring("MostAllocated", weights))
        assert cluster.pin(pod("cpu-heavy", cpu="6", extra={"nvidia.com/gpu": "1"}), "busy-cpu")
        assert cluster.pin(pod("gpu-heavy", cpu="1", extra={"nvidia.com/gpu": "6"}), "busy-gpu")
        assert cluster.schedule([pod("p", cpu="1", extra={"nvidia.com/gpu": "1"})]).bound == {"t/p": chosen}, weights


# ---------------------------------------------------------------- gangs


def test_a_gang_is_placed_whole_or_not_at_all():
    group = {"metadata": {"name": "job", "namespace": "t"}, "spec": {"minMember": 3}}
    members = [pod(f"w{i}", cpu="2", group="job") for i in range(3)]
    outcome = Cluster([node("n1", cpu="4")]).schedule([*members, pod("small", cpu="1")], pod_groups=[group])
    assert outcome.bound == {"t/small": "n1"}  # what the gang held for a moment is free again
    assert all(outcome.unschedulable[f"t/w{i}"].startswith("gang t/job: 2 of minMember 3 pods fit, so none is bound")
               for i in range(3))


def test_gangs_of_one_priority_take_their_turns_in_a_drawn_order_given_a_seed():
    """Two 4-CPU nodes: `wide` (2 x 3 CPUs) first leaves no room for `many` (3 x 1 CPU) and the other way round.
    Volcano orders such jobs by UID when they are created in the same second; with a seed, so does the model."""
    groups = [{"metadata": {"name": name, "namespace": "t"}, "spec": {"minMember": size}}
              for name, size in (("wide", 2), ("many", 3))]
    members = [pod(f"wide-{i}", cpu="3", group="wide") for i in range(2)] + [
        pod(f"many-{i}", cpu="1", group="many") for i in range(3)]

    def bound_gangs(ties):
        outcome = Cluster([node("a"), node("b")], ties=ties).schedule(members, pod_groups=groups)
        return tuple(sorted({name.split("/")[1].split("-")[0] for name in outcome.bound}))

    assert bound_gangs(None) == ("wide",)  # without a seed: the order given
    assert {bound_gangs(seed) for seed in range(8)} == {("wide",), ("many",)}


def test_a_gang_missing_members_is_not_bound():
    group = {"metadata": {"name": "job", "namespace": "t"}, "spec": {"minMember": 3}}
    outcome = Cluster([node("n1", cpu="8")]).schedule([pod(f"w{i}", cpu="1", group="job") for i in range(2)],
                                                      pod_groups=[group])
    assert outcome.bound == {}
    assert outcome.unschedulable["t/w0"] == ("gang t/job: 2 pods admitted for minMember 3 (the others were refused), "
                                            "so none is bound (Volcano gang scheduling)")


def test_a_gang_with_min_member_below_its_size_keeps_what_fits():
    group = {"metadata": {"name": "job", "namespace": "t"}, "spec": {"minMember": 2}}
    outcome = Cluster([node("n1", cpu="4")]).schedule([pod(f"w{i}", cpu="2", group="job") for i in range(3)],
                                                      pod_groups=[group])
    assert sorted(outcome.bound) == ["t/w0", "t/w1"]
    assert outcome.unschedulable == {"t/w2": "0/1 nodes are available: 1 Insufficient cpu." + NO_VICTIMS}


def test_a_gang_stays_within_its_queue_s_capability():
    """batch's queue may hold 5 CPUs: of three 2-CPU members two fit it, on a node with room for all three."""
    queue = {"metadata": {"name": "batch"}, "spec": {"capability": {"cpu": "5"}}}
    members = [pod(f"w{i}", cpu="2", group="job") for i in range(3)]
    for minimum, bound in ((3, []), (2, ["t/w0", "t/w1"])):
        group = {"metadata": {"name": "job", "namespace": "t"}, "spec": {"minMember": minimum, "queue": "batch"}}
        outcome = Cluster([node("n1", cpu="8")]).schedule(members, pod_groups=[group], queues=[queue])
        assert sorted(outcome.bound) == bound, minimum
        assert "queue batch is overused: its capability has no room for cpu" in outcome.unschedulable["t/w2"]
    # another queue's capability, or none, does not bound it
    for named in ("default", None):
        group = {"metadata": {"name": "job", "namespace": "t"}, "spec": {"minMember": 3, "queue": named}}
        assert len(Cluster([node("n1", cpu="8")]).schedule(members, pod_groups=[group], queues=[queue]).bound) == 3


def test_a_queue_s_capability_counts_what_its_earlier_gangs_hold():
    queue = {"metadata": {"name": "batch"}, "spec": {"capability": {"cpu": "5"}}}
    groups = [{"metadata": {"name": name, "namespace": "t"}, "spec": {"minMember": 2, "queue": "batch"}}
              for name in ("first", "second")]
    members = [pod(f"{name}-{i}", cpu="1500m", group=name) for name in ("first", "second") for i in range(2)]
    outcome = Cluster([node("n1", cpu="8")]).schedule(members, pod_groups=groups, queues=[queue])
    assert sorted(outcome.bound) == ["t/first-0", "t/first-1"]  # 3 CPUs held, 2 left: one more member, not two


# ---------------------------------------------------------------- VolumeBinding


def volume(name, host, size, storage_class="local"):
    return {"metadata": {"name": name}, "spec": {"capacity": {"storage": size}, "storageClassName": storage_class,
                                                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}}}


def claim(name, size, storage_class="local"):
    return {"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "t"},
            "spec": {"storageClassName": storage_class, "resources": {"requests": {"storage": size}}}}


CLASSES = [{"metadata": {"name": "local"}, "provisioner": NO_PROVISIONER},
           {"metadata": {"name": "nfs"}, "provisioner": "nfs.csi.k8s.io"}]


def test_a_local_claim_needs_a_free_volume_on_the_node():
    nodes = [node("a", labels={"kubernetes.io/hostname": "a"}), node("b", labels={"kubernetes.io/hostname": "b"})]
    volumes = [volume("small", "b", "50Gi"), volume("big", "b", "200Gi"), volume("mid", "b", "100Gi")]
    cluster = Cluster(nodes, volumes, CLASSES)
    outcome = cluster.schedule([pod("p", claim="c1"), pod("q", claim="c2"), pod("r", claim="c3")],
                               [claim("c1", "60Gi"), claim("c2", "100Gi"), claim("c3", "100Gi")])
    assert outcome.bound == {"t/p": "b", "t/q": "b"}
    assert outcome.claims == {"t/c1": "mid", "t/c2": "big"}  # the smallest volume that holds the claim
    assert outcome.unschedulable["t/r"] == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. no new claims to deallocate, preemption: 0/2 nodes "
        "are available: 2 Preemption is not helpful for scheduling.")


def test_a_claim_of_a_provisioned_class_binds_anywhere():
    assert one([node("a")], pod("p", claim="c1"), claims=[claim("c1", "1Pi", "nfs")], storage_classes=CLASSES) == "a"


# ---------------------------------------------------------------- losing a node


def test_a_lost_node_gives_back_its_pods_and_takes_its_volumes():
    nodes = [node("a", labels={"kubernetes.io/hostname": "a"}), node("b", labels={"kubernetes.io/hostname": "b"})]
    cluster = Cluster(nodes, [volume("va", "a", "1Gi"), volume("vb", "b", "1Gi")], CLASSES)
    claims = [claim("c1", "1Gi")]
    assert cluster.schedule([pod("p", claim="c1")], claims).bound == {"t/p": "a"}
    trial = cluster.clone()
    assert trial.remove_node("a") == ["t/p"]
    assert trial.schedule([pod("p", claim="c1")], claims).bound == {"t/p": "b"}
    assert cluster.node_of("t/p") == "a"  # the clone changed nothing of the original


# ---------------------------------------------------------------- quota admission


def quota(hard):
    return {"metadata": {"name": "t", "namespace": "t"}, "spec": {"hard": hard}}


def test_quota_admits_up_to_hard_and_refuses_with_the_api_servers_message():
    quotas = Quotas([quota({"requests.cpu": "4"})])
    assert quotas.admit(pod("a", cpu="3")) is None
    assert quotas.admit(pod("b", cpu="1")) is None
    assert quotas.admit(pod("c", cpu="500m")) == ('pods "c" is forbidden: exceeded quota: t, requested: '
                                                  "requests.cpu=500m, used: requests.cpu=4, limited: requests.cpu=4")


def test_quota_counts_memory_extended_resources_and_pods():
    quotas = Quotas([quota({"requests.memory": "2Gi", "pods": "3", "requests.nvidia.com/gpu": "1"})])
    assert quotas.admit(pod("a", memory="1Gi")) is None
    assert quotas.admit(pod("b", memory="1025Mi")).endswith(
        "requested: requests.memory=1025Mi, used: requests.memory=1Gi, limited: requests.memory=2Gi")
    assert quotas.admit(pod("c", memory="512Mi", extra={"nvidia.com/gpu": "1"})) is None
    assert quotas.admit(pod("d", memory="1Mi", extra={"nvidia.com/gpu": "1"})).endswith(
        "exceeded quota: t, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, "
        "limited: requests.nvidia.com/gpu=1")
    assert quotas.admit(pod("e", memory="1Mi")) is None
    assert quotas.admit(pod("f", memory="1Mi")).endswith("requested: pods=1, used: pods=3, limited: pods=3")


def test_a_quota_on_memory_refuses_pods_that_do_not_request_it():
    quotas = Quotas([quota({"requests.memory": "2Gi"})])
    assert quotas.admit(pod("a", memory=None)) == 'pods "a" is forbidden: failed quota: t: must specify requests.memory'


def test_a_quota_on_limits_refuses_pods_without_limits():
    quotas = Quotas([quota({"limits.cpu": "4"})])
    assert quotas.admit(pod("a")) == 'pods "a" is forbidden: failed quota: t: must specify limits.cpu'
    assert quotas.admit(pod("b", limits={"cpu": "1"})) is None


def test_quota_counts_claims_per_storage_class():
    quotas = Quotas([quota({"local.storageclass.storage.k8s.io/requests.storage": "100Gi"})])
    assert quotas.admit(claim("c1", "60Gi")) is None
    assert quotas.admit(claim("c2", "50Gi", "nfs")) is None  # another class: not this quota's
    assert quotas.admit(claim("c3", "50Gi")) == (
        'persistentvolumeclaims "c3" is forbidden: exceeded quota: t, requested: '
        "local.storageclass.storage.k8s.io/requests.storage=50Gi, used: "
        "local.storageclass.storage.k8s.io/requests.storage=60Gi, limited: "
        "local.storageclass.storage.k8s.io/requests.storage=100Gi")


def test_another_namespace_is_not_charged():
    quotas = Quotas([quota({"requests.cpu": "1"})])
    assert quotas.admit(pod("a", cpu="8", namespace="other")) is None


# ---------------------------------------------------------------- the fast path is the per-node definition


def reference(nodes, pods, scoring):
    """kube-scheduler one node at a time, with the filters and score written out plainly."""
    weights = dict(scoring.weights)
    def amount(name, value):
        from infra.planning.filters import amount_of
        return amount_of(name, str(value))

    free = [{k: amount(k, v) for k, v in n["status"]["allocatable"].items()} for n in nodes]
    held = [[0, 0] for _ in nodes]
    placed, failed = {}, {}
    for item in sorted(pods, key=lambda p: -p["spec"]["priority"]):
        requests = {k: amount(k, v) for k, v in item["spec"]["containers"][0]["resources"]["requests"].items()}
        requests["pods"] = 1
        best, reasons, why_of = None, {}, {}
        for i, n in enumerate(nodes):
            taint = next((t for t in n["spec"]["taints"] if not any(
                tol.get("key") == t["key"] for tol in item["spec"].get("tolerations", []))), None)
            if taint:
                why = ["node(s) had untolerated taint(s)"]
            elif any(n["metadata"]["labels"].get(k) != v for k, v in item["spec"].get("nodeSelector", {}).items()):
                why = ["node(s) didn't match Pod's node affinity/selector"]
            else:
                why = [("Too many pods" if k == "pods" else f"Insufficient {k}") for k, v in requests.items()
                       if v > free[i].get(k, 0)]
            why_of[i] = why or [""]
            if why:
                for reason in why:
                    reasons[reason] = reasons.get(reason, 0) + 1
                continue
            alloc = {k: amount(k, v) for k, v in n["status"]["allocatable"].items()}
            asked = [("cpu", held[i][0] + requests.get("cpu", 100)), ("memory", held[i][1] + requests.get("memory", 200 * 2**20))]
            asked += [(k, alloc[k] - free[i][k] + v) for k, v in requests.items() if "/" in k]
            parts = [(k, r) for k, r in asked if k in weights and alloc.get(k)]
            if scoring.strategy == "MostAllocated":
                total = sum(min(r, alloc[k]) * 100 // alloc[k] * weights[k] for k, r in parts)
            else:
                total = sum((alloc[k] - r) * 100 // alloc[k] * weights[k] if r <= alloc[k] else 0 for k, r in parts)
            score = total // sum(weights[k] for k, _ in parts) if parts else 0
            if best is None or score > best[0]:
                best = (score, i)
        if best is None:
            short = sum(1 for i, n in enumerate(nodes) if not why_of[i][0].startswith("node(s)"))
            clause = f"no new claims to deallocate, preemption: 0/{len(nodes)} nodes are available: " + ", ".join(sorted(
                f"{count} {reason}" for reason, count in (("No preemption victims found for incoming pod", short),
                                                          ("Preemption is not helpful for scheduling",
                                                           len(nodes) - short)) if count)) + "."
            failed[f"t/{item['metadata']['name']}"] = f"{no_nodes_message(len(nodes), reasons)} {clause}"
            continue
        i = best[1]
        for k, v in requests.items():
            free[i][k] -= v
        held[i][0] += requests.get("cpu", 100)
        held[i][1] += requests.get("memory", 200 * 2**20)
        placed[f"t/{item['metadata']['name']}"] = nodes[i]["metadata"]["name"]
    return placed, failed


@pytest.mark.parametrize("seed", range(25))
def test_bucketed_placement_equals_trying_every_node(seed):
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(1, 30)):
        kind = rng.choice(["cpu", "gpu", "mig"])
        taints = [] if kind == "cpu" else [GPU_TAINT]
        extra = {"nvidia.com/gpu": "8"} if kind == "gpu" else {"nvidia.com/mig-1g.10gb": "14"} if kind == "mig" else {}
        nodes.append(node(f"n{i:02d}", cpu=rng.choice(["8", "16", "31500m"]), memory=rng.choice(["32Gi", "64Gi"]),
                          pods=rng.choice(["10", "110"]), labels={"pool": kind}, taints=taints, extra=extra))
    pods = []
    for i in range(rng.randint(1, 120)):
        kind = rng.choice(["cpu", "gpu", "mig", "any"])
        extra = {"nvidia.com/gpu": str(rng.randint(1, 8))} if kind == "gpu" else (
            {"nvidia.com/mig-1g.10gb": str(rng.randint(1, 3))} if kind == "mig" else {})
        pods.append(pod(f"p{i:03d}", cpu=rng.choice(["250m", "1", "2", "7"]), memory=rng.choice(["512Mi", "4Gi", "16Gi"]),
                        priority=rng.choice([0, 0, 10]),
                        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}] if kind != "cpu" else None,
                        selector=None if kind == "any" else {"pool": kind}, extra=extra))
    weights = [(name, rng.randint(1, 5)) for name in ("cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb")
               if rng.random() < 0.8]
    scoring = Scoring(rng.choice(["MostAllocated", "LeastAllocated"]), tuple(weights))
    outcome = Cluster(nodes, scoring=scoring).schedule(pods)
    assert (outcome.bound, outcome.unschedulable) == reference(nodes, pods, scoring)


def test_a_pinned_pod_takes_its_node_s_room_and_one_that_does_not_fit_is_not_bound():
    """DaemonSet pods are bound by name, before any workload: they take a pod slot and their requests."""
    cluster = Cluster([node("a", cpu="4", pods="2"), node("b", cpu="4", pods="2")])
    assert cluster.pin(pod("agent-a", cpu="1"), "a")
    assert not cluster.pin(pod("huge-b", cpu="5"), "b")  # more than b has: nothing bound
    outcome = cluster.schedule([pod("w1", cpu="3"), pod("w2", cpu="3"), pod("w3", cpu="1")])
    assert outcome.bound == {"t/w1": "a", "t/w2": "b", "t/w3": "b"}  # a: the agent's cpu and slot are taken
    assert cluster.node_of("t/agent-a") == "a" and cluster.node_of("t/huge-b") is None
