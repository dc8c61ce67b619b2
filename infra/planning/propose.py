"""`infra propose`: the cheapest pool sizes, machine models and MIG layouts that serve every declared workload
with N-1 headroom, found by a mixed-integer program and then verified by `fit` on the proposed environment.

Why a solver: machine counts, one machine model and one MIG layout per pool, and which pool serves how
many replicas are coupled choices (a layout with more 3g.40gb instances needs fewer cards for the chat
model and more for the rerankers; a cheaper machine may need a third host to survive losing one), and
the catalogue multiplies them. A MILP states them once and HiGHS proves the cheapest combination
optimal (gap 0), where a hand-made greedy rule would only be right on the cases it was written for.

The model (one integer variable per pool, candidate and workload, never one per node, so its size does
not grow with the cluster):

- Candidates per pool: every catalogue machine of the pool's kind (GPU pools: cards of a known model;
  MIG pools: MIG-capable cards) times, for MIG pools, every maximal layout infra.model.mig.placement accepts
  on that card (no instance can be added) plus the current layout, less those that add a check error
  other than the workload rules (a driver too old for the card, a quota naming an instance the layout
  lacks). Capacity per node is infra.model.kubelet's allocatable.
- Variables: n[p,k] hosts of pool p on candidate k; z[p,k] whether p uses k (at most one per pool);
  x[w,p] replicas of workload w that pool p serves.
- Constraints: every replica admitted by quota is served (sum over p of x[w,p] = replicas); per pool
  and resource, the requests fit the pool less one host: sum of x[w,p] * request <= capacity * (n - 1),
  so losing any host leaves room (N-1, conservatively per pool); a candidate that cannot hold one
  replica (too big, wrong card, no such MIG instance, too big for a NUMA node under
  single-numa-node, no disk large enough) serves none of it; replicas that need more than half a
  node in some resource get a node each; replicas with local volumes get a disk each (of that size or
  more), N-1 too; local storage classes keep the capacity their quotas promise, and all nodes keep a
  Pod CIDR block (the checks STORAGE-CAPACITY and NET-POD-CIDR stay clean).
- Objective: the monthly price of all hosts; then, at that price, as few changes as possible
  (machine or layout changes first, then hosts added or removed).

What it approximates: capacity is summed per pool (bin packing relaxed), so a proposal can be short
where pods fragment across nodes (the scheduler places them one at a time, by priority, on the
fullest node that fits). Each proposal is therefore built as an inventory and run through the checks
and `fit` with N-1; a pool whose pods do not all fit gets a cut (that candidate needs at least as many
hosts more as the unplaced pods' requests fill) and the program is solved again, until `fit` agrees.
Pools no workload can run on are left as they are.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import cache
from typing import Any

import highspy

from infra.checks import Finding, has_errors, run_checks
from infra.knowledge import MEDIA_EXTENSIONS, gpu_models
from infra.knowledge.units import GIB, parse_quantity
from infra.model.capacity import host_capacity, pool_capacity
from infra.model.mig import placement
from infra.model.network import node_blocks
from infra.model.resolve import resolve
from infra.model.workloads import Demand, Offer, demands, device_memory_gib
from infra.planning.admission import Quotas
from infra.planning.fit import fit, workload_objects
from infra.spec import Environment, Host, Pool
from infra.spec.models import HostVars, Machine

Layout = tuple[tuple[str, int], ...]
MAX_ROUNDS = 25
# Check errors a proposal can cure (another machine, layout or pool size), so they do not stop `propose`;
# the proposal itself must pass every check.
FIXABLE = frozenset({"WORKLOAD-RESOURCE", "WORKLOAD-TOO-BIG", "WORKLOAD-NUMA"})


@dataclass(frozen=True)
class Candidate:
    """One way to build a pool's hosts: a machine model and, for MIG pools, the layout of every card."""

    machine: str
    layout: Layout | None
    capacity: dict[str, float]  # per node: cpu (cores), memory and hugepages (GiB), pods, GPU resources
    numa_nodes: int
    gpu_model: str | None
    price: float


