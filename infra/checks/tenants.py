"""Tenants: who may share which GPUs, quotas that name real resources and fit the pools behind them."""

from __future__ import annotations

import re
from decimal import Decimal

from infra.checks.base import Report, gpu_fact, machine_fact, rule
from infra.knowledge.units import GIB, parse_quantity
from infra.model.capacity import PoolCapacity, combined, pool_capacity
from infra.model.resolve import Resolved
from infra.spec.models import Tenant

TEN_SHARED_GPU = rule(
    "TEN-SHARED-GPU", "error",
    "A production or inference tenant allowed onto time-sliced or MPS GPUs: no memory isolation, so one "
    "pod's OOM or fault takes its neighbours' requests down with it.",
    "Give the tenant MIG or whole-GPU pools only; keep shared GPUs for offline, dev and re-runnable work.",
)
TEN_MEMORY_OVERCOMMIT = rule(
    "TEN-MEMORY-OVERCOMMIT", "error",
    "A tenant on a memory pool whose default memory request is below its limit: pods are admitted "
    "overcommitted and OOM-killed under pressure.",
    "Set limit_range.default.memory and limit_range.default_request.memory to the same value.",
)
TEN_NO_DEFAULTS = rule(
    "TEN-NO-DEFAULTS", "warning",
    "A tenant without default CPU and memory requests: pods that omit requests are rejected by the quota "
    "or run BestEffort, invisible to the scheduler's accounting.",
    "Set limit_range.default_request (and default) for cpu and memory.",
)
TEN_NO_QUOTA = rule(
    "TEN-NO-QUOTA", "warning",
    "A tenant without a CPU and memory quota: one team's runaway job can take its pools whole.",
    "Set quota requests.cpu and requests.memory.",
)
QUOTA_GPU_RESOURCE = rule(
    "QUOTA-GPU-RESOURCE", "error",
    "A quota or queue capability naming a GPU or other extended resource that none of the tenant's pools "
    "advertises (nvidia.com/gpu on a MIG pool, a typo such as nvidia.con/gpu): its pods and Volcano jobs "
    "stay Pending forever.",
    "Name a resource the pool's sharing mode advertises; `python -m infra plan` lists them per pool.",
)
QUOTA_HUGEPAGES = rule(
    "QUOTA-HUGEPAGES", "error",
    "A quota or queue capability for a hugepage size that none of the tenant's pools reserves: pods asking "
    "for it never schedule.",
    "Reserve that page size in one of the tenant's pools (hugepages), or remove it from the quota.",
)
QUOTA_OVER_POOLS = rule(
    "QUOTA-OVER-POOLS", "warning",
    "A tenant's quota larger than all the pools it may use: the quota promises what the cluster cannot give.",
    "Lower the quota to the capacity named in the finding, or give the tenant more pools.",
)
QUOTA_OVERSUBSCRIBED = rule(
    "QUOTA-OVERSUBSCRIBED", "warning",
    "Tenants' quotas adding up to more than their pools hold: fine for elastic work, but guaranteed "
    "tenants then wait or preempt.",
    "Lower the quotas, or accept the ratio knowingly and rely on PriorityClasses and Volcano queues.",
)

_COMPUTE = re.compile(r"^(requests\.)?(cpu|memory|hugepages-(2Mi|1Gi))$|^requests\.([a-z0-9.-]+/.+)$")


def quota_resource(key: str) -> str | None:
    """The schedulable resource a quota key requests ("requests.cpu" -> "cpu"), None for counts and storage."""
    match = _COMPUTE.match(key)
    if not match:
        return None
    return match[2] or match[4]


def _show(resource: str, value: Decimal) -> str:
    if resource == "memory" or resource.startswith("hugepages-"):
        return f"{value / GIB:.0f}Gi"
    return f"{value.normalize():f}"


def check(view: Resolved, report: Report) -> None:
    env = view.env
    tenants_file = env.cluster_source("tenants")
    capacities = {
        name: pool_capacity(view, pool) for name, pool in env.pools.items()
        if view.fully_known(pool) and not report.broken(machine_fact(name))
    }
    checked: dict[str, Tenant] = {}

    for name, tenant in env.cluster.tenants.items():
        if not all(p in capacities for p in tenant.pools):
            continue  # an unknown pool or a broken machine is reported once, where it is
        checked[name] = tenant
        pools = [env.pools[p] for p in tenant.pools]
        if tenant.tier in ("production", "inference"):
            for pool in pools:
                if pool.vars.is_gpu and pool.vars.sharing.shared:
                    report.add(TEN_SHARED_GPU, tenants_file, f"tenants.{name}.pools",
                               f"{tenant.tier} tenant {name} may use {pool.name}, shared by {pool.vars.sharing.mode}")
        if any(pool.vars.pool_kind == "memory" for pool in pools):
            _no_memory_overcommit(name, tenant, tenants_file, report)
        _defaults_and_quota(name, tenant, tenants_file, report)
        gpus_known = not report.broken(*(gpu_fact(p) for p in tenant.pools))
        _quota_against_pools(name, tenant, combined(capacities[p] for p in tenant.pools), gpus_known,
                             tenants_file, report)

    gpu_broken = {p for p in capacities if report.broken(gpu_fact(p))}
    _oversubscription(checked, capacities, gpu_broken, tenants_file, report)


