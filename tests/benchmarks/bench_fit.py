"""Benchmark: `fit` and `propose` wall time and peak memory on generated environments (figures only).

    .venv/bin/python tests/benchmarks/bench_fit.py [--nodes 1000 5000] [--replicas 10000] [--propose 100 ...]

fit: environments of the example's shape (bench_check_plan.generate) whose workloads are the example's
scaled to about `--replicas` replicas, with the tenants' compute quotas scaled alike (storage quotas
left out: scaled, they would pass the backends' capacity); `python -m infra fit --json --draws 0` (one
placement; the default adds 4 with random tie orders) in a fresh interpreter, N-1 included.
propose: the shipped example, and generated environments of `--propose` nodes with the example's
workloads scaled to their size. Each figure is the fastest of three runs; wall time includes interpreter
start and imports, peak is the process's maximum resident set size. Timings on shared machines are
noisy: never pass/fail.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_check_plan import EXAMPLE, MEASURE, ROOT, generate

sys.path.insert(0, str(ROOT))
from infra.knowledge.units import parse_quantity

_SCALED_QUOTA = ("requests.", "limits.", "cpu", "memory", "pods", "hugepages-")


def scaled(folder: Path, nodes: int, replicas: int) -> tuple[Path, int]:
    """An example-shaped inventory of `nodes` hosts whose workloads add up to about `replicas` replicas."""
    generate(folder, nodes)
    path = folder / "group_vars" / "all.yml"
    cluster = yaml.safe_load(path.read_text())
    declared = sum(w["replicas"] for tenant in cluster["workloads"].values() for w in tenant.values())
    factor = max(1, round(replicas / declared))
    total = 0
    for tenant in cluster["workloads"].values():
        for workload in tenant.values():
            workload["replicas"] *= factor
            total += workload["replicas"]
    for tenant in cluster["tenants"].values():
        quota = tenant.get("quota", {})
        for key, value in list(quota.items()):
            if ".storageclass." in key:
                del quota[key]  # scaled, they would pass the backends' capacity (STORAGE-CAPACITY)
            elif key.startswith(_SCALED_QUOTA):
                quota[key] = int(parse_quantity(value) * factor)
    path.write_text(yaml.safe_dump(cluster))
    return folder, total


def measure(inventory: Path, *args: str, repeat: int = 3) -> dict:
    """The fastest of `repeat` runs in a fresh interpreter; exit 0 or 1 (a workload that does not fit) is a result."""
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", MEASURE, *args, str(inventory)], cwd=ROOT,
                                capture_output=True, text=True)
        figures = json.loads(result.stderr.strip().splitlines()[-1])
        if figures["code"] not in (0, 1):
            raise SystemExit(f"{args} on {inventory} exited {figures['code']}:\n{result.stderr}")
        runs.append({"wall": time.perf_counter() - started, "stdout": result.stdout, **figures})
    return min(runs, key=lambda figures: figures["wall"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--replicas", type=int, default=10000)
    parser.add_argument("--propose", type=int, nargs="+", default=[100],
                        help="nodes of the generated environments propose runs on (besides the example)")
    args = parser.parse_args()
    print(f"{'command':>8} {'environment':>20} {'nodes':>6} {'replicas':>9} {'placed':>7} {'wall s':>7} "
          f"{'peak MiB':>9}  result")
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.nodes:
            inventory, _ = scaled(Path(tmp) / f"fit{nodes}", nodes, args.replicas)
            figures = measure(inventory, "fit", "--json", "--draws", "0")  # one placement, as before draws
            data = json.loads(figures["stdout"])
            result = "fits" if data["fits"] else "some replicas do not fit"
            print(f"{'fit':>8} {'generated':>20} {data['nodes']:>6} {data['replicas']:>9} {data['placed']:>7} "
                  f"{figures['wall']:>7.2f} {figures['peak_mib']:>9.0f}  {result}", flush=True)
        runs = [("inventories/example", EXAMPLE)]
        for nodes in args.propose:  # the example's density: 106 replicas on 9 nodes
            runs.append(("generated", scaled(Path(tmp) / f"propose{nodes}", nodes, round(nodes * 106 / 9))[0]))
        for name, inventory in runs:
            figures = measure(inventory, "propose", "--json")
            data = json.loads(figures["stdout"])
            solver = data.get("solver", {})
            result = (f"{data['current']['monthly_cost']:,.0f} -> {data['proposed']['monthly_cost']:,.0f} "
                      f"{data['currency']}/month, {solver['status']}, {solver['variables']} variables, "
                      f"{solver['rounds']} round(s) of fit" if data.get("proposed") else data.get("problem", ""))
            print(f"{'propose':>8} {name:>20} {data['current']['hosts']:>6} {data['replicas']:>9} {'':>7} "
                  f"{figures['wall']:>7.2f} {figures['peak_mib']:>9.0f}  {result}", flush=True)
    print("wall = process start to exit (interpreter and imports included); peak = max RSS")


if __name__ == "__main__":
    main()