@dataclass
class Sized:
    """A pool the program sizes: its candidates, and what it is today."""

    pool: Pool
    candidates: list[Candidate]
    current: int | None  # the candidate that is today's machine and layout, if it is one
    hosts: int
    disks: list[int]  # GiB of each local disk of one host


@dataclass
class Need:
    """A workload as the program sees it: its admitted replicas and what one of them asks."""

    demand: Demand
    replicas: int
    requests: dict[str, float]
    pools: list[str]
    local_gib: float | None  # a local volume per replica, GiB


@dataclass
class Proposal:
    """The answer: per sized pool the candidate and host count, what it costs, and how it was found."""

    choice: dict[str, tuple[Candidate, int]]
    monthly: float
    status: str
    rounds: int
    variables: int
    constraints: int
    seconds: float
    env: Environment
    fit: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)


# ---------------------------------------------------------------- candidates


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
    pools = {name: reshaped(pool, *changes[name]) if name in changes else pool for name, pool in env.pools.items()}
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
    probe = {name: (other.vars.machine, _current_layout(other), 1) for name, other in env.pools.items()}
    baseline = _error_keys(reshaped_env(env, probe))
    found = []
    current = _current_layout(pool)
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
                        "pods": float(one.max_pods)}
            capacity.update({size: float(amount / GIB) for size, amount in one.hugepages.items()})
            capacity.update({resource: float(count) for resource, count in one.gpu_resources.items()})
            found.append(Candidate(name, layout, capacity, machine.numa_nodes, machine.gpu_model,
                                   float(machine.monthly_price)))
    return found


def _current_layout(pool: Pool) -> Layout | None:
    sharing = pool.vars.gpu_sharing
    if sharing is None or sharing.mode != "mig":
        return None
    return tuple(sorted(sharing.mig_devices.items()))


# ---------------------------------------------------------------- what must be served


def _offers(sized: dict[str, Sized]) -> list[Offer]:
    """Every GPU resource some candidate of a pool could advertise: what a `memory` need may resolve to."""
    found = []
    for name, entry in sized.items():
        for candidate in entry.candidates:
            for resource in candidate.capacity:
                if "/" in resource:
                    found.append(Offer(name, resource, candidate.gpu_model,
                                       device_memory_gib(resource, candidate.gpu_model)))
    return found


