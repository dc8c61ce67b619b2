"""Benchmark: the real Pulumi path on generated environments (issue 8). Figures only, never pass/fail.

    .venv/bin/python tests/benchmarks/bench_real.py [--sizes 10 100 1000] [--timeout 900]

Per size, on a fresh local control plane (tools/cluster.sh, kwok included): the environment's hosts
registered as Nodes (tools/make_nodes.py), then `pulumi preview` and `pulumi up --yes` of a stack naming
it (helmReleases=false), with the CLI, language host and provider built by `./dev.sh tools`.
Environments have the example's shape (bench_check_plan.generate). Wall time per command, and peak
memory: the largest sum of resident memory of the pulumi process and all its descendants (language
host, Python program, provider), sampled every 0.1 s; the API server's and etcd's resident memory after
`up`. Needs the built tools.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from bench_check_plan import ROOT, generate

sys.path.insert(0, str(ROOT))

from infra.live.compare import pulumi_resource_count
from infra.live.controlplane import LocalCluster
from infra.live.pulumi_cli import REAL, Stack

PAGE = 4096


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _rss_mib(pid: int) -> float:
    try:
        return int((Path("/proc") / str(pid) / "statm").read_text().split()[1]) * PAGE / 2**20
    except OSError:
        return 0.0


def tree_rss_mib(root: int) -> float:
    tree, total, todo = _children(), 0.0, [root]
    while todo:
        pid = todo.pop()
        total += _rss_mib(pid)
        todo.extend(tree.get(pid, []))
    return total


class Peak:
    """The largest summed RSS of this process's descendants while the block runs (pulumi and everything it starts)."""

    def __enter__(self) -> Peak:
        import os

        self.me, self.peak, self._stop = os.getpid(), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, tree_rss_mib(self.me) - _rss_mib(self.me))

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def timed(label: str, run):  # type: ignore[no-untyped-def]
    """(wall s, peak MiB), or (None, peak MiB so far) when the command ran past the stack's timeout."""
    with Peak() as peak:
        started = time.perf_counter()
        try:
            done = run()
        except subprocess.TimeoutExpired:
            print(f"  {label}: stopped after {time.perf_counter() - started:.0f} s (--timeout)", flush=True)
            return None, peak.peak
        wall = time.perf_counter() - started
    print(f"  {label}: {wall:.1f} s, {peak.peak:.0f} MiB", flush=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        raise SystemExit(f"{label} failed after {wall:.1f} s:\n{tail}")
    return wall, peak.peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--timeout", type=float, default=900, help="seconds one pulumi command may run")
    parser.add_argument("--no-settle", action="store_true",
                        help="preview and apply while the node lifecycle controller still lifts its not-ready taints "
                             "(about 4.5 Nodes a second here) instead of waiting for every Node to settle")
    args = parser.parse_args()
    work = REAL / "bench"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cluster = LocalCluster()
    rows = []
    try:
        for nodes in args.sizes:
            inventory = generate(work / f"n{nodes}", nodes)
            settings = work / f"Pulumi.bench{nodes}.yaml"
            settings.write_text(yaml.safe_dump({"config": {
                "k8s-node-pools:inventory": str(inventory), "k8s-node-pools:kubeconfig": ".state/bench/kubeconfig"}}))
            cluster.down()
            started = time.perf_counter()
            up = cluster.up()
            plane = time.perf_counter() - started
            assert up.ok, up.summary
            started = time.perf_counter()
            registered = cluster.register_nodes(str(inventory), settle=not args.no_settle)
            assert registered.ok, registered.summary
            register = time.perf_counter() - started
            print(f"{nodes} nodes: control plane {plane:.1f} s, Nodes registered {register:.1f} s", flush=True)
            stack = Stack(f"bench{nodes}", cluster, settings=settings, work=work / "pulumi", timeout=args.timeout)
            stack.prepare()
            preview_s, preview_mib = timed("preview", stack.preview)
            up_s, up_mib = timed("up", stack.up) if preview_s is not None else (None, 0.0)
            resources = pulumi_resource_count(stack.resources()) if up_s is not None else len(stack.declared())
            pids = {c: int((ROOT / ".state/cluster/pids" / f"{c}.pid").read_text()) for c in ("kube-apiserver", "etcd")}
            server_mib = {c: _rss_mib(pid) for c, pid in pids.items()}
            rows.append((nodes, plane, register, resources, preview_s, preview_mib, up_s, up_mib,
                         server_mib["kube-apiserver"], server_mib["etcd"]))
            print(f"  {resources} objects; apiserver {server_mib['kube-apiserver']:.0f} MiB, "
                  f"etcd {server_mib['etcd']:.0f} MiB", flush=True)
    finally:
        cluster.down()
    print(f"\n{'nodes':>6} {'plane s':>8} {'Nodes s':>8} {'objects':>8} {'preview s':>10} {'MiB':>6} "
          f"{'up s':>7} {'MiB':>6} {'apiserver MiB':>14} {'etcd MiB':>9}")
    for row in rows:
        preview = f"{row[4]:>10.1f}" if row[4] is not None else f"{'> ' + str(int(args.timeout)):>10}"
        up = f"{row[6]:>7.1f}" if row[6] is not None else f"{'-':>7}"
        print(f"{row[0]:>6} {row[1]:>8.1f} {row[2]:>8.1f} {row[3]:>8} {preview} {row[5]:>6.0f} "
              f"{up} {row[7]:>6.0f} {row[8]:>14.0f} {row[9]:>9.0f}")


if __name__ == "__main__":
    main()
