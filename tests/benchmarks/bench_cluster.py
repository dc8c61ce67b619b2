"""Benchmark: the cluster layer on generated environments: `render` (build + strict validation + write) and
the Pulumi program under mocks, each in a fresh interpreter (start-up and imports included).

    .venv/bin/python tests/benchmarks/bench_cluster.py [--sizes 10 100 1000 5000] [--program-sizes 10 100 1000]

Environments have the example's shape (bench_check_plan.generate). Figures only, never pass/fail: timings on
shared machines are noisy. Growth is linear when the per-node column stays flat as sizes grow.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_check_plan import ROOT, generate

RENDER = """
import json, resource, sys, time
start = time.perf_counter()
from infra.cli import main
code = main(["render", sys.argv[1], "--out", sys.argv[2]])
print(json.dumps({"code": code, "seconds": time.perf_counter() - start,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
"""

PROGRAM = """
import json, resource, sys, time
start = time.perf_counter()
import pulumi

class Mocks(pulumi.runtime.Mocks):
    count = 0
    def new_resource(self, args):
        Mocks.count += 1
        return [args.resource_id or f"{args.name}-id", args.inputs if not args.resource_id else {}]
    def call(self, args):
        return {}

pulumi.runtime.set_mocks(Mocks(), project="k8s-node-pools", stack="bench", preview=False)
from infra.cluster.components import ClusterSettings
from infra.stack import declare

@pulumi.runtime.test
def program():
    declare(sys.argv[1], ClusterSettings(kubeconfig="/nonexistent"))

program()
print(json.dumps({"code": 0, "resources": Mocks.count, "seconds": time.perf_counter() - start,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
"""


def run(script: str, *args: str) -> dict:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    lines = result.stderr.strip().splitlines()
    figures = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {"code": result.returncode}
    if figures["code"] != 0:
        raise SystemExit(f"exited {figures['code']}:\n{result.stdout}\n{result.stderr}")
    return {"wall": wall, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 5000])
    parser.add_argument("--program-sizes", type=int, nargs="+", default=[10, 100, 1000])
    args = parser.parse_args()
    print(f"{'nodes':>6} {'render s':>9} {'ms/node':>8} {'peak MiB':>9}   {'program s':>9} {'resources':>9} "
          f"{'ms/res':>7} {'peak MiB':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in sorted(set(args.sizes) | set(args.program_sizes)):
            inventory = generate(Path(tmp) / f"n{nodes}", nodes)
            line = f"{nodes:>6}"
            if nodes in args.sizes:
                render = min((run(RENDER, str(inventory), f"{tmp}/out{nodes}") for _ in range(3)),
                             key=lambda f: f["wall"])
                line += f" {render['wall']:>9.2f} {1000 * render['wall'] / nodes:>8.2f} {render['peak_mib']:>9.0f}"
            else:
                line += f" {'':>9} {'':>8} {'':>9}"
            if nodes in args.program_sizes:
                program = run(PROGRAM, str(inventory))
                line += (f"   {program['wall']:>9.2f} {program['resources']:>9} "
                         f"{1000 * program['wall'] / program['resources']:>7.2f} {program['peak_mib']:>9.0f}")
            print(line, flush=True)
    print("render = check + build + strict validation + write; program = the Pulumi program under mocks "
          "(one resource per object, node patch and live-node read); wall from process start to exit")


if __name__ == "__main__":
    main()
