"""Scheduling: Volcano with one queue per tenant, and a descheduler that never touches a GPU pool.

Volcano (pinned Helm release, its own namespace) schedules gangs: a job starts only when
minAvailable of its pods fit, so a half-started training job never holds GPUs idle. Its scheduler
configuration is generated here, not taken from the chart, because the chart's default runs no
preempt or reclaim action, and enabling those safely needs the plugins arranged with care:

- gang keeps its victim check on (the chart's default turns it off with enablePreemptable: false,
  harmless without preemption): with preempt and reclaim enabled and gang not voting, an eviction
  can take a running gang below minAvailable, where it stays stuck.
- priority, gang, conformance and proportion share the first tier. Volcano picks victims from the
  first tier whose plugins agree on some, intersecting only within a tier, so a proportion below
  conformance never gets asked and reclaim ignores the queues' deserved shares (volcano-sh/volcano
  issue 5896); drf, the one later plugin with a victim function, is kept from voting.

Each tenant with a `queue` gets a Volcano Queue of its name, with exactly the spec's weight,
capability and reclaimable. A capability naming a resource the tenant's pools do not advertise
(nvidia.com/gpu on a MIG pool) is refused here as in the checks: a job asking for it stays Pending.
The tenant's namespace names its queue (scheduling.volcano.sh/queue-name), which Volcano's PodGroup
webhook, enabled here, gives every PodGroup created there without one; the admission policy in
infra/cluster/tenancy.py refuses PodGroups and Volcano jobs naming any other queue, `default` included.

The descheduler runs as two CronJobs of the pinned chart, because a descheduler policy has one
node selector for all its profiles: one evicts pods violating the pools' taints or required node
affinity on every non-GPU pool, the other rebalances the CPU pools (LowNodeUtilization). Both
select nodes by an allow-list of non-GPU pool kinds, so a GPU node - of any pool, present or
added later, or not yet labelled - is never processed: no GPU pod is ever evicted for balance.
The Volcano and descheduler pods themselves run on the CPU pools and tolerate no GPU taint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from infra.cluster.nodes import POOL_KIND_LABEL, pool_taints
from infra.cluster.objects import Concern, HelmRelease, Obj, key, obj
from infra.cluster.placement import gpu_pools, pool_affinity
from infra.knowledge.chart_values import chart_values
from infra.knowledge.platform import platform
from infra.knowledge.versions import versions
from infra.model.capacity import combined, pool_capacity
from infra.model.resolve import Resolved
from infra.spec import Environment, Pool
from infra.spec.models import Tenant

NAME = "scheduling"
VOLCANO = "volcano"  # component in versions.yml, and the release name
DESCHEDULER = "descheduler"  # likewise
VOLCANO_NAMESPACE = "volcano-system"  # the namespace Volcano's own installer and docs use
DESCHEDULER_NAMESPACE = "kube-system"  # the namespace the descheduler chart's README installs into
EVICT_RELEASE = "descheduler"  # pods violating pool taints or affinity, all non-GPU pools
BALANCE_RELEASE = "descheduler-balance"  # LowNodeUtilization, CPU pools only
PODGROUP_MUTATION = "/podgroups/mutate"  # Volcano's webhook that reads a namespace's queue annotation

# Resources every node advertises without a domain prefix; hugepages-<size> only where reserved,
# extended resources (with a "/") only where a device plugin advertises them.
NODE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})

# The Volcano scheduler configuration: actions run in this order each cycle.
ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")


def _tiers() -> list[list[Obj]]:
    """The plugin tiers; a fresh copy each call, so no caller can alter the next one's."""
    return [
        # Victim choice: lower priority only, never a gang below minAvailable, never a critical
        # pod, and on reclaim only from queues above their deserved share - all in one tier.
        [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}, {"name": "proportion"}],
        # Ordering and placement. drf orders jobs by dominant share; it must not pick victims on
        # its own when the first tier finds none.
        [{"name": "overcommit"},
         {"name": "drf", "enablePreemptable": False, "enableReclaimable": False},
         {"name": "predicates"}, {"name": "nodeorder"}, {"name": "binpack"}],
    ]


