"""The kubelet of one kind of host in a pool: the spec's kubelet_* variables as the kubelet reads them.

Everything that decides what a node offers pods lives here, once: which CPUs and how much memory the
kubelet withholds, the eviction thresholds in force, and the Memory Manager's reservedMemory. The
capacity plan computes allocatable from these settings and the host layer writes the same settings
into the KubeletConfiguration, so the plan cannot promise what the node will not give.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from infra.knowledge.platform import platform
from infra.knowledge.units import parse_cpu_list, parse_quantity
from infra.spec.models import ClusterVars, Machine, PoolVars

HUGEPAGE_BYTES = {"2Mi": 2 * 2**20, "1Gi": 2**30}


@dataclass(frozen=True)
class KubeletSettings:
    max_pods: int
    cpu_manager_policy: str
    reserved_system_cpus: frozenset[int]  # empty when the pool sets no reservedSystemCPUs
    reserved_cpu: Decimal  # CPUs withheld from pods (cores)
    kube_reserved_memory: Decimal  # bytes
    system_reserved_memory: Decimal  # bytes
    eviction_hard: dict[str, str]  # the kubelet's defaults merged with the pool's thresholds
    eviction_memory: Decimal  # bytes held back by memory.available
    hugepages: dict[str, int]  # pages per size, reserved at boot
    topology_manager_policy: str
    memory_manager_policy: str
    reserved_memory: tuple[tuple[int, Decimal], ...]  # Memory Manager Static: (NUMA node, bytes)

    @property
    def withheld_memory(self) -> Decimal:
        """Bytes the kubelet withholds from pods besides hugepages: reservations plus the eviction threshold."""
        return self.kube_reserved_memory + self.system_reserved_memory + self.eviction_memory

    @property
    def hugepages_bytes(self) -> Decimal:
        return sum((Decimal(HUGEPAGE_BYTES[size] * count) for size, count in self.hugepages.items()), Decimal(0))


def eviction_hard(pool: PoolVars) -> dict[str, str]:
    """The evictionHard map the kubelet runs with: its defaults, overridden signal by signal by the pool."""
    evictions: dict[str, str] = dict(platform().kubelet.eviction_hard)
    evictions.update({str(signal): threshold for signal, threshold in pool.eviction_hard.items()})
    return evictions


def threshold_bytes(threshold: str, capacity_bytes: Decimal) -> Decimal:
    """Bytes held back by a threshold written as a quantity ("500Mi") or a share of capacity ("5%")."""
    if threshold.endswith("%"):
        return capacity_bytes * Decimal(threshold[:-1]) / 100
    return parse_quantity(threshold)


def reserved_cpu(pool: PoolVars) -> Decimal:
    """CPUs withheld from pods. With reservedSystemCPUs the kubelet reserves exactly that set and ignores
    the cpu of kubeReserved and systemReserved (it replaces them with the set's size)."""
    if pool.kubelet_reserved_system_cpus:
        return Decimal(len(parse_cpu_list(pool.kubelet_reserved_system_cpus)))
    return parse_quantity(pool.kube_cpu_reserved) + parse_quantity(pool.system_cpu_reserved)


def kubelet_settings(cluster: ClusterVars, pool: PoolVars, machine: Machine) -> KubeletSettings:
    memory = Decimal(machine.memory_gib) * 2**30
    evictions = eviction_hard(pool)
    eviction_memory = threshold_bytes(evictions["memory.available"], memory)
    kube_memory, system_memory = parse_quantity(pool.kube_memory_reserved), parse_quantity(pool.system_memory_reserved)
    reserved_memory: tuple[tuple[int, Decimal], ...] = ()
    if pool.kubelet_memory_manager_policy == "Static":
        # The Memory Manager refuses to start unless reservedMemory adds up to exactly
        # kubeReserved + systemReserved + evictionHard memory.available. It all goes on NUMA node 0,
        # where the system daemons and the reserved CPUs live.
        reserved_memory = ((0, kube_memory + system_memory + eviction_memory),)
    return KubeletSettings(
        max_pods=pool.kubelet_max_pods or cluster.kubelet_max_pods,
        cpu_manager_policy=pool.kubelet_cpu_manager_policy,
        reserved_system_cpus=parse_cpu_list(pool.kubelet_reserved_system_cpus)
        if pool.kubelet_reserved_system_cpus else frozenset(),
        reserved_cpu=reserved_cpu(pool),
        kube_reserved_memory=kube_memory,
        system_reserved_memory=system_memory,
        eviction_hard=evictions,
        eviction_memory=eviction_memory,
        hugepages={str(size): count for size, count in pool.hugepages.items()},
        topology_manager_policy=pool.kubelet_topology_manager_policy,
        memory_manager_policy=pool.kubelet_memory_manager_policy,
        reserved_memory=reserved_memory,
    )
