"""Workloads: names that point elsewhere (tenant, priority class, storage class), and whether the pools
that may run a replica can serve it at all. Whether they serve all replicas at once is `infra fit`'s
question; these rules find what no amount of capacity would fix."""

from __future__ import annotations

from decimal import Decimal

from infra.checks.base import Report, gpu_fact, machine_fact, rule
from infra.knowledge.units import GIB, parse_quantity
from infra.model.capacity import HostCapacity, host_capacity
from infra.model.resolve import Resolved
from infra.model.workloads import Demand, Offer, defaulted, demand, pool_offers
from infra.spec import Pool
from infra.spec.models import Machine, Tenant, Workload

WORKLOAD_TENANT = rule(
    "WORKLOAD-TENANT", "error",
    "Workloads declared for a tenant that `tenants` does not define: there is no namespace, quota or pool "
    "list for them, so none of their pods can be created.",
    "Declare the tenant under tenants, or move the workloads under an existing tenant.",
)
WORKLOAD_PRIORITY = rule(
    "WORKLOAD-PRIORITY", "error",
    "A workload naming a PriorityClass that `priority_classes` does not define: the API server refuses its pods.",
    "Define the class under priority_classes, fix the name, or leave priority_class out to use the tenant's.",
)
WORKLOAD_RESOURCE = rule(
    "WORKLOAD-RESOURCE", "error",
    "A workload asking for a GPU resource, GPU model or hugepage size that none of its tenant's pools offers "
    "(a MIG profile no layout cuts, whole GPUs of a MIG-only pool, an H100 of A100 pools): its pods stay "
    "Pending forever.",
    "Ask for what the tenant's pools advertise (`python -m infra plan` lists it), or give the tenant a pool "
    "that offers it.",
)
WORKLOAD_STORAGE = rule(
    "WORKLOAD-STORAGE", "error",
    "A workload's volume in a storage class that `storage_classes` does not define, or in a local class "
    "that backs none of the pools its pods may run on: the claim never binds and the pods stay Pending.",
    "Name a defined class; for a local class, one whose pools include a pool the workload runs on.",
)
WORKLOAD_GANG_QUEUE = rule(
    "WORKLOAD-GANG-QUEUE", "error",
    "A gang (a job with `gang`, a Volcano PodGroup) of a tenant without a Volcano queue: the tenants' admission "
    "policy refuses its PodGroup (Volcano would run it in the `default` queue, which no tenant may use), so "
    "none of its pods is ever scheduled.",
    "Give the tenant a queue (tenants.<name>.queue), or drop `gang` from the workload.",
)
WORKLOAD_LIMIT_RANGE = rule(
    "WORKLOAD-LIMIT-RANGE", "error",
    "A workload whose requests or limits, once the tenant's LimitRange has filled them in, break it: a "
    "request above its (defaulted) limit, a value above max, a limit/request ratio above "
    "max_limit_request_ratio. The API server refuses every one of its pods.",
    "Write the workload's limits (and requests) within the tenant's limit_range, or widen the limit_range.",
)
WORKLOAD_TOO_BIG = rule(
    "WORKLOAD-TOO-BIG", "error",
    "A replica larger than any one node of the pools that may run it (CPU, memory, hugepages, GPU devices, "
    "pods, a local disk): no node ever fits it, however many are added.",
    "Split the work into smaller replicas, lower the requests, or give the tenant a pool of bigger machines.",
)
WORKLOAD_NUMA = rule(
    "WORKLOAD-NUMA", "error",
    "A replica the kubelet aligns to one NUMA node (it asks for devices, or is Guaranteed with whole CPUs "
    "under CPU Manager static, or under Memory Manager Static) on a single-numa-node pool, but larger "
    "than one NUMA node: the kubelet rejects it after scheduling (TopologyAffinityError), again and again.",
    "Lower the replica to one NUMA node's share (named in the finding), or run it on a pool whose "
    "kubelet_topology_manager_policy is restricted.",
)
WORKLOAD_NUMA_POLICY = rule(
    "WORKLOAD-NUMA-POLICY", "warning",
    "A workload marked numa_aligned that no node will align: its pools' Topology Manager does not enforce "
    "alignment (none, best-effort), or the pod gets no exclusive CPUs (not Guaranteed with whole CPUs under "
    "CPU Manager static) and asks for no device. It runs, but with the cross-socket latency it declared "
    "it cannot take.",
    "Run it on a pool with kubelet_topology_manager_policy single-numa-node or restricted and CPU Manager "
    "static, with requests equal to limits and whole CPUs; or drop numa_aligned.",
)


