"""The real Pulumi path (issue 8): the pinned CLI and provider against the local control plane.

Stages the main job and the tests call, each returning a StageResult (success and a one-line summary):

    cluster_up(inventory)     tools/cluster.sh up (etcd, API server, controller manager, scheduler, kwok)
                              on free loopback ports, then the inventory's hosts registered as Nodes
    pulumi_up(stack)          `pulumi preview` then `pulumi up --yes` of a shipped stack, then through the
                              API: every declared object exists as rendered
    probes(stack)             the scheduling and admission proofs with probe pods (infra/live/probes.py)
    teardown(stack)           `pulumi destroy --yes`, no project object left, Nodes removed, cluster down

The Pulumi project is used as a user's CLI reads it: Pulumi.yaml, Pulumi.<stack>.yaml and __main__.py are
copied unchanged into .state/real/project/ (the CLI writes the passphrase provider's salt into the stack
file at `stack init`, which must not dirty the checkout), next to links to infra/, inventories/ and .venv.
The stack file's `kubeconfig` is honoured, not overridden: the admin kubeconfig of the local control
plane is written where it points, relative paths under the project copy and `~` under a HOME of the
runs' own (.state/real/home), so no user's ~/.kube is touched. Backend: a local file backend
(.state/real/backend); secrets: the passphrase provider. Helm releases are left out by the stack config
the CLI is given (`--config helmReleases=false`: chart archives cannot be fetched here); everything else
is applied for real.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from infra.cluster.concerns import build_concerns
from infra.cluster.objects import MANAGED_BY, Obj
from infra.knowledge.units import parse_quantity
from infra.live.kubeapi import ApiError, Kube, wait_for
from infra.model.resolve import resolve
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".state"
REAL = STATE / "real"
PASSPHRASE = "k8s-node-pools-local-state"
"""The passphrase of the local stacks' secrets: state that lives and dies with a test run, not a secret."""
BINARIES = {
    "etcd": "etcd", "kube-apiserver": "kubernetes", "kube-controller-manager": "kubernetes",
    "kube-scheduler": "kubernetes", "kwok": "kwok", "pulumi": "pulumi", "pulumi-language-python": "pulumi",
    "pulumi-resource-kubernetes": "pulumi-kubernetes",
}
"""Every binary the real path runs, and the tools family (tools/<family>) that builds it."""
PORTS = ("CLUSTER_ETCD_PORT", "CLUSTER_ETCD_PEER_PORT", "CLUSTER_APISERVER_PORT", "CLUSTER_KCM_PORT",
         "CLUSTER_SCHEDULER_PORT", "CLUSTER_KWOK_PORT")
PULUMI_TIMEOUT = 900.0
"""Seconds one pulumi command may take before it is stopped: a hang (a rollout that never completes) fails."""


@dataclass(frozen=True)
class StageResult:
    ok: bool
    summary: str
    seconds: float = 0.0


class ToolsMissing(Exception):
    """The pinned tools are not built on this machine."""


def tool_paths(root: Path = ROOT) -> dict[str, Path]:
    """Each binary of BINARIES in the build cache; ToolsMissing naming the command that builds them."""
    printed = subprocess.run([str(root / "tools" / "build.sh"), "--print-path"], check=True,
                             capture_output=True, text=True).stdout.split()
    dirs = {Path(d).parent.name.rsplit("-", 1)[0]: Path(d) for d in printed}
    found: dict[str, Path] = {}
    missing = []
    for binary, family in BINARIES.items():
        path = dirs.get(family, Path("/nonexistent")) / binary
        if path.is_file() and os.access(path, os.X_OK):
            found[binary] = path
        else:
            missing.append(f"{binary} ({family})")
    if missing:
        raise ToolsMissing("the pinned tools are not built: " + ", ".join(missing) + "; run `./dev.sh tools` "
                           "first (builds them from the Go module proxy into ~/.cache/k8s-node-pools/tools, "
                           "about 20-25 minutes cold on 2 cores, skipped once built)")
    return found


