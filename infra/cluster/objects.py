"""The shapes every concern returns: plain Kubernetes objects, pinned Helm releases, extra files.

Objects are plain dicts exactly as `kubectl apply` would take them (camelCase, apiVersion/kind/
metadata first), so they can be validated against the OpenAPI schemas, rendered as YAML and declared
by Pulumi without a second model. Helm releases carry only what the cluster decides (namespace and
values); chart, repository and version come from infra/knowledge/versions.yml, pinned in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.knowledge.versions import Component, versions

Obj = dict[str, Any]

PROJECT = "k8s-node-pools"
LABEL_PREFIX = "k8s-node-pools.io"
MANAGED_BY = {"app.kubernetes.io/managed-by": PROJECT}
SYSTEM_NAMESPACE = "k8s-node-pools-system"
HELM_TIMEOUT_SECONDS = 300  # Helm's --timeout default, which pulumi-kubernetes' Release keeps


def obj(api_version: str, kind: str, name: str, namespace: str | None = None,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **fields: Any) -> Obj:
    """A Kubernetes object with the project's managed-by label; `fields` are its top-level fields (spec, data...)."""
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = {**MANAGED_BY, **(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


@dataclass(frozen=True)
class HelmRelease:
    """A Helm release of a pinned chart: the component names its entry in versions.yml."""

    name: str
    namespace: str
    component: str
    values: Obj
    timeout: int = HELM_TIMEOUT_SECONDS  # seconds Helm waits for its resources; node agents': rollout.py

    @property
    def pinned(self) -> Component:
        return versions()[self.component]

    def as_dict(self) -> Obj:
        """What `render` writes: the release with its chart, repository and version spelled out."""
        chart = self.pinned.chart
        assert chart is not None, f"{self.component} has no Helm chart in versions.yml"
        return {"name": self.name, "namespace": self.namespace, "chart": chart.name,
                "repository": chart.repository, "version": chart.version, "timeout": self.timeout,
                "values": self.values}


@dataclass(frozen=True)
class Concern:
    """What one concern adds to the cluster."""

    name: str
    objects: list[Obj] = field(default_factory=list)
    releases: list[HelmRelease] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # extra rendered files, e.g. the mig-parted config


def key(o: Obj) -> tuple[str, str, str, str]:
    """A stable identity and sort order for objects: (apiVersion, kind, namespace, name)."""
    metadata = o["metadata"]
    return (o["apiVersion"], o["kind"], metadata.get("namespace", ""), metadata["name"])
