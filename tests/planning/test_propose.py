"""`propose`: MIG layouts enumerated by the placement geometry, the program's optimum against exhaustive
search (of the model, and of what `fit` accepts), cuts when the relaxation is short, the example, the command."""

import itertools
import json
import random
import subprocess
import sys

import pytest
from inventory_builder import ROOT

from infra.checks import has_errors, run_checks
from infra.knowledge.gpus import gpu_models
from infra.model.mig import placement
from infra.planning.fit import fit
from infra.planning.propose import FIXABLE, propose, render, report
from infra.planning.propose.candidates import mig_layouts, reshaped_env
from infra.planning.propose.program import _fits, build_program
from infra.spec import load_environment

EXAMPLE = ROOT / "inventories" / "example"


# ---------------------------------------------------------------- MIG layouts


@pytest.mark.parametrize("model", ["A100-80GB", "A100-40GB", "A30-24GB", "H100-80GB"])
def test_layouts_are_exactly_the_maximal_valid_ones(model):
    """Against every count vector within the profiles' max_count: valid, and no instance can be added."""
    geometry = gpu_models()[model].mig
    names = sorted(name for name in geometry.profiles if not name.endswith("+me"))
    ranges = [range((geometry.profiles[name].max_count or 7) + 1) for name in names]
    valid = set()
    for counts in itertools.product(*ranges):
        layout = {name: count for name, count in zip(names, counts, strict=True) if count}
        if layout and placement(model, layout) is not None:
            valid.add(tuple(sorted(layout.items())))
    maximal = {layout for layout in valid if not any(
        tuple(sorted({**dict(layout), name: dict(layout).get(name, 0) + 1}.items())) in valid for name in names)}
    assert set(mig_layouts(model)) == maximal
    assert len(mig_layouts(model)) == len(maximal)  # each once


def test_a100_layouts_include_nvidias_published_combinations():
    layouts = {tuple(sorted(layout)) for layout in mig_layouts("A100-80GB")}
    for known in ({"1g.10gb": 7}, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, {"4g.40gb": 1, "3g.40gb": 1},
                  {"7g.80gb": 1}, {"2g.20gb": 3, "1g.10gb": 1}):
        assert tuple(sorted(known.items())) in layouts
    assert (("3g.40gb", 2),) in layouts  # 3g + 3g uses all 8 memory slices: maximal
    assert all(not name.endswith("+me") for layout in layouts for name, _ in layout)
    assert any(name == "1g.10gb+me" for layout in mig_layouts("A100-80GB", frozenset({"1g.10gb+me"}))
               for name, _ in layout)


# ---------------------------------------------------------------- the program against exhaustive search


CATALOGUE = {
    "medium": {"cores": 16, "memory_gib": 128, "monthly_price": 170},
    "big": {"cores": 32, "memory_gib": 256, "monthly_price": 300},
    "t4quad": {"cores": 32, "memory_gib": 256, "gpu_model": "T4-16GB", "gpu_count": 4, "gpu_interconnect": "pcie",
               "monthly_price": 1400},
}


def instance(inventory, seed, mig=True):
    """The base inventory with a bigger catalogue, open quotas, a wide Pod CIDR and random workloads:
    each workload has exactly one pool that can serve it, so pools can be searched one by one."""
    rng = random.Random(seed)
    cluster = inventory["group_vars"]["all"]
    cluster["machines"].update(CATALOGUE)
    cluster["kube_pods_subnet"] = "10.244.0.0/16"
    for name, tenant in cluster["tenants"].items():
        tenant["quota"] = {"requests.cpu": 1000} if name != "infer" else {"requests.nvidia.com/mig-1g.10gb": 1000}
        tenant.pop("queue", None)
        if name != "cache":  # a memory pool's tenant keeps its request = limit defaults (TEN-MEMORY-OVERCOMMIT)
            tenant.pop("limit_range", None)
    workloads = {"svc": {}, "batch": {}}
    for i in range(rng.randint(1, 2)):
        cpu, memory = rng.choice([1, 3, 5, 9]), rng.choice([2, 8, 30, 70])
        workloads["svc"][f"web{i}"] = {"replicas": rng.randint(1, 4), "requests": {"cpu": str(cpu), "memory": f"{memory}Gi"}}
    workloads["batch"]["gpu"] = {"kind": "job", "replicas": rng.randint(1, 5), "gpu": {"type": "shared"},
                                 "requests": {"cpu": str(rng.choice([1, 4])), "memory": "4Gi"}}
    workloads["cache"] = {"db": {"replicas": rng.randint(1, 3), "requests": {"cpu": "1", "memory": "2Gi"},
                                 "storage": {"storage_class": "local", "size": rng.choice(["40Gi", "100Gi"])}}}
    cluster["storage_classes"]["local"]["pools"] = ["mem"]
    inventory["group_vars"]["mem"]["local_disks"] = [
        {"device": "/dev/nvme0n1", "size_gib": 100, "mount": "/mnt/disks/nvme0"},
        {"device": "/dev/nvme1n1", "size_gib": 50, "mount": "/mnt/disks/nvme1"}]
    if mig:
        workloads["infer"] = {f"m{i}": {"replicas": rng.randint(1, 6), "requests": {"cpu": "2", "memory": "8Gi"},
                                        "gpu": {"type": "mig", "profile": profile}}
                              for i, profile in enumerate(rng.sample(["1g.10gb", "2g.20gb", "3g.40gb"], 2))}
    cluster["workloads"] = workloads
    return inventory


