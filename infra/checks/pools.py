"""Node pools: taints that keep the wrong pods out, kubelet settings that start, tuning that adds up."""

from __future__ import annotations

from decimal import Decimal

from infra.capacity import describe_hosts, host_capacity, machine_groups
from infra.checks.base import Report, rule
from infra.knowledge import platform
from infra.spec import Environment, Host, Pool
from infra.spec.models import Machine, parse_taint
from infra.units import parse_cpu_list, parse_quantity

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
    "net.netfilter.nf_conntrack_max below what kube-proxy sets (max(131072, 32768 x logical CPUs)): "
    "kube-proxy overrides it at start, so the inventory lies about the host; a busy node drops "
    "new connections when the table fills.",
    "Raise net.netfilter.nf_conntrack_max to at least the value named in the finding.",
)
CONNTRACK_BUCKETS = rule(
    "SYSCTL-CONNTRACK-BUCKETS", "error",
    "A conntrack hash table under a quarter of nf_conntrack_max: every lookup walks long chains on each packet.",
    "Set net.netfilter.nf_conntrack_buckets to nf_conntrack_max / 4, as kube-proxy does.",
)

CONNTRACK_MAX_SYSCTL = "net.netfilter.nf_conntrack_max"
CONNTRACK_BUCKETS_SYSCTL = "net.netfilter.nf_conntrack_buckets"


def kube_proxy_conntrack_max(cpus: int) -> int:
    facts = platform().kube_proxy_conntrack
    return max(facts.min, facts.max_per_core * cpus)


def check(env: Environment, report: Report) -> None:
    for pool in env.pools.values():
        _taints(pool, report)
        _cpu_pinning(pool, report)
        if pool.vars.pool_kind == "memory" and pool.vars.overcommit.memory > 1:
            report.add(POOL_MEMORY_OVERCOMMIT, pool.source, "overcommit.memory",
                       f"pool {pool.name} allows {pool.vars.overcommit.memory}x memory overcommit")
        for machine, hosts in machine_groups(env, pool).items():
            _host_resources(env, pool, machine, hosts, report)


def _taints(pool: Pool, report: Report) -> None:
    effects = {parse_taint(taint)[2] for taint in pool.vars.node_taints}
    repelled = bool(effects & {"NoSchedule", "NoExecute"})
    if pool.vars.is_gpu and not repelled:
        report.add(POOL_GPU_TAINT, pool.source, "node_taints", f"GPU pool {pool.name} has no NoSchedule taint")
    if pool.vars.pool_kind == "memory" and not repelled:
        report.add(POOL_MEMORY_TAINT, pool.source, "node_taints", f"memory pool {pool.name} has no NoSchedule taint")


def _cpu_pinning(pool: Pool, report: Report) -> None:
    """CPU Manager static needs CPUs reserved for the system, and the NIC interrupts belong on those."""
    spec = pool.vars
    if spec.kubelet_cpu_manager_policy != "static":
        return
    reserved = parse_cpu_list(spec.kubelet_reserved_system_cpus) if spec.kubelet_reserved_system_cpus else None
    reserved_cpu = parse_quantity(spec.kube_cpu_reserved) + parse_quantity(spec.system_cpu_reserved)
    if reserved_cpu == 0 and not reserved:
        report.add(KUBELET_STATIC_CPU, pool.source, "kubelet_cpu_manager_policy",
                   f"pool {pool.name}: static policy with 0 CPU reserved")
    if spec.irq_affinity and not (reserved and parse_cpu_list(spec.irq_affinity.cpus) <= reserved):
        report.add(IRQ_EXCLUSIVE, pool.source, "irq_affinity.cpus",
                   f"pool {pool.name}: IRQ CPUs {spec.irq_affinity.cpus} are not all in the reserved set "
                   f"{spec.kubelet_reserved_system_cpus or '(none)'}")


def _host_resources(env: Environment, pool: Pool, machine: Machine, hosts: list[Host], report: Report) -> None:
    """Rules that depend on the hardware: run once per kind of host in the pool."""
    spec = pool.vars
    where = f"pool {pool.name} ({describe_hosts(hosts)})"
    one = host_capacity(env, pool, machine)

    if one.allocatable_cpu <= 0 or one.allocatable_memory_gib <= 0:
        report.add(HOST_ALLOCATABLE, pool.source, "kube_cpu_reserved" if one.allocatable_cpu <= 0 else "hugepages",
                   f"{where}: allocatable {one.allocatable_cpu} CPU, {one.allocatable_memory_gib:.1f} GiB "
                   f"of {one.cpus} CPU, {one.memory_gib:.0f} GiB")
    elif one.allocatable_memory_gib < one.memory_gib / 10:
        report.add(HOST_ALLOCATABLE_LOW, pool.source, "hugepages",
                   f"{where}: {one.allocatable_memory_gib:.1f} GiB of {one.memory_gib:.0f} GiB left for "
                   f"pods after {one.hugepages_gib:.0f} GiB hugepages and reservations")

    cpu_lists = {
        "kubelet_reserved_system_cpus": (spec.kubelet_reserved_system_cpus, KUBELET_RESERVED_CPUS),
        "irq_affinity.cpus": (spec.irq_affinity.cpus if spec.irq_affinity else None, IRQ_CPUS),
    }
    for field, (cpu_list, which) in cpu_lists.items():
        highest = max(parse_cpu_list(cpu_list)) if cpu_list else -1
        if highest >= machine.cpus:
            report.add(which, pool.source, field,
                       f"{where}: CPU {highest} named, the machine has CPUs 0-{machine.cpus - 1}")

    floor = kube_proxy_conntrack_max(machine.cpus)
    declared_max = spec.sysctls.get(CONNTRACK_MAX_SYSCTL)
    if declared_max is not None and int(declared_max) < floor:
        report.add(CONNTRACK_MAX, pool.source, f"sysctls.{CONNTRACK_MAX_SYSCTL}",
                   f"{where}: {declared_max} is below kube-proxy's {floor} for {machine.cpus} CPUs")
    buckets = spec.sysctls.get(CONNTRACK_BUCKETS_SYSCTL)
    conntrack_max = max(int(declared_max or 0), floor)
    divisor = platform().kube_proxy_conntrack.buckets_divisor
    if buckets is not None and Decimal(int(buckets)) * divisor < conntrack_max:
        report.add(CONNTRACK_BUCKETS, pool.source, f"sysctls.{CONNTRACK_BUCKETS_SYSCTL}",
                   f"{where}: {buckets} buckets for {conntrack_max} entries; want at least {conntrack_max // divisor}")