def _admitted(env: Environment, found: list[Demand]) -> dict[str, int]:
    """Replicas per workload that quota admission lets exist (the rest are refused whatever the pools)."""
    objects = workload_objects(env, found)
    quotas = Quotas(objects.quotas)
    claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in objects.claims}
    admitted: dict[str, int] = {}
    for pod in objects.pods:
        refused = None
        for volume in pod["spec"].get("volumes", []):
            claim = f"{pod['metadata']['namespace']}/{volume['persistentVolumeClaim']['claimName']}"
            refused = quotas.admit(claims[claim])
        refused = refused or quotas.admit(pod)
        key = objects.owner[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"].key
        admitted[key] = admitted.get(key, 0) + (refused is None)
    return admitted


def _fits(need: Need, entry: Sized, candidate: Candidate) -> bool:
    """Whether one replica fits one node of the candidate (and its NUMA node, its disk)."""
    demand = need.demand
    if any(amount > candidate.capacity.get(resource, 0.0) for resource, amount in need.requests.items()):
        return False
    gpu = demand.spec.gpu
    if gpu is not None and gpu.model and candidate.gpu_model != gpu.model:
        return False
    if need.local_gib is not None and not any(size >= need.local_gib for size in entry.disks):
        return False
    spec = entry.pool.vars
    guaranteed = all(demand.limits.get(r) == demand.requests.get(r) for r in ("cpu", "memory"))
    hinted = (demand.gpu_resource is not None
              or (spec.kubelet_cpu_manager_policy == "static" and guaranteed
                  and demand.requests.get("cpu", Decimal(0)) % 1 == 0)
              or (spec.kubelet_memory_manager_policy == "Static" and guaranteed))
    if spec.kubelet_topology_manager_policy == "single-numa-node" and hinted and candidate.numa_nodes > 1:
        share = candidate.numa_nodes
        return all(amount <= candidate.capacity.get(resource, 0.0) / share for resource, amount in need.requests.items()
                   if resource in ("cpu", "memory") or "/" in resource)
    return True


# ---------------------------------------------------------------- the program


@contextmanager
def _quiet() -> Iterator[None]:
    """HiGHS prints its banner on stdout from C when a solver is created: keep it out of the command's output."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        ctypes.CDLL(None).fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _highs() -> highspy.Highs:
    with _quiet():
        solver = highspy.Highs()  # type: ignore[no-untyped-call]
    solver.silent()
    solver.setOptionValue("mip_rel_gap", 0.0)
    solver.setOptionValue("mip_abs_gap", 0.0)
    solver.setOptionValue("random_seed", 0)
    solver.setOptionValue("threads", 1)
    return solver


@dataclass
class _Program:
    sized: dict[str, Sized]
    needs: list[Need]
    kept_hosts: int
    env: Environment
    cuts: dict[tuple[str, int], int] = field(default_factory=dict)  # (pool, candidate) -> at least this many hosts

    def solve(self) -> tuple[dict[str, tuple[int | None, int]], str, int, int]:
        """Cheapest, then fewest changes: per pool (candidate or None, hosts), the status, the model's size."""
        solver = _highs()
        n: dict[tuple[str, int], Any] = {}
        z: dict[tuple[str, int], Any] = {}
        upper = {name: sum(need.replicas for need in self.needs if name in need.pools) + 1 for name in self.sized}
        for name, entry in self.sized.items():
            for k in range(len(entry.candidates)):
                n[name, k] = solver.addIntegral(lb=0, ub=upper[name], name=f"n[{name},{k}]")
                z[name, k] = solver.addBinary(name=f"z[{name},{k}]")
                solver.addConstr(n[name, k] <= upper[name] * z[name, k])
                solver.addConstr(n[name, k] >= self.cuts.get((name, k), 0) * z[name, k])
            solver.addConstr(solver.qsum(z[name, k] for k in range(len(entry.candidates))) <= 1)
        x = {}
        for i, need in enumerate(self.needs):
            for name in need.pools:
                x[i, name] = solver.addIntegral(lb=0, ub=need.replicas, name=f"x[{need.demand.key},{name}]")
            solver.addConstr(solver.qsum(x[i, name] for name in need.pools) == need.replicas)
        for name, entry in self.sized.items():
            self._pool_constraints(solver, name, entry, n, z, x)
        self._cluster_constraints(solver, n)
        cost = solver.qsum(entry.candidates[k].price * n[name, k] for name, entry in self.sized.items()
                           for k in range(len(entry.candidates)))
        solver.minimize(cost)
        status = solver.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            return {}, solver.modelStatusToString(status), solver.numVariables, solver.numConstrs
        best = solver.getObjectiveValue()
        solver.addConstr(cost <= best + 1e-6 * max(1.0, abs(best)))
        changes = []
        weight = sum(upper.values()) + 1
        for name, entry in self.sized.items():
            total = solver.qsum(n[name, k] for k in range(len(entry.candidates)))
            moved = solver.addVariable(lb=0, name=f"d[{name}]")
            solver.addConstr(moved >= total - entry.hosts)
            solver.addConstr(moved >= entry.hosts - total)
            changes.append(moved)
            changes += [weight * z[name, k] for k in range(len(entry.candidates)) if k != entry.current]
        solver.minimize(solver.qsum(changes))
        status = solver.getModelStatus()
        choice: dict[str, tuple[int | None, int]] = {}
        for name, entry in self.sized.items():
            used = [k for k in range(len(entry.candidates)) if solver.val(z[name, k]) > 0.5]
            hosts = round(solver.val(n[name, used[0]])) if used else 0
            choice[name] = (used[0] if used and hosts else None, hosts)
        return choice, solver.modelStatusToString(status), solver.numVariables, solver.numConstrs

    def _pool_constraints(self, solver: highspy.Highs, name: str, entry: Sized, n: dict[tuple[str, int], Any],
                          z: dict[tuple[str, int], Any], x: dict[tuple[int, str], Any]) -> None:
        served = [(i, need) for i, need in enumerate(self.needs) if name in need.pools]
        count = range(len(entry.candidates))
        survivors = solver.qsum(n[name, k] - z[name, k] for k in count)  # hosts left when one is lost
        resources = sorted({resource for _, need in served for resource in need.requests})
        for resource in resources:
            load = solver.qsum(need.requests[resource] * x[i, name] for i, need in served if resource in need.requests)
            room = solver.qsum(entry.candidates[k].capacity.get(resource, 0.0) * (n[name, k] - z[name, k])
                               for k in count)
            solver.addConstr(load <= room)
        bound = sum(need.replicas for _, need in served)
        for k in count:
            candidate = entry.candidates[k]
            for i, need in served:
                if not _fits(need, entry, candidate):
                    solver.addConstr(x[i, name] <= need.replicas * (1 - z[name, k]))
            for resource in resources:
                capacity = candidate.capacity.get(resource, 0.0)
                big = [i for i, need in served if capacity and need.requests.get(resource, 0.0) > capacity / 2]
                if len(big) > 0 and sum(self.needs[i].replicas for i in big) > 1:
                    solver.addConstr(solver.qsum(x[i, name] for i in big)
                                     <= n[name, k] - z[name, k] + bound * (1 - z[name, k]))
        local = sorted({need.local_gib for _, need in served if need.local_gib is not None})
        for size in local:
            disks = sum(1 for disk in entry.disks if disk >= size)
            solver.addConstr(solver.qsum(x[i, name] for i, need in served
                                         if need.local_gib is not None and need.local_gib >= size) <= disks * survivors)

    def _cluster_constraints(self, solver: highspy.Highs, n: dict[tuple[str, int], Any]) -> None:
        """Keep STORAGE-CAPACITY and NET-POD-CIDR clean: local classes hold their quotas, nodes get blocks."""
        env = self.env
        all_hosts = solver.qsum(n.values())
        solver.addConstr(all_hosts <= node_blocks(env.cluster) - self.kept_hosts)
        promised: dict[str, float] = {}
        for tenant in env.cluster.tenants.values():
            for key, value in tenant.quota.items():
                if key.endswith(".storageclass.storage.k8s.io/requests.storage"):
                    name = key.split(".storageclass.", 1)[0]
                    promised[name] = promised.get(name, 0.0) + float(parse_quantity(value) / GIB)
        for name, amount in promised.items():
            storage_class = env.cluster.storage_classes.get(name)
            if storage_class is None or storage_class.type != "local":
                continue
            fixed = sum(sum(d.size_gib for d in env.pools[p].vars.local_disks) * len(env.pools[p].hosts)
                        for p in storage_class.pools if p in env.pools and p not in self.sized)
            sized = [(p, sum(self.sized[p].disks)) for p in storage_class.pools if p in self.sized]
            if sized:
                solver.addConstr(solver.qsum(per_host * n[p, k] for p, per_host in sized
                                             for k in range(len(self.sized[p].candidates))) >= amount - fixed)


# ---------------------------------------------------------------- propose


def _program(env: Environment) -> tuple[_Program | None, dict[str, int], list[Demand], str]:
    """The program for the environment's workloads, or the reason there is none."""
    media = frozenset(gpu.profile for tenant in env.workloads.values() for w in tenant.values()
                      if (gpu := w.gpu) is not None and gpu.profile and gpu.profile.endswith(MEDIA_EXTENSIONS))
    sized: dict[str, Sized] = {}
    for name, pool in env.pools.items():
        found = candidates(env, pool, media)
        current = next((k for k, c in enumerate(found) if c.machine == pool.vars.machine
                        and c.layout == _current_layout(pool)), None)
        sized[name] = Sized(pool, found, current, len(pool.hosts), [disk.size_gib for disk in pool.vars.local_disks])
    found_demands = demands(env, _offers(sized))
    admitted = _admitted(env, found_demands)
    needs = []
    for item in found_demands:
        replicas = admitted.get(item.key, 0)
        if not replicas:
            continue
        requests = {"pods": 1.0}
        for resource, amount in item.requests.items():
            scale = GIB if resource == "memory" or resource.startswith("hugepages-") else 1
            requests[resource] = float(amount / scale)
        storage = item.spec.storage
        storage_class = env.cluster.storage_classes[storage.storage_class] if storage else None
        local = None
        pools = list(item.pools)
        if storage is not None and storage_class is not None and storage_class.type == "local":
            local = float(parse_quantity(storage.size) / GIB)
            pools = [p for p in pools if p in storage_class.pools]  # its volume lives on these pools' disks
        need = Need(item, replicas, requests, pools, local)
        need.pools = [p for p in pools if any(_fits(need, sized[p], c) for c in sized[p].candidates)]
        if not need.pools:
            where = ", ".join(item.pools) or "its tenant's pools"
            return None, admitted, found_demands, (f"no machine of the catalogue in {where} holds one replica of "
                                                   f"{item.key}")
        needs.append(need)
    used = {p for need in needs for p in need.pools}
    kept_hosts = sum(len(pool.hosts) for name, pool in env.pools.items() if name not in used)
    kept_hosts += sum(1 for host in env.control_plane if not host.pool)
    program = _Program({name: entry for name, entry in sized.items() if name in used}, needs, kept_hosts, env)
    return program, admitted, found_demands, ""


def propose(env: Environment) -> Proposal | str:
    """The cheapest verified proposal, or why there is none."""
    started = time.perf_counter()
    program, _, _, problem = _program(env)
    if program is None:
        return problem
    for rounds in range(1, MAX_ROUNDS + 1):
        choice, status, variables, constraints = program.solve()
        if not choice:
            return (f"the program has no solution ({status}): no choice of the catalogue's machines serves every "
                    f"workload with N-1 headroom within the Pod CIDR's {node_blocks(env.cluster)} node blocks and the "
                    "local storage the quotas promise")
        changes = {}
        for name, (k, hosts) in choice.items():
            entry = program.sized[name]
            changes[name] = ((entry.candidates[k].machine, entry.candidates[k].layout, hosts) if k is not None
                             else (entry.pool.vars.machine, _current_layout(entry.pool), 0))
        proposed = reshaped_env(env, changes)
        findings = run_checks(proposed)
        data = fit(proposed)
        short = _short_pools(data, program)
        if not short and not has_errors(findings):
            picked = {name: (program.sized[name].candidates[k] if k is not None else None, hosts)
                      for name, (k, hosts) in choice.items()}
            monthly = sum(c.price * hosts for c, hosts in picked.values() if c is not None)
            return Proposal({name: (c, hosts) for name, (c, hosts) in picked.items() if c is not None}, monthly,
                            status, rounds, variables, constraints, time.perf_counter() - started, proposed, data,
                            findings)
        if has_errors(findings):
            return "the proposal fails the checks: " + "; ".join(
                f"{f.code} {f.field}: {f.message}" for f in findings if f.severity == "error")
        for name, missing in short.items():
            k, hosts = choice[name]
            if k is not None:
                program.cuts[name, k] = hosts + _hosts_for(missing, program.sized[name].candidates[k])
    return f"no proposal verified by fit after {MAX_ROUNDS} rounds"


def _short_pools(data: dict[str, Any], program: _Program) -> dict[str, list[tuple[Need, int]]]:
    """Sized pools where fit leaves pods unplaced, now or when the pool loses its biggest host, with them.

    Unplaced now counts first; only a pool whose pods all fit can still be short at N-1."""
    needs = {need.demand.key: need for need in program.needs}
    short: dict[str, list[tuple[Need, int]]] = {}
    for workload in data["workloads"]:
        key = f"{workload['tenant']}/{workload['name']}"
        for entry in workload["unplaced"]:
            for name in needs[key].pools if key in needs else ():
                short.setdefault(name, []).append((needs[key], entry["count"]))
    for pool in data["pools"]:
        loss = pool.get("n_minus_1")
        if pool["name"] in program.sized and pool["name"] not in short and loss and not loss["ok"]:
            short[pool["name"]] = [(needs[entry["workload"]], entry["count"]) for entry in loss["failures"]
                                   if entry["workload"] in needs]
    return short


def _hosts_for(missing: list[tuple[Need, int]], candidate: Candidate) -> int:
    """Hosts the unplaced pods need at the least: their requests over one node's allocatable (one at least).

    A lower bound for the pods left out, so the cut rarely overshoots; and a pool short by many hosts (a
    large cluster whose pods fragment) is fixed in a few rounds instead of one host per round."""
    worst = 0.0
    for resource in {r for need, _ in missing for r in need.requests}:
        capacity = candidate.capacity.get(resource, 0.0)
        if capacity:
            worst = max(worst, sum(need.requests.get(resource, 0.0) * count for need, count in missing) / capacity)
    return max(1, math.ceil(worst - 1e-9))


# ---------------------------------------------------------------- the report


def _layout_text(layout: Layout | None) -> str:
    if layout is None:
        return ""
    return "+".join(profile if count == 1 else f"{count}x{profile}" for profile, count in
                    sorted(layout, key=lambda item: (-int(item[0].split("g.")[0]), item[0])))


def report(env: Environment, proposal: Proposal | str) -> dict[str, Any]:
    """The proposal beside today's plan, as plain data (the JSON output)."""
    view = resolve(env)
    today = fit(env)
    replicas = today["replicas"]
    pools = []
    current_total = proposed_total = 0.0
    current_hosts = proposed_hosts = 0
    for name, pool in env.pools.items():
        monthly = float(pool_capacity(view, pool).monthly_cost)
        today_pool = next(p for p in today["pools"] if p["name"] == name)
        entry: dict[str, Any] = {"name": name, "current": {
            "machine": pool.vars.machine, "hosts": len(pool.hosts), "mig_layout": _layout_text(_current_layout(pool)),
            "monthly_cost": monthly, "n_minus_1_ok": today_pool.get("n_minus_1", {}).get("ok"),
            "percent": today_pool["percent"]}}
        current_total += monthly
        current_hosts += len(pool.hosts)
        if isinstance(proposal, Proposal):
            if name in proposal.choice:
                candidate, hosts = proposal.choice[name]
                after = next(p for p in proposal.fit["pools"] if p["name"] == name)
                entry["proposed"] = {"machine": candidate.machine, "hosts": hosts,
                                     "mig_layout": _layout_text(candidate.layout),
                                     "mig_config": proposal.env.pools[name].vars.sharing.mig_config,
                                     "monthly_cost": candidate.price * hosts,
                                     "n_minus_1_ok": after.get("n_minus_1", {}).get("ok"),
                                     "requested": after["requested"], "allocatable": after["allocatable"],
                                     "percent": after["percent"]}
            else:
                entry["proposed"] = {**entry["current"], "kept": True}
            proposed_total += entry["proposed"]["monthly_cost"]
            proposed_hosts += entry["proposed"]["hosts"]
            entry["changes"] = _changes(entry["current"], entry["proposed"])
        pools.append(entry)
    data: dict[str, Any] = {
        "environment": env.name, "currency": env.cluster.currency, "replicas": replicas,
        "refused_by_quota": today["refused"],
        "current": {"hosts": current_hosts, "monthly_cost": round(current_total, 2), "fits": today["fits"],
                    "n_minus_1_ok": today["n_minus_1_ok"]},
        "pools": pools,
    }
    if isinstance(proposal, str):
        data["problem"] = proposal
        return data
    data["proposed"] = {"hosts": proposed_hosts, "monthly_cost": round(proposed_total, 2),
                        "placed": proposal.fit["placed"], "n_minus_1_ok": proposal.fit["n_minus_1_ok"]}
    data["solver"] = {"name": "HiGHS", "version": highspy_version(), "kind": "MILP", "status": proposal.status,
                      "variables": proposal.variables, "constraints": proposal.constraints,
                      "rounds": proposal.rounds, "seconds": round(proposal.seconds, 2)}
    data["warnings"] = [f"{f.code} {f.field}: {f.message}" for f in proposal.findings]
    return data


@cache
def highspy_version() -> str:
    with _quiet():
        solver = highspy.Highs()  # type: ignore[no-untyped-call]
    return str(solver.version())


def _changes(current: dict[str, Any], proposed: dict[str, Any]) -> list[str]:
    if proposed.get("kept"):
        return []
    found = []
    if proposed["machine"] != current["machine"]:
        found.append(f"machine {current['machine']} -> {proposed['machine']}")
    if proposed["hosts"] != current["hosts"]:
        difference = proposed["hosts"] - current["hosts"]
        found.append(f"{difference:+d} host{'s' if abs(difference) != 1 else ''}")
    if proposed["mig_layout"] != current["mig_layout"]:
        found.append(f"MIG {current['mig_layout']} -> {proposed['mig_layout']} ({proposed['mig_config']})")
    return found


def render(data: dict[str, Any]) -> str:
    """The proposal for a terminal: per pool today -> proposed, the totals, the solver's figures."""
    money = data["currency"]
    current = data["current"]
    if "problem" in data:
        return f"No proposal for {data['environment']}: {data['problem']}."
    proposed = data["proposed"]
    difference = proposed["monthly_cost"] - current["monthly_cost"]
    lines = [f"Proposal for {data['environment']}: {proposed['placed']} replicas placed with N-1 headroom in every "
             f"sized pool, {money} {proposed['monthly_cost']:,.0f} a month (today {current['monthly_cost']:,.0f}: "
             f"{difference:+,.0f})", ""]
    header = ["POOL", "MACHINE", "HOSTS", "MIG LAYOUT PER CARD", f"{money}/MONTH", "N-1", "CHANGES"]
    rows = []
    for pool in data["pools"]:
        before, after = pool["current"], pool["proposed"]
        rows.append([pool["name"], _pair(pool, "machine", "{}"), _pair(pool, "hosts", "{}"),
                     _pair(pool, "mig_layout", "{}"), _pair(pool, "monthly_cost", "{:,.0f}"),
                     _n1(before["n_minus_1_ok"]) if after.get("kept") else
                     f"{_n1(before['n_minus_1_ok'])} -> {_n1(after['n_minus_1_ok'])}",
                     "kept: no workload runs there" if after.get("kept") else ", ".join(pool["changes"]) or "-"])
    rows.append(["total", "", f"{current['hosts']} -> {proposed['hosts']}", "",
                 f"{current['monthly_cost']:,.0f} -> {proposed['monthly_cost']:,.0f}", "", ""])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    separator = "  ".join("-" * width for width in widths)
    lines += [line(header), separator, *(line(row) for row in rows[:-1]), separator, line(rows[-1])]
    lines += ["", "Requested / allocatable after placement, today -> proposed:"]
    for pool in data["pools"]:
        before, after = pool["current"]["percent"], pool["proposed"]["percent"]
        shown = [f"{name.rsplit('/', 1)[-1]} {before.get(name, 0):.0f}% -> {after.get(name, 0):.0f}%"
                 for name in after if name != "pods"]
        lines.append(f"  {pool['name']}: {', '.join(shown)}")
    solver = data["solver"]
    lines += ["", f"Solver: {solver['name']} {solver['version']} ({solver['kind']}, {solver['variables']} variables, "
                  f"{solver['constraints']} constraints): {solver['status'].lower()}, gap 0; verified by fit with N-1 "
                  f"in {solver['rounds']} round(s); {solver['seconds']:.2f} s."]
    if data["refused_by_quota"]:
        lines.append(f"{data['refused_by_quota']} replicas are refused by quota whatever the pools (see fit); "
                     "they are not sized for.")
    lines += [f"Warning: {warning}" for warning in data["warnings"]]
    return "\n".join(lines)


def _pair(pool: dict[str, Any], key: str, form: str) -> str:
    """"value" when the proposal keeps it, "before -> after" when it changes."""
    before, after = pool["current"][key], pool["proposed"][key]
    return form.format(after) if before == after else f"{form.format(before)} -> {form.format(after)}"


def _n1(ok: bool | None) -> str:
    return "-" if ok is None else "ok" if ok else "fails"
