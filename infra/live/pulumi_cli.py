"""One shipped stack run by the real Pulumi CLI against the local control plane.

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
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.cluster.concerns import build_concerns
from infra.cluster.objects import Obj
from infra.live.controlplane import ROOT, STATE, LocalCluster, tool_paths
from infra.model.resolve import resolve
from infra.spec import load_environment

REAL = STATE / "real"
PASSPHRASE = "k8s-node-pools-local-state"
"""The passphrase of the local stacks' secrets: state that lives and dies with a test run, not a secret."""
PULUMI_TIMEOUT = 900.0
"""Seconds one pulumi command may take before it is stopped: a hang (a rollout that never completes) fails."""


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
    """The stack file, when it is not the program's Pulumi.<name>.yaml (generated environments)."""
    program: Path | None = None
    """The folder of Pulumi.yaml and __main__.py, when it is not the checkout's (a test's own program)."""

    @property
    def project(self) -> Path:
        return self.work / "project"

    @property
    def home(self) -> Path:
        return self.work / "home"

    @property
    def source(self) -> Path:
        return self.program or self.root

    @property
    def stack_file(self) -> Path:
        return self.settings or self.source / f"Pulumi.{self.name}.yaml"

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
            # The built CLI, then the dynamic-provider plugin the official CLI ships beside itself.
            "PATH": os.pathsep.join([str(tools["pulumi"].parent), str(self.root / "tools" / "pulumi-plugins"),
                                     env.get("PATH", "")]),
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
        for name in ("Pulumi.yaml", "__main__.py", *(p.name for p in self.source.glob("Pulumi.*.yaml"))):
            shutil.copy2(self.source / name, self.project / name)
        shutil.copy2(self.stack_file, self.project / f"Pulumi.{self.name}.yaml")
        for name in ("infra", "inventories", "tools", ".venv"):
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
