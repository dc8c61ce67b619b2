"""Where the cluster layer's DaemonSets run, decided by the real DaemonSet controller and scheduler
(kube-controller-manager and kube-scheduler 1.34, kwok standing in for the kubelets). Each DaemonSet here runs
a pause container with exactly the placement (affinity, tolerations) the cluster layer renders for an agent.

- The MIG repartition's pause label: a DaemonSet placed like the device plugin and dcgm-exporter leaves a
  node labelled k8s-node-pools.io/gpu-clients=paused-for-mig-change and comes back when the label goes; one
  placed on the GPU pools without the pause term (as the NFD worker is) stays. The host layer's mig role
  sets and removes the label (tests/hosts/test_mig_repartition.py).
- A node that registers NotReady, tainted node.kubernetes.io/not-ready, as every node is before its CNI
  runs: Multus' placement gets a pod onto it, a per-pool placement does not. kwok is told to leave that one
  node NotReady (tools/kwok/stages.sed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.cluster import nodes as cluster_nodes
from infra.cluster.gpu import GPU_CLIENTS_LABEL, GPU_CLIENTS_PAUSED, gpu_client_placement
from infra.cluster.networking import multus_objects
from infra.cluster.nodes import pool_labels
from infra.cluster.objects import Obj
from infra.cluster.placement import everywhere, gpu_pools, on_pools
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube, wait_for
from infra.model.resolve import resolve
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/sandbox"
ENV = load_environment(ROOT / INVENTORY)
NAMESPACE = "gpu-clients-pause"
NODE = "sb-mig-1"
NEW_NODE = "sb-new-1"
HOLD_NOT_READY = "kwok.k8s-node-pools.io/hold-not-ready"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def daemon_set(name: str, placement: Obj) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {**placement, "automountServiceAccountToken": False,
                                           "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}}


def pods_by_node(kube: Kube, name: str) -> dict[str, str]:
    """node -> pod uid for the DaemonSet's pods that are not being deleted."""
    pods = kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3D{name}")["items"]
    return {p["spec"].get("nodeName", ""): p["metadata"]["uid"] for p in pods
            if not p["metadata"].get("deletionTimestamp")}


@pytest.fixture(scope="module")
def kube(cluster: LocalCluster) -> Iterator[Kube]:
    registered = cluster.register_nodes(INVENTORY)
    assert registered.ok, registered.summary
    api = cluster.api()
    for node in cluster_nodes.build(resolve(ENV)).objects:  # the labels no kubelet may set, as `pulumi up` gives them
        api.merge_patch(f"/api/v1/nodes/{node['metadata']['name']}", {"metadata": node["metadata"]})
    api.create_namespace(NAMESPACE)
    try:
        yield api
    finally:
        api.delete(f"/api/v1/namespaces/{NAMESPACE}", grace_seconds=0)
        cluster.remove_nodes()


def nodes(kube: Kube) -> list[str]:
    return sorted(node["metadata"]["name"] for node in kube.get("/api/v1/nodes")["items"])


def test_the_pause_label_takes_the_gpu_clients_off_the_node_and_back(kube: Kube) -> None:
    pools = gpu_pools(ENV)
    gpu_nodes = sorted(host.name for pool in pools for host in pool.hosts)
    assert NODE in gpu_nodes and len(gpu_nodes) > 1
    for name, placement in (("gpu-client", gpu_client_placement(ENV)), ("no-card", on_pools(pools))):
        kube.create(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", daemon_set(name, placement))
    before = {name: wait_for(f"{name} pods on {gpu_nodes}", lambda name=name: (
        pods_by_node(kube, name) if sorted(pods_by_node(kube, name)) == gpu_nodes else None))
        for name in ("gpu-client", "no-card")}

    kube.merge_patch(f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {GPU_CLIENTS_LABEL: GPU_CLIENTS_PAUSED}}})
    wait_for(f"the gpu-client pod to leave the paused {NODE}",
             lambda: True if NODE not in pods_by_node(kube, "gpu-client") else None)
    others = {node: uid for node, uid in before["gpu-client"].items() if node != NODE}
    assert pods_by_node(kube, "gpu-client") == others  # the other GPU nodes keep theirs
    assert pods_by_node(kube, "no-card") == before["no-card"]  # without the pause term: untouched

    kube.merge_patch(f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {GPU_CLIENTS_LABEL: None}}})
    back = wait_for(f"a gpu-client pod back on {NODE}",
                    lambda: pods_by_node(kube, "gpu-client") if NODE in pods_by_node(kube, "gpu-client") else None)
    assert back[NODE] != before["gpu-client"][NODE]  # a new pod, which reads the new layout