def relaxed_feasible(program, name, k, hosts):
    """The model as written in infra/planning/propose/__init__.py's docstring, for one pool on `hosts` hosts of candidate k."""
    entry = program.sized[name]
    served = [need for need in program.needs if need.pools == [name]]
    candidate = entry.candidates[k]
    survivors = hosts - 1
    if any(not _fits(need, entry, candidate) for need in served):
        return False
    for resource in {r for need in served for r in need.requests}:
        load = sum(need.requests.get(resource, 0) * need.replicas for need in served)
        capacity = candidate.capacity.get(resource, 0.0)
        if load > capacity * survivors + 1e-9:
            return False
        if capacity and sum(need.replicas for need in served if need.requests.get(resource, 0) > capacity / 2) > survivors:
            return False  # more than half a node each: one per node
    for need in served:  # a local volume per replica, each on a disk at least its size
        if need.local_gib is not None:
            larger = sum(other.replicas for other in served if (other.local_gib or 0) >= need.local_gib)
            if larger > sum(1 for disk in entry.disks if disk >= need.local_gib) * survivors:
                return False
    return True


def cheapest_by_exhaustive_search(program):
    total = 0.0
    for name, entry in program.sized.items():
        limit = sum(need.replicas for need in program.needs if name in need.pools) + 1
        costs = [candidate.price * hosts for k, candidate in enumerate(entry.candidates)
                 for hosts in range(limit + 1) if relaxed_feasible(program, name, k, hosts)]
        total += min(costs)
    return total


@pytest.mark.parametrize("seed", range(12))
def test_the_programs_optimum_is_the_exhaustive_searchs(inventory, write, seed):
    env = load_environment(write(instance(inventory, seed)))
    assert not has_errors([f for f in run_checks(env) if f.code not in FIXABLE])
    program, _, _, problem = build_program(env)
    assert problem == ""
    assert all(len(need.pools) == 1 for need in program.needs)
    choice, status, _, _ = program.solve()
    assert status == "Optimal"
    solved = sum(program.sized[name].candidates[k].price * hosts for name, (k, hosts) in choice.items() if k is not None)
    assert solved == pytest.approx(cheapest_by_exhaustive_search(program))


def cheapest_that_fit_accepts(env, program):
    """Every machine and host count per sized pool (layouts as today): the cheapest inventory fit places with N-1."""
    options = {}
    for name, entry in program.sized.items():
        limit = sum(need.replicas for need in program.needs if name in need.pools) + 2
        options[name] = [(c.machine, c.layout, hosts, c.price * hosts) for c in entry.candidates
                         for hosts in range(1, limit + 1)]
    # Cheapest first: the first combination fit accepts is the answer, so fit runs only on those cheaper than it.
    for combination in sorted(itertools.product(*options.values()), key=lambda c: sum(option[3] for option in c)):
        changes = {name: option[:3] for name, option in zip(options, combination, strict=True)}
        data = fit(reshaped_env(env, changes))
        if data["fits"] and all(pool.get("n_minus_1", {}).get("ok", True) for pool in data["pools"]
                                if pool["name"] in program.sized):
            return sum(option[3] for option in combination)
    return None


@pytest.mark.parametrize("seed", range(4))
def test_the_proposal_is_the_cheapest_inventory_fit_accepts(inventory, write, seed):
    env = load_environment(write(instance(inventory, seed, mig=False)))
    program, _, _, _ = build_program(env)
    result = propose(env)
    assert not isinstance(result, str), result
    assert result.monthly == pytest.approx(cheapest_that_fit_accepts(env, program))


def test_a_short_relaxation_is_cut_until_fit_agrees(inventory, write):
    """Five 6-CPU replicas on 15.8-CPU nodes: the sum says two nodes hold them (30 <= 31.6), but only two
    fit per node, so three are needed, and a fourth for N-1."""
    cluster = inventory["group_vars"]["all"]
    cluster["kube_pods_subnet"] = "10.244.0.0/16"
    cluster["tenants"]["svc"]["quota"] = {}
    cluster["tenants"]["svc"].pop("limit_range")
    cluster["workloads"] = {"svc": {"w": {"replicas": 5, "requests": {"cpu": "6", "memory": "1Gi"}}}}
    result = propose(load_environment(write(inventory)))
    assert not isinstance(result, str), result
    assert result.rounds == 2
    assert result.choice["cpu"][1] == 4
    assert result.fit["fits"] and all(p["n_minus_1"]["ok"] for p in result.fit["pools"] if p["name"] == "cpu")


