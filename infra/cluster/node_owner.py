"""Node ownership that scales: one Pulumi resource per pool keeps the pool's labels and taints on its Nodes.

A resource per Node cost the engine ~0.7 s each (a live read and a patch), so a 1,000-node preview ran
past ten minutes; and force-applying a Node's whole taint list (an atomic list in server-side apply)
reverted taints added meanwhile and handed the list to Pulumi, so a destroy stripped the GPU taint. Here:

- Preview reads nothing live: a pool's resource differs only when its inputs (its hosts' labels, its
  taints) do, so the number of resources and the preview's cost do not grow with the nodes.
- Labels: a label-only Node document per node, server-side applied under the pool's own field manager
  (`k8s-node-pools-<pool>`, forced). Label maps merge key by key: no live read, no other manager's
  label touched, and a key the pool stops setting is removed by the API server, since it was the pool's.
- Taints: the kubelet registers with the pool's taints (registerWithTaints, from the host layer). A
  registered node that lacks one of them (a taint added to the pool later) gets it by a JSON patch
  guarded by the node's resourceVersion: a concurrent change fails the patch, which is retried on the
  fresh node, so no other owner's taint is ever lost. Nothing here removes a pool's taint.
- A host that leaves the pool keeps its labels and is tainted `k8s-node-pools.io/left-pool=<pool>:
  NoSchedule` (unless another pool has already claimed it); joining a pool removes that taint.
- A host of the inventory that has not registered (out for repair, not yet joined) is listed in the
  resource's `unregistered` output and changes nothing else.
- Destroying the stack or removing a pool changes nothing on the nodes.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pulumi
import pulumi.dynamic
import yaml

from infra.cluster.nodes import POOL_LABEL
from infra.cluster.objects import LABEL_PREFIX, Obj

DYNAMIC_RESOURCE = "pulumi-python:dynamic:Resource"  # the type token of every Python dynamic resource
LEFT_POOL_TAINT = f"{LABEL_PREFIX}/left-pool"
FIELD_MANAGER_PREFIX = "k8s-node-pools-"
PARALLEL_REQUESTS = 16
GUARDED_TRIES = 8


def field_manager(pool: str) -> str:
    """The field manager that owns a pool's labels on its nodes (pool names are [a-z0-9_])."""
    return FIELD_MANAGER_PREFIX + pool.replace("_", "-")


# --------------------------------------------------------------------------- taints: pure


def _taint(t: Mapping[str, Any]) -> Obj:
    return {k: t[k] for k in ("key", "value", "effect") if t.get(k) not in (None, "")}


def taints_after(current: Iterable[Mapping[str, Any]], add: Iterable[Mapping[str, Any]],
                 remove_keys: Iterable[str] = ()) -> list[Obj] | None:
    """A node's taint list with every taint of `add` in it and none keyed `remove_keys`; None when the list
    already is so. A taint is one per key and effect (the API server's rule): one of `add` replaces a
    taint of its key and effect with another value in place; every other taint is kept as it is."""
    gone, before = set(remove_keys), [dict(t) for t in current]
    wanted = {(t["key"], t["effect"]): _taint(t) for t in add}
    after = []
    for taint in before:
        if taint.get("key") in gone:
            continue
        mine = wanted.pop((taint.get("key"), taint.get("effect")), None)
        after.append(taint if mine is None or mine.get("value") == taint.get("value") else mine)
    after += wanted.values()
    return None if after == before else after


def left_taint(pool: str) -> Obj:
    return {"key": LEFT_POOL_TAINT, "value": pool, "effect": "NoSchedule"}


# --------------------------------------------------------------------------- the API server