def scheduler_conf() -> str:
    """The volcano-scheduler.conf text (custom.scheduler_config_override); the same text every call."""
    conf = {"actions": ", ".join(ACTIONS), "tiers": [{"plugins": tier} for tier in _tiers()]}
    text: str = yaml.safe_dump(conf, sort_keys=False, default_flow_style=False)
    missing = set(chart_values().volcano.required_plugins) - chart_values().volcano.conf_plugins(text)
    if missing:
        raise ValueError(f"the Volcano scheduler configuration lacks {sorted(missing)}")
    return text


# --- where the scheduling components run -------------------------------------------------------


def system_pools(env: Environment) -> list[Pool]:
    """The pools Volcano and the descheduler run on: the CPU pools, else every non-GPU pool.

    Memory pools are tainted to keep general pods off their big-memory nodes; controllers are
    general pods, so they go there only in a cluster without CPU pools.
    """
    pools = sorted(env.pools.values(), key=lambda pool: pool.name)
    return [p for p in pools if p.vars.pool_kind == "cpu"] or [p for p in pools if not p.vars.is_gpu]


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule: whether a toleration tolerates a taint."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if not toleration.get("key"):
        return toleration.get("operator") == "Exists"
    if toleration["key"] != taint["key"]:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(toleration.get("value", "") == taint.get("value", ""))


def system_tolerations(env: Environment) -> list[Obj]:
    """Exact tolerations of the system pools' taints, leaving out any that would also tolerate a GPU
    pool's taint (a taint key shared with a GPU pool, e.g. workload-profile=memory beside
    workload-profile=gpu-offline, is tolerated for its value only)."""
    gpu_taints = [taint for pool in gpu_pools(env) for taint in pool_taints(pool)]
    chosen: dict[tuple[str, str, str], Obj] = {}
    for pool in system_pools(env):
        for taint in pool_taints(pool):
            value = taint.get("value", "")
            toleration: Obj = {"key": taint["key"], "operator": "Equal" if value else "Exists",
                               "effect": taint["effect"]}
            if value:
                toleration["value"] = value
            if not any(tolerates(toleration, gpu_taint) for gpu_taint in gpu_taints):
                chosen[(taint["key"], value, taint["effect"])] = toleration
    return [chosen[k] for k in sorted(chosen)]


def system_placement(env: Environment) -> Obj:
    """Pod-spec fields (affinity, tolerations) for the scheduling components; either may be absent."""
    placement: Obj = {}
    pools = system_pools(env)
    if pools:
        placement["affinity"] = pool_affinity(pools)
    tolerations = system_tolerations(env)
    if tolerations:
        placement["tolerations"] = tolerations
    return placement


# --- Volcano ------------------------------------------------------------------------------------


def advertised(view: Resolved, tenant: Tenant) -> set[str]:
    """The resources the tenant's pools advertise (infra.model.capacity), as a queue capability may name them."""
    offered = combined(pool_capacity(view, view.env.pools[name]) for name in tenant.pools)
    extended = {name for name, count in offered.gpu_resources.items() if count}
    hugepages = {name for name, amount in offered.hugepages.items() if amount}
    return set(NODE_RESOURCES) | extended | hugepages


def queue(view: Resolved, name: str, tenant: Tenant) -> Obj:
    """The tenant's Volcano Queue: exactly the spec's weight, capability and reclaimable."""
    spec_queue = tenant.queue
    if spec_queue is None:
        raise ValueError(f"tenant {name} has no queue")
    if name in platform().scheduling.volcano_reserved_queues:
        raise ValueError(f"tenant {name}: Volcano creates a queue of that name itself; rename the tenant")
    unknown_pools = sorted(set(tenant.pools) - set(view.env.pools))
    if unknown_pools:
        raise ValueError(f"tenant {name} names unknown pools {unknown_pools}")
    offered = advertised(view, tenant)
    missing = sorted(set(spec_queue.capability) - offered)
    if missing:
        raise ValueError(f"tenant {name}: queue capability names {', '.join(missing)}, which none of "
                         f"{', '.join(tenant.pools)} advertises (they offer {', '.join(sorted(offered))}); "
                         "jobs asking for it would stay Pending")
    facts = chart_values().volcano.queue
    spec: Obj = {"weight": spec_queue.weight, "reclaimable": spec_queue.reclaimable}
    if spec_queue.capability:
        spec["capability"] = {resource: str(amount) for resource, amount in sorted(spec_queue.capability.items())}
    unknown = sorted(set(spec) - set(facts.spec_fields))
    if unknown:
        raise ValueError(f"Queue spec fields {unknown} are not in the Queue CRD")
    return obj(facts.api_version, facts.kind, name, spec=spec)


