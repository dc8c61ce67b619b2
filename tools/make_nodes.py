"""Create an environment's Nodes on the local control plane, as their kubelets would register them (issue 8).

    python tools/make_nodes.py inventories/sandbox [--kubeconfig .state/cluster/admin.kubeconfig]

One Node per pool host: the labels a kubelet may set on itself and the pool's taints
(`infra.cluster.nodes.kubelet_registration`, what the host layer gives the kubelet at join); capacity and
allocatable as infra.model.capacity computes them for the host (CPU, memory, pods, hugepages, the GPU or MIG
extended resources the device plugin advertises, and the root disk as ephemeral-storage, allocatable less the
kubelet's nodefs.available hard-eviction threshold); status Ready. Each control-plane host outside the pools
(Kubespray's kube_control_plane) gets its Node as `fit` counts it: the control-plane taint and role label. The
labels the kubelet may not set are left to the cluster layer (`pulumi up`). Stdlib only: the admin
kubeconfig's client certificate over TLS. An existing Node keeps its metadata and spec; its status is written
again.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.cluster.nodes import kubelet_registration  # noqa: E402
from infra.knowledge.units import GIB  # noqa: E402
from infra.model.capacity import host_capacity  # noqa: E402
from infra.model.resolve import resolve  # noqa: E402
from infra.planning.fit import node_objects  # noqa: E402
from infra.spec import load_environment  # noqa: E402

HOSTNAME_LABEL = "kubernetes.io/hostname"
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"  # what kubeadm labels them with
PARALLEL = 8  # Nodes registered at a time


def _milli(cores: Decimal) -> str:
    return f"{int((max(cores, Decimal(0)) * 1000).to_integral_value(rounding=ROUND_CEILING))}m"


def _bytes(value: Decimal) -> str:
    return str(int(max(value, Decimal(0)).to_integral_value(rounding=ROUND_CEILING)))


def nodes(inventory: str) -> list[dict[str, Any]]:
    view = resolve(load_environment(inventory))
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    version = f"v{view.env.cluster.kube_version}".replace("vv", "v")
    out = []
    for name, resolved in view.hosts.items():
        if resolved.machine is None:
            continue
        pool = view.env.pools[resolved.host.pool]
        one = host_capacity(view.env.cluster, pool, resolved.machine)
        extra = {k: _bytes(v) for k, v in one.hugepages.items()}
        extra.update({k: str(v) for k, v in sorted(one.gpu_resources.items())})
        capacity = {"cpu": str(one.cpus), "memory": _bytes(one.memory_gib * GIB), "pods": str(one.max_pods),
                    "ephemeral-storage": _bytes(one.ephemeral_storage), **extra}
        allocatable = {"cpu": _milli(one.allocatable_cpu), "memory": _bytes(one.allocatable_memory_gib * GIB),
                       "pods": str(one.max_pods), "ephemeral-storage": _bytes(one.allocatable_ephemeral_storage),
                       **extra}
        registration = kubelet_registration(view, name)
        out.append(_node(name, registration["node_labels"], registration["register_with_taints"], capacity,
                         allocatable, version, now))
    # The control-plane hosts outside the pools, as fit counts them: tainted, so no workload lands there.
    for control in node_objects(view):
        if control["metadata"]["name"] not in view.hosts:
            labels = {key: value for key, value in control["metadata"]["labels"].items() if key != HOSTNAME_LABEL}
            out.append(_node(control["metadata"]["name"], {**labels, CONTROL_PLANE_ROLE: ""},
                             control["spec"]["taints"], control["status"]["allocatable"],
                             control["status"]["allocatable"], version, now))
    return out


def _node(name: str, labels: dict[str, str], taints: list[dict[str, str]], capacity: dict[str, str],
          allocatable: dict[str, str], version: str, now: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {**labels, HOSTNAME_LABEL: name,
                                              "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
        "spec": {"taints": taints},
        "status": {
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "node created by tools/make_nodes.py (no kubelet)",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"kubeletVersion": version, "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


class Api:
    def __init__(self, kubeconfig: Path) -> None:
        config = _kubeconfig(kubeconfig)
        self.server = config["server"]
        self.context = ssl.create_default_context(cafile=config["certificate-authority"])
        self.context.load_cert_chain(config["client-certificate"], config["client-key"])

    def call(self, method: str, path: str, body: Any = None,
             content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method,
                                         headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


def _kubeconfig(path: Path) -> dict[str, str]:
    """The first cluster's server and CA and the first user's certificate and key (the files
    tools/cluster.sh writes: paths, not inline data)."""
    import yaml

    doc = yaml.safe_load(path.read_text())
    cluster = doc["clusters"][0]["cluster"]
    user = doc["users"][0]["user"]
    return {"server": cluster["server"], "certificate-authority": cluster["certificate-authority"],
            "client-certificate": user["client-certificate"], "client-key": user["client-key"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inventory")
    parser.add_argument("--kubeconfig", type=Path, default=ROOT / ".state/cluster/admin.kubeconfig")
    parser.add_argument("--dry-run", action="store_true", help="print the Nodes as JSON; create nothing")
    args = parser.parse_args()
    items = nodes(args.inventory)
    if args.dry_run:
        json.dump(items, sys.stdout, indent=2)
        print()
        return 0
    api = Api(args.kubeconfig)

    def register(item: dict[str, Any]) -> str | None:
        """Create one Node and set its status; the error, or None."""
        name = item["metadata"]["name"]
        code, answer = api.call("POST", "/api/v1/nodes", item)
        if code not in (201, 409):
            return f"make_nodes: {name}: create: HTTP {code}: {answer.get('message')}"
        code, answer = api.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": item["status"]},
                                "application/merge-patch+json")
        if code != 200:
            return f"make_nodes: {name}: status: HTTP {code}: {answer.get('message')}"
        ready = [c["status"] for c in answer["status"].get("conditions", []) if c["type"] == "Ready"]
        print(f"make_nodes: {name}: allocatable {answer['status']['allocatable']}, "
              f"taints {answer['spec'].get('taints', [])}, Ready={ready[0] if ready else '?'}", flush=True)
        return None

    # Nodes one after another cost ~0.2 s each here (two requests, the API server's latency): 5,000 took
    # longer than registering is given. A few at a time, as kubelets joining together would.
    with ThreadPoolExecutor(PARALLEL) as workers:
        errors = [error for error in workers.map(register, items) if error]
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0

if __name__ == "__main__":
    sys.exit(main())
