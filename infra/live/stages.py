"""The main job's real-cluster stages: the pinned Pulumi CLI and provider against the local control plane.

Stages the main job and the tests call, each returning a StageResult (success and a one-line summary):

    cluster_up(inventory)     tools/cluster.sh up (etcd, API server, controller manager, scheduler, kwok)
                              on free loopback ports, then the inventory's hosts registered as Nodes
    pulumi_up(stack)          `pulumi preview` then `pulumi up --yes` of a shipped stack, then through the
                              API: every declared object exists as rendered
    probes(stack)             the scheduling and admission proofs with probe pods (infra/live/probes.py)
    teardown(stack)           `pulumi destroy --yes`, nothing left but what a destroy keeps (tenants'
                              namespaces, CRDs, storage classes), Nodes removed, cluster down
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from infra.live.compare import destroy_differences, not_as_rendered, pulumi_resource_count
from infra.live.controlplane import ROOT, LocalCluster, StageResult, ToolsMissing
from infra.live.kubeapi import ApiError
from infra.live.pulumi_cli import Stack
from infra.model.resolve import resolve
from infra.spec import load_environment


def _tail(done: subprocess.CompletedProcess[str], lines: int = 30) -> str:
    return "\n".join((done.stdout + done.stderr).strip().splitlines()[-lines:])


def stack_for(inventory: str, root: Path = ROOT) -> str | None:
    """The shipped stack whose Pulumi.<stack>.yaml names `inventory`; None if none does."""
    wanted = (root / inventory).resolve()
    for path in sorted(root.glob("Pulumi.*.yaml")):
        config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
        named = config.get("k8s-node-pools:inventory")
        if named and (root / str(named)).resolve() == wanted:
            return path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return None


def cluster_up(cluster: LocalCluster, inventory: str) -> StageResult:
    """A fresh control plane with kwok, and the inventory's hosts as Ready Nodes."""
    started = time.perf_counter()
    try:
        cluster.down()
        up = cluster.up()
        if not up.ok:
            return up
        nodes = cluster.register_nodes(inventory)
    except (ToolsMissing, TimeoutError, ApiError, subprocess.SubprocessError) as error:
        return StageResult(False, f"cluster up failed: {error}", time.perf_counter() - started)
    return StageResult(nodes.ok, f"{up.summary}; {nodes.summary}", time.perf_counter() - started)


def pulumi_up(stack: Stack) -> StageResult:
    """`pulumi preview`, `pulumi up --yes`, every declared object read back as rendered, and a second
    `pulumi preview --expect-no-changes`."""
    started = time.perf_counter()
    try:
        stack.prepare()
        steps = []
        for label, run in (("preview", stack.preview), ("up", stack.up)):
            began = time.perf_counter()
            done = run()
            if done.returncode != 0:
                return StageResult(False, f"pulumi {label} of {stack.name} failed:\n{_tail(done)}",
                                   time.perf_counter() - started)
            steps.append(f"{label} {time.perf_counter() - began:.1f} s")
        declared = stack.declared()
        problems = not_as_rendered(stack.cluster.api(), declared)
        if problems:
            return StageResult(False, f"{stack.name}: {len(problems)} objects not as rendered: {problems[:5]}",
                               time.perf_counter() - started)
        again = stack.preview("--expect-no-changes")
        if again.returncode != 0:
            return StageResult(False, f"{stack.name}: the second preview shows changes:\n{_tail(again)}",
                               time.perf_counter() - started)
    except (ToolsMissing, RuntimeError, ApiError, subprocess.SubprocessError) as error:
        return StageResult(False, f"pulumi up of {stack.name} failed: {error}", time.perf_counter() - started)
    count = pulumi_resource_count(stack.resources())
    return StageResult(True, f"{stack.name}: {count} objects applied and read back as rendered ({', '.join(steps)}); "
                             "second preview: no changes", time.perf_counter() - started)


def probes(stack: Stack) -> StageResult:
    """The scheduling and admission probes (infra/live/probes.py) on the applied stack."""
    from infra.live import probes as p

    started = time.perf_counter()
    try:
        results = p.run_all(stack.cluster.api(), resolve(load_environment(stack.root / stack.inventory)),
                            stack.declared())
    except (TimeoutError, ApiError) as error:
        return StageResult(False, f"probes failed: {error}", time.perf_counter() - started)
    for result in results:
        print(f"    {'ok  ' if result.ok else 'FAIL'} {result.name}: {result.detail}")
    passed = sum(r.ok for r in results)
    placed = sum(r.placed for r in results)
    return StageResult(passed == len(results), f"{passed}/{len(results)} probes passed, {placed} probe pods placed",
                       time.perf_counter() - started)


def teardown(stack: Stack | None, cluster: LocalCluster) -> StageResult:
    """`pulumi destroy`, then nothing of the project may be left but what a destroy keeps; Nodes removed and
    the cluster stopped whatever happened before."""
    started = time.perf_counter()
    notes, ok = [], True
    try:
        if stack is not None and stack.project.exists():
            done = stack.destroy()
            if done.returncode != 0:
                ok = False
                notes.append(f"pulumi destroy of {stack.name} failed:\n{_tail(done)}")
            else:
                wrong = destroy_differences(cluster.api(), stack.declared())
                ok = not wrong
                notes.append(f"destroy: {', '.join(wrong)}" if wrong else
                             f"{stack.name} destroyed; left only what users' data lives in (tenants' namespaces, "
                             "CRDs, storage classes)")
    except (RuntimeError, ApiError, subprocess.SubprocessError, OSError) as error:
        ok = False
        notes.append(f"destroy failed: {error}")
    finally:
        down = cluster.down()
        ok = ok and down.ok
        notes.append(down.summary)
    return StageResult(ok, "; ".join(notes), time.perf_counter() - started)


def main_job_stages(inventory: str) -> tuple[list[tuple[str, Callable[[], bool]]], Callable[[], None]]:
    """The main job's real-cluster stages for `inventory` (cluster up, pulumi up, probes, teardown), and a
    cleanup the caller runs in any case: it tears down when a stage stopped the job before teardown."""
    cluster = LocalCluster()
    name = stack_for(inventory)
    stack = Stack(name, cluster) if name else None
    state = {"up": False, "applied": False, "down": False}

    def report(result: StageResult) -> bool:
        print(result.summary)
        return result.ok

    def up() -> bool:
        state["up"] = True
        if stack is None:
            print(f"no Pulumi.<stack>.yaml names {inventory}: there is no stack to apply")
            return False
        return report(cluster_up(cluster, stack.inventory))

    def apply() -> bool:
        assert stack is not None
        state["applied"] = True
        return report(pulumi_up(stack))

    def probe() -> bool:
        assert stack is not None
        return report(probes(stack))

    def down() -> bool:
        state["down"] = True
        return report(teardown(stack if state["applied"] else None, cluster))

    def cleanup() -> None:
        if state["up"] and not state["down"]:
            print("==> teardown after a failed stage")
            down()

    return [("cluster up", up), ("pulumi up", apply), ("probes", probe), ("teardown", down)], cleanup
