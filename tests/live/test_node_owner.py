"""Issue 15, item 2, asked of the real API server (kube-apiserver 1.34): one pool's reconciliation
(infra/cluster/node_owner.py) sets the pool's labels under its own field manager without reading a Node
first, adds a missing pool taint without losing one another owner added meanwhile, reports a host that has
not registered, taints a host that left the pool and keeps its labels, and removes nothing on delete.

The Nodes are created here as a kubelet registers them (with the pool's taints); no kubelet runs, so the
node lifecycle controller soon adds its not-ready taints too: they are another owner's, and the assertions
leave them out (LIFECYCLE).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from infra.cluster import node_owner
from infra.cluster.node_owner import LEFT_POOL_TAINT, NodeApi, NodeOwner, field_manager, reconcile
from infra.cluster.nodes import POOL_LABEL
from infra.cluster.objects import Obj
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube

POOL = "owner_gpu"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# Another owner's taint. Not the cordon taint node.kubernetes.io/unschedulable: the node lifecycle
# controller takes that one off any Node whose spec.unschedulable is false, which raced these tests.
OPERATOR_TAINT = {"key": "example.com/maintenance", "value": "disk", "effect": "NoSchedule"}
NAMES = ("owner-1", "owner-2", "owner-3")
LIFECYCLE = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def labels(**extra: str) -> dict[str, str]:
    return {POOL_LABEL: POOL, "k8s-node-pools.io/pool-kind": "gpu", **extra}


def register(kube: Kube, name: str, taints: list[Obj]) -> None:
    kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                  "spec": {"taints": taints}})


def node(kube: Kube, name: str) -> Obj:
    found: Obj = kube.get(f"/api/v1/nodes/{name}")
    return found


def taints(found: Obj) -> list[Obj]:
    """A node's taints less the node lifecycle controller's."""
    return [t for t in found["spec"].get("taints", []) if t["key"] not in LIFECYCLE]


def taint_keys(kube: Kube, name: str) -> list[str]:
    return [t["key"] for t in taints(node(kube, name))]


@pytest.fixture
def kube(cluster: LocalCluster) -> Iterator[Kube]:
    api = cluster.api()
    for name in NAMES:
        api.delete(f"/api/v1/nodes/{name}")
    register(api, "owner-1", [GPU_TAINT])  # registered with the pool's taint, as the kubelet does
    register(api, "owner-2", [])  # registered before the pool had its taint
    yield api
    for name in NAMES:
        api.delete(f"/api/v1/nodes/{name}")


@pytest.fixture
def nodes_api(cluster: LocalCluster) -> NodeApi:
    return NodeApi(str(cluster.kubeconfig))


def test_a_pool_gets_its_labels_and_taints_and_an_unregistered_host_is_reported(kube: Kube, nodes_api: NodeApi):
    wanted = {"owner-1": labels(), "owner-2": labels(), "owner-3": labels()}  # owner-3 never registered
    found = reconcile(nodes_api, POOL, wanted, [GPU_TAINT])
    assert found == {"registered": 2, "unregistered": ["owner-3"], "left": []}
    for name in ("owner-1", "owner-2"):
        got = node(kube, name)
        assert {k: got["metadata"]["labels"][k] for k in labels()} == labels()
        assert taints(got) == [GPU_TAINT]
        managers = {(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]}
        assert (field_manager(POOL), "Apply") in managers
    assert not kube.exists("/api/v1/nodes/owner-3")  # applying labels never creates a Node


def test_labels_merge_with_other_owners_and_a_dropped_pool_label_goes(kube: Kube, nodes_api: NodeApi):
    kube.merge_patch("/api/v1/nodes/owner-1", {"metadata": {"labels": {"team": "ml"}}})  # an operator's label
    reconcile(nodes_api, POOL, {"owner-1": labels(rack="r1")}, [GPU_TAINT])
    reconcile(nodes_api, POOL, {"owner-1": labels()}, [GPU_TAINT])  # the pool no longer sets rack
    got = node(kube, "owner-1")["metadata"]["labels"]
    assert got["team"] == "ml" and "rack" not in got and got[POOL_LABEL] == POOL


def test_a_taint_added_meanwhile_by_another_owner_is_kept(kube: Kube, nodes_api: NodeApi):
    stale = node(kube, "owner-2")  # what a reconciliation read before an operator's taint landed
    kube.merge_patch("/api/v1/nodes/owner-2", {"spec": {"taints": [OPERATOR_TAINT]}})
    after = nodes_api.guarded_taints(stale, lambda n: node_owner.taints_after(n["spec"].get("taints", []),
                                                                              [GPU_TAINT]), "test")
    assert [t["key"] for t in taints(after)] == [OPERATOR_TAINT["key"], "nvidia.com/gpu"]
    assert taint_keys(kube, "owner-2") == [OPERATOR_TAINT["key"], "nvidia.com/gpu"]


def test_an_unguarded_write_would_have_lost_it(kube: Kube):
    """The failing case: writing the list computed from the stale read drops the operator's taint."""
    stale = node(kube, "owner-2")
    kube.merge_patch("/api/v1/nodes/owner-2", {"spec": {"taints": [OPERATOR_TAINT]}})
    taints = node_owner.taints_after(stale["spec"].get("taints", []), [GPU_TAINT])
    kube.merge_patch("/api/v1/nodes/owner-2", {"spec": {"taints": taints}})
    assert taint_keys(kube, "owner-2") == ["nvidia.com/gpu"]


