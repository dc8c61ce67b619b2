"""The MIG repartition's pause label against the real DaemonSet controller (kube-controller-manager 1.34,
kwok standing in for the kubelets): a DaemonSet placed like the device plugin and dcgm-exporter (the
affinity and tolerations the cluster layer renders for them) leaves a node labelled
k8s-node-pools.io/gpu-clients=paused-for-mig-change and comes back when the label goes; a DaemonSet placed
on the GPU pools without the pause term (as the NFD worker is) stays. The host layer's mig role sets and
removes the label (tests/hosts/test_mig_repartition.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.cluster.gpu import GPU_CLIENTS_LABEL, GPU_CLIENTS_PAUSED, gpu_client_placement
from infra.cluster.objects import Obj
from infra.cluster.placement import gpu_pools, on_pools
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube, wait_for
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/sandbox"
ENV = load_environment(ROOT / INVENTORY)
NAMESPACE = "gpu-clients-pause"
NODE = "sb-mig-1"


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
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    try:
        wait_for("the namespace's default ServiceAccount",
                 lambda: True if api.exists(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default") else None)
        yield api
    finally:
        api.delete(f"/api/v1/namespaces/{NAMESPACE}", grace_seconds=0)
        cluster.remove_nodes()


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
