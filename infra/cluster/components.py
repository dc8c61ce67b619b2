"""The Pulumi edge of the cluster layer: one ComponentResource per concern over the pure objects, all
declared through one explicit provider from the stack's settings (`declare_cluster`).

A component declares each plain object as the Kubernetes resource of its apiVersion and kind (the type
token the provider knows, `kubernetes:<group>/<version>:<Kind>`), its Helm releases as pinned
`helm.v3.Release`s, and parents everything to itself. The objects are the ones `render` writes, so the
two cannot disagree. What users' data lives in (tenants' namespaces, CRDs, storage classes) is kept
on destroy and on removal, by Pulumi for the project's objects and by Helm, through a post-renderer, for
the CRDs a chart brings (infra/cluster/retention.py). Nodes are neither created nor read at preview:
one resource per pool keeps the pool's labels and taints on its nodes (infra/cluster/node_owner.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from infra.cluster.concerns import AFTER, Ref, build_concerns, definition_of, is_custom, named_by, ref
from infra.cluster.node_owner import PoolNodes
from infra.cluster.nodes import POOL_LABEL
from infra.cluster.objects import Concern, HelmRelease, Obj
from infra.cluster.retention import POST_RENDERER, retained
from infra.model.resolve import resolve
from infra.spec import Environment

TYPE_PREFIX = "k8s-node-pools:cluster"
COMPONENT_TYPES = {
    "nodes": "NodePools", "tenancy": "Tenancy", "gpu": "GpuSharing", "scheduling": "Scheduling",
    "networking": "Networking", "storage": "Storage", "crds": "CustomResourceDefinitions",
}


def type_token(api_version: str, kind: str) -> str:
    """The provider's type token of a kind: core/v1 for the legacy group "v1", group/version otherwise."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def resource_name(o: Obj) -> str:
    """A Pulumi resource name unique per type: [namespace/]name."""
    metadata = o["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else str(metadata["name"])


class KubernetesObject(pulumi.CustomResource):
    """Any Kubernetes object, given as the plain dict `kubectl apply` would take."""

    def __init__(self, o: Obj, opts: pulumi.ResourceOptions) -> None:
        super().__init__(type_token(o["apiVersion"], o["kind"]), resource_name(o), dict(o), opts)


@dataclass(frozen=True, kw_only=True)
class ConcernArgs:
    """What a concern component declares.

    concern        the objects, releases and files of one concern (infra/cluster/<concern>.py)
    provider       the stack's explicit Kubernetes provider; never the ambient default
    helm_releases  False leaves the Helm releases out (no chart repository reachable, e.g. a test cluster)
    depends_on     what the releases wait for besides their namespace: the components of the concerns in AFTER
    declared       the objects earlier concerns declared, by the name others know them by (concerns.ref):
                   an object waits for those it names (concerns.named_by), and for nothing else
    kubeconfig     the cluster's kubeconfig and context, for what the provider does not declare (node_owner.py)
    context
    """

    concern: Concern
    provider: pulumi.ProviderResource
    helm_releases: bool = True
    depends_on: tuple[pulumi.Resource, ...] = ()
    declared: Mapping[Ref, pulumi.Resource] = field(default_factory=dict)
    kubeconfig: str = ""
    context: str = ""


# What other objects name comes first within a concern: namespaces and definitions, then what pods name.
_FIRST = {"Namespace": 0, "CustomResourceDefinition": 0, "PriorityClass": 1, "ServiceAccount": 1, "ConfigMap": 1}


class ConcernComponent(pulumi.ComponentResource):
    """One concern of the cluster: its objects, node patches and Helm releases, parented here."""

    objects: dict[str, pulumi.Resource]
    releases: dict[str, pulumi.Resource]
    declared: dict[Ref, pulumi.Resource]

    def __init__(self, name: str, args: ConcernArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:{COMPONENT_TYPES[args.concern.name]}", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        nodes = [o for o in args.concern.objects if o["kind"] == "Node"]
        builtin = sorted((o for o in args.concern.objects if not is_custom(o) and o["kind"] != "Node"),
                         key=lambda o: _FIRST.get(o["kind"], 2))
        custom = [o for o in args.concern.objects if is_custom(o)]
        self.objects = {}
        self.declared = dict(args.declared)
        for pool, members in _by_pool(nodes).items():
            self.objects[f"NodePool/{pool}"] = PoolNodes(
                pool, {o["metadata"]["name"]: o["metadata"]["labels"] for o in members}, members[0]["spec"]["taints"],
                args.kubeconfig, args.context, pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)))
        for o in builtin:
            self._declare(o, child)
        self.releases = {}
        if args.helm_releases:
            for release in args.concern.releases:
                namespace = [self.declared[r] for r in [("Namespace", "", release.namespace)] if r in self.declared]
                self.releases[release.name] = _release(release, pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[*args.depends_on, *namespace])))
        # A custom resource whose definition the stack does not declare waits for the concern's releases,
        # which install it (Volcano's chart its Queue).
        for o in custom:
            by_release = definition_of(o) not in self.declared
            self._declare(o, pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=list(self.releases.values()))) if by_release else child)
        self.register_outputs({"objects": len(self.objects), "releases": sorted(self.releases)})

    def _declare(self, o: Obj, opts: pulumi.ResourceOptions) -> None:
        """`o`, after the objects it names that the stack declares."""
        needs = pulumi.ResourceOptions(depends_on=[self.declared[r] for r in named_by(o) if r in self.declared])
        resource = KubernetesObject(o, _kept(o, pulumi.ResourceOptions.merge(opts, needs)))
        self.objects[f"{o['kind']}/{resource_name(o)}"] = resource
        self.declared[ref(o)] = resource


