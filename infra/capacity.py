"""What each host and pool offers the scheduler: pure arithmetic over the spec, shared by checks and plan.

Allocatable follows the kubelet's formula: capacity - kube-reserved - system-reserved - hard eviction
threshold, with pre-allocated hugepages taken out of memory capacity first. GPU resources are named as
the NVIDIA device plugin advertises them for the pool's sharing mode (MIG always under the `mixed`
strategy, shared cards renamed to nvidia.com/gpu.shared), so quotas can be checked against them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from decimal import Decimal

from infra.knowledge import platform
from infra.spec import Environment, Host, Pool
from infra.spec.models import Machine
from infra.units import GIB, parse_quantity

HUGEPAGE_BYTES = {"2Mi": 2 * 2**20, "1Gi": 2**30}
SHARED_GPU = "nvidia.com/gpu.shared"
WHOLE_GPU = "nvidia.com/gpu"


def mig_resource(profile: str) -> str:
    return f"nvidia.com/mig-{profile}"


def host_machine(env: Environment, host: Host) -> Machine | None:
    """The host's effective hardware: its machine model with the host's own overrides; None if unknown."""
    pool = env.pools[host.pool]
    machine = env.cluster.machines.get(host.vars.machine or pool.vars.machine)
    if machine is None or host.vars.hardware is None:
        return machine
    return machine.model_copy(update=host.vars.hardware.model_dump(exclude_none=True))


def fully_known(env: Environment, pool: Pool) -> bool:
    """Whether every host of the pool has a machine model the cluster defines (else its figures are partial)."""
    return all(machine_name(env, host) in env.cluster.machines for host in pool.hosts)


def machine_name(env: Environment, host: Host) -> str:
    return host.vars.machine or env.pools[host.pool].vars.machine


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


def eviction_bytes(threshold: str | int | float, memory_bytes: Decimal) -> Decimal:
    """Bytes held back by a hard eviction threshold, which may be a quantity or a percentage."""
    text = str(threshold)
    if text.endswith("%"):
        return memory_bytes * Decimal(text[:-1]) / 100
    return parse_quantity(text)


def host_capacity(env: Environment, pool: Pool, machine: Machine) -> HostCapacity:
    spec = pool.vars
    memory = Decimal(machine.memory_gib) * GIB
    hugepages = sum((Decimal(HUGEPAGE_BYTES[size] * count) for size, count in spec.hugepages.items()), Decimal(0))
    threshold = spec.eviction_hard.get("memory.available", platform().kubelet.eviction_hard_memory_available)
    reserved_memory = (
        parse_quantity(spec.kube_memory_reserved)
        + parse_quantity(spec.system_memory_reserved)
        + eviction_bytes(threshold, memory)
    )
    reserved_cpu = parse_quantity(spec.kube_cpu_reserved) + parse_quantity(spec.system_cpu_reserved)
    return HostCapacity(
        cpus=machine.cpus,
        cores=machine.cores,
        memory_gib=memory / GIB,
        hugepages_gib=hugepages / GIB,
        allocatable_cpu=Decimal(machine.cpus) - reserved_cpu,
        allocatable_memory_gib=(memory - hugepages - reserved_memory) / GIB,
        max_pods=spec.kubelet_max_pods or env.cluster.kubelet_max_pods,
        gpus=machine.gpu_count,
        gpu_resources=gpu_resources(pool, machine.gpu_count),
    )


def gpu_resources(pool: Pool, gpus: int) -> dict[str, int]:
    """Extended resources one host of the pool advertises, by device-plugin resource name."""
    if not gpus or not pool.vars.is_gpu:
        return {}
    sharing = pool.vars.sharing
    if sharing.mode == "mig":
        return {mig_resource(profile): count * gpus for profile, count in sharing.mig_devices.items()}
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
    pods: int = 0
    gpus: int = 0
    gpu_resources: Counter = field(default_factory=Counter)
    monthly_cost: Decimal = Decimal(0)
    yearly_cost: Decimal = Decimal(0)

    def resource(self, name: str) -> Decimal:
        """Schedulable amount of a resource: "cpu" (cores), "memory" (bytes) or an extended resource."""
        if name == "cpu":
            return self.allocatable_cpu
        if name == "memory":
            return self.allocatable_memory_gib * GIB
        return Decimal(self.gpu_resources.get(name, 0))


def combined(capacities: Iterable[PoolCapacity]) -> PoolCapacity:
    """The sum of several capacities (a pool's hosts, a tenant's pools, the whole cluster)."""
    total = PoolCapacity()
    for one in capacities:
        for item in fields(PoolCapacity):
            setattr(total, item.name, getattr(total, item.name) + getattr(one, item.name))
    return total


def pool_capacity(env: Environment, pool: Pool) -> PoolCapacity:
    """The pool's totals over its hosts whose machine model is known."""
    shares = []
    for host in pool.hosts:
        machine = host_machine(env, host)
        if machine is not None:
            shares.append(_as_pool_share(env, pool, host, machine))
    return combined(shares)


def _as_pool_share(env: Environment, pool: Pool, host: Host, machine: Machine) -> PoolCapacity:
    """One host's contribution to its pool: a negative allocatable (an error finding) counts as none."""
    one = host_capacity(env, pool, machine)
    priced = env.cluster.machines[machine_name(env, host)]  # the price stays with the machine model
    monthly = Decimal(str(priced.monthly_price))
    return PoolCapacity(
        hosts=1, cpus=one.cpus, cores=one.cores, memory_gib=one.memory_gib, hugepages_gib=one.hugepages_gib,
        allocatable_cpu=max(one.allocatable_cpu, Decimal(0)),
        allocatable_memory_gib=max(one.allocatable_memory_gib, Decimal(0)),
        pods=one.max_pods, gpus=one.gpus, gpu_resources=Counter(one.gpu_resources),
        monthly_cost=monthly,
        yearly_cost=monthly * 12 * (1 - Decimal(str(priced.yearly_discount_percent)) / 100),
    )


def machine_groups(env: Environment, pool: Pool) -> dict[Machine, list[Host]]:
    """The pool's hosts grouped by effective hardware, so per-machine rules run once per kind of host."""
    groups: dict[Machine, list[Host]] = {}
    for host in pool.hosts:
        machine = host_machine(env, host)
        if machine is not None:
            groups.setdefault(machine, []).append(host)
    return groups


def describe_hosts(hosts: list[Host], limit: int = 3) -> str:
    names = ", ".join(host.name for host in hosts[:limit])
    return names + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")
