"""What each host and pool offers the scheduler: pure arithmetic over the resolved spec, shared by checks and plan.

Allocatable follows the kubelet (infra/model/kubelet.py): capacity - reserved CPUs (the reservedSystemCPUs
set when there is one, else kube-reserved + system-reserved) for CPU; capacity - hugepages -
kube-reserved - system-reserved - the hard eviction threshold for memory. GPU resources are named as
the NVIDIA device plugin advertises them for the pool's sharing mode (MIG always under the `mixed`
strategy, shared cards renamed to nvidia.com/gpu.shared), so quotas can be checked against them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from decimal import Decimal

from infra.knowledge.units import GIB
from infra.model.kubelet import HUGEPAGE_BYTES, kubelet_settings, threshold_bytes
from infra.model.mig import mig_resource_name
from infra.model.resolve import Resolved
from infra.spec import Host, Pool
from infra.spec.models import ClusterVars, Machine

SHARED_GPU = "nvidia.com/gpu.shared"
WHOLE_GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class HostCapacity:
    cpus: int
    cores: int
    memory_gib: Decimal
    hugepages_gib: Decimal
    allocatable_cpu: Decimal
    allocatable_memory_gib: Decimal
    max_pods: int
    gpus: int
    gpu_resources: dict[str, int]
    hugepages: dict[str, Decimal]  # "hugepages-1Gi" -> bytes, as the kubelet advertises them
    ephemeral_storage: Decimal  # bytes: the root disk, the kubelet's capacity
    allocatable_ephemeral_storage: Decimal  # bytes: less the nodefs.available hard-eviction threshold


def host_capacity(cluster: ClusterVars, pool: Pool, machine: Machine) -> HostCapacity:
    kubelet = kubelet_settings(cluster, pool.vars, machine)
    memory = Decimal(machine.memory_gib) * GIB
    hugepages = kubelet.hugepages_bytes
    disk = Decimal(machine.root_disk_gib) * GIB
    return HostCapacity(
        cpus=machine.cpus,
        cores=machine.cores,
        memory_gib=memory / GIB,
        hugepages_gib=hugepages / GIB,
        allocatable_cpu=Decimal(machine.cpus) - kubelet.reserved_cpu,
        allocatable_memory_gib=(memory - hugepages - kubelet.withheld_memory) / GIB,
        max_pods=kubelet.max_pods,
        gpus=machine.gpu_count,
        gpu_resources=gpu_resources(pool, machine.gpu_count),
        hugepages={f"hugepages-{size}": Decimal(HUGEPAGE_BYTES[size] * count)
                   for size, count in kubelet.hugepages.items() if count},
        ephemeral_storage=disk,
        allocatable_ephemeral_storage=disk - threshold_bytes(kubelet.eviction_hard.get("nodefs.available", "0"), disk),
    )


def gpu_resources(pool: Pool, gpus: int) -> dict[str, int]:
    """Extended resources one host of the pool advertises, by device-plugin resource name."""
    if not gpus or not pool.vars.is_gpu:
        return {}
    sharing = pool.vars.sharing
    if sharing.mode == "mig":
        return {mig_resource_name(profile): count * gpus for profile, count in sharing.mig_devices.items()}
    if sharing.shared:
        return {SHARED_GPU: gpus * (sharing.replicas or 1)}
    return {WHOLE_GPU: gpus}


@dataclass
class PoolCapacity:
    """Totals of a pool over the hosts whose machine model is known."""

    hosts: int = 0
    cpus: int = 0
    cores: int = 0
    memory_gib: Decimal = Decimal(0)
    hugepages_gib: Decimal = Decimal(0)
    allocatable_cpu: Decimal = Decimal(0)
    allocatable_memory_gib: Decimal = Decimal(0)
    allocatable_ephemeral_storage: Decimal = Decimal(0)  # bytes
    pods: int = 0
    gpus: int = 0
    gpu_resources: Counter[str] = field(default_factory=Counter)
    hugepages: Counter[str] = field(default_factory=Counter)
    monthly_cost: Decimal = Decimal(0)
    yearly_cost: Decimal = Decimal(0)

    def resource(self, name: str) -> Decimal:
        """Schedulable amount of a resource: "cpu" (cores), "memory", "ephemeral-storage" and hugepages (bytes), or
        an extended one."""
        if name == "cpu":
            return self.allocatable_cpu
        if name == "memory":
            return self.allocatable_memory_gib * GIB
        if name == "ephemeral-storage":
            return self.allocatable_ephemeral_storage
        if name.startswith("hugepages-"):
            return Decimal(self.hugepages.get(name, 0))
        return Decimal(self.gpu_resources.get(name, 0))


def combined(capacities: Iterable[PoolCapacity]) -> PoolCapacity:
    """The sum of several capacities (a pool's hosts, a tenant's pools, the whole cluster)."""
    total = PoolCapacity()
    for one in capacities:
        for item in fields(PoolCapacity):
            setattr(total, item.name, getattr(total, item.name) + getattr(one, item.name))
    return total


def pool_capacity(view: Resolved, pool: Pool) -> PoolCapacity:
    """The pool's totals over its hosts whose machine model is known (computed once per kind of host)."""
    cluster = view.env.cluster
    kinds = Counter((r.machine_name, r.machine) for r in view.of_pool(pool) if r.machine is not None)
    shares = []
    for (name, machine), count in kinds.items():
        assert machine is not None
        one = host_capacity(cluster, pool, machine)
        priced = cluster.machines[name]  # the price stays with the machine model
        monthly = Decimal(str(priced.monthly_price))
        shares.append(PoolCapacity(
            hosts=count, cpus=one.cpus * count, cores=one.cores * count, memory_gib=one.memory_gib * count,
            hugepages_gib=one.hugepages_gib * count,
            # a negative allocatable (an error finding) counts as none
            allocatable_cpu=max(one.allocatable_cpu, Decimal(0)) * count,
            allocatable_memory_gib=max(one.allocatable_memory_gib, Decimal(0)) * count,
            allocatable_ephemeral_storage=max(one.allocatable_ephemeral_storage, Decimal(0)) * count,
            pods=one.max_pods * count, gpus=one.gpus * count,
            gpu_resources=Counter({k: v * count for k, v in one.gpu_resources.items()}),
            hugepages=Counter({k: v * count for k, v in one.hugepages.items()}),
            monthly_cost=monthly * count,
            yearly_cost=monthly * 12 * (1 - Decimal(str(priced.yearly_discount_percent)) / 100) * count,
        ))
    return combined(shares)


def describe_hosts(hosts: list[Host], limit: int = 3) -> str:
    names = ", ".join(host.name for host in hosts[:limit])
    return names + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")