def test_a_not_ready_node_gets_its_cni_agents_and_only_them(kube: Kube) -> None:
    pool = next(iter(ENV.pools.values()))
    # Registered as a kubelet registers (initialNode fills the status before the POST): a Node created without
    # conditions has its not-ready taint lifted by the node lifecycle controller until its status comes, and the
    # DaemonSet controller may place a per-pool pod in that window.
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NEW_NODE, "labels": {**pool_labels(pool), HOLD_NOT_READY: "true"}},
            "spec": {"taints": [dict(NOT_READY_TAINT)]},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "message": "container runtime network not ready: cni plugin not initialized"}],
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    created = kube.create("/api/v1/nodes", node)
    try:
        assert not_ready(created)  # the API server keeps a Node's status on create
        wait_for(f"{NEW_NODE} NotReady with the not-ready taint (as the node lifecycle controller keeps it)",
                 lambda: True if not_ready(kube.get(f"/api/v1/nodes/{NEW_NODE}")) else None)

        multus = next(o for o in multus_objects(ENV) if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
        for name, placement in (("cni-agent", {"tolerations": multus["tolerations"]}),
                                ("per-pool", everywhere(ENV))):
            kube.create(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", daemon_set(name, placement))
        everyone = nodes(kube)
        wait_for(f"cni-agent pods on {everyone}",
                 lambda: True if sorted(pods_by_node(kube, "cni-agent")) == everyone else None)
        # Every schedulable node gets a per-pool pod, NEW_NODE none. Which nodes are schedulable is read each
        # time: on a loaded machine kwok's heartbeat can lag and the lifecycle controller taint a node a while.
        def per_pool() -> bool | None:
            live = kube.get("/api/v1/nodes")["items"]
            want = {n["metadata"]["name"] for n in live if schedulable(n)} - {NEW_NODE}
            have = set(pods_by_node(kube, "per-pool"))
            return True if want and want <= have <= set(everyone) - {NEW_NODE} else None

        def state() -> object:
            return {"per-pool pods": sorted(pods_by_node(kube, "per-pool")),
                    "nodes": {n["metadata"]["name"]: lifecycle(n) for n in kube.get("/api/v1/nodes")["items"]}}

        wait_for(f"per-pool pods on the schedulable nodes of {everyone}, none on {NEW_NODE}", per_pool,
                 timeout=120, seen=state)
        assert NEW_NODE not in pods_by_node(kube, "per-pool")
        assert not_ready(kube.get(f"/api/v1/nodes/{NEW_NODE}"))  # held NotReady throughout
    finally:
        kube.delete(f"/api/v1/nodes/{NEW_NODE}")


def lifecycle(node: Obj) -> tuple[list[str], list[str]]:
    """The node's Ready condition and the node lifecycle controller's taints on it."""
    return ([c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"],
            [f"{t['key']}:{t['effect']}" for t in node["spec"].get("taints", [])
             if t["key"].startswith("node.kubernetes.io/")])


def schedulable(node: Obj) -> bool:
    return lifecycle(node) == (["True"], [])


def not_ready(node: Obj) -> bool:
    ready, taints = lifecycle(node)
    return ready == ["False"] and "node.kubernetes.io/not-ready:NoSchedule" in taints
