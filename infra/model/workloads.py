"""Workloads as the scheduler meets them: each replica's requests after Kubernetes' defaulting, the one
GPU resource it names, its priority, and the tenant's pools that can serve it.

The checks (can the pools serve it at all), `fit` (place every replica) and `propose` (size the pools)
read workloads through this module only, so the three cannot disagree about what a replica asks for.

- Requests and limits are defaulted as the API server and the LimitRanger admission plugin do it: a
  missing request takes the written limit; then the tenant's LimitRange fills what is still missing
  (defaultRequest, which itself defaults to `default`, which defaults to `max`), ephemeral-storage
  included: the cluster layer gives every tenant's LimitRange a default for it (platform.yml).
- A GPU need becomes one extended resource, because a pod names exactly one: `whole` is
  nvidia.com/gpu, `mig` nvidia.com/mig-<profile>, `shared` nvidia.com/gpu.shared, and `memory` the
  smallest device with enough memory that the tenant's pools offer (a MIG instance before a whole card
  of the same size, then by name), so the choice is deterministic.
- A replica may run on the tenant's pools that can serve it: those offering its GPU resource (of its
  model, if it names one); for a replica without GPUs the tenant's CPU and memory pools, or all its
  pools when it has none. This is what the pod's node affinity and tolerations say (infra.planning.fit), so a
  pod that never asked for a GPU does not land on a GPU node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from infra.knowledge.chart_values import chart_values
from infra.knowledge.gpus import gpu_models
from infra.knowledge.platform import platform
from infra.knowledge.units import parse_quantity
from infra.model.capacity import SHARED_GPU, WHOLE_GPU, gpu_resources
from infra.model.mig import mig_resource_name
from infra.model.resolve import Resolved
from infra.spec import Environment, Pool
from infra.spec.models import GpuNeed, LimitRangeSpec, Tenant, Workload

COMPUTE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "hugepages-1Gi")
_MIG_MEMORY = re.compile(r"^nvidia\.com/mig-\d+g\.(\d+)gb(\.me)?$")


@dataclass(frozen=True)
class Offer:
    """A GPU resource a pool advertises, with what one device of it holds."""

    pool: str
    resource: str
    model: str | None  # the card
    memory_gib: int | None  # per device; None for shared slices, which isolate no memory


def device_memory_gib(resource: str, model: str | None) -> int | None:
    """Memory of one device of an extended resource: the MIG profile's (3g.40gb -> 40), a whole card's."""
    match = _MIG_MEMORY.match(resource)
    if match:
        return int(match[1])
    if resource == WHOLE_GPU and model in gpu_models():
        return gpu_models()[model].memory_gib
    return None


def pool_offers(view: Resolved, pool: Pool) -> list[Offer]:
    """The GPU resources the pool's hosts advertise today (one GPU model per pool; else nothing)."""
    models = view.gpu_models(pool)
    if len(models) != 1:
        return []
    names: set[str] = set()
    for resolved in view.of_pool(pool):
        if resolved.machine is not None:
            names.update(gpu_resources(pool, resolved.machine.gpu_count))
    return [Offer(pool.name, name, models[0], device_memory_gib(name, models[0])) for name in sorted(names)]


def resolve_gpu(need: GpuNeed, offers: Iterable[Offer]) -> str | None:
    """The extended resource a GPU need names; for `memory`, the smallest offered device with enough memory."""
    if need.type == "whole":
        return WHOLE_GPU
    if need.type == "mig":
        return mig_resource_name(need.profile or "")
    if need.type == "shared":
        return SHARED_GPU
    mig_prefix = chart_values().nvidia_device_plugin.mig_resource_prefix
    fitting = [(offer.memory_gib, not offer.resource.startswith(mig_prefix), offer.resource)
               for offer in offers
               if offer.memory_gib is not None and offer.memory_gib >= (need.memory_gib or 0)
               and (need.model is None or offer.model == need.model)]
    return min(fitting)[2] if fitting else None


def serves(offer: Offer, need: GpuNeed, resource: str) -> bool:
    """Whether the offer is the resource the need names (of the model it names, if any)."""
    return offer.resource == resource and (need.model is None or offer.model == need.model)


def _larger(a: str, b: str) -> bool:
    return parse_quantity(a) > parse_quantity(b)