class NodeApi:
    """The Node endpoints of one cluster, from a kubeconfig: client certificates or a bearer token."""

    def __init__(self, kubeconfig: str, context: str = "") -> None:
        with open(os.path.expanduser(kubeconfig)) as source:
            doc = yaml.safe_load(source)
        base = os.path.dirname(os.path.abspath(os.path.expanduser(kubeconfig)))
        name = context or doc.get("current-context") or doc["contexts"][0]["name"]
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        if "exec" in user or "auth-provider" in user:
            raise ValueError(f"{kubeconfig}: user {ctx['user']} authenticates through a plugin, which the node "
                             "owner does not run; give it a client certificate or a token")
        server = urllib.parse.urlsplit(cluster["server"])
        self._host, self._port, self._prefix = server.hostname or "", server.port or 443, server.path.rstrip("/")
        self._local = threading.local()
        self._tls = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            self._tls.check_hostname = False
            self._tls.verify_mode = ssl.CERT_NONE
        elif "certificate-authority-data" in cluster:
            self._tls.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif "certificate-authority" in cluster:
            self._tls.load_verify_locations(cafile=os.path.join(base, cluster["certificate-authority"]))
        with tempfile.TemporaryDirectory() as scratch:
            cert = _file(user, "client-certificate", base, scratch)
            key = _file(user, "client-key", base, scratch)
            if cert and key:
                self._tls.load_cert_chain(cert, key)
        token = user.get("token", "")
        if not token and "tokenFile" in user:
            with open(os.path.join(base, user["tokenFile"])) as source:
                token = source.read().strip()
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        """(HTTP status, decoded JSON answer), over this thread's kept-alive connection: a TLS handshake
        per request cost more than the request itself at thousands of Nodes."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type, "Accept": "application/json", **self._headers}
        for attempt in (1, 2):
            connection = self._connection()
            try:
                connection.request(method, self._prefix + path, body=data, headers=headers)
                response = connection.getresponse()
                raw = response.read()
                break
            except (http.client.HTTPException, OSError):
                self._local.connection = None  # the server closed it: one fresh connection, then give up
                if attempt == 2:
                    raise
        try:
            return int(response.status), json.loads(raw or b"null")
        except ValueError:
            return int(response.status), {"message": raw.decode(errors="replace")}

    def _connection(self) -> http.client.HTTPSConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = http.client.HTTPSConnection(self._host, self._port, context=self._tls, timeout=60)
            self._local.connection = connection
        return connection

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        code, answer = self.request(method, path, body, content_type)
        if code >= 300:
            message = answer.get("message", answer) if isinstance(answer, dict) else answer
            raise RuntimeError(f"{method} {path}: HTTP {code}: {message}")
        return answer

    def nodes(self) -> dict[str, Obj]:
        """Every registered Node by name, listed in pages of 500."""
        found: dict[str, Obj] = {}
        token = ""
        while True:
            more = f"&continue={urllib.parse.quote(token)}" if token else ""
            page = self.call("GET", f"/api/v1/nodes?limit=500{more}")
            found.update((n["metadata"]["name"], n) for n in page["items"])
            token = page["metadata"].get("continue") or ""
            if not token:
                return found

    def apply_labels(self, name: str, labels: Mapping[str, str], manager: str) -> Obj:
        """Server-side apply a label-only Node document; the Node as the API server holds it after."""
        document = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}
        path = f"/api/v1/nodes/{urllib.parse.quote(name)}?fieldManager={manager}&force=true"
        result: Obj = self.call("PATCH", path, document, "application/apply-patch+yaml")
        return result

    def guarded_taints(self, node: Obj, change: Any, manager: str) -> Obj:
        """Set the taints `change(node)` returns (None: leave them), guarded by the node's resourceVersion;
        on a conflict, read the node again and retry. The node as it is after."""
        name = node["metadata"]["name"]
        path = f"/api/v1/nodes/{urllib.parse.quote(name)}"
        for _ in range(GUARDED_TRIES):
            taints = change(node)
            if taints is None:
                return node
            patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
                     {"op": "add", "path": "/spec/taints", "value": taints}]
            code, answer = self.request("PATCH", f"{path}?fieldManager={manager}", patch, "application/json-patch+json")
            if code < 300:
                result: Obj = answer
                return result
            if code not in (409, 422):  # 422: the test op failed, the node changed meanwhile
                raise RuntimeError(f"PATCH {path}: HTTP {code}: {answer}")
            node = self.call("GET", path)
            time.sleep(0.05)
        raise RuntimeError(f"node {name}: its taints kept changing under {GUARDED_TRIES} tries; run again")


def _file(user: Mapping[str, Any], field: str, base: str, scratch: str) -> str:
    """The path of a client certificate or key, written to `scratch` when the kubeconfig inlines it."""
    if f"{field}-data" in user:
        path = os.path.join(scratch, field)
        with open(path, "wb") as out:
            out.write(base64.b64decode(user[f"{field}-data"]))
        return path
    return os.path.join(base, user[field]) if field in user else ""


# --------------------------------------------------------------------------- one pool's reconciliation


def reconcile(api: NodeApi, pool: str, nodes: Mapping[str, Mapping[str, str]], taints: list[Obj],
              left: Iterable[str] = ()) -> dict[str, Any]:
    """Bring the pool's registered nodes to their labels and taints, taint the hosts that left it; what was
    found: how many nodes were registered, the hosts that were not, the hosts tainted as having left."""
    manager = field_manager(pool)
    registered = api.nodes()
    unregistered = sorted(name for name in nodes if name not in registered)

    def own(name: str) -> None:
        node = api.apply_labels(name, nodes[name], manager)
        api.guarded_taints(node, lambda n: taints_after(n["spec"].get("taints", []), taints, [LEFT_POOL_TAINT]),
                           manager)

    def release(name: str) -> bool:
        def change(node: Obj) -> list[Obj] | None:
            if node["metadata"].get("labels", {}).get(POOL_LABEL) != pool:
                return None  # another pool has claimed it: its own reconciliation owns its taints now
            return taints_after(node["spec"].get("taints", []), [left_taint(pool)])
        after = api.guarded_taints(registered[name], change, manager)
        return any(t.get("key") == LEFT_POOL_TAINT for t in after["spec"].get("taints", []))

    with ThreadPoolExecutor(PARALLEL_REQUESTS) as workers:
        list(workers.map(own, sorted(name for name in nodes if name in registered)))
        leaving = sorted(name for name in left if name in registered and name not in nodes)
        tainted = [name for name, done in zip(leaving, workers.map(release, leaving), strict=True) if done]
    return {"registered": len(nodes) - len(unregistered), "unregistered": unregistered, "left": tainted}


# --------------------------------------------------------------------------- the Pulumi edge


_INPUTS = ("pool", "nodes", "taints")


class NodeOwner(pulumi.dynamic.ResourceProvider):
    """The dynamic provider of PoolNodes: diff on inputs only, reconcile on create and update, nothing on delete."""

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [key for key in _INPUTS if olds.get(key) != news.get(key)]
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        outs = {**props, **self._run(props, [])}
        return pulumi.dynamic.CreateResult(id_=f"node-pool-{props['pool']}", outs=outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        left = sorted(set(olds.get("nodes") or {}) - set(news["nodes"]))
        return pulumi.dynamic.UpdateResult(outs={**news, **self._run(news, left)})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing: a destroy or a pool's removal leaves its nodes' labels and taints as they are."""

    @staticmethod
    def _run(props: Mapping[str, Any], left: list[str]) -> dict[str, Any]:
        api = NodeApi(props["kubeconfig"], props.get("context") or "")
        return reconcile(api, props["pool"], props["nodes"], list(props["taints"]), left)


class PoolNodes(pulumi.dynamic.Resource):
    """One pool's labels and taints on its nodes (see the module's docstring)."""

    registered: pulumi.Output[int]
    unregistered: pulumi.Output[list[str]]
    left: pulumi.Output[list[str]]

    def __init__(self, pool: str, nodes: Mapping[str, Mapping[str, str]], taints: list[Obj], kubeconfig: str,
                 context: str, opts: pulumi.ResourceOptions) -> None:
        props = {"pool": pool, "nodes": {name: dict(labels) for name, labels in sorted(nodes.items())},
                 "taints": taints, "kubeconfig": kubeconfig, "context": context,
                 "registered": None, "unregistered": None, "left": None}
        super().__init__(NodeOwner(), pool, props, opts)
