"""What a pool could be built of: every catalogue machine of its kind and, for MIG pools, every maximal
layout of its cards, less those that bring a check error of their own; and the environment reshaped to a
choice of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from infra.checks import run_checks
from infra.knowledge.gpus import MEDIA_EXTENSIONS, gpu_models
from infra.knowledge.units import GIB
from infra.model.capacity import host_capacity
from infra.model.mig import placement
from infra.model.network import missing_slots
from infra.model.resolve import resolve
from infra.planning.fit import agent_overhead
from infra.spec import Environment, Host, Pool
from infra.spec.models import HostVars, Machine

Layout = tuple[tuple[str, int], ...]
# Check errors a proposal can cure (another machine, layout or pool size), so they do not stop `propose`;
# the proposal itself must pass every check.
FIXABLE = frozenset({"WORKLOAD-RESOURCE", "WORKLOAD-TOO-BIG", "WORKLOAD-NUMA"})

@dataclass(frozen=True)
class Candidate:
    """One way to build a pool's hosts: a machine model and, for MIG pools, the layout of every card."""

    machine: str
    layout: Layout | None
    capacity: dict[str, float]  # per node: cpu (cores), memory, ephemeral-storage and hugepages (GiB), pods, GPUs
    numa_nodes: int
    gpu_model: str | None
    price: float


@cache
def mig_layouts(model: str, media: frozenset[str] = frozenset()) -> tuple[Layout, ...]:
    """Every maximal MIG layout of a card (no instance can be added), by NVIDIA's placement geometry.

    Layouts are grown one instance at a time in profile order, so each multiset is met once; a layout
    without a placement has none with more instances either, which prunes the search. "+me" profiles
    only when asked for (`media`): they take the card's one media engine and add nothing else.
    """
    geometry = gpu_models()[model].mig
    if geometry is None:
        return ()
    names = sorted(name for name in geometry.profiles if not name.endswith(MEDIA_EXTENSIONS) or name in media)
    found: list[dict[str, int]] = []

    def grow(layout: dict[str, int], start: int) -> None:
        found.append(layout)
        for i in range(start, len(names)):
            bigger = {**layout, names[i]: layout.get(names[i], 0) + 1}
            if placement(model, bigger) is not None:
                grow(bigger, i)

    grow({}, 0)
    maximal = [layout for layout in found if layout and not any(
        placement(model, {**layout, name: layout.get(name, 0) + 1}) is not None for name in names)]
    return tuple(tuple(sorted(layout.items())) for layout in maximal)


def _kind_fits(pool: Pool, machine: Machine) -> bool:
    if not pool.vars.is_gpu:
        return not machine.gpu_count
    model = gpu_models().get(machine.gpu_model or "")
    if not machine.gpu_count or model is None:
        return False
    return pool.vars.sharing.mode != "mig" or model.mig is not None


def reshaped(pool: Pool, machine: str, layout: Layout | None, hosts: int) -> Pool:
    """The pool on `hosts` hosts of `machine` (its first hosts kept, by name; new ones named <pool>-new-NN),
    every card cut as `layout`; host-level machine and hardware overrides dropped."""
    sharing = pool.vars.gpu_sharing
    if layout is not None and sharing is not None:
        devices = dict(layout)
        name = sharing.mig_config if devices == sharing.mig_devices else layout_name(pool, layout)
        sharing = sharing.model_copy(update={"mig_devices": devices, "mig_config": name})
    variables = pool.vars.model_copy(update={"machine": machine, "gpu_sharing": sharing})
    kept = [Host(host.name, host.pool, host.vars.model_copy(update={"machine": None, "hardware": None}),
                 host.hosts_file, {}, host.address) for host in pool.hosts[:hosts]]
    hosts_file = pool.hosts[0].hosts_file if pool.hosts else ""
    added = [Host(f"{pool.k8s_name}-new-{i:02d}", pool.name, HostVars(), hosts_file)
             for i in range(1, hosts - len(kept) + 1)]
    return Pool(pool.name, variables, tuple(kept + added), pool.source, dict(pool.sources))


