"""Pools on nodes: labels and taints, who sets which, and the taint merge that keeps other owners' taints."""

from inventory_builder import ROOT

from infra.cluster import nodes
from infra.cluster.node_owner import LEFT_POOL_TAINT, taints_after
from infra.model.resolve import resolve
from infra.spec import load_environment


def view_of(write, inventory):
    return resolve(load_environment(write(inventory)))


def test_every_gpu_node_registers_with_its_pools_taints(inventory, write):
    view = view_of(write, inventory)
    for name, host in view.hosts.items():
        registration = nodes.kubelet_registration(view, name)
        pool = view.env.pools[host.host.pool]
        assert registration["register_with_taints"] == nodes.pool_taints(pool)
        if pool.vars.is_gpu:
            assert {t["effect"] for t in registration["register_with_taints"]} & {"NoSchedule", "NoExecute"}


def test_the_kubelet_registers_only_labels_it_may_set_on_itself(inventory, write):
    inventory["group_vars"]["gpu"]["node_labels"] = {"node-role.kubernetes.io/gpu": "true", "team": "ml",
                                                     "node.kubernetes.io/exclude-from-external-load-balancers": ""}
    view = view_of(write, inventory)
    registered = nodes.kubelet_registration(view, "gpu-1")["node_labels"]
    assert "node-role.kubernetes.io/gpu" not in registered  # NodeRestriction refuses it: the cluster layer sets it
    assert registered["team"] == "ml" and "node.kubernetes.io/exclude-from-external-load-balancers" in registered
    assert nodes.POOL_LABEL not in registered and registered["topology.kubernetes.io/zone"] == "a"
    [node] = [n for n in nodes.build(view).objects if n["metadata"]["name"] == "gpu-1"]
    assert node["metadata"]["labels"]["node-role.kubernetes.io/gpu"] == "true"
    assert node["metadata"]["labels"][nodes.POOL_LABEL] == "gpu"


def test_the_pool_label_is_one_no_kubelet_may_set():
    """Issue 15, item 4: what isolation relies on is under node-restriction.kubernetes.io/, which the
    NodeRestriction admission plugin refuses from a kubelet; the old, kubelet-writable key is not."""
    assert nodes.POOL_LABEL.startswith("node-restriction.kubernetes.io/")
    assert not nodes.kubelet_settable(nodes.POOL_LABEL)
    assert nodes.kubelet_settable("k8s-node-pools.io/pool")


def test_gpu_nodes_carry_model_count_and_their_device_plugin_config(inventory, write):
    view = view_of(write, inventory)
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes.build(view).objects}
    assert labels["gpu-1"][nodes.GPU_MODEL_LABEL] == "A100-80GB" and labels["gpu-1"][nodes.GPU_COUNT_LABEL] == "8"
    assert labels["gpu-1"][nodes.DEVICE_PLUGIN_CONFIG_LABEL] == "gpu"
    assert nodes.GPU_MODEL_LABEL not in labels["cpu-1"] and nodes.DEVICE_PLUGIN_CONFIG_LABEL not in labels["cpu-1"]


def test_the_taints_after_keep_other_owners_and_reassert_the_pools():
    pool = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-12-01T00:00:00Z"}
    stale = {"key": "nvidia.com/gpu", "value": "old", "effect": "NoSchedule"}
    assert taints_after([stale, cordon], pool) == [pool[0], cordon]  # its value re-asserted in place
    assert taints_after([cordon], pool) == [cordon, pool[0]]
    assert taints_after([pool[0], cordon], pool) is None  # nothing to write
    assert taints_after([], []) is None and taints_after([cordon], []) is None  # a pool without taints owns none
    left = {"key": LEFT_POOL_TAINT, "value": "gpu", "effect": "NoSchedule"}
    assert taints_after([left, cordon], pool, [LEFT_POOL_TAINT]) == [cordon, pool[0]]
    assert taints_after([cordon], [left]) == [cordon, left]


def test_every_shipped_node_is_labelled_with_its_pool():
    for env_name in ("example", "sandbox"):
        view = resolve(load_environment(ROOT / "inventories" / env_name))
        built = {n["metadata"]["name"]: n for n in nodes.build(view).objects}
        assert set(built) == set(view.hosts)
        for name, node in built.items():
            assert node["metadata"]["labels"][nodes.POOL_LABEL] == view.hosts[name].host.pool