def ephemeral_storage_defaults(spec: LimitRangeSpec | None) -> tuple[str, str]:
    """(default limit, default request) of ephemeral-storage in a tenant's LimitRange (infra.cluster.tenancy
    adds them to every tenant's), so every container has a scratch-space request and limit.

    The tenant's own values win; platform.yml fills what it leaves out, kept consistent with what it
    sets, since the API server refuses a LimitRange whose default exceeds its max or whose default
    request exceeds its default: a missing default limit is at least the tenant's request and at most
    its max; a missing default request is at most the limit, and equals it where the tenant's
    max_limit_request_ratio would refuse the platform's request.
    """
    facts = platform().tenant_ephemeral_storage
    limit = spec.default.get("ephemeral-storage") if spec else None
    request = spec.default_request.get("ephemeral-storage") if spec else None
    maximum = spec.max.get("ephemeral-storage") if spec else None
    ratio = spec.max_limit_request_ratio.get("ephemeral-storage") if spec else None
    if limit is None:
        limit = facts.default
        if request is not None and _larger(request, limit):
            limit = request
        if maximum is not None and _larger(limit, maximum):
            limit = maximum
    if request is None:
        request = facts.default_request
        if _larger(request, limit):
            request = limit
        if ratio is not None and parse_quantity(limit) > parse_quantity(ratio) * parse_quantity(request):
            request = limit
    return limit, request


def defaulted(workload: Workload, tenant: Tenant) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
    """Requests and limits per replica as admitted: the written request, else the written limit, else the
    tenant's LimitRange (defaultRequest, else default, else max); limits from `default`, else `max`."""
    limit_range = tenant.limit_range
    default_limit: dict[str, str] = {}
    default_request: dict[str, str] = {}
    if limit_range is not None:
        default_limit = {**limit_range.max, **limit_range.default}
        default_request = {**default_limit, **limit_range.default_request}
    default_limit["ephemeral-storage"], default_request["ephemeral-storage"] = ephemeral_storage_defaults(limit_range)
    written_requests = {str(key): value for key, value in workload.requests.items()}
    written_limits = {str(key): value for key, value in workload.limits.items()}
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    for resource in COMPUTE_RESOURCES:
        written_request = written_requests.get(resource)
        written_limit = written_limits.get(resource)
        request = written_request or written_limit or default_request.get(resource)
        limit = written_limit or default_limit.get(resource)
        if resource.startswith("hugepages-"):  # never defaulted by a LimitRange; request equals limit
            request = written_request or written_limit
            limit = written_limit or written_request
        if request is not None:
            requests[resource] = parse_quantity(request)
        if limit is not None:
            limits[resource] = parse_quantity(limit)
    return requests, limits


@dataclass(frozen=True)
class Demand:
    """One workload as each of its replicas reaches the scheduler."""

    tenant: str
    name: str
    spec: Workload
    requests: dict[str, Decimal]  # cpu (cores), memory and hugepages (bytes), the GPU resource (devices)
    limits: dict[str, Decimal]
    gpu_resource: str | None  # the extended resource it names; None without GPUs or when nothing offers it
    pools: tuple[str, ...]  # the tenant's pools that can serve it: its pods' node affinity
    priority_class: str | None
    priority: int
    storage_bytes: Decimal | None

    @property
    def key(self) -> str:
        return f"{self.tenant}/{self.name}"


def demands(env: Environment, offers: Iterable[Offer]) -> list[Demand]:
    """Every workload of a defined tenant, in the order written (tenant by tenant)."""
    offered = list(offers)
    found = []
    for tenant_name, workloads in env.workloads.items():
        tenant = env.cluster.tenants.get(tenant_name)
        if tenant is None:
            continue  # WORKLOAD-TENANT
        for name, workload in workloads.items():
            found.append(demand(env, tenant_name, tenant, name, workload, offered))
    return found


def demand(env: Environment, tenant_name: str, tenant: Tenant, name: str, workload: Workload,
           offers: list[Offer]) -> Demand:
    requests, limits = defaulted(workload, tenant)
    known = [pool for pool in tenant.pools if pool in env.pools]
    resource = None
    if workload.gpu is not None:
        need = workload.gpu
        tenant_offers = [offer for offer in offers if offer.pool in known]
        resource = resolve_gpu(need, tenant_offers)
        pools = tuple(pool for pool in known
                      if resource and any(offer.pool == pool and serves(offer, need, resource) for offer in offers))
        if resource is not None:
            requests[resource] = limits[resource] = Decimal(need.count)
    else:
        plain = tuple(pool for pool in known if not env.pools[pool].vars.is_gpu)
        pools = plain or tuple(known)
    priority_class = workload.priority_class or tenant.priority_class
    classes = env.cluster.priority_classes
    priority = classes[priority_class].value if priority_class in classes else 0
    storage = parse_quantity(workload.storage.size) if workload.storage else None
    return Demand(tenant_name, name, workload, requests, limits, resource, pools, priority_class, priority, storage)
