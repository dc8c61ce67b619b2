"""Node pools: taints that keep the wrong pods out, kubelet settings that start, tuning that adds up."""

from __future__ import annotations

from decimal import Decimal

from infra.checks.base import Report, machine_fact, rule
from infra.knowledge.platform import platform
from infra.knowledge.units import GIB, parse_cpu_list, parse_quantity
from infra.model.capacity import describe_hosts, host_capacity
from infra.model.conntrack import BUCKETS_SYSCTL, MAX_SYSCTL, conntrack, kube_proxy_settings
from infra.model.resolve import Resolved
from infra.spec import Host, Pool
from infra.spec.models import Machine, parse_taint

POOL_GPU_TAINT = rule(
    "POOL-GPU-TAINT", "error",
    "A GPU pool without a NoSchedule taint: any pod, GPU or not, can land on a GPU node and hold its "
    "CPU and memory while GPU jobs wait.",
    'Add a taint such as "nvidia.com/gpu=present:NoSchedule" to node_taints.',
)
POOL_MEMORY_TAINT = rule(
    "POOL-MEMORY-TAINT", "warning",
    "A memory pool without a NoSchedule taint: stateless pods fill the big-memory nodes first.",
    'Add a taint such as "node-pool/memory=true:NoSchedule" to node_taints.',
)
POOL_MEMORY_OVERCOMMIT = rule(
    "POOL-MEMORY-OVERCOMMIT", "error",
    "A memory pool that allows memory overcommit: Redis, Elasticsearch and JVMs get OOM-killed when "
    "neighbours use their limits.",
    "Set overcommit.memory to 1.0 for memory pools.",
)
HOST_ALLOCATABLE = rule(
    "HOST-ALLOCATABLE", "error",
    "Reservations and hugepages larger than the machine: the kubelet has nothing (or less than nothing) "
    "to give pods.",
    "Lower hugepages or the *_reserved settings, or use a bigger machine.",
)
HOST_ALLOCATABLE_LOW = rule(
    "HOST-ALLOCATABLE-LOW", "warning",
    "Hugepages and reservations leaving under 10% of memory for ordinary pods (including the system "
    "daemons of GPU and network plugins).",
    "Lower hugepages, or check that the pool really runs only hugepage workloads.",
)
HOST_GPU_VARS = rule(
    "HOST-GPU-VARS", "error",
    "A driver or CUDA version set on a host of a CPU or memory pool: nothing installs it, so the "
    "inventory claims a driver the host will never have.",
    "Remove nvidia_driver_version and cuda_version from the host, or move the host to a GPU pool.",
)
KUBELET_STATIC_CPU = rule(
    "KUBELET-STATIC-CPU", "error",
    "CPU Manager static policy with no CPU reserved: the kubelet refuses to start with this combination.",
    "Reserve CPU (kube_cpu_reserved/system_cpu_reserved > 0) or set kubelet_reserved_system_cpus.",
)
KUBELET_RESERVED_CPUS = rule(
    "KUBELET-RESERVED-CPUS", "error",
    "kubelet_reserved_system_cpus naming CPUs the machine does not have: the kubelet fails to start.",
    "List CPUs between 0 and the machine's logical CPU count - 1.",
)
KUBELET_RESERVED_CPUS_IGNORED = rule(
    "KUBELET-RESERVED-CPUS-IGNORED", "warning",
    "kube_cpu_reserved or system_cpu_reserved set beside kubelet_reserved_system_cpus: the kubelet then "
    "reserves exactly the listed CPUs and ignores both quantities, so the inventory says one thing and "
    "the node does another.",
    "Remove kube_cpu_reserved and system_cpu_reserved from the pool; size kubelet_reserved_system_cpus instead.",
)
KUBELET_TOPOLOGY_FIT = rule(
    "KUBELET-TOPOLOGY-FIT", "error",
    "Topology Manager single-numa-node on a pool whose pods cannot fit one NUMA node (a whole-machine "
    "gpu_bigmem pool, or a tenant whose LimitRange max exceeds one NUMA node's share): the kubelet "
    "rejects those pods with TopologyAffinityError.",
    "Use kubelet_topology_manager_policy restricted (aligns where it can, admits multi-NUMA pods), or "
    "lower the tenant's limit_range.max to one NUMA node's share.",
)
IRQ_CPUS = rule(
    "IRQ-CPUS", "error",
    "IRQ affinity naming CPUs the machine does not have: the setting fails on the host.",
    "List CPUs between 0 and the machine's logical CPU count - 1.",
)
IRQ_EXCLUSIVE = rule(
    "IRQ-EXCLUSIVE", "warning",
    "With CPU Manager static, NIC interrupts on CPUs outside the reserved set land on the exclusive "
    "CPUs of latency-critical pods.",
    "Make irq_affinity.cpus a subset of kubelet_reserved_system_cpus.",
)
CONNTRACK_MAX = rule(
    "SYSCTL-CONNTRACK-MAX", "error",
    "net.netfilter.nf_conntrack_max in a pool's sysctls while kube-proxy manages the table: kube-proxy "
    "sets max(min, maxPerCore x logical CPUs) at start, raising or lowering whatever the host set, so "
    "the inventory lies about the host.",
    "Remove the sysctl (the value follows from the machine); size the table with "
    "kube_proxy_conntrack_max_per_core and kube_proxy_conntrack_min in group_vars/all.yml.",
)
CONNTRACK_BUCKETS = rule(
    "SYSCTL-CONNTRACK-BUCKETS", "error",
    "A conntrack hash table under a quarter of nf_conntrack_max where kube-proxy does not raise it "
    "(kube-proxy removed, or its maxPerCore 0): every lookup walks long chains on each packet.",
    "Set net.netfilter.nf_conntrack_buckets to at least nf_conntrack_max / 4, or leave it out: the host "
    "layer then sets a quarter of the table.",
)