def layout_name(pool: Pool, layout: Layout) -> str:
    """A mig-parted config name for a proposed layout: <pool>-<count>x<profile>-..., "+" written ".")."""
    return "-".join([pool.k8s_name, *(f"{count}x{profile.replace('+', '.')}" for profile, count in layout)])


def reshaped_env(env: Environment, changes: dict[str, tuple[str, Layout | None, int]]) -> Environment:
    """The environment with `changes` made; the hosts it adds to RDMA pools get the lowest free slots."""
    pools = {name: reshaped(pool, *changes[name]) if name in changes else pool for name, pool in env.pools.items()}
    for name, given in missing_slots(pools.values()).items():
        if given:
            pool = pools[name]
            slots = {**pool.vars.rdma_slots, **given}
            pools[name] = replace(pool, vars=pool.vars.model_copy(update={"rdma_slots": slots}))
    return replace(env, pools=pools)


def _error_keys(env: Environment) -> set[tuple[str, str]]:
    """Errors of a probe inventory, but those about serving workloads: the program itself decides those."""
    return {(f.code, f.field) for f in run_checks(env) if f.severity == "error" and f.code not in FIXABLE}


def candidates(env: Environment, pool: Pool, media: frozenset[str]) -> list[Candidate]:
    """Every machine of the catalogue (and MIG layout) the pool could run on without a new check error.

    Each is tried in a probe inventory where every pool has one host, against the same probe with today's
    machines: an error only the candidate brings (a reserved CPU it lacks, a driver too old for its card,
    hugepages beyond its memory, a layout without an instance a tenant's quota names) rules it out. The
    workload rules are left to the program, which knows which replicas a candidate serves.
    """
    cluster = env.cluster
    agents = agent_overhead(resolve(env)).get(pool.name, {})  # the DaemonSet pods every node of the pool runs
    probe = {name: (other.vars.machine, current_layout(other), 1) for name, other in env.pools.items()}
    baseline = _error_keys(reshaped_env(env, probe))
    found = []
    current = current_layout(pool)
    for name, machine in sorted(cluster.machines.items()):
        if not _kind_fits(pool, machine):
            continue
        layouts: list[Layout | None] = [None]
        if pool.vars.sharing.mode == "mig":
            model = machine.gpu_model or ""
            layouts = list(mig_layouts(model, media))
            geometry = gpu_models()[model].mig
            if (current is not None and current not in layouts and geometry is not None
                    and all(profile in geometry.profiles for profile, _ in current)
                    and placement(model, dict(current)) is not None):
                layouts.insert(0, current)  # today's layout stays a choice even when it is not maximal
            if not layouts:
                continue
        for layout in layouts:
            if _error_keys(reshaped_env(env, {**probe, pool.name: (name, layout, 1)})) - baseline:
                continue  # e.g. a layout without an instance a tenant's quota names (QUOTA-GPU-RESOURCE)
            one = host_capacity(cluster, reshaped(pool, name, layout, 1), machine)
            if one.allocatable_cpu <= 0 or one.allocatable_memory_gib <= 0:
                continue
            capacity = {"cpu": float(one.allocatable_cpu), "memory": float(one.allocatable_memory_gib),
                        "ephemeral-storage": float(one.allocatable_ephemeral_storage / GIB),
                        "pods": float(one.max_pods)}
            capacity.update({size: float(amount / GIB) for size, amount in one.hugepages.items()})
            capacity.update({resource: float(count) for resource, count in one.gpu_resources.items()})
            for resource, amount in agents.items():
                scale = GIB if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-") else 1
                capacity[resource] = capacity.get(resource, 0.0) - float(amount / scale)
            found.append(Candidate(name, layout, capacity, machine.numa_nodes, machine.gpu_model,
                                   float(machine.monthly_price)))
    return found


def current_layout(pool: Pool) -> Layout | None:
    sharing = pool.vars.gpu_sharing
    if sharing is None or sharing.mode != "mig":
        return None
    return tuple(sorted(sharing.mig_devices.items()))