def check(view: Resolved, report: Report) -> None:
    env = view.env
    kinds = _Kinds(view)
    where = env.cluster_source("workloads")
    tenants = env.cluster.tenants
    offers = [offer for pool in env.pools.values() for offer in pool_offers(view, pool)]
    for tenant_name, workloads in env.workloads.items():
        tenant = tenants.get(tenant_name)
        if tenant is None:
            report.add(WORKLOAD_TENANT, where, f"workloads.{tenant_name}",
                       f"{len(workloads)} workload(s) for {tenant_name!r}, which is not a tenant; tenants: "
                       f"{', '.join(sorted(tenants)) or 'none'}")
            continue
        pools_known = all(pool in env.pools and not report.broken(machine_fact(pool)) for pool in tenant.pools)
        gpus_known = pools_known and not report.broken(*(gpu_fact(pool) for pool in tenant.pools))
        for name, workload in workloads.items():
            field = f"workloads.{tenant_name}.{name}"
            if workload.priority_class and workload.priority_class not in env.cluster.priority_classes:
                report.add(WORKLOAD_PRIORITY, where, f"{field}.priority_class",
                           f"no priority class named {workload.priority_class!r}")
            if workload.gang is not None and tenant.queue is None:
                report.add(WORKLOAD_GANG_QUEUE, where, f"{field}.gang",
                           f"tenant {tenant_name} has no Volcano queue, so the PodGroup of this gang is refused; "
                           f"give tenants.{tenant_name} a queue")
            limits_ok = _limit_range(tenant_name, tenant, field, workload, where, report)
            if not pools_known or (workload.gpu is not None and not gpus_known):
                continue  # an unknown pool or broken pool facts are reported once, where they are
            found = demand(env, tenant_name, tenant, name, workload, offers)
            if not _served(kinds, tenant, found, offers, field, where, report) or not limits_ok:
                continue
            if _fits_a_node(kinds, found, field, where, report):
                _numa(kinds, found, field, where, report)


def _limit_range(tenant_name: str, tenant: Tenant, field: str, workload: Workload, where: str,
                 report: Report) -> bool:
    """What the LimitRanger admission plugin refuses, after it has filled in its defaults."""
    requests, limits = defaulted(workload, tenant)
    problems = []
    for resource, request in requests.items():
        limit = limits.get(resource)
        if limit is not None and request > limit:
            source = "written" if resource in workload.limits else f"tenant {tenant_name}'s limit_range default"
            problems.append(f"{resource} request {_show(resource, request)} is above its limit "
                            f"{_show(resource, limit)} ({source})")
    limit_range = tenant.limit_range
    for resource, maximum in (limit_range.max.items() if limit_range else ()):
        value = limits.get(resource, requests.get(resource))
        if value is not None and value > parse_quantity(maximum):
            problems.append(f"{resource} {_show(resource, value)} is above tenant {tenant_name}'s limit_range.max "
                            f"{maximum}")
    for resource, ratio in (limit_range.max_limit_request_ratio.items() if limit_range else ()):
        asked, allowed = requests.get(resource), limits.get(resource)
        if asked and allowed and allowed / asked > parse_quantity(ratio):
            problems.append(f"{resource} limit/request {allowed / asked:.2f} is above tenant {tenant_name}'s "
                            f"limit_range.max_limit_request_ratio {ratio}")
    for problem in problems:
        report.add(WORKLOAD_LIMIT_RANGE, where, field, problem)
    return not problems


def _served(kinds: _Kinds, tenant: Tenant, found: Demand, offers: list[Offer], field: str, where: str,
            report: Report) -> bool:
    """Whether some pool of the tenant offers what a replica names: its GPU resource and model, its
    hugepage sizes, its storage class."""
    env = kinds.view.env
    need = found.spec.gpu
    pools = ", ".join(tenant.pools)
    if need is not None and not found.pools:
        offered = sorted({f"{offer.resource} ({offer.model})" for offer in offers if offer.pool in tenant.pools})
        wanted = {"memory": f"a GPU device with {need.memory_gib} GiB", "whole": "whole GPUs (nvidia.com/gpu)"}.get(
            need.type, found.gpu_resource or "")
        if need.model:
            wanted += f" of a {need.model}"
        report.add(WORKLOAD_RESOURCE, where, f"{field}.gpu",
                   f"asks for {wanted}; {pools} offer {', '.join(offered) or 'no GPU resources'}")
        return False
    capacities = kinds.of(found.pools)
    for resource in found.requests:
        if resource.startswith("hugepages-") and not any(one.hugepages.get(resource) for _, _, one in capacities):
            report.add(WORKLOAD_RESOURCE, where, f"{field}.requests.{resource}",
                       f"none of {', '.join(found.pools)} reserves {resource.removeprefix('hugepages-')} pages")
            return False
    storage = found.spec.storage
    if storage is not None:
        storage_class = env.cluster.storage_classes.get(storage.storage_class)
        if storage_class is None:
            report.add(WORKLOAD_STORAGE, where, f"{field}.storage.storage_class",
                       f"no storage class named {storage.storage_class!r}; defined: "
                       f"{', '.join(sorted(env.cluster.storage_classes)) or 'none'}")
            return False
        if storage_class.type == "local" and not set(storage_class.pools) & set(found.pools):
            report.add(WORKLOAD_STORAGE, where, f"{field}.storage.storage_class",
                       f"local class {storage.storage_class} backs {', '.join(storage_class.pools)}; the workload "
                       f"runs on {', '.join(found.pools)}")
            return False
    return True