def queues(view: Resolved) -> list[Obj]:
    tenants = view.env.cluster.tenants
    return [queue(view, name, tenants[name]) for name in sorted(tenants) if tenants[name].queue is not None]


def volcano_namespace() -> Obj:
    return obj("v1", "Namespace", VOLCANO_NAMESPACE)


def _one(values: Iterable[str], what: str) -> str:
    distinct = sorted(set(values))
    if len(distinct) != 1:
        raise ValueError(f"the chart takes one {what} for all Volcano images; versions.yml pins {distinct}")
    return distinct[0]


def enabled_admissions() -> str:
    """The chart's admission webhooks plus /podgroups/mutate, which routes a tenant's PodGroups that name
    no queue (those Volcano's controller makes for plain pods with schedulerName volcano) to the queue
    its namespace's annotation names (infra/cluster/tenancy.py) instead of `default`."""
    return f"{chart_values().volcano.keys['custom.enabled_admissions'].default},{PODGROUP_MUTATION}"


def volcano_release(env: Environment) -> HelmRelease:
    """Volcano with the generated scheduler configuration, its pods off the GPU pools, no bundled
    Prometheus/Grafana (they run unpinned images)."""
    images = versions()[VOLCANO].images.values()
    custom: Obj = {"scheduler_config_override": scheduler_conf(), "metrics_enable": False,
                   "enabled_admissions": enabled_admissions()}
    placement = system_placement(env)
    if "affinity" in placement:
        custom["default_affinity"] = placement["affinity"]
    if "tolerations" in placement:
        custom["default_tolerations"] = placement["tolerations"]
    values: Obj = {
        "basic": {"image_registry": _one((image.registry for image in images), "registry"),
                  "image_tag_version": _one((image.tag for image in images), "tag")},
        "custom": custom,
    }
    return HelmRelease(VOLCANO, VOLCANO_NAMESPACE, VOLCANO, values)


# --- descheduler --------------------------------------------------------------------------------


def plugin_config(name: str, args: Obj | None = None) -> Obj:
    """A pluginConfig entry, its plugin and arguments checked against the policy shape in chart_values.yml."""
    shape = chart_values().descheduler.policy.plugins.get(name)
    if shape is None:
        raise ValueError(f"descheduler plugin {name} is not described in chart_values.yml")
    unknown = sorted(set(args or {}) - set(shape.args))
    if unknown:
        raise ValueError(f"descheduler plugin {name} takes no arguments {unknown}")
    entry: Obj = {"name": name}
    if args:
        entry["args"] = args
    return entry


def profile(name: str, configs: list[Obj], extension_point: str) -> Obj:
    """A profile enabling its plugins (all but DefaultEvictor, always on) at one extension point."""
    plugins = chart_values().descheduler.policy.plugins
    enabled = [c["name"] for c in configs if c["name"] != "DefaultEvictor"]
    wrong = [p for p in enabled if extension_point not in plugins[p].extension_points]
    if wrong:
        raise ValueError(f"descheduler plugins {wrong} do not run at {extension_point}")
    return {"name": name, "pluginConfig": configs, "plugins": {extension_point: {"enabled": enabled}}}


