"""Benchmark: offline validation (infra.cluster.validation.validate) of N Node-like objects plus one of every other kind.

    .venv/bin/python tests/benchmarks/bench_validate.py [--sizes 10 100 1000 5000] [--version 1.34.2] [--compare]

Each size runs in a fresh interpreter, as the Pulumi program would: "cold" is the first validate()
(it reads the minor's definitions and compiles a validator and a check plan per kind), "warm" a second
validate() of the same objects (everything cached), split into the schema layer and the project's own
checks. Peak memory is the process's maximum resident set. --compare also times kubernetes-validate's
own validate(strict=True) on the first 100 objects, which re-reads the schema files for every object.
Figures only, never pass/fail: timings on shared machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {tests!r})
from test_validate import GPU_NODE_LABELS, valid_objects

nodes, version, compare = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"


def node(i):
    name = f"gpu-a100-{{i:05d}}"
    return {{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {{"name": name, "labels": {{**GPU_NODE_LABELS, "kubernetes.io/hostname": name,
                                              "topology.kubernetes.io/zone": f"rack-{{i % 8}}"}},
                     "annotations": {{"pools.example.com/plan": "gpu_a100"}}}},
        "spec": {{"taints": [{{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}},
                             {{"key": "pools.example.com/dedicated", "value": "gpu", "effect": "NoExecute"}}]}},
        "status": {{"capacity": {{"cpu": "128", "memory": "2113509376Ki", "nvidia.com/gpu": "8", "pods": "110",
                                  "hugepages-1Gi": "0", "ephemeral-storage": "7Ti"}},
                    "allocatable": {{"cpu": "126500m", "memory": "2000Gi", "nvidia.com/gpu": "8", "pods": "110",
                                     "hugepages-1Gi": "0", "ephemeral-storage": "6.5Ti"}}}},
    }}


objects = [node(i) for i in range(nodes)] + valid_objects()
start = time.perf_counter()
from infra.cluster.validation.validate import project_problems, schema_problems, validate
imported = time.perf_counter()
problems = validate(objects, version)
cold = time.perf_counter()
validate(objects, version)
warm = time.perf_counter()
schema_problems(objects, version)
schema = time.perf_counter()
project_problems(objects, version)
own = time.perf_counter()
figures = {{"objects": len(objects), "problems": len(problems), "import": imported - start, "cold": cold - imported,
            "warm": warm - cold, "schema": schema - warm, "own": own - schema}}
if compare:
    import kubernetes_validate
    sample = [o for o in objects if o["kind"] not in ("Queue", "NetworkAttachmentDefinition", "VolumeSnapshotClass")][:100]
    began = time.perf_counter()
    for o in sample:
        kubernetes_validate.validate(o, version, strict=True)
    figures["upstream_ms_per_object"] = (time.perf_counter() - began) * 1000 / len(sample)
figures["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(figures))
"""


def run(nodes: int, version: str, compare: bool) -> dict[str, float]:
    script = MEASURE.format(tests=str(ROOT / "tests" / "cluster"))
    result = subprocess.run([sys.executable, "-c", script, str(nodes), version, "1" if compare else "0"],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 5000])
    parser.add_argument("--version", default="1.34.2")
    parser.add_argument("--compare", action="store_true", help="also time kubernetes-validate's validate()")
    args = parser.parse_args()
    print(f"Kubernetes {args.version}; each row: N Node-like objects + one of every other rendered kind\n")
    header = (f"{'nodes':>6} {'objects':>7} {'cold s':>7} {'cold ms/obj':>11} {'warm s':>7} {'warm ms/obj':>11} "
              f"{'schema ms/obj':>13} {'own ms/obj':>10} {'peak MiB':>8}")
    print(header + ("  upstream ms/obj" if args.compare else ""))
    for nodes in args.sizes:
        f = run(nodes, args.version, args.compare)
        per = 1000 / f["objects"]
        line = (f"{nodes:>6} {f['objects']:>7.0f} {f['cold']:>7.3f} {f['cold'] * per:>11.3f} {f['warm']:>7.3f} "
                f"{f['warm'] * per:>11.3f} {f['schema'] * per:>13.3f} {f['own'] * per:>10.3f} {f['peak_mib']:>8.1f}")
        if f["problems"]:
            line += f"  ({f['problems']:.0f} problems!)"
        print(line + (f"  {f['upstream_ms_per_object']:>15.2f}" if args.compare else ""))


if __name__ == "__main__":
    main()