def test_the_pod_cidr_bounds_the_number_of_nodes(inventory, write):
    """/21 with /24 per node holds 8 nodes; mem, gpu and t4 keep 3, so the CPU pool may have 5. Twelve 7-CPU
    replicas need 7 small nodes (2 each, 6 + 1 for N-1, 700 a month) but fit 3 big ones (9 each, 900)."""
    cluster = inventory["group_vars"]["all"]
    cluster["machines"]["big"] = CATALOGUE["big"]
    cluster["tenants"]["svc"]["quota"] = {}
    cluster["tenants"]["svc"].pop("limit_range")
    cluster["workloads"] = {"svc": {"w": {"replicas": 12, "requests": {"cpu": "7", "memory": "1Gi"}}}}
    result = propose(load_environment(write(inventory)))
    candidate, hosts = result.choice["cpu"]
    assert (candidate.machine, hosts) == ("big", 3)
    assert not has_errors(run_checks(result.env))
    cluster["kube_pods_subnet"] = "10.244.0.0/16"
    candidate, hosts = propose(load_environment(write(inventory))).choice["cpu"]
    assert (candidate.machine, hosts) == ("small", 7)


def test_nothing_to_propose_when_no_machine_holds_a_replica(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["svc"].pop("limit_range")
    inventory["group_vars"]["all"]["tenants"]["svc"]["quota"] = {}
    inventory["group_vars"]["all"]["workloads"] = {"svc": {"w": {"replicas": 1, "requests": {"cpu": "15"}}}}
    env = load_environment(write(inventory))
    assert not has_errors(run_checks(env))
    inventory["group_vars"]["all"]["machines"]["small"]["cores"] = 4  # no pool check finding for the CPU pool
    result = propose(load_environment(write(inventory)))
    assert result == "no machine of the catalogue in cpu holds one replica of svc/w"


def test_equal_cost_keeps_what_is_there(inventory, write):
    """Two machine models at one price: the proposal keeps today's."""
    cluster = inventory["group_vars"]["all"]
    cluster["machines"]["twin"] = dict(cluster["machines"]["small"])
    cluster["workloads"] = {"svc": {"w": {"replicas": 2}}}
    result = propose(load_environment(write(inventory)))
    assert result.choice["cpu"][0].machine == "small"


# ---------------------------------------------------------------- the example and the command


def test_the_example_proposal_places_everything_with_n_1_and_passes_the_checks():
    env = load_environment(EXAMPLE)
    result = propose(env)
    assert not isinstance(result, str), result
    assert result.status == "Optimal"
    assert result.fit["fits"] and result.fit["n_minus_1_ok"]
    assert not has_errors(run_checks(result.env))
    hosts = {name: hosts for name, (_, hosts) in result.choice.items()}
    assert hosts == {"cpu_general": 2, "mem_cache": 2, "gpu_a100": 2, "gpu_t4_offline": 2, "gpu_h100_bigmem": 3}
    assert result.monthly == 2 * 420 + 2 * 1100 + 2 * 11500 + 2 * 1300 + 3 * 24000


def run(*args):
    return subprocess.run([sys.executable, "-m", "infra", *args], capture_output=True, text=True, cwd=ROOT)


def test_propose_prints_the_table_or_json_alone():
    table = run("propose", "inventories/example")
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("Proposal for example: 106 replicas placed with N-1 headroom")
    assert "Running HiGHS" not in table.stdout + table.stderr  # the solver's banner is kept out
    data = json.loads(run("propose", "--json", "inventories/example").stdout)
    assert data["proposed"]["monthly_cost"] == 100640
    assert data["solver"]["status"] == "Optimal" and data["solver"]["name"] == "HiGHS"
    assert {pool["name"]: pool["changes"] for pool in data["pools"]} == {
        "cpu_general": ["-1 host"], "mem_cache": [], "gpu_a100": [], "gpu_t4_offline": ["+1 host"],
        "gpu_h100_bigmem": ["+1 host"]}
    env = load_environment(EXAMPLE)  # the same table as the library renders; only the solver's timing differs
    assert table.stdout.split("Solver:")[0] == render(report(env, propose(env))).split("Solver:")[0]


def test_propose_exits_1_without_a_proposal(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["svc"].pop("limit_range")
    inventory["group_vars"]["all"]["tenants"]["svc"]["quota"] = {}
    inventory["group_vars"]["all"]["machines"]["small"]["cores"] = 4
    inventory["group_vars"]["all"]["workloads"] = {"svc": {"w": {"replicas": 1, "requests": {"cpu": "15"}}}}
    path = write(inventory)
    result = run("propose", str(path))
    assert result.returncode == 1
    assert result.stdout.startswith("No proposal for env")
    assert json.loads(run("propose", "--json", str(path)).stdout)["problem"]


def test_propose_without_workloads_has_nothing_to_size(inventory, write):
    result = run("propose", str(write(inventory)))
    assert (result.returncode, result.stdout.strip().endswith("nothing to size")) == (0, True)


@pytest.mark.parametrize("workload", [
    {"replicas": 1, "gpu": {"type": "mig", "profile": "7g.80gb"}},  # no layout today: propose may cut one
    {"replicas": 1, "gpu": {"type": "mig", "profile": "8g.96gb"}},  # no card has it
    {"replicas": 1, "gpu": {"type": "memory", "memory_gib": 500}},
    {"replicas": 100000, "requests": {"cpu": "1m"}},
    {"replicas": 3, "gpu": {"type": "mig", "profile": "1g.10gb", "count": 64}},
    {"kind": "job", "replicas": 3, "gang": 3, "gpu": {"type": "whole", "count": 8}},
])
def test_odd_workloads_get_a_proposal_or_a_reason_never_a_traceback(inventory, write, workload):
    inventory["group_vars"]["all"]["tenants"]["infer"]["quota"] = {}
    inventory["group_vars"]["all"]["workloads"] = {"infer": {"w": workload}}
    env = load_environment(write(inventory))
    if has_errors([f for f in run_checks(env) if f.code not in FIXABLE]):
        return
    data = report(env, propose(env))
    assert ("problem" in data) != ("proposed" in data)
    render(data)


def test_a_mig_layout_changes_when_the_workloads_ask_for_another_instance(inventory, write):
    """Today every A100 is cut 7x 1g.10gb; a workload on 7g.80gb gets whole-card instances, under a new
    mig-parted config name (the old name keeps meaning the old layout)."""
    inventory["group_vars"]["all"]["tenants"]["infer"]["quota"] = {}  # no quota names the 1g.10gb instances
    inventory["group_vars"]["all"]["workloads"] = {"infer": {"big": {"replicas": 12, "gpu": {"type": "mig",
                                                                                            "profile": "7g.80gb"}}}}
    env = load_environment(write(inventory))
    assert [f.code for f in run_checks(env) if f.severity == "error"] == ["WORKLOAD-RESOURCE"]
    result = propose(env)
    candidate, hosts = result.choice["gpu"]
    assert (candidate.layout, hosts) == ((("7g.80gb", 1),), 3)  # 8 cards per host: 2 hosts hold 12, +1 for N-1
    assert result.env.pools["gpu"].vars.sharing.mig_config == "gpu-1x7g.80gb"
    assert not has_errors(run_checks(result.env))


def test_one_layout_per_pool_cannot_serve_a_whole_card_and_its_slices_at_once(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["infer"]["quota"] = {}
    inventory["group_vars"]["all"]["workloads"] = {"infer": {
        "big": {"replicas": 1, "gpu": {"type": "mig", "profile": "7g.80gb"}},
        "small": {"replicas": 1, "gpu": {"type": "mig", "profile": "1g.10gb"}}}}
    result = propose(load_environment(write(inventory)))
    assert isinstance(result, str) and result.startswith("the program has no solution (Infeasible)")


def test_a_candidate_offers_what_the_pools_daemonset_pods_leave():
    """Every node runs the cluster layer's agents (Multus, Cilium's agent and envoy and the NFS node plugin
    everywhere; the device plugin, GFD, NFD's worker and dcgm-exporter on GPU pools; the RDMA plugin on RDMA
    pools): a candidate machine's capacity is the kubelet's allocatable less their pod slots and requests."""
    from infra.model.capacity import host_capacity
    from infra.model.resolve import resolve
    from infra.planning.fit import agent_overhead
    from infra.planning.propose.candidates import candidates

    env = load_environment(EXAMPLE)
    pool = env.pools["gpu_a100"]
    agents = agent_overhead(resolve(env))
    assert agents["gpu_a100"]["pods"] == 9 and agents["cpu_general"]["pods"] == 4
    [today] = [c for c in candidates(env, pool, frozenset()) if c.machine == pool.vars.machine][:1]
    one = host_capacity(env.cluster, pool, env.cluster.machines[pool.vars.machine])
    assert today.capacity["pods"] == one.max_pods - 9
    assert today.capacity["cpu"] == pytest.approx(float(one.allocatable_cpu - agents["gpu_a100"]["cpu"]))