def default_evictor() -> Obj:
    """Evict only pods that fit another selected node (nodeFit), keep the default protections
    (local storage, DaemonSet, system-critical and failed bare pods) and add pods with PVCs: a pod
    bound to a local volume can only come back to the node it left. Never a Volcano job's pod: a gang
    member evicted alone leaves its gang below minAvailable, so Volcano restarts the whole job (or it
    hangs waiting for the member), which costs far more than the imbalance the eviction cured."""
    gangs = {"matchExpressions": [{"key": chart_values().volcano.job_pod_label, "operator": "DoesNotExist"}]}
    return plugin_config("DefaultEvictor", {"nodeFit": True, "labelSelector": gangs,
                                            "podProtections": {"extraEnabled": ["PodsWithPVC"]}})


def node_selector(kinds: Iterable[str]) -> str:
    """The policy's top-level node selector: nodes whose pool kind is one of `kinds`.

    An allow-list, not "notin (gpu, gpu_bigmem)": a node without the label - a control-plane
    node, or one joined before its labels - matches a "notin" but never an "in".
    """
    return f"{POOL_KIND_LABEL} in ({','.join(sorted(set(kinds)))})"


def _taint_name(taint: Mapping[str, Any]) -> str:
    return f"{taint['key']}={taint['value']}" if taint.get("value") else str(taint["key"])


def evict_policy(env: Environment) -> Obj | None:
    """Evict pods violating their node's pool taints or their required node affinity, on every
    non-GPU pool. Only the pools' own taints count (includedTaints): a cordon
    (node.kubernetes.io/unschedulable) or an operator's taint must not empty a node (kubernetes-sigs/
    descheduler issue 1114)."""
    pools = [pool for pool in env.pools.values() if not pool.vars.is_gpu]
    if not pools:
        return None
    configs = [default_evictor()]
    taints = sorted({_taint_name(taint) for pool in pools for taint in pool_taints(pool)})
    if taints:
        configs.append(plugin_config("RemovePodsViolatingNodeTaints", {"includedTaints": taints}))
    configs.append(plugin_config("RemovePodsViolatingNodeAffinity",
                                 {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}))
    return {"nodeSelector": node_selector(pool.vars.pool_kind for pool in pools),
            "profiles": [profile("pool-placement", configs, "deschedule")]}


def balance_policy(env: Environment) -> Obj | None:
    """Move pods from busy to idle nodes of the CPU pools (LowNodeUtilization), nowhere else."""
    if not any(pool.vars.pool_kind == "cpu" for pool in env.pools.values()):
        return None
    limits = platform().scheduling.descheduler.low_node_utilization
    configs = [default_evictor(), plugin_config("LowNodeUtilization", {
        "thresholds": dict(sorted(limits.thresholds.items())),
        "targetThresholds": dict(sorted(limits.target_thresholds.items()))})]
    return {"nodeSelector": node_selector(["cpu"]), "profiles": [profile("balance-cpu-pools", configs, "balance")]}


def descheduler_release(env: Environment, name: str, policy: Obj, schedule: str) -> HelmRelease:
    shape = chart_values().descheduler.policy
    unknown = sorted(set(policy) - set(shape.top_level))
    if unknown:
        raise ValueError(f"descheduler policy fields {unknown} are not in {shape.api_version}")
    values: Obj = {"kind": "CronJob", "schedule": schedule, "deschedulerPolicyAPIVersion": shape.api_version,
                   "deschedulerPolicy": policy, **system_placement(env)}
    return HelmRelease(name, DESCHEDULER_NAMESPACE, DESCHEDULER, values)


def descheduler_releases(env: Environment) -> list[HelmRelease]:
    defaults = platform().scheduling.descheduler
    releases = []
    evict = evict_policy(env)
    if evict is not None:
        releases.append(descheduler_release(env, EVICT_RELEASE, evict, defaults.schedule))
    balance = balance_policy(env)
    if balance is not None:
        releases.append(descheduler_release(env, BALANCE_RELEASE, balance, defaults.balance_schedule))
    return releases


def build(view: Resolved) -> Concern:
    env = view.env
    objects = sorted([volcano_namespace(), *queues(view)], key=key)
    return Concern(NAME, objects, [volcano_release(env), *descheduler_releases(env)])