class _Kinds:
    """One node of each kind per pool, with what it offers: computed once per check run, read per workload."""

    def __init__(self, view: Resolved):
        self.view = view
        self._kinds: dict[str, list[tuple[Pool, Machine, HostCapacity]]] = {}

    def of(self, pools: tuple[str, ...]) -> list[tuple[Pool, Machine, HostCapacity]]:
        found = []
        for name in pools:
            if name not in self._kinds:
                pool = self.view.env.pools[name]
                self._kinds[name] = [(pool, machine, host_capacity(self.view.env.cluster, pool, machine))
                                     for machine in self.view.machine_groups(pool)]
            found += self._kinds[name]
        return found


def _offered(one: HostCapacity) -> dict[str, Decimal]:
    """What one node offers a single pod, in the units of Demand.requests."""
    offered = {"cpu": one.allocatable_cpu, "memory": one.allocatable_memory_gib * GIB,
               "ephemeral-storage": one.allocatable_ephemeral_storage}
    offered.update(one.hugepages)
    offered.update({name: Decimal(count) for name, count in one.gpu_resources.items()})
    return offered


def _fits_a_node(kinds: _Kinds, found: Demand, field: str, where: str, report: Report) -> bool:
    """A replica must fit one node of some pool it may run on, its local volume on one of that node's disks."""
    storage = found.spec.storage
    storage_class = kinds.view.env.cluster.storage_classes[storage.storage_class] if storage else None
    best: tuple[int, str] | None = None
    for pool, _, one in kinds.of(found.pools):
        offered = _offered(one)
        short = [f"{resource} {_show(resource, amount)} (a node has {_show(resource, offered.get(resource, 0))})"
                 for resource, amount in found.requests.items() if amount > offered.get(resource, Decimal(0))]
        if storage and storage_class and storage_class.type == "local" and found.storage_bytes is not None:
            disks = [disk.size_gib for disk in pool.vars.local_disks] if pool.name in storage_class.pools else []
            if not any(size * GIB >= found.storage_bytes for size in disks):
                short.append(f"a {storage.size} local volume (the largest disk is {max(disks, default=0)}Gi)")
        if not short:
            return True
        message = f"on {pool.name}: " + ", ".join(short)
        if best is None or len(short) < best[0]:
            best = (len(short), message)
    if best is not None:
        report.add(WORKLOAD_TOO_BIG, where, field, f"one replica needs more than a whole node {best[1]}")
    return False


def _numa(kinds: _Kinds, found: Demand, field: str, where: str, report: Report) -> None:
    """single-numa-node admits an aligned pod only within one NUMA node; numa_aligned needs a node that aligns."""
    aligning = False
    for pool, machine, one in kinds.of(found.pools):
        spec = pool.vars
        policy = spec.kubelet_topology_manager_policy
        guaranteed = all(found.limits.get(r) == found.requests.get(r) for r in ("cpu", "memory"))
        exclusive_cpus = (spec.kubelet_cpu_manager_policy == "static" and guaranteed
                          and found.requests.get("cpu", Decimal(0)) % 1 == 0)
        hinted = (found.gpu_resource is not None or exclusive_cpus
                  or (spec.kubelet_memory_manager_policy == "Static" and guaranteed))
        if policy in ("single-numa-node", "restricted") and hinted:
            aligning = True
        if policy != "single-numa-node" or not hinted or machine.numa_nodes < 2:
            continue
        share = {name: amount / machine.numa_nodes for name, amount in _offered(one).items()}
        over = [f"{resource} {_show(resource, amount)} > {_show(resource, share[resource])}"
                for resource, amount in found.requests.items()
                if resource in share and not resource.startswith("hugepages-") and amount > share[resource]]
        if over:
            report.add(WORKLOAD_NUMA, where, field,
                       f"on {pool.name} (single-numa-node, {machine.numa_nodes} NUMA nodes) one replica needs "
                       f"{', '.join(over)}, one NUMA node's share")
    if found.spec.numa_aligned and not aligning:
        report.add(WORKLOAD_NUMA_POLICY, where, f"{field}.numa_aligned",
                   f"numa_aligned, but on {', '.join(found.pools)} the kubelet does not align it: a topology policy "
                   "of single-numa-node or restricted, and devices or exclusive CPUs (requests = limits, whole "
                   "CPUs, CPU Manager static) are both needed")


def _show(resource: str, amount: Decimal | int) -> str:
    value = Decimal(amount)
    if resource == "memory" or resource.startswith("hugepages-"):
        return f"{value / GIB:.1f}Gi".replace(".0Gi", "Gi")
    return f"{value.normalize():f}" if value == value.to_integral_value() else f"{value:.2f}"
