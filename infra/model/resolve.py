"""One resolved view of a checked environment: each host's effective machine and GPU model.

A host's hardware is its machine model (its own `machine`, else its pool's) with the host's
`hardware` overrides applied; its GPU facts come from infra/knowledge. Checks, the plan and the
cluster and host layers read this view instead of resolving hosts their own way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infra.knowledge.gpus import GpuModel, gpu_models
from infra.spec import Environment, Host, Pool
from infra.spec.models import Machine


@dataclass(frozen=True)
class ResolvedHost:
    host: Host
    machine_name: str
    machine: Machine | None  # effective hardware; None when the machine model is not defined
    gpu: GpuModel | None  # facts of machine.gpu_model; None without GPUs or for an unknown model

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def gpu_model(self) -> str | None:
        return self.machine.gpu_model if self.machine else None


@dataclass(frozen=True)
class Resolved:
    env: Environment
    hosts: Mapping[str, ResolvedHost]  # pool hosts by name

    def of_pool(self, pool: Pool) -> list[ResolvedHost]:
        return [self.hosts[host.name] for host in pool.hosts]

    def fully_known(self, pool: Pool) -> bool:
        """Whether every host of the pool has a defined machine model (else its figures are partial)."""
        return all(self.hosts[host.name].machine is not None for host in pool.hosts)

    def machine_groups(self, pool: Pool) -> dict[Machine, list[Host]]:
        """The pool's hosts grouped by effective hardware, so per-machine rules run once per kind of host."""
        groups: dict[Machine, list[Host]] = {}
        for resolved in self.of_pool(pool):
            if resolved.machine is not None:
                groups.setdefault(resolved.machine, []).append(resolved.host)
        return groups

    def gpu_models(self, pool: Pool) -> list[str]:
        """The GPU models the pool's hosts carry, sorted (more than one is an error finding)."""
        return sorted({r.gpu_model for r in self.of_pool(pool) if r.gpu_model and r.machine and r.machine.gpu_count})


def resolve(env: Environment) -> Resolved:
    known = gpu_models()
    machines = env.cluster.machines
    cache: dict[tuple[str, object], Machine | None] = {}
    hosts: dict[str, ResolvedHost] = {}
    for pool in env.pools.values():
        for host in pool.hosts:
            name = host.vars.machine or pool.vars.machine
            key = (name, host.vars.hardware)
            if key not in cache:
                machine = machines.get(name)
                if machine is not None and host.vars.hardware is not None:
                    machine = machine.model_copy(update=host.vars.hardware.model_dump(exclude_none=True))
                cache[key] = machine
            machine = cache[key]
            gpu = known.get(machine.gpu_model) if machine and machine.gpu_model and machine.gpu_count else None
            hosts[host.name] = ResolvedHost(host, name, machine, gpu)
    return Resolved(env, hosts)