def _kept(o: Obj, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """`opts`, plus retain_on_delete for what a destroy or a removal must leave (infra/cluster/retention.py)."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True)) if retained(o) else opts


def _by_pool(nodes: list[Obj]) -> dict[str, list[Obj]]:
    """The Node documents of `nodes` by the pool their pool label names; one taint list per pool."""
    pools: dict[str, list[Obj]] = {}
    for o in nodes:
        pools.setdefault(o["metadata"]["labels"][POOL_LABEL], []).append(o)
    for pool, members in pools.items():
        if any(o["spec"]["taints"] != members[0]["spec"]["taints"] for o in members):
            raise ValueError(f"the nodes of pool {pool} were built with different taints")
    return dict(sorted(pools.items()))


def _release(release: HelmRelease, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    chart = release.pinned.chart
    assert chart is not None
    return k8s.helm.v3.Release(
        release.name, name=release.name, chart=chart.name, version=chart.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
        namespace=release.namespace, values=release.values, create_namespace=False, timeout=release.timeout,
        postrender=POST_RENDERER, opts=opts,
    )


@dataclass(frozen=True)
class ClusterSettings:
    """How the stack reaches its cluster (Pulumi.<stack>.yaml, project namespace).

    kubeconfig     path of the cluster's kubeconfig file (`~` expanded; relative to the project folder)
    context        the kubeconfig context; "" for its current context
    helm_releases  false leaves the Helm releases out (no chart repository reachable, e.g. a test cluster)
    """

    kubeconfig: str
    context: str = ""
    helm_releases: bool = True


def declare_cluster(env: Environment, settings: ClusterSettings) -> dict[str, ConcernComponent]:
    """One component per concern, all through one explicit provider."""
    provider = k8s.Provider("cluster", kubeconfig=os.path.expanduser(settings.kubeconfig),
                            context=settings.context or None, enable_server_side_apply=True)
    components: dict[str, ConcernComponent] = {}
    declared: Mapping[Ref, pulumi.Resource] = {}
    for concern in build_concerns(resolve(env), settings.helm_releases):
        components[concern.name] = ConcernComponent(concern.name, ConcernArgs(
            concern=concern, provider=provider, helm_releases=settings.helm_releases,
            kubeconfig=os.path.abspath(os.path.expanduser(settings.kubeconfig)), context=settings.context,
            depends_on=tuple(components[name] for name in AFTER.get(concern.name, ()) if name in components),
            declared=declared))
        declared = components[concern.name].declared
    pulumi.export("cluster", {name: {"objects": len(c.objects), "releases": sorted(c.releases)}
                              for name, c in components.items()})
    return components
