"""`fit` on inventories: the objects it hands the scheduler, each placement rule through the spec, quota,
gangs, N-1, and what the CLI prints and returns."""

import json
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal

import pytest
from inventory_builder import ROOT

from infra.cluster.nodes import POOL_LABEL
from infra.model.capacity import pool_capacity
from infra.model.resolve import resolve
from infra.model.workloads import demands, pool_offers
from infra.planning.filters import pod_requests
from infra.planning.fit import daemon_pods, fit, node_objects, place, render, workload_objects
from infra.spec import load_environment

EXAMPLE = ROOT / "inventories" / "example"


def env_with(write, inventory, workloads, **changes):
    inventory["group_vars"]["all"]["workloads"] = workloads
    for path, value in changes.items():
        file, *keys = path.split("__")
        target = inventory["group_vars"][file]
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return load_environment(write(inventory))


def workload(name="w", tenant="svc", **spec):
    return {tenant: {name: {"replicas": 1, **spec}}}


def by_name(data):
    return {f"{w['tenant']}/{w['name']}": w for w in data["workloads"]}


def pool(data, name):
    return next(p for p in data["pools"] if p["name"] == name)


# ---------------------------------------------------------------- the objects fit hands the scheduler


def test_nodes_carry_the_pools_labels_taints_and_the_kubelets_allocatable():
    env = load_environment(EXAMPLE)
    view = resolve(env)
    nodes = {n["metadata"]["name"]: n for n in node_objects(view)}
    assert len(nodes) == 10
    a100 = nodes["gpu-a100-01"]
    assert a100["metadata"]["labels"][POOL_LABEL] == "gpu_a100"
    assert a100["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-a100-01"
    assert a100["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert a100["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "8"
    for name in env.pools:  # per pool, the nodes add up to the plan's figures
        capacity = pool_capacity(view, env.pools[name])
        members = [n for n in nodes.values() if n["metadata"]["labels"][POOL_LABEL] == name]
        assert sum(int(n["status"]["allocatable"]["cpu"].rstrip("m")) for n in members) == capacity.allocatable_cpu * 1000
        assert abs(sum(int(n["status"]["allocatable"]["memory"]) for n in members)
                   - capacity.allocatable_memory_gib * 2**30) < len(members)


def test_pods_name_the_pools_that_serve_them_and_tolerate_exactly_their_taints():
    env = load_environment(EXAMPLE)
    view = resolve(env)
    offers = [offer for pool in env.pools.values() for offer in pool_offers(view, pool)]
    objects = workload_objects(env, demands(env, offers))
    pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in objects.pods}
    embed = pods["batch/offline-embed-0"]["spec"]
    term = embed["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [{"key": POOL_LABEL, "operator": "In", "values": ["gpu_t4_offline"]}]
    assert embed["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "workload-profile", "operator": "Equal", "value": "gpu-offline", "effect": "NoSchedule"}]
    # sizes as a user or the LimitRange writes them: the API server's quota messages print them so
    assert embed["containers"][0]["resources"]["requests"] == {"cpu": "2000m", "memory": "8Gi",
                                                               "ephemeral-storage": "256Mi", "nvidia.com/gpu.shared": "1"}
    runner = pods["batch/ci-runner-0"]["spec"]  # the same tenant's CPU-only job goes to its CPU pool only
    assert runner["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["cpu_general"]
    assert runner.get("tolerations") == []
    pretrain = pods["training/pretrain-1"]
    assert pretrain["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "pretrain"}
    assert pretrain["spec"]["schedulerName"] == "volcano"
    assert {"key": "k8s-node-pools.io/gpu-model", "operator": "In", "values": ["H100-80GB"]} in pretrain["spec"][
        "affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"]
    assert objects.pod_groups == [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                   "metadata": {"name": "pretrain", "namespace": "training"},
                                   "spec": {"minMember": 2, "queue": "training"}}]  # the queue its namespace names
    assert pods["inference/llm-chat-0"]["spec"]["priority"] == 100000
    assert next(iter(pods)).startswith("inference/")  # created (and queued) highest priority first


# ---------------------------------------------------------------- the shipped example


def test_the_example_fits_and_reports_n_1_per_pool():
    data = fit(load_environment(EXAMPLE))
    assert data["fits"] and data["placed"] == data["replicas"] == 106
    assert {p["name"]: p["n_minus_1"]["ok"] for p in data["pools"]} == {
        "cpu_general": True, "mem_cache": True, "gpu_a100": True, "gpu_t4_offline": False, "gpu_h100_bigmem": False}
    assert by_name(data)["inference/embeddings"]["gpu_resource"] == "nvidia.com/mig-2g.20gb"
    assert pool(data, "gpu_a100")["requested"]["nvidia.com/mig-3g.40gb"] == 8
    t4 = pool(data, "gpu_t4_offline")["n_minus_1"]
    assert (t4["lost"], t4["pods_moved"], t4["unplaced"]) == ("gpu-t4-01", 12, 12)
    assert t4["failures"][0]["reason"].startswith("0/9 nodes are available: ")


# ---------------------------------------------------------------- each placement rule through the spec


def test_resources_fit_per_node_not_per_pool(inventory, write):
    # two cpu nodes of 15.8 CPUs: 31.6 in the pool, but no node holds two 8-CPU pods plus a third
    env = env_with(write, inventory, workload(replicas=3, requests={"cpu": "8"}, limits={"cpu": "8"}),
                   all__tenants__svc__quota={"requests.cpu": 64, "requests.memory": "16Gi"})
    data = fit(env)
    assert by_name(data)["svc/w"]["placed"] == 2
    [unplaced] = by_name(data)["svc/w"]["unplaced"]
    assert unplaced["reason"] == (
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/5 nodes are "
        "available: 2 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.")


def test_fit_scores_with_the_strategy_the_inventory_declares(inventory, write):
    """Two cpu nodes of 15.8 CPUs; four 3-CPU pods, then two of 12: packed, the small ones leave one node whole for a
    large one; spread over both, neither node has 12 left. Only the declared strategy changes."""
    workloads = {"svc": {"small": {"replicas": 4, "requests": {"cpu": "3"}, "limits": {"cpu": "3"}},
                         "large": {"replicas": 2, "requests": {"cpu": "12"}, "limits": {"cpu": "12"}}}}
    quota = {"requests.cpu": 64, "requests.memory": "16Gi"}
    placed = {}
    for strategy in ("MostAllocated", "LeastAllocated"):
        profile = inventory["group_vars"]["all"]["kube_scheduler_profiles"][0]
        profile["pluginConfig"][0]["args"]["scoringStrategy"]["type"] = strategy
        data = fit(env_with(write, inventory, workloads, all__tenants__svc__quota=quota))
        assert data["scoring"]["strategy"] == strategy
        placed[strategy] = (by_name(data)["svc/small"]["placed"], by_name(data)["svc/large"]["placed"])
    assert placed == {"MostAllocated": (4, 1), "LeastAllocated": (4, 0)}


def test_max_pods_limits_a_node(inventory, write):
    env = env_with(write, inventory, workload(replicas=21, requests={"cpu": "10m", "memory": "1Mi"}),
                   cpu__kubelet_max_pods=10, all__tenants__svc__quota={"pods": 100})
    data = fit(env)
    # Three node agents take three of each node's ten slots: Multus (a DaemonSet the cluster layer declares),
    # calico-node (the tigera-operator release's) and csi-nfs-node (the NFS CSI driver release's).
    assert by_name(data)["svc/w"]["placed"] == 14
    assert "2 Too many pods" in by_name(data)["svc/w"]["unplaced"][0]["reason"]


def test_the_cluster_layers_daemonsets_run_a_pod_on_each_node_they_select():
    view = resolve(load_environment(EXAMPLE))
    nodes = node_objects(view)
    pairs = daemon_pods(view, nodes)
    on = defaultdict(set)
    for name, pod in pairs:
        [term] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [name]}]
        on[pod["metadata"]["name"].removesuffix(f"-{name}")].add(name)
    every = {n["metadata"]["name"] for n in nodes}
    gpu = {name for name in every if name.startswith("gpu-")}
    # Every node: pod networking (Multus, Cilium's agent and its envoy) and the NFS CSI node plugin.
    for agent in ("kube-multus-ds", "cilium-agent", "cilium-envoy", "csi-driver-nfs-csi-nfs-node"):
        assert on.pop(agent) == every, agent
    # The GPU pools: the device plugin release's DaemonSets (the MPS daemon only where a node is MPS-capable: none).
    for agent in ("nvidia-device-plugin-device-plugin", "nvidia-device-plugin-gpu-feature-discovery",
                  "nvidia-device-plugin-node-feature-discovery-worker", "dcgm-exporter-exporter"):
        assert on.pop(agent) == gpu, agent
    assert on.pop("local-local-nvme-provisioner") == {"mem-01", "mem-02", "gpu-h100-01", "gpu-h100-02"}  # local disks
    assert on.pop("rdma-shared-dp-gpu-a100") == {"gpu-a100-01", "gpu-a100-02"}  # each RDMA pool's plugin
    assert on.pop("rdma-shared-dp-gpu-h100-bigmem") == {"gpu-h100-01", "gpu-h100-02"}
    assert on == {}
    priorities = {pod["metadata"]["name"].removesuffix(f"-{name}"): pod["spec"]["priority"] for name, pod in pairs}
    assert priorities["csi-driver-nfs-csi-nfs-node"] == 2000000000  # the chart's system-cluster-critical
    assert priorities["nvidia-device-plugin-node-feature-discovery-worker"] == 0  # the NFD subchart sets no class
    assert priorities["cilium-agent"] == priorities["dcgm-exporter-exporter"] == 2000001000  # system-node-critical


def test_a_helm_release_s_agents_take_their_charts_requests_and_follow_its_values():
    """The chart facts (chart_values.yml) give each release's DaemonSets: requests at the chart's defaults, the
    release's values for tolerations, affinity and whether an optional DaemonSet renders at all."""
    view = resolve(load_environment(EXAMPLE))
    nodes = [n for n in node_objects(view) if n["metadata"]["name"] == "gpu-t4-01"]
    pods = {pod["metadata"]["name"].removesuffix("-gpu-t4-01"): pod for _, pod in daemon_pods(view, nodes)}
    assert pod_requests(pods["dcgm-exporter-exporter"]) == {"cpu": 100, "memory": 128 * 2**20}
    assert pod_requests(pods["nvidia-device-plugin-node-feature-discovery-worker"]) == {"cpu": 5, "memory": 64 * 2**20}
    assert pod_requests(pods["cilium-agent"]) == {"cpu": 100, "memory": 10 * 2**20}  # its install-cni init container
    assert pod_requests(pods["nvidia-device-plugin-device-plugin"]) == {}
    from infra.knowledge.chart_values import daemonsets_of

    [gfd] = [d for d in daemonsets_of("nvidia-device-plugin") if d.name == "gpu-feature-discovery"]
    assert gfd.pod_spec({}) is None and gfd.pod_spec({"gfd": {"enabled": True}}) is not None  # off by default
    [exporter] = daemonsets_of("dcgm-exporter")
    # The chart's own tolerations leave a tainted GPU node without its exporter; the release's values replace them.
    assert exporter.pod_spec({})["tolerations"] == [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]
    assert exporter.pod_spec({"tolerations": [{"operator": "Exists"}]})["tolerations"] == [{"operator": "Exists"}]


def test_the_mps_control_daemon_runs_only_on_the_pools_that_share_cards_by_mps(inventory, write):
    """The device plugin release's MPS control daemon selects nvidia.com/mps.capable, which GFD sets on the nodes
    whose plugin config shares by MPS: counted there, not on the time-sliced pool."""
    def daemons(env):
        view = resolve(env)
        return {name for name, pod in daemon_pods(view, node_objects(view))
                if pod["metadata"]["name"].startswith("nvidia-device-plugin-mps-control-daemon-")}

    assert daemons(env_with(write, inventory, {})) == set()  # t4 time-slices
    assert daemons(env_with(write, inventory, {}, t4__gpu_sharing={"mode": "mps", "replicas": 2})) == {"t4-1"}


def test_hugepages_are_a_resource_of_the_node(inventory, write):
    spec = {"requests": {"hugepages-1Gi": "2Gi", "memory": "1Gi"}, "limits": {"hugepages-1Gi": "2Gi"}}
    env = env_with(write, inventory, {"cache": {"w": {"replicas": 2, **spec}}}, mem__hugepages={"1Gi": 3})
    data = fit(env)
    assert by_name(data)["cache/w"]["placed"] == 1
    assert "1 Insufficient hugepages-1Gi" in by_name(data)["cache/w"]["unplaced"][0]["reason"]


def test_ephemeral_storage_is_a_resource_of_the_node(inventory, write):
    # A 2 GiB root disk less the kubelet's nodefs.available 10%: 1.8 GiB, seven of the LimitRange's 256Mi
    # scratch requests per node, so the two cpu nodes take 14 of 16 tiny pods.
    env = env_with(write, inventory, workload(replicas=16, requests={"cpu": "10m", "memory": "1Mi"}),
                   all__machines__small__root_disk_gib=2)
    nodes = {n["metadata"]["name"]: n for n in node_objects(resolve(env))}
    # the kubelet truncates the threshold to whole bytes: 2 GiB less 214748364
    assert nodes["cpu-1"]["status"]["allocatable"]["ephemeral-storage"] == str(2 * 2**30 - 2 * 2**30 // 10)
    data = fit(env)
    assert by_name(data)["svc/w"]["placed"] == 14
    assert "2 Insufficient ephemeral-storage" in by_name(data)["svc/w"]["unplaced"][0]["reason"]
    roomy = env_with(write, inventory, workload(replicas=16, requests={"cpu": "10m", "memory": "1Mi"}),
                     all__machines__small__root_disk_gib=3)  # ten per node
    assert by_name(fit(roomy))["svc/w"]["placed"] == 16


def test_gpu_pods_need_the_pools_extended_resource(inventory, write):
    quota = {"requests.cpu": 32, "requests.memory": "256Gi", "requests.nvidia.com/mig-1g.10gb": 63}
    env = env_with(write, inventory, workload("llm", "infer", replicas=9, gpu={"type": "mig", "profile": "1g.10gb",
                                                                               "count": 7}),
                   all__tenants__infer__quota=quota)
    data = fit(env)  # 8 cards x 7 instances = 56 = 8 replicas
    assert by_name(data)["infer/llm"]["placed"] == 8
    assert "1 Insufficient nvidia.com/mig-1g.10gb" in by_name(data)["infer/llm"]["unplaced"][0]["reason"]


def test_local_volumes_bind_one_disk_each(inventory, write):
    env = env_with(write, inventory, {"cache": {"db": {"replicas": 2, "storage": {"storage_class": "local",
                                                                                    "size": "10Gi"}}}})
    data = fit(env)
    assert by_name(data)["cache/db"]["placed"] == 1
    assert "1 node(s) didn't find available persistent volumes to bind" in by_name(data)["cache/db"]["unplaced"][0][
        "reason"]


def test_a_pod_without_gpus_stays_off_the_gpu_pools_of_its_tenant(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["batch"]["pools"] = ["t4", "cpu"]
    env = env_with(write, inventory, workload("cpu-job", "batch", replicas=2))
    assert set(by_name(fit(env))["batch/cpu-job"]["nodes"]) <= {"cpu-1", "cpu-2"}


# ---------------------------------------------------------------- quota, priority, gangs


def test_quota_refuses_what_passes_hard_and_the_rest_still_fits(inventory, write):
    # svc's quota: requests.cpu 8; ten 1-CPU replicas
    env = env_with(write, inventory, workload(replicas=10, requests={"cpu": "1"}))
    data = fit(env)
    entry = by_name(data)["svc/w"]
    assert (entry["placed"], data["refused"]) == (8, 2)
    assert entry["refused"] == [{"count": 2, "first": "w-8", "reason": 'pods "w-8" is forbidden: exceeded quota: '
                                 "svc, requested: requests.cpu=1, used: requests.cpu=8, limited: requests.cpu=8"}]
    assert ("  svc/w: 2 of 10, from w-8: exceeded quota: svc, requested: requests.cpu=1, used: requests.cpu=8, "
            "limited: requests.cpu=8") in render(data).splitlines()
    assert not data["fits"]


def test_quota_counts_the_ephemeral_storage_the_limit_range_gives_each_container(inventory, write):
    quota = {"requests.cpu": 8, "requests.memory": "16Gi", "requests.ephemeral-storage": "1Gi"}
    env = env_with(write, inventory, workload(replicas=6, requests={"cpu": "10m", "memory": "1Mi"}),
                   all__tenants__svc__quota=quota)
    entry = by_name(fit(env))["svc/w"]
    assert entry["placed"] == 4  # 4 x 256Mi
    assert entry["refused"] == [{"count": 2, "first": "w-4", "reason": (
        'pods "w-4" is forbidden: exceeded quota: svc, requested: requests.ephemeral-storage=256Mi, '
        "used: requests.ephemeral-storage=1Gi, limited: requests.ephemeral-storage=1Gi")}]


def test_higher_priority_workloads_are_admitted_and_placed_first(inventory, write):
    env = env_with(write, inventory, {"svc": {"first": {"replicas": 6, "requests": {"cpu": "1"}, "priority_class": "low"},
                                              "second": {"replicas": 6, "requests": {"cpu": "1"}}}})
    workloads = by_name(fit(env))
    assert (workloads["svc/second"]["placed"], workloads["svc/first"]["placed"]) == (6, 2)  # svc's quota: 8 CPUs


def test_a_gang_is_placed_all_or_none(inventory, write):
    spec = {"kind": "job", "gang": 3, "replicas": 3, "requests": {"cpu": "7", "memory": "1Gi"},
            "limits": {"cpu": "7", "memory": "1Gi"}}
    two_fit = env_with(write, inventory, {"svc": {"job": spec}}, all__tenants__svc__quota={})
    entry = by_name(fit(two_fit))["svc/job"]  # two nodes of 15.8 CPUs hold 4 workers of 7: enough
    assert entry["placed"] == 3
    spec["requests"]["cpu"] = spec["limits"]["cpu"] = "8"
    one_short = env_with(write, inventory, {"svc": {"job": spec}}, all__tenants__svc__quota={})
    entry = by_name(fit(one_short))["svc/job"]  # one 8-CPU worker per node: 2 of 3
    assert entry["placed"] == 0
    assert entry["unplaced"][0]["reason"].startswith("gang svc/job: 2 of minMember 3 pods fit, so none is bound")


def test_competing_gangs_of_one_priority_are_only_possible(inventory, write):
    """Either gang leaves the other short (two cpu nodes of 15.8 CPUs): which one runs is Volcano's draw."""
    gang = {"kind": "job", "limits": {"memory": "1Gi"}}
    env = env_with(write, inventory, {"svc": {
        "wide": {**gang, "gang": 2, "replicas": 2, "requests": {"cpu": "9", "memory": "1Gi"}, "limits": {"cpu": "9"}},
        "many": {**gang, "gang": 4, "replicas": 4, "requests": {"cpu": "7", "memory": "1Gi"}, "limits": {"cpu": "7"}}}},
        all__tenants__svc__quota={})
    data = fit(env, n_minus_1=False)
    workloads = by_name(data)
    assert (workloads["svc/wide"]["placed"], workloads["svc/many"]["placed"]) == (2, 0)  # the order declared
    assert workloads["svc/wide"]["placed_range"] == [0, 2] and workloads["svc/many"]["placed_range"] == [0, 4]
    assert not data["guaranteed"]


# ---------------------------------------------------------------- N-1


def test_n_1_loses_the_biggest_host_and_places_its_pods_again(inventory, write):
    fits_on_one = env_with(write, inventory, workload(replicas=4, requests={"cpu": "2"}, limits={"cpu": "2"}))
    loss = pool(fit(fits_on_one), "cpu")["n_minus_1"]
    assert (loss["ok"], loss["pods_moved"]) == (True, 4)  # packed onto cpu-1, all of them move to cpu-2
    needs_both = env_with(write, inventory, workload(replicas=3, requests={"cpu": "7"}, limits={"cpu": "7"}),
                          all__tenants__svc__quota={})
    loss = pool(fit(needs_both), "cpu")["n_minus_1"]
    assert (loss["ok"], loss["lost"], loss["pods_moved"], loss["unplaced"]) == (False, "cpu-1", 2, 1)
    assert loss["failures"] == [{"workload": "svc/w", "count": 1, "first": "w-1", "reason": (
        "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/4 nodes are "
        "available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.")}]


def test_n_1_moves_a_whole_gang_when_one_member_is_lost(inventory, write):
    spec = {"kind": "job", "gang": 2, "replicas": 2, "requests": {"cpu": "8"}, "limits": {"cpu": "8"}}
    env = env_with(write, inventory, {"svc": {"job": spec}}, all__tenants__svc__quota={})
    result = place(env)
    lost, moved, outcome = result.n_minus_1["cpu"]
    assert lost == "cpu-1"
    assert sorted(moved) == ["svc/job-0", "svc/job-1"]  # the member on the other node moves too
    assert outcome.bound == {}
    assert result.outcome.bound == {"svc/job-0": "cpu-1", "svc/job-1": "cpu-2"}  # the placement itself is untouched


def test_a_pool_short_before_any_loss_fails_n_1(inventory, write):
    env = env_with(write, inventory, workload(replicas=5, requests={"cpu": "7"}, limits={"cpu": "7"}),
                   all__tenants__svc__quota={})
    data = fit(env)
    loss = pool(data, "cpu")["n_minus_1"]
    assert (loss["short_now"], loss["ok"]) == (1, False)
    assert "short now: 1 unplaced" in render(data)


def test_n_1_picks_the_host_whose_loss_costs_most(inventory, write):
    inventory["hosts"]["all"]["children"]["node_pools"]["children"]["cpu"]["hosts"]["cpu-2"]["hardware"] = {
        "cores": 16}
    env = env_with(write, inventory, workload(replicas=1))
    assert pool(fit(env), "cpu")["n_minus_1"]["lost"] == "cpu-2"


# ---------------------------------------------------------------- the command


def run(*args):
    return subprocess.run([sys.executable, "-m", "infra", *args], capture_output=True, text=True, cwd=ROOT)


def test_fit_prints_the_table_and_exits_0_when_every_replica_fits():
    result = run("fit", "inventories/example")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Fit for example: 106 replicas of 13 workloads on 10 nodes")
    assert "106 of 106 replicas placed; N-1: 3 of 5 pools keep every pod placed" in result.stdout
    assert result.stdout == render(fit(load_environment(EXAMPLE))) + "\n"


def test_fit_require_n_1_exits_1_when_a_pool_cannot_lose_its_biggest_host():
    assert run("fit", "--require-n-1", "inventories/example").returncode == 1


# ---------------------------------------------------------------- ties: guaranteed or only possible


def tie_sensitive(inventory):
    """A CPU job allowed on the cpu and mem pools, scoring the same on an empty cpu node and the empty mem node
    (kube-scheduler draws between them), then the cache's database, which needs the mem node's local disk."""
    inventory["group_vars"]["all"]["tenants"]["svc"].update({
        "pools": ["cpu", "mem"], "quota": {"requests.cpu": 32, "requests.memory": "64Gi"},
        "limit_range": {"default": {"cpu": "1", "memory": "1Gi"}, "default_request": {"cpu": "1", "memory": "1Gi"}}})
    inventory["group_vars"]["all"]["workloads"] = {
        "svc": {"big": {"replicas": 1, "requests": {"cpu": "15", "memory": "1Gi"},
                        "limits": {"cpu": "15", "memory": "1Gi"}}},
        "cache": {"db": {"replicas": 1,
                         "storage": {"storage_class": "local", "size": "10Gi"}}}}
    return inventory


def test_a_placement_that_depends_on_how_ties_are_broken_is_only_possible(inventory, write):
    data = fit(load_environment(write(tie_sensitive(inventory))), draws=8)
    db = by_name(data)["cache/db"]
    assert (data["fits"], db["placed"]) == (True, 1)  # the first node in order is a cpu node: it fits...
    assert (db["guaranteed"], db["placed_range"]) == (False, [0, 1])  # ...but a draw may take the mem node
    assert by_name(data)["svc/big"]["guaranteed"] and not data["guaranteed"]
    assert "  cache/db: 0 to 1 of 1 placed" in render(data).splitlines()


def test_a_placement_that_holds_whatever_the_draw_is_guaranteed(inventory, write):
    inventory = tie_sensitive(inventory)
    inventory["group_vars"]["all"]["tenants"]["svc"]["pools"] = ["cpu"]  # the CPU job cannot take the disk's node
    data = fit(load_environment(write(inventory)), draws=8)
    assert data["guaranteed"] and all(w["placed_range"] == [1, 1] for w in data["workloads"])
    assert "Only possible" not in render(data)
    assert fit(load_environment(EXAMPLE))["guaranteed"]


def test_fit_require_guaranteed_exits_1_on_a_placement_that_holds_only_with_luck(inventory, write):
    path = write(tie_sensitive(inventory))
    assert run("fit", "--draws", "8", str(path)).returncode == 0
    assert run("fit", "--draws", "8", "--require-guaranteed", str(path)).returncode == 1
    assert run("fit", "--draws", "0", "--require-guaranteed", str(path)).returncode == 0  # one order: no draw
    assert run("fit", "--require-guaranteed", "inventories/example").returncode == 0
    refused = run("fit", "--draws", "-1", str(path))
    assert refused.returncode == 2 and "'-1' is not a whole number of 0 or more" in refused.stderr


def test_fit_exits_1_when_a_replica_does_not_fit_and_json_says_why(inventory, write):
    inventory["group_vars"]["all"]["workloads"] = workload(replicas=10, requests={"cpu": "1"})
    path = write(inventory)
    result = run("fit", str(path))
    assert result.returncode == 1
    assert "Refused by quota (never created):" in result.stdout
    data = json.loads(run("fit", "--json", str(path)).stdout)
    assert (data["fits"], data["placed"], data["refused"]) == (False, 8, 2)


def test_fit_refuses_a_spec_with_errors_like_plan(inventory, write):
    inventory["group_vars"]["all"]["workloads"] = {"ghost": {"w": {"replicas": 1}}}
    result = run("fit", str(write(inventory)))
    assert result.returncode == 1
    assert "WORKLOAD-TENANT" in result.stderr and "fix them before fitting" in result.stderr
    assert result.stdout == ""
    data = json.loads(run("fit", "--json", str(write(inventory))).stdout)
    assert [f["code"] for f in data["findings"]] == ["WORKLOAD-TENANT"]


def test_fit_without_workloads_has_nothing_to_place(inventory, write):
    result = run("fit", str(write(inventory)))
    assert (result.returncode, result.stdout.strip().endswith("nothing to place")) == (0, True)


def test_fit_unusable_input_exits_2_without_a_traceback(inventory, write):
    inventory["group_vars"]["all"]["workloads"] = {"svc": {"w": {"replicas": "many"}}}
    result = run("fit", str(write(inventory)))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "workloads.svc.w.replicas: 'many' is a string" in result.stderr


@pytest.mark.parametrize("amount", [Decimal("0.5"), Decimal(3)])
def test_cpu_quantities_are_written_in_millicores(amount):
    from infra.planning.fit import _cpu

    assert _cpu(amount) == f"{int(amount * 1000)}m"


def test_control_plane_kubelets_count_as_nodes_that_repel_the_pods(inventory, write):
    from inventory_builder import add_control_plane

    add_control_plane(inventory, {"cp-1": {"zone": "a"}})
    env = env_with(write, inventory, workload(replicas=1, requests={"cpu": "15801m"}, limits={"cpu": "15801m"}),
                   all__tenants__svc__quota={})
    data = fit(env)  # too big for a cpu node (a check would say so first; fit still answers, without a traceback)
    assert data["nodes"] == 6
    # the three pools' taints and the control plane's
    assert "4 node(s) had untolerated taint(s)" in by_name(data)["svc/w"]["unplaced"][0]["reason"]
