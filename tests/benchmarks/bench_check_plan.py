"""Benchmark: `check` + `plan` wall time and peak memory for generated environments.

    .venv/bin/python tests/benchmarks/bench_check_plan.py [--sizes 10 100 1000 5000]

Each size is generated in a temporary folder with the example environment's shape (five pools, hosts
listed one by one with inline variables) and measured in a fresh interpreter, as a user would run it:
`python -m infra check` then `python -m infra plan --json`, each the fastest of three runs. Figures only, never pass/fail: timings
on shared machines are noisy. Growth is linear when the per-node column stays flat as sizes grow.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "example"
SHARES = {"cpu_general": 0.5, "mem_cache": 0.2, "gpu_a100": 0.2, "gpu_t4_offline": 0.05, "gpu_h100_bigmem": 0.05}

MEASURE = """
import json, resource, sys, time
start = time.perf_counter()
from infra.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "seconds": time.perf_counter() - start,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
"""


def generate(folder: Path, nodes: int) -> Path:
    """Write an inventory of `nodes` hosts shaped like inventories/example, scaled."""
    (folder / "group_vars").mkdir(parents=True)
    counts = {pool: max(1, round(nodes * share)) for pool, share in SHARES.items()}
    counts["cpu_general"] += nodes - sum(counts.values())
    children = {}
    serial = 0
    for pool, count in counts.items():
        hosts = {}
        for i in range(count):
            serial += 1
            hosts[f"{pool.replace('_', '-')}-{i:05d}"] = {
                "ansible_host": f"10.{20 + serial // 65536}.{serial // 256 % 256}.{serial % 256}",
                "zone": "rack-a" if i % 2 else "rack-b",
            }
        children[pool] = {"hosts": hosts}
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"node_pools": {"children": children}}}}))

    cluster = yaml.safe_load((EXAMPLE / "group_vars" / "all.yml").read_text())
    cluster.update(kube_pods_subnet="10.64.0.0/10", kube_network_node_prefix=25, kube_service_addresses="10.128.0.0/16",
                   reserved_networks={"machine-room": "10.16.0.0/12"})
    (folder / "group_vars" / "all.yml").write_text(yaml.safe_dump(cluster))
    slots = iter(range(1 << 20))
    for pool in SHARES:
        pool_vars = yaml.safe_load((EXAMPLE / "group_vars" / f"{pool}.yml").read_text())
        if "rdma_network" in pool_vars:  # one RDMA fabric wide enough to give every GPU host its slice
            pool_vars["rdma_network"]["cidr"] = "172.16.0.0/12"
            pool_vars["rdma_slots"] = {host: next(slots) for host in sorted(children[pool]["hosts"])}
        (folder / "group_vars" / f"{pool}.yml").write_text(yaml.safe_dump(pool_vars))
    return folder


def measure(inventory: Path, *args: str, repeat: int = 3) -> dict:
    """The fastest of `repeat` runs (the least disturbed by the machine's other work)."""
    return min((_run(inventory, *args) for _ in range(repeat)), key=lambda figures: figures["wall"])


def _run(inventory: Path, *args: str) -> dict:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", MEASURE, *args, str(inventory)], cwd=ROOT,
                            capture_output=True, text=True)
    wall = time.perf_counter() - started
    figures = json.loads(result.stderr.strip().splitlines()[-1])
    if figures["code"] != 0:
        raise SystemExit(f"{args} on {inventory} exited {figures['code']}:\n{result.stderr}")
    return {"wall": wall, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 5000])
    args = parser.parse_args()
    print(f"{'nodes':>6} {'hosts.yml':>10} {'check s':>8} {'plan s':>8} {'total s':>8} "
          f"{'ms/node':>8} {'peak MiB':>9} {'added ms/node':>14}")
    previous = None
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.sizes:
            inventory = generate(Path(tmp) / f"n{nodes}", nodes)
            check = measure(inventory, "check")
            plan = measure(inventory, "plan", "--json")
            total = check["wall"] + plan["wall"]
            size_kb = (inventory / "hosts.yml").stat().st_size / 1024
            # the cost of each node added since the previous size: flat when growth is linear
            added = f"{1000 * (total - previous[1]) / (nodes - previous[0]):14.3f}" if previous else f"{'':>14}"
            print(f"{nodes:>6} {size_kb:>8.0f}KB {check['wall']:>8.2f} {plan['wall']:>8.2f} {total:>8.2f} "
                  f"{1000 * total / nodes:>8.2f} {max(check['peak_mib'], plan['peak_mib']):>9.0f} {added}",
                  flush=True)
            previous = (nodes, total)
    print("wall = process start to exit (interpreter and imports included); peak = max RSS of the two runs")


if __name__ == "__main__":
    main()