def test_a_host_that_leaves_is_tainted_keeps_its_labels_and_is_freed_when_a_pool_claims_it(
        kube: Kube, nodes_api: NodeApi):
    reconcile(nodes_api, POOL, {"owner-1": labels(), "owner-2": labels()}, [GPU_TAINT])
    found = reconcile(nodes_api, POOL, {"owner-1": labels()}, [GPU_TAINT], left=["owner-2", "owner-3"])
    assert found["left"] == ["owner-2"]
    assert taint_keys(kube, "owner-2") == ["nvidia.com/gpu", LEFT_POOL_TAINT]
    assert node(kube, "owner-2")["metadata"]["labels"][POOL_LABEL] == POOL  # not stripped
    other = {POOL_LABEL: "owner_cpu"}
    reconcile(nodes_api, "owner_cpu", {"owner-2": other}, [])  # another pool claims it
    assert LEFT_POOL_TAINT not in taint_keys(kube, "owner-2")
    assert node(kube, "owner-2")["metadata"]["labels"][POOL_LABEL] == "owner_cpu"
    again = reconcile(nodes_api, POOL, {"owner-1": labels()}, [GPU_TAINT], left=["owner-2"])
    assert again["left"] == []  # the old pool's late update leaves another pool's node alone
    assert LEFT_POOL_TAINT not in taint_keys(kube, "owner-2")


def test_the_provider_diffs_on_inputs_and_deletes_nothing(kube: Kube, cluster: LocalCluster):
    props = {"pool": POOL, "nodes": {"owner-1": labels()}, "taints": [GPU_TAINT],
             "kubeconfig": str(cluster.kubeconfig), "context": ""}
    provider = NodeOwner()
    created = provider.create(props)
    assert created.outs["registered"] == 1
    assert not provider.diff("id", created.outs, props).changes
    assert provider.diff("id", created.outs, {**props, "nodes": {"owner-1": labels(rack="r2")}}).changes
    provider.delete("id", created.outs)
    got = node(kube, "owner-1")
    assert got["metadata"]["labels"][POOL_LABEL] == POOL and taints(got) == [GPU_TAINT]


def test_a_kubeconfig_with_inline_credentials_and_a_named_context_works(cluster: LocalCluster, tmp_path):
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    (c,), (u,) = admin["clusters"], admin["users"]
    inline = {"apiVersion": "v1", "kind": "Config", "current-context": "elsewhere",
              "clusters": [{"name": "local", "cluster": {"server": c["cluster"]["server"], "certificate-authority-data":
                            base64.b64encode(Path(c["cluster"]["certificate-authority"]).read_bytes()).decode()}}],
              "users": [{"name": "admin", "user": {
                  f"{field}-data": base64.b64encode(Path(u["user"][field]).read_bytes()).decode()
                  for field in ("client-certificate", "client-key")}},
                  {"name": "plugin", "user": {"exec": {"command": "get-token"}}}],
              "contexts": [{"name": "admin@local", "context": {"cluster": "local", "user": "admin"}},
                           {"name": "elsewhere", "context": {"cluster": "local", "user": "plugin"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(inline))
    assert isinstance(NodeApi(str(path), "admin@local").nodes(), dict)
    with pytest.raises(ValueError, match="authenticates through a plugin"):
        NodeApi(str(path))  # the current context's user runs an exec plugin