GPU_VARIABLES = ("nvidia_driver_version", "cuda_version")


def check(view: Resolved, report: Report) -> None:
    for pool in view.env.pools.values():
        _taints(pool, report)
        _cpu_pinning(pool, report)
        if pool.vars.pool_kind == "memory" and pool.vars.overcommit.memory > 1:
            report.at_pool(POOL_MEMORY_OVERCOMMIT, pool, "overcommit.memory",
                       f"pool {pool.name} allows {pool.vars.overcommit.memory}x memory overcommit")
        for machine, hosts in view.machine_groups(pool).items():
            _host_resources(view, pool, machine, hosts, report)


    for host in view.env.nodes:
        pool_vars = view.env.pools[host.pool].vars if host.pool else None
        if pool_vars and pool_vars.is_gpu:
            continue
        where = f"{pool_vars.pool_kind} pool {host.pool}" if pool_vars else "control plane"
        for name in GPU_VARIABLES:
            if getattr(host.vars, name):
                report.add(HOST_GPU_VARS, host.source(name), f"{host.name}.{name}",
                           f"{where}: host {host.name} sets {name}")


def _taints(pool: Pool, report: Report) -> None:
    effects = {parse_taint(taint)[2] for taint in pool.vars.node_taints}
    repelled = bool(effects & {"NoSchedule", "NoExecute"})
    if pool.vars.is_gpu and not repelled:
        report.at_pool(POOL_GPU_TAINT, pool, "node_taints", f"GPU pool {pool.name} has no NoSchedule taint")
    if pool.vars.pool_kind == "memory" and not repelled:
        report.at_pool(POOL_MEMORY_TAINT, pool, "node_taints", f"memory pool {pool.name} has no NoSchedule taint")


def _cpu_pinning(pool: Pool, report: Report) -> None:
    """Reserved CPUs as the kubelet reads them; CPU Manager static needs some, and the NIC interrupts belong there."""
    spec = pool.vars
    reserved = parse_cpu_list(spec.kubelet_reserved_system_cpus) if spec.kubelet_reserved_system_cpus else None
    if reserved:
        ignored = sorted({"kube_cpu_reserved", "system_cpu_reserved"} & spec.model_fields_set)
        if ignored:
            report.at_pool(KUBELET_RESERVED_CPUS_IGNORED, pool, ignored[0],
                       f"pool {pool.name}: {' and '.join(ignored)} ignored; the kubelet reserves the "
                       f"{len(reserved)} CPUs {spec.kubelet_reserved_system_cpus}")
    if spec.kubelet_cpu_manager_policy != "static":
        return
    reserved_cpu = parse_quantity(spec.kube_cpu_reserved) + parse_quantity(spec.system_cpu_reserved)
    if reserved_cpu == 0 and not reserved:
        report.at_pool(KUBELET_STATIC_CPU, pool, "kubelet_cpu_manager_policy",
                   f"pool {pool.name}: static policy with 0 CPU reserved")
    if spec.irq_affinity and not (reserved and parse_cpu_list(spec.irq_affinity.cpus) <= reserved):
        report.at_pool(IRQ_EXCLUSIVE, pool, "irq_affinity.cpus",
                   f"pool {pool.name}: IRQ CPUs {spec.irq_affinity.cpus} are not all in the reserved set "
                   f"{spec.kubelet_reserved_system_cpus or '(none)'}")


