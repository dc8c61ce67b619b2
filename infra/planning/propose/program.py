"""The mixed-integer program: the pools to size with their candidates, the admitted replicas to serve, the
constraints (demand served, N-1 per pool and resource, replicas a candidate cannot hold, big replicas a
node each, local disks, Pod CIDR blocks, promised local storage) and HiGHS solving it, cheapest first,
then fewest changes.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from typing import Any

import highspy

from infra.knowledge.gpus import MEDIA_EXTENSIONS
from infra.knowledge.units import GIB, parse_quantity
from infra.model.network import node_blocks
from infra.model.workloads import Demand, Offer, demands, device_memory_gib
from infra.planning.admission import Quotas
from infra.planning.fit import workload_objects
from infra.planning.propose.candidates import Candidate, candidates, current_layout
from infra.spec import Environment, Pool


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


# ---------------------------------------------------------------- built from an environment


def build_program(env: Environment) -> tuple[Program | None, dict[str, int], list[Demand], str]:
    """The program for the environment's workloads, or the reason there is none."""
    media = frozenset(gpu.profile for tenant in env.workloads.values() for w in tenant.values()
                      if (gpu := w.gpu) is not None and gpu.profile and gpu.profile.endswith(MEDIA_EXTENSIONS))
    sized: dict[str, Sized] = {}
    for name, pool in env.pools.items():
        found = candidates(env, pool, media)
        current = next((k for k, c in enumerate(found) if c.machine == pool.vars.machine
                        and c.layout == current_layout(pool)), None)
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
            scale = GIB if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-") else 1
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
    program = Program({name: entry for name, entry in sized.items() if name in used}, needs, kept_hosts, env)
    return program, admitted, found_demands, ""


# ---------------------------------------------------------------- the program


@contextmanager
def quiet() -> Iterator[None]:
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
    with quiet():
        solver = highspy.Highs()  # type: ignore[no-untyped-call]
    solver.silent()
    solver.setOptionValue("mip_rel_gap", 0.0)
    solver.setOptionValue("mip_abs_gap", 0.0)
    solver.setOptionValue("random_seed", 0)
    solver.setOptionValue("threads", 1)
    return solver


@dataclass
class Program:
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


@cache
def highspy_version() -> str:
    with quiet():
        solver = highspy.Highs()  # type: ignore[no-untyped-call]
    return str(solver.version())
