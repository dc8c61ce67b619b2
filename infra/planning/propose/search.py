"""`propose`: solve the program, build the proposed inventory, run the checks and `fit` with N-1 on it, and
where pods are left out cut the pool's candidate to more hosts and solve again, until `fit` agrees.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from infra.checks import Finding, has_errors, run_checks
from infra.model.network import node_blocks
from infra.planning.fit import fit
from infra.planning.propose.candidates import Candidate, current_layout, reshaped_env
from infra.planning.propose.program import Need, Program, build_program
from infra.spec import Environment

MAX_ROUNDS = 25


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


def propose(env: Environment) -> Proposal | str:
    """The cheapest verified proposal, or why there is none."""
    started = time.perf_counter()
    program, _, _, problem = build_program(env)
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
                             else (entry.pool.vars.machine, current_layout(entry.pool), 0))
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


def _short_pools(data: dict[str, Any], program: Program) -> dict[str, list[tuple[Need, int]]]:
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
