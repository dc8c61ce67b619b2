"""Where the system DaemonSets run, and the tolerations they need: computed from the pools, never hand-written.

A DaemonSet tolerates exactly the taints of the pools it must run on, and is kept off the others by a
node affinity on the pool label: the device plugin reaches every GPU pool and nothing else, the CSI
node plugin every pool. A GPU taint never lets an unrelated agent in. The agents a node needs before it
can be Ready (the CNI agent, Multus) are the exception: they tolerate every taint, the not-ready one
included, so a new or repaired node never waits for a CNI that cannot start on it.
"""

from __future__ import annotations

from collections.abc import Iterable

from infra.cluster.nodes import POOL_LABEL, pool_taints
from infra.cluster.objects import Obj
from infra.spec import Environment, Pool

CONTROL_PLANE_TOLERATION: Obj = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                                 "effect": "NoSchedule"}


def tolerations(pools: Iterable[Pool]) -> list[Obj]:
    """Exactly the pools' taints, tolerated one by one: key, value and effect (Exists only for a taint
    without a value), so tolerating gpu_h100_bigmem's `workload-profile=gpu-training` does not also admit
    the agent to a pool tainted `workload-profile=gpu-offline`."""
    seen: dict[tuple[str, str, str], Obj] = {}
    for pool in pools:
        for taint in pool_taints(pool):
            value = taint.get("value", "")
            toleration: Obj = {"key": taint["key"], "operator": "Equal", "value": value, "effect": taint["effect"]}
            if not value:
                toleration = {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
            seen.setdefault((taint["key"], value, taint["effect"]), toleration)
    return [seen[k] for k in sorted(seen)]


def pool_affinity(pools: Iterable[Pool]) -> Obj:
    """A required node affinity onto the hosts of these pools."""
    names = sorted(pool.name for pool in pools)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": names}]}]}}}


def on_pools(pools: Iterable[Pool]) -> Obj:
    """Pod-spec fields that place a DaemonSet on exactly these pools: affinity and tolerations."""
    chosen = list(pools)
    return {"affinity": pool_affinity(chosen), "tolerations": tolerations(chosen)}


def everywhere(env: Environment) -> Obj:
    """Pod-spec fields for an agent every node needs (CNI, Multus, CSI node plugin): all pools' taints
    and the control plane's, no affinity."""
    return {"tolerations": [*tolerations(env.pools.values()), CONTROL_PLANE_TOLERATION]}


NODE_CRITICAL_TOLERATIONS: list[Obj] = [{"operator": "Exists"}]
"""Every taint, of every effect. A node without its CNI is NotReady and tainted node.kubernetes.io/not-ready
(NoSchedule), and a DaemonSet pod is given only the NoExecute not-ready toleration: an agent that
tolerates less than everything never starts on a new node, which then stays NotReady for good."""


def node_critical() -> Obj:
    """Pod-spec fields for an agent a node needs before it can be Ready (the CNI agent, Multus): every node,
    whatever its taints, as Cilium's and Multus' own manifests place them."""
    return {"tolerations": [dict(t) for t in NODE_CRITICAL_TOLERATIONS]}


def gpu_pools(env: Environment) -> list[Pool]:
    return [pool for pool in env.pools.values() if pool.vars.is_gpu]
