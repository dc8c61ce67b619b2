"""Pools on nodes: the labels and taints each host carries, and who sets them.

Ownership, so a GPU node is never schedulable untainted:
- At join, the kubelet registers the node with its pool's taints (registerWithTaints) and the labels
  a kubelet may set on itself (`kubelet_registration`, data for the host layer). From its first
  second in the cluster, a GPU node repels pods without the pool's tolerations.
- On every `pulumi up`, one resource per pool (infra/cluster/node_owner.py) re-asserts all of the
  pool's labels (including those the NodeRestriction admission plugin forbids a kubelet to set on
  itself, such as the pool label isolation relies on) under the pool's own field manager, and adds a
  pool taint a node lacks without losing anyone else's: a cordon, a NotReady taint or an operator's
  taint survives. `node` below is the document of one Node that the resource keeps.
"""

from __future__ import annotations

from typing import Any

from infra.cluster.objects import LABEL_PREFIX, Concern, Obj
from infra.model.resolve import Resolved, ResolvedHost
from infra.spec import Pool
from infra.spec.models import parse_taint

POOL_LABEL = "node-restriction.kubernetes.io/k8s-node-pools.pool"
"""The pool a node serves: what the admission policy, the tolerations' placements and the probes rely on.
Under node-restriction.kubernetes.io/, which the NodeRestriction admission plugin forbids a kubelet to set
(and a kubelet refuses on --node-labels), so a compromised node cannot move itself into another pool:
only the cluster layer sets it, after the node has joined."""
POOL_KIND_LABEL = f"{LABEL_PREFIX}/pool-kind"
GPU_MODEL_LABEL = f"{LABEL_PREFIX}/gpu-model"
GPU_COUNT_LABEL = f"{LABEL_PREFIX}/gpu-count"
ZONE_LABEL = "topology.kubernetes.io/zone"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"  # selects the device plugin's config per node

# Labels a kubelet may set on its own Node (NodeRestriction admission plugin); any other key in the
# kubernetes.io and k8s.io domains is refused at registration, so only the cluster layer sets those.
_KUBELET_SETTABLE = ("kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
                     "node.kubernetes.io/instance-type", "topology.kubernetes.io/region", "topology.kubernetes.io/zone")
_KUBELET_SETTABLE_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def device_plugin_config_name(pool: Pool) -> str:
    """The name of the pool's NVIDIA device plugin config (one per GPU pool), selected by node label."""
    return pool.k8s_name


def pool_labels(pool: Pool) -> dict[str, str]:
    """Labels every host of the pool carries: the user's node_labels plus the pool's identity and GPU selectors."""
    labels = dict(pool.vars.node_labels)
    labels[POOL_LABEL] = pool.name
    labels[POOL_KIND_LABEL] = pool.vars.pool_kind
    if pool.vars.is_gpu:
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = device_plugin_config_name(pool)
    return labels


def host_labels(host: ResolvedHost, pool: Pool) -> dict[str, str]:
    labels = pool_labels(pool)
    if host.host.vars.zone:
        labels[ZONE_LABEL] = host.host.vars.zone
    if host.machine is not None and host.machine.gpu_count and host.gpu_model:
        labels[GPU_MODEL_LABEL] = host.gpu_model
        labels[GPU_COUNT_LABEL] = str(host.machine.gpu_count)
    return labels


def pool_taints(pool: Pool) -> list[Obj]:
    """The pool's taints as Node.spec.taints entries."""
    taints = []
    for text in pool.vars.node_taints:
        key, value, effect = parse_taint(text)
        taint: Obj = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    return taints


def kubelet_settable(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    if not (domain.endswith("kubernetes.io") or domain.endswith("k8s.io")):
        return True
    return key in _KUBELET_SETTABLE or key.startswith(_KUBELET_SETTABLE_PREFIXES)


def kubelet_registration(view: Resolved, host_name: str) -> dict[str, Any]:
    """What the host layer gives the kubelet at join: --node-labels and registerWithTaints."""
    resolved = view.hosts[host_name]
    pool = view.env.pools[resolved.host.pool]
    labels = host_labels(resolved, pool)
    return {
        "node_labels": {k: v for k, v in sorted(labels.items()) if kubelet_settable(k)},
        "register_with_taints": pool_taints(pool),
    }


def node(host: ResolvedHost, pool: Pool) -> Obj:
    """The part of a Node the cluster layer owns: its pool's labels and taints."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": host.name, "labels": dict(sorted(host_labels(host, pool).items()))},
            "spec": {"taints": pool_taints(pool)}}


def build(view: Resolved) -> Concern:
    pools = view.env.pools
    return Concern("nodes", [node(host, pools[host.host.pool]) for host in view.hosts.values()])