def _descendants(root: int) -> list[int]:
    """Every live descendant of `root`, from /proc (children before their parents' turn does not matter:
    all are killed)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------ cluster


@dataclass
class LocalCluster:
    """tools/cluster.sh with ports of its own (free ones unless CLUSTER_*_PORT are set), so that a test run
    does not collide with a control plane another checkout on the machine has up."""

    root: Path = ROOT
    ports: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in PORTS:
            self.ports.setdefault(name, os.environ.get(name) or str(_free_port()))

    @property
    def kubeconfig(self) -> Path:
        return self.root / ".state" / "cluster" / "admin.kubeconfig"

    def _sh(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.root / "tools" / "cluster.sh"), *args], env={**os.environ, **self.ports},
                              capture_output=True, text=True, timeout=timeout)

    def up(self) -> StageResult:
        started = time.perf_counter()
        tool_paths(self.root)
        done = self._sh("up")
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            return StageResult(False, f"cluster up failed: {done.stderr.strip()[-2000:]}", seconds)
        return StageResult(True, f"control plane and kwok up on 127.0.0.1:{self.ports['CLUSTER_APISERVER_PORT']} "
                                 f"in {seconds:.1f} s", seconds)

    def down(self) -> StageResult:
        started = time.perf_counter()
        done = self._sh("down")
        ok = done.returncode == 0
        return StageResult(ok, "cluster down" if ok else f"cluster down failed: {done.stderr.strip()[-1000:]}",
                           time.perf_counter() - started)

    def api(self) -> Kube:
        return Kube(self.kubeconfig)

    def register_nodes(self, inventory: str) -> StageResult:
        """The inventory's hosts as Nodes (tools/make_nodes.py), then waits until each is Ready, untainted
        by the node lifecycle controller and holding a lease that kwok renews."""
        started = time.perf_counter()
        done = subprocess.run([sys.executable, str(self.root / "tools" / "make_nodes.py"), inventory,
                               "--kubeconfig", str(self.kubeconfig)], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            return StageResult(False, f"registering Nodes failed: {done.stderr.strip()[-2000:]}")
        names = sorted(node["metadata"]["name"] for node in _inventory_nodes(inventory))
        kube = self.api()

        def settled() -> bool | None:
            live = {n["metadata"]["name"]: n for n in kube.get("/api/v1/nodes")["items"]}
            leases = {lease["metadata"]["name"] for lease in kube.get(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]}
            for name in names:
                node = live.get(name)
                if node is None or name not in leases:
                    return None
                ready = [c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
                lifecycle = [t for t in node["spec"].get("taints", []) if t["key"].startswith("node.kubernetes.io/")]
                if ready != ["True"] or lifecycle:
                    return None
            return True

        wait_for(f"Nodes of {inventory} Ready with leases", settled, timeout=120)
        seconds = time.perf_counter() - started
        return StageResult(True, f"{len(names)} Nodes of {inventory} Ready in {seconds:.1f} s", seconds)

    def remove_nodes(self) -> None:
        kube = self.api()
        for node in kube.get("/api/v1/nodes")["items"]:
            kube.delete(f"/api/v1/nodes/{node['metadata']['name']}")


def _inventory_nodes(inventory: str) -> list[Obj]:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import make_nodes  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    nodes: list[Obj] = make_nodes.nodes(inventory)
    return nodes


# ------------------------------------------------------------------------------------------- pulumi


@dataclass
class Stack:
    """One shipped stack run by the real CLI against the local control plane."""

    name: str
    cluster: LocalCluster
    root: Path = ROOT
    work: Path = REAL
    helm_releases: bool = False
    timeout: float = PULUMI_TIMEOUT
    settings: Path | None = None
    """The stack file, when it is not the checkout's Pulumi.<name>.yaml (generated environments)."""

    @property
    def project(self) -> Path:
        return self.work / "project"

    @property
    def home(self) -> Path:
        return self.work / "home"

    @property
    def stack_file(self) -> Path:
        return self.settings or self.root / f"Pulumi.{self.name}.yaml"

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = yaml.safe_load(self.stack_file.read_text())["config"]
        return config

    @property
    def inventory(self) -> str:
        return str(self.config()["k8s-node-pools:inventory"])

    def env(self) -> dict[str, str]:
        tools = tool_paths(self.root)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PULUMI_", "KUBECONFIG")) and k not in ("VIRTUAL_ENV",)}
        env.update({
            "PATH": os.pathsep.join([str(tools["pulumi"].parent), env.get("PATH", "")]),
            "HOME": str(self.home),
            "PULUMI_HOME": str(self.work / "pulumi-home"),
            "PULUMI_BACKEND_URL": f"file://{self.work / 'backend'}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        })
        return env

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """One pulumi command in the project copy, on this stack, without colour or prompts. Past `timeout`
        seconds it and every descendant (language host, program, provider) are killed and
        subprocess.TimeoutExpired raised, so a hang leaves no process behind."""
        command = ["pulumi", *args, "--stack", self.name, "--non-interactive", "--color", "never"]
        with subprocess.Popen(command, cwd=self.project, env=self.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True) as process:
            try:
                stdout, stderr = process.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                # The CLI starts its plugins in process groups of their own: kill every descendant too.
                for pid in [*_descendants(process.pid), process.pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                process.communicate()
                raise
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)

    def prepare(self) -> None:
        """A fresh project copy, backend and stack; the provider plugin installed from the built binary at
        the version the Python SDK asks for; the control plane's kubeconfig where the stack file points."""
        tools = tool_paths(self.root)
        if self.project.exists():
            shutil.rmtree(self.project)
        self.project.mkdir(parents=True)
        (self.work / "backend").mkdir(exist_ok=True)
        self.home.mkdir(exist_ok=True)
        for name in ("Pulumi.yaml", "__main__.py", *(p.name for p in self.root.glob("Pulumi.*.yaml"))):
            shutil.copy2(self.root / name, self.project / name)
        shutil.copy2(self.stack_file, self.project / f"Pulumi.{self.name}.yaml")
        for name in ("infra", "inventories", ".venv"):
            (self.project / name).symlink_to(self.root / name)
        kubeconfig = self.kubeconfig_path()
        kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.cluster.kubeconfig, kubeconfig)
        version = importlib.metadata.version("pulumi_kubernetes")
        env = self.env()
        plugin = subprocess.run(["pulumi", "plugin", "install", "resource", "kubernetes", version,
                                 "--file", str(tools["pulumi-resource-kubernetes"])],
                                env=env, cwd=self.project, capture_output=True, text=True, timeout=300)
        if plugin.returncode != 0:
            raise RuntimeError(f"pulumi plugin install failed: {plugin.stderr}")
        # A stack left by an interrupted run: its cluster is gone with it.
        subprocess.run(["pulumi", "stack", "rm", self.name, "--force", "--yes", "--preserve-config",
                        "--non-interactive"], env=env,
                       cwd=self.project, capture_output=True, text=True, timeout=300)
        init = subprocess.run(["pulumi", "stack", "init", self.name, "--secrets-provider", "passphrase",
                               "--non-interactive"], env=env, cwd=self.project, capture_output=True, text=True,
                              timeout=300)
        if init.returncode != 0:
            raise RuntimeError(f"pulumi stack init {self.name} failed: {init.stderr}")
        self._set_helm()

    def kubeconfig_path(self) -> Path:
        """Where the stack file's `kubeconfig` points for the CLI's runs: `~` is their HOME, a relative
        path is under the project copy (the program's working folder)."""
        raw = str(self.config()["k8s-node-pools:kubeconfig"])
        if raw == "~" or raw.startswith("~/"):
            return self.home / raw[2:]
        path = Path(raw)
        return path if path.is_absolute() else self.project / path

    def _set_helm(self) -> None:
        done = self.run("config", "set", "helmReleases", str(self.helm_releases).lower())
        if done.returncode != 0:
            raise RuntimeError(f"pulumi config set helmReleases failed: {done.stderr}")

    def preview(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.run("preview", "--diff", *extra)

    def up(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.run("up", "--yes", "--skip-preview", *extra)

    def destroy(self) -> subprocess.CompletedProcess[str]:
        return self.run("destroy", "--yes", "--skip-preview")

    def resources(self) -> list[dict[str, Any]]:
        """The stack's resources as the backend records them (`pulumi stack export`)."""
        import json

        done = self.run("stack", "export")
        if done.returncode != 0:
            raise RuntimeError(f"pulumi stack export failed: {done.stderr}")
        resources: list[dict[str, Any]] = json.loads(done.stdout)["deployment"].get("resources") or []
        return resources

    def declared(self) -> list[Obj]:
        """The objects the stack declares: those `render` writes, Helm releases left out as configured."""
        return [o for c in build_concerns(resolve(load_environment(self.root / self.inventory)),
                                          self.helm_releases) for o in c.objects]


# ------------------------------------------------------------------------------ comparing with render


def _same_scalar(want: Any, live: Any) -> bool:
    if want == live:
        return True
    if isinstance(want, str | int | float) and isinstance(live, str | int | float) and not isinstance(want, bool):
        try:
            return parse_quantity(str(want)) == parse_quantity(str(live))
        except (ValueError, InvalidOperation, ArithmeticError):
            return False
    return False


def differences(want: Any, live: Any, where: str = "") -> list[str]:
    """Where `live` does not hold `want`: every key of a rendered map must be in the live one with the same
    value (the server adds defaults and status, which are not compared), except a zero value (false, {},
    [], "", 0), which the server omits as it stores none; lists match item by item; quantities compare by
    value ("0.5" and "500m")."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return [f"{where or '.'}: want a map, live has {live!r}"]
        out = []
        for k, v in want.items():
            if k not in live:
                if v in (False, {}, [], "", 0, None):
                    continue
                out.append(f"{where}.{k}: missing (want {v!r})")
            else:
                out.extend(differences(v, live[k], f"{where}.{k}"))
        return out
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return [f"{where}: want {want!r}, live has {live!r}"]
        return [d for i, (w, v) in enumerate(zip(want, live, strict=True)) for d in differences(w, v, f"{where}[{i}]")]
    return [] if _same_scalar(want, live) else [f"{where}: want {want!r}, live has {live!r}"]


def not_as_rendered(kube: Kube, objects: list[Obj]) -> list[str]:
    """Every declared object read back through the API and compared with its rendered form; Nodes (patched,
    not created) by their labels and taints. Returns one line per difference; [] when all are as rendered."""
    problems = []
    for o in objects:
        name = f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}".replace(" /", " ")
        code, live = kube.request("GET", kube.path(o))
        if code == 404:
            problems.append(f"{name}: does not exist")
            continue
        if code != 200:
            problems.append(f"{name}: HTTP {code}")
            continue
        if o["kind"] == "Node":
            want = {"metadata": {"labels": o["metadata"]["labels"]}}
            live_taints = {(t["key"], t.get("value"), t["effect"]) for t in live["spec"].get("taints", [])}
            for taint in o["spec"]["taints"]:
                if (taint["key"], taint.get("value"), taint["effect"]) not in live_taints:
                    problems.append(f"{name}: taint {taint} missing")
        else:
            want = {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
        problems.extend(f"{name}: {d}" for d in differences(want, live))
    return problems


PROJECT_LABEL = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())


def _listable(kube: Kube) -> Iterator[tuple[str, str]]:
    """(collection path, kind) of every resource type the server serves that can be listed, all namespaces."""
    groups = [("/api/v1", "v1")]
    for group in kube.get("/apis")["groups"]:
        version = group["preferredVersion"]["groupVersion"]
        groups.append((f"/apis/{version}", version))
    for base, _ in groups:
        try:
            resources = kube.get(base)["resources"]
        except ApiError:
            continue  # a CRD group going away while we read
        for r in resources:
            if "/" not in r["name"] and "list" in r.get("verbs", []) and r["kind"] != "Event":
                yield f"{base}/{r['name']}", r["kind"]


def project_objects_left(kube: Kube, declared: list[Obj]) -> list[str]:
    """What of the project is still in the cluster: any object of any type carrying the project's
    managed-by label, and any declared object (but Nodes, which are the hosts') that still exists."""
    left = set()
    for path, kind in _listable(kube):
        code, answer = kube.request("GET", f"{path}?labelSelector={PROJECT_LABEL}")
        if code != 200:
            continue
        for item in answer.get("items") or []:
            meta = item["metadata"]
            left.add(f"{kind} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " "))
    for o in declared:
        if o["kind"] != "Node":
            try:
                present = kube.exists(kube.path(o))
            except (ApiError, KeyError):  # its type is gone with its CRD
                present = False
            if present:
                left.add(f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}".replace(" /", " "))
    return sorted(left)


def pulumi_resource_count(resources: list[dict[str, Any]]) -> int:
    """Kubernetes objects the stack manages (the provider, components and the Nodes' live reads left out)."""
    return sum(1 for r in resources if r["type"].startswith("kubernetes:") and not r["type"].startswith(
        "pulumi:providers:") and not r.get("external"))



# ------------------------------------------------------------------------------------------- stages


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
    """`pulumi destroy`, then no project object may be left; Nodes removed and the cluster stopped whatever
    happened before."""
    started = time.perf_counter()
    notes, ok = [], True
    try:
        if stack is not None and stack.project.exists():
            done = stack.destroy()
            if done.returncode != 0:
                ok = False
                notes.append(f"pulumi destroy of {stack.name} failed:\n{_tail(done)}")
            else:
                left = project_objects_left(cluster.api(), stack.declared())
                ok = not left
                notes.append(f"destroy left {left}" if left else f"{stack.name} destroyed, no project object left")
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
