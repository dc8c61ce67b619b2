"""One scheduler configuration (issue 16): the local control plane's kube-scheduler runs the configuration
`python -m infra scheduler` prints for the sandbox inventory, the one fit simulates, and places a pod where
fit says - asked of the running scheduler (its /configz) and of its placements, not of the file written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube, wait_for
from infra.live.replay import register_node
from infra.model.resolve import resolve
from infra.model.scheduler import Scoring, scheduler_configuration_of, scoring_of
from infra.planning.filters import Obj
from infra.planning.scheduler import Cluster
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
ENV = load_environment(ROOT / "inventories" / "sandbox")
NAMESPACE = "scheduler-config"
LABEL = "scheduler-config.k8s-node-pools.io/node"
HOSTNAME = "kubernetes.io/hostname"


def test_the_running_scheduler_scores_as_fit_does(cluster: LocalCluster) -> None:
    scoring, share, plugins = cluster.scheduler_scoring()
    assert scoring == scoring_of(scheduler_configuration_of(resolve(ENV)))
    assert scoring.strategy == "MostAllocated" and ("nvidia.com/mig-1g.6gb", 1) in scoring.weights
    assert share == 100
    assert plugins == ["NodeResourcesFit"]  # no other score plugin decides


def _node(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {LABEL: "true", HOSTNAME: name}},
            "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def _pod(name: str, cpu: str, node: str | None = None) -> Obj:
    """A pod for the two nodes, or for NODE only."""
    selector = {LABEL: "true", **({HOSTNAME: node} if node else {})}
    spec: Obj = {"automountServiceAccountToken": False, "nodeSelector": selector,
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


@pytest.fixture
def kube(cluster: LocalCluster) -> Iterator[Kube]:
    api = cluster.api()
    api.create_namespace(NAMESPACE)
    try:
        yield api
    finally:
        api.delete(f"/api/v1/namespaces/{NAMESPACE}", grace_seconds=0)
        for name in ("pack-a", "pack-b"):
            api.delete(f"/api/v1/nodes/{name}")


def test_the_real_scheduler_puts_a_pod_where_fit_does(kube: Kube) -> None:
    """Two alike nodes, one already half full: the configured scheduler packs onto it, as fit does; with
    the other strategy fit would spread, so the agreement is the configuration's, not chance's."""
    nodes = [_node("pack-a"), _node("pack-b")]
    for item in nodes:
        register_node(kube, item)
    pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    # Scheduled, not bound by name: the scheduler then holds it in its cache before it sees the next pod.
    kube.create(pods, _pod("there", "4", node="pack-b"))
    wait_for("the scheduler to bind the first pod", lambda: kube.get(f"{pods}/there")["spec"].get("nodeName"))
    kube.create(pods, _pod("new", "1"))
    real = wait_for("the scheduler to bind the new pod",
                    lambda: kube.get(f"{pods}/new")["spec"].get("nodeName"))

    def simulated(scoring: Scoring) -> str | None:
        model = Cluster(nodes, scoring=scoring)
        assert model.schedule([_pod("there", "4", node="pack-b")]).bound == {f"{NAMESPACE}/there": "pack-b"}
        return model.schedule([_pod("new", "1")]).bound.get(f"{NAMESPACE}/new")

    configured = scoring_of(scheduler_configuration_of(resolve(ENV)))
    assert real == simulated(configured) == "pack-b"
    assert simulated(Scoring("LeastAllocated", configured.weights)) == "pack-a"
