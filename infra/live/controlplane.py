"""A local control plane from the pinned tools: tools/cluster.sh (etcd, kube-apiserver, controller manager,
scheduler with the inventory's configuration, kwok) on free loopback ports, and an inventory's hosts registered
as Nodes; the pinned tools' paths, or ToolsMissing naming the command that builds them.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from infra.cluster.objects import Obj
from infra.live.kubeapi import Kube, wait_for
from infra.model.scheduler import Scoring

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".state"
BINARIES = {
    "etcd": "etcd", "kube-apiserver": "kubernetes", "kube-controller-manager": "kubernetes",
    "kube-scheduler": "kubernetes", "kwok": "kwok", "pulumi": "pulumi", "pulumi-language-python": "pulumi",
    "pulumi-resource-kubernetes": "pulumi-kubernetes",
}
"""Every binary the real path runs, and the tools family (tools/<family>) that builds it."""
PORTS = ("CLUSTER_ETCD_PORT", "CLUSTER_ETCD_PEER_PORT", "CLUSTER_APISERVER_PORT", "CLUSTER_KCM_PORT",
         "CLUSTER_SCHEDULER_PORT", "CLUSTER_KWOK_PORT")


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalCluster:
    """tools/cluster.sh with ports of its own (free ones unless CLUSTER_*_PORT are set), so that a test run
    does not collide with a control plane another checkout on the machine has up."""

    root: Path = ROOT
    ports: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in PORTS:
            self.ports.setdefault(name, os.environ.get(name) or str(free_port()))

    @property
    def kubeconfig(self) -> Path:
        return self.root / ".state" / "cluster" / "admin.kubeconfig"

    def _sh(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.root / "tools" / "cluster.sh"), *args],
                              env={**os.environ, "CLUSTER_PYTHON": sys.executable, **self.ports},
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

    def scheduler_scoring(self) -> tuple[Scoring, int, list[str]]:
        """What the running kube-scheduler says it scores with (its /configz, read with the admin's
        certificate): the first profile's NodeResourcesFit strategy, the share of nodes it scores and its
        enabled score plugins."""
        pki = self.root / ".state" / "cluster" / "pki"
        tls = ssl.create_default_context()
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # its serving certificate is self-signed
        tls.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        url = f"https://127.0.0.1:{self.ports['CLUSTER_SCHEDULER_PORT']}/configz"
        with urllib.request.urlopen(url, context=tls, timeout=10) as answer:
            config = json.load(answer)["componentconfig"]
        profile = config["Profiles"][0]
        args = next(c["Args"] for c in profile["PluginConfig"] if c["Name"] == "NodeResourcesFit")
        strategy = args["ScoringStrategy"]
        scoring = Scoring(strategy["Type"], tuple((r["Name"], int(r["Weight"])) for r in strategy["Resources"]))
        return (scoring, int(config["PercentageOfNodesToScore"] or 0),
                [plugin["Name"] for plugin in profile["Plugins"]["Score"]["Enabled"] or []])

    def register_nodes(self, inventory: str, settle: bool = True) -> StageResult:
        """The inventory's hosts as Nodes (tools/make_nodes.py), then (unless `settle` is False) waits until
        each is Ready, untainted by the node lifecycle controller and holding a lease that kwok renews."""
        started = time.perf_counter()
        done = subprocess.run([sys.executable, str(self.root / "tools" / "make_nodes.py"), inventory,
                               "--kubeconfig", str(self.kubeconfig)], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            return StageResult(False, f"registering Nodes failed: {done.stderr.strip()[-2000:]}")
        if not settle:
            return StageResult(True, "Nodes registered (not waited for)", time.perf_counter() - started)
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

        # The node lifecycle controller lifts its not-ready taints at about 4.5 Nodes a second here.
        wait_for(f"Nodes of {inventory} Ready with leases", settled, timeout=120 + 0.3 * len(names))
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
