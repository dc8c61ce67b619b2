"""Benchmark: bootstrap wall time of ansible/site.yml on 1, 2 and 4 fresh sandbox hosts, and its
idempotent re-run.

    .venv/bin/python tests/benchmarks/bench_hosts.py [--sizes 1 2 4] [--pool sb_mem] [--keep-hosts]

For each size, `tests/hosts/sandbox.sh down` then `up N` start N fresh hosts (sb-host-1..N), and a
generated inventory puts all of them in one pool of inventories/sandbox (its group_vars, the cluster
settings filtered to that pool), so every size does the same work per host and the ratio measures
Ansible's parallelism (forks), not a different mix of roles. site.yml runs once (the first run,
everything to do) and again (the re-run, nothing to do; it must report changed=0).
The issue's aims: 4 hosts within 1.3x of one host; the re-run under 35% of the first run.
Figures only, never pass/fail: timings on shared machines are noisy. This removes the sandbox's own
hosts (sb-cpu-1, ...) like any `up N`; `sandbox.sh up` brings them back.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from infra.hosts.ansible_run import OVERLAY, SANDBOX_INVENTORY, PlaybookRun, run_playbook, sandbox  # noqa: E402


def generate(folder: Path, hosts: int, pool: str) -> Path:
    """inventories/sandbox with its hosts replaced by sb-host-1..N, all in POOL; the tenants and storage
    classes keep only those of that pool alone (a pool without hosts is refused by the spec)."""
    shutil.copytree(SANDBOX_INVENTORY, folder)
    cluster_file = folder / "group_vars" / "all.yml"
    cluster: dict[str, Any] = yaml.safe_load(cluster_file.read_text())
    for key in ("tenants", "storage_classes"):
        kept = {}
        for name, entry in (cluster.get(key) or {}).items():
            if entry.get("pools") == [pool]:  # one that spans other pools would quota their resources
                kept[name] = entry
        cluster[key] = kept
    cluster_file.write_text(yaml.safe_dump(cluster, sort_keys=False))
    for other in (folder / "group_vars").glob("*.yml"):
        if other.stem not in ("all", pool):
            other.unlink()
    inventory = {"all": {"children": {"node_pools": {"children": {pool: {"hosts": {
        f"sb-host-{i}": {"zone": "local"} for i in range(1, hosts + 1)}}}}}}}
    (folder / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    return folder


def must(run: PlaybookRun, what: str) -> PlaybookRun:
    if run.rc != 0:
        sys.exit(f"{what} failed (rc {run.rc}):\n{run.tail(40)}")
    return run


def measure(hosts: int, pool: str, work: Path) -> dict[str, float]:
    inventory = generate(work / f"hosts-{hosts}", hosts, pool)
    down = sandbox("down")
    began = time.perf_counter()
    up = sandbox("up", str(hosts))
    up_s = time.perf_counter() - began
    if down.returncode or up.returncode:
        sys.exit(f"sandbox.sh failed:\n{down.stderr}{up.stdout}{up.stderr}")
    first = must(run_playbook("site.yml", inventories=(inventory, OVERLAY)), f"site.yml on {hosts} hosts")
    again = must(run_playbook("site.yml", inventories=(inventory, OVERLAY)), f"the re-run on {hosts} hosts")
    if again.changed():
        print(f"  warning: the re-run on {hosts} hosts changed tasks:\n{again.describe_changes()}")
    return {"up": up_s, "first": first.seconds, "rerun": again.seconds,
            "changed_first": sum(first.changed().values()), "changed_rerun": sum(again.changed().values())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--pool", default="sb_mem", help="the sandbox pool every host joins (default sb_mem)")
    parser.add_argument("--keep-hosts", action="store_true", help="leave the last size's hosts running")
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
        try:
            for hosts in args.sizes:
                print(f"{hosts} host(s) in {args.pool} ...", flush=True)
                rows[hosts] = measure(hosts, args.pool, Path(tmp))
        finally:
            if not args.keep_hosts:
                sandbox("down")
    print(f"\nsite.yml on fresh sandbox hosts, pool {args.pool}:\n")
    print("| hosts | up s | first run s | changed | re-run s | changed | re-run / first |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for hosts, row in rows.items():
        print(f"| {hosts} | {row['up']:.1f} | {row['first']:.1f} | {row['changed_first']:.0f} | {row['rerun']:.1f} "
              f"| {row['changed_rerun']:.0f} | {row['rerun'] / row['first']:.0%} |")
    smallest, largest = min(rows), max(rows)
    if largest != smallest:
        ratio = rows[largest]["first"] / rows[smallest]["first"]
        print(f"\n{largest} hosts vs {smallest}: first run {ratio:.2f}x (aim: within 1.3x for 4 vs 1)")
    print("re-run vs first run: " + ", ".join(f"{hosts} hosts {row['rerun'] / row['first']:.0%}"
                                               for hosts, row in rows.items()) + " (aim: under 35%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
