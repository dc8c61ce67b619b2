"""What the live cluster holds against what was declared: each object read back as rendered, what of the
project is left after a destroy (and whether that is exactly what a destroy keeps), and how many objects a
stack manages.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import InvalidOperation
from typing import Any

from infra.cluster.node_owner import DYNAMIC_RESOURCE
from infra.cluster.nodes import POOL_LABEL
from infra.cluster.objects import MANAGED_BY, Obj
from infra.cluster.retention import retained
from infra.knowledge.units import parse_quantity
from infra.live.kubeapi import ApiError, Kube


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
            left.add(described({**item, "kind": kind}))
    for o in declared:
        if o["kind"] != "Node":
            try:
                present = kube.exists(kube.path(o))
            except (ApiError, KeyError):  # its type is gone with its CRD
                present = False
            if present:
                left.add(described(o))
    return sorted(left)


def destroy_differences(kube: Kube, declared: list[Obj]) -> list[str]:
    """What a destroy got wrong: each project object left that it must remove ("left: <kind> <ns/name>"),
    and each object it must keep (infra/cluster/retention.py) that is gone ("lost: ...")."""
    kept = {described(o) for o in declared if retained(o)}
    left = set(project_objects_left(kube, declared))
    return [f"left: {name}" for name in sorted(left - kept)] + [f"lost: {name}" for name in sorted(kept - left)]


def described(o: Obj) -> str:
    """`<kind> <namespace>/<name>`, or `<kind> <name>` for a cluster-scoped object."""
    metadata = o["metadata"]
    return f"{o['kind']} {metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else \
        f"{o['kind']} {metadata['name']}"


def pulumi_resource_count(resources: list[dict[str, Any]]) -> int:
    """Resources the stack manages on the cluster: Kubernetes objects and one node owner per pool (the
    providers and components left out)."""
    return sum(1 for r in resources if (r["type"].startswith("kubernetes:") or r["type"] == DYNAMIC_RESOURCE)
               and not r.get("external"))


def managed_count(declared: list[Obj]) -> int:
    """What pulumi_resource_count finds once `declared` is applied: every object but the Nodes, and one
    resource per pool for those."""
    nodes = [o for o in declared if o["kind"] == "Node"]
    return len(declared) - len(nodes) + len({o["metadata"]["labels"][POOL_LABEL] for o in nodes})