def _host_resources(view: Resolved, pool: Pool, machine: Machine, hosts: list[Host], report: Report) -> None:
    """Rules that depend on the hardware: run once per kind of host in the pool."""
    spec = pool.vars
    cluster = view.env.cluster
    where = f"pool {pool.name} ({describe_hosts(hosts)})"
    one = host_capacity(cluster, pool, machine)

    if one.allocatable_cpu <= 0 or one.allocatable_memory_gib <= 0:
        field = "kube_cpu_reserved" if one.allocatable_cpu <= 0 else "hugepages"
        report.at_pool(HOST_ALLOCATABLE, pool, field,
                   f"{where}: allocatable {one.allocatable_cpu} CPU, {one.allocatable_memory_gib:.1f} GiB "
                   f"of {one.cpus} CPU, {one.memory_gib:.0f} GiB", breaks=(machine_fact(pool.name),))
    elif one.allocatable_memory_gib < one.memory_gib / 10:
        report.at_pool(HOST_ALLOCATABLE_LOW, pool, "hugepages",
                   f"{where}: {one.allocatable_memory_gib:.1f} GiB of {one.memory_gib:.0f} GiB left for "
                   f"pods after {one.hugepages_gib:.0f} GiB hugepages and reservations")

    cpu_lists = {
        "kubelet_reserved_system_cpus": (spec.kubelet_reserved_system_cpus, KUBELET_RESERVED_CPUS),
        "irq_affinity.cpus": (spec.irq_affinity.cpus if spec.irq_affinity else None, IRQ_CPUS),
    }
    for field, (cpu_list, which) in cpu_lists.items():
        highest = max(parse_cpu_list(cpu_list)) if cpu_list else -1
        if highest >= machine.cpus:
            report.at_pool(which, pool, field,
                       f"{where}: CPU {highest} named, the machine has CPUs 0-{machine.cpus - 1}")

    if spec.kubelet_topology_manager_policy == "single-numa-node" and machine.numa_nodes > 1:
        _numa_fit(view, pool, machine, where, report)
    _conntrack(view, pool, machine, where, report)


def _numa_fit(view: Resolved, pool: Pool, machine: Machine, where: str, report: Report) -> None:
    """single-numa-node admits a pod only if its CPUs, memory and devices fit one NUMA node."""
    if pool.vars.pool_kind == "gpu_bigmem":
        report.at_pool(KUBELET_TOPOLOGY_FIT, pool, "kubelet_topology_manager_policy",
                   f"{where}: whole-machine pods need the CPUs and GPUs of all {machine.numa_nodes} NUMA nodes; "
                   "single-numa-node rejects them")
        return
    one = host_capacity(view.env.cluster, pool, machine)
    share = {"cpu": one.allocatable_cpu, "memory": one.allocatable_memory_gib * GIB}
    share.update({name: Decimal(count) for name, count in one.gpu_resources.items()})
    share = {name: amount / machine.numa_nodes for name, amount in share.items()}
    for tenant_name, tenant in view.env.cluster.tenants.items():
        if pool.name not in tenant.pools or tenant.limit_range is None:
            continue
        for resource, limit in tenant.limit_range.max.items():
            if resource in share and parse_quantity(limit) > share[resource]:
                shown = f"{share[resource] / GIB:.1f}Gi" if resource == "memory" else f"{share[resource]:.1f}"
                report.at_pool(KUBELET_TOPOLOGY_FIT, pool, "kubelet_topology_manager_policy",
                           f"{where}: tenant {tenant_name} allows {resource} up to {limit} per container, one "
                           f"of {machine.numa_nodes} NUMA nodes holds {shown}")


def _conntrack(view: Resolved, pool: Pool, machine: Machine, where: str, report: Report) -> None:
    table = conntrack(view.env.cluster, pool.vars, machine.cpus)
    if table.kube_proxy_sets_max and table.declared_max is not None and table.declared_max != table.max:
        per_core, minimum = kube_proxy_settings(view.env.cluster)
        report.at_pool(CONNTRACK_MAX, pool, f"sysctls.{MAX_SYSCTL}",
                   f"{where}: kube-proxy sets {table.max} at start (max({minimum}, {per_core} x {machine.cpus} "
                   f"CPUs)); the declared {table.declared_max} never holds")
    divisor = platform().kube_proxy_conntrack.buckets_divisor
    buckets = table.declared_buckets
    if not table.kube_proxy_sets_max and buckets is not None and buckets * divisor < table.max:
        report.at_pool(CONNTRACK_BUCKETS, pool, f"sysctls.{BUCKETS_SYSCTL}",
                   f"{where}: {buckets} buckets for {table.max} entries; want at least {table.max // divisor}")
