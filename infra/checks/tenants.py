"""Tenants: who may share which GPUs, quotas that name real resources and fit the pools behind them."""

from __future__ import annotations

import re
from decimal import Decimal

from infra.capacity import combined, pool_capacity
from infra.checks.base import Report, rule
from infra.spec import Environment
from infra.spec.models import Tenant
from infra.units import GIB, parse_quantity

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
    "A quota or queue capability naming a GPU resource that none of the tenant's pools advertises "
    "(e.g. nvidia.com/gpu on a MIG pool): its pods and Volcano jobs stay Pending forever.",
    "Name a resource the pool's sharing mode advertises; `python -m infra plan` lists them per pool.",
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

_COMPUTE = re.compile(r"^(requests\.)?(cpu|memory)$|^requests\.([a-z0-9.-]+/.+)$")


def quota_resource(key: str) -> str | None:
    """The schedulable resource a quota key requests ("requests.cpu" -> "cpu"), None for counts and storage."""
    match = _COMPUTE.match(key)
    if not match or key.startswith("requests.hugepages"):
        return None
    return match[2] or match[3]


def _show(resource: str, value: Decimal) -> str:
    return f"{value / GIB:.0f}Gi" if resource == "memory" else f"{value.normalize():f}"


def check(env: Environment, report: Report) -> None:
    tenants_file = env.cluster_source("tenants")
    capacities = {name: pool_capacity(env, pool) for name, pool in env.pools.items()}
    totals: dict[str, Decimal] = {}
    users: dict[str, set[str]] = {}

    for name, tenant in env.cluster.tenants.items():
        pools = [env.pools[p] for p in tenant.pools if p in env.pools]
        if tenant.tier in ("production", "inference"):
            for pool in pools:
                if pool.vars.pool_kind in ("gpu", "gpu_bigmem") and pool.vars.sharing.mode in ("time-slicing", "mps"):
                    report.add(TEN_SHARED_GPU, tenants_file, f"tenants.{name}.pools",
                               f"{tenant.tier} tenant {name} may use {pool.name}, shared by {pool.vars.sharing.mode}")
        if any(pool.vars.pool_kind == "memory" for pool in pools):
            _no_memory_overcommit(name, tenant, tenants_file, report)
        _defaults_and_quota(name, tenant, tenants_file, report)

        offered = combined(capacities[pool.name] for pool in pools)
        advertised = set(offered.gpu_resources)
        for section, resources in (("quota", tenant.quota), ("queue.capability", tenant.queue.capability if tenant.queue else {})):
            for key in resources:
                resource = key if section == "queue.capability" else quota_resource(key)
                if resource and resource.startswith("nvidia.com/") and resource not in advertised:
                    report.add(QUOTA_GPU_RESOURCE, tenants_file, f"tenants.{name}.{section}.{key}",
                               f"{resource} is advertised by none of {', '.join(tenant.pools)}; they offer "
                               f"{', '.join(sorted(advertised)) or 'no GPU resources'}")
        for key, value in tenant.quota.items():
            resource = quota_resource(key)
            if resource is None:
                continue
            amount, available = parse_quantity(value), offered.resource(resource)
            if amount > available and (not resource.startswith("nvidia.com/") or resource in advertised):
                report.add(QUOTA_OVER_POOLS, tenants_file, f"tenants.{name}.quota.{key}",
                           f"{value} asked, the pools {', '.join(tenant.pools)} hold {_show(resource, available)}")
            totals[resource] = totals.get(resource, Decimal(0)) + amount
            users.setdefault(resource, set()).update(pool.name for pool in pools)

    for resource, total in sorted(totals.items()):
        available = combined(capacities[pool] for pool in users[resource]).resource(resource)
        if available and total > available:
            report.add(QUOTA_OVERSUBSCRIBED, tenants_file, "tenants",
                       f"{resource}: quotas total {_show(resource, total)} against {_show(resource, available)} "
                       f"in their pools ({total / available:.2f}x)")


def _no_memory_overcommit(name: str, tenant: Tenant, tenants_file: str, report: Report) -> None:
    limits = tenant.limit_range
    default = limits.default.get("memory") if limits else None
    request = limits.default_request.get("memory") if limits else None
    if default is None or request is None or parse_quantity(default) != parse_quantity(request):
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