def _quota_against_pools(name: str, tenant: Tenant, offered: PoolCapacity, gpus_known: bool, tenants_file: str,
                         report: Report) -> None:
    advertised = set(offered.gpu_resources)
    capability = tenant.queue.capability if tenant.queue else {}
    named = [("quota", key, quota_resource(key)) for key in tenant.quota]
    named += [("queue.capability", key, key) for key in capability]
    for section, key, resource in named:
        field = f"tenants.{name}.{section}.{key}"
        if resource is None:
            continue
        if "/" in resource:
            if not gpus_known:
                continue  # the pools' GPU resources are broken: reported once, at the pool
            if resource not in advertised:
                report.add(QUOTA_GPU_RESOURCE, tenants_file, field,
                           f"{resource} is advertised by none of {', '.join(tenant.pools)}; they offer "
                           f"{', '.join(sorted(advertised)) or 'no GPU resources'}")
                continue
        if resource.startswith("hugepages-") and not offered.resource(resource):
            report.add(QUOTA_HUGEPAGES, tenants_file, field,
                       f"none of {', '.join(tenant.pools)} reserves {resource.removeprefix('hugepages-')} pages")
            continue
        if section == "quota":
            available = offered.resource(resource)
            if parse_quantity(tenant.quota[key]) > available:
                report.add(QUOTA_OVER_POOLS, tenants_file, field,
                           f"{tenant.quota[key]} asked, the pools {', '.join(tenant.pools)} hold "
                           f"{_show(resource, available)}")


def _oversubscription(tenants: dict[str, Tenant], capacities: dict[str, PoolCapacity], gpu_broken: set[str],
                      tenants_file: str, report: Report) -> None:
    """Warn where the tenants confined to a set of pools ask for more than those pools hold together.

    The candidate sets are each tenant's pools, each single pool and all pools: enough to catch two
    teams on one pool and a cluster promised twice over, without trying every subset.
    """
    candidates = {frozenset(t.pools) for t in tenants.values()} | {frozenset([p]) for p in capacities}
    candidates.add(frozenset(capacities))
    reported: dict[str, list[frozenset[str]]] = {}
    for pool_set in sorted(candidates, key=lambda s: (len(s), sorted(s))):
        inside = [t for t in tenants.values() if set(t.pools) <= pool_set]
        if len(inside) < 2:
            continue  # one tenant over its pools is QUOTA-OVER-POOLS
        offered = combined(capacities[p] for p in pool_set)
        asked: dict[str, Decimal] = {}
        for tenant in inside:
            for key, value in tenant.quota.items():
                resource = quota_resource(key)
                if resource and not ("/" in resource and pool_set & gpu_broken):
                    asked[resource] = asked.get(resource, Decimal(0)) + parse_quantity(value)
        for resource, total in sorted(asked.items()):
            available = offered.resource(resource)
            if not available:
                continue  # a resource no pool offers is reported per tenant (QUOTA-GPU-RESOURCE, QUOTA-HUGEPAGES)
            if total <= available or any(s <= pool_set for s in reported.get(resource, [])):
                continue
            reported.setdefault(resource, []).append(pool_set)
            ratio = f"{total / available:.2f}x"
            report.add(QUOTA_OVERSUBSCRIBED, tenants_file, "tenants",
                       f"{resource} on {', '.join(sorted(pool_set))}: quotas total {_show(resource, total)} "
                       f"against {_show(resource, available)} ({ratio})")


def _no_memory_overcommit(name: str, tenant: Tenant, tenants_file: str, report: Report) -> None:
    limits = tenant.limit_range
    default = limits.default.get("memory") if limits else None
    request = limits.default_request.get("memory") if limits else None
    if default is None or request is None:
        report.add(TEN_MEMORY_OVERCOMMIT, tenants_file, f"tenants.{name}.limit_range",
                   f"tenant {name} uses a memory pool but sets no default memory limit and request")
    elif parse_quantity(default) != parse_quantity(request):
        report.add(TEN_MEMORY_OVERCOMMIT, tenants_file, f"tenants.{name}.limit_range",
                   f"tenant {name} uses a memory pool; default memory request {request} != limit {default}")
    ratio = limits.max_limit_request_ratio.get("memory") if limits else None
    if ratio is not None and parse_quantity(ratio) > 1:
        report.add(TEN_MEMORY_OVERCOMMIT, tenants_file, f"tenants.{name}.limit_range.max_limit_request_ratio.memory",
                   f"tenant {name} uses a memory pool; memory limit may be {ratio}x the request")


def _defaults_and_quota(name: str, tenant: Tenant, tenants_file: str, report: Report) -> None:
    requests = tenant.limit_range.default_request if tenant.limit_range else {}
    missing = [r for r in ("cpu", "memory") if r not in requests]
    if missing:
        report.add(TEN_NO_DEFAULTS, tenants_file, f"tenants.{name}.limit_range.default_request",
                   f"tenant {name} has no default request for {' and '.join(missing)}")
    quoted = {quota_resource(key) for key in tenant.quota}
    unquoted = [r for r in ("cpu", "memory") if r not in quoted]
    if unquoted:
        report.add(TEN_NO_QUOTA, tenants_file, f"tenants.{name}.quota",
                   f"tenant {name} has no quota for {' and '.join(unquoted)}")
