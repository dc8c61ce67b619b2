"""Every concern of the cluster layer, in the order they are declared and rendered.

Order matters on a real cluster, and only where something needs something else: an object waits for the
objects it names (its namespace, its kind's definition, its pods' priority class, service account and
config maps: `named_by`), a release for its namespace and, unless it is the CNI's, for pod networking
(`AFTER`). Nothing else waits, so a 1,000-node `pulumi up` does not hold a StorageClass back while
Multus rolls out on every node.
Custom resources need their definitions: a release installs some (Volcano's chart its Queue, the NFS
driver's chart the snapshot CRDs); the project declares the rest (Multus' NetworkAttachmentDefinition,
which no chart brings) and, when releases are left out, all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace

from infra.cluster import gpu, networking, nodes, scheduling, storage, tenancy
from infra.cluster.objects import Concern, Obj, key
from infra.cluster.validation.validate import crd_definitions
from infra.knowledge.platform import platform
from infra.model.resolve import Resolved

BUILDERS = (nodes.build, tenancy.build, networking.build, storage.build, gpu.build, scheduling.build)

# What each concern's Helm releases wait for on a real cluster: a release's pods need pod networking, so
# every release but the CNI's waits for the networking concern. Objects wait only for the objects they name
# (`named_by`), never for a whole concern: a StorageClass must not wait for Multus to run on every node.
# Nothing waits for the node patches: a dependency on a component is a dependency on each of its children.
AFTER = {
    "storage": ("networking",),  # provisioner pods need pod networking
    "gpu": ("networking",),
    "scheduling": ("networking",),
}

# Who a concern's objects can name, as (kind, namespace, name); a CustomResourceDefinition by "Kind.group".
Ref = tuple[str, str, str]

# API group of a CRD -> the Helm release whose chart installs it.
CRDS_INSTALLED_BY = {"scheduling.volcano.sh": "volcano", "snapshot.storage.k8s.io": "csi-driver-nfs"}


def build_concerns(view: Resolved, helm_releases: bool = True) -> list[Concern]:
    """The objects, releases and files of every concern, from the same view `render` and Pulumi use;
    first the CustomResourceDefinitions the project must declare itself. The tenants' admission policies
    are bound last, to every namespace but the system's, which only the whole set of concerns knows."""
    concerns = [build(view) for build in BUILDERS]
    exempt = system_namespaces(view, concerns)
    bindings = [tenancy.binding(policy, exempt) for policy in tenancy.policies()]
    concerns = [replace(c, objects=sorted(c.objects + bindings, key=key)) if c.name == "tenancy" else c
                for c in concerns]
    crds = crds_to_declare(concerns, helm_releases)
    return ([Concern("crds", crds)] if crds else []) + concerns


def system_namespaces(view: Resolved, concerns: list[Concern]) -> list[str]:
    """The namespaces whose pods are the cluster's own: Kubernetes' and the CNI's (platform.yml), every
    namespace a concern places a release or a component's object in, and the spec's system_namespaces.
    A tenant of the same name would confine those pods to its pools: refused."""
    cluster = view.env.cluster
    known = platform().system_namespaces
    found = {*known["kubernetes"], *known[cluster.kube_network_plugin], *cluster.system_namespaces}
    found |= {r.namespace for c in concerns for r in c.releases}
    if taken := sorted(found & set(cluster.tenants)):
        raise ValueError(f"tenants {taken} would take over namespaces where the cluster runs its own components; "
                         "rename the tenants")
    found |= {o["metadata"]["namespace"] for c in concerns for o in c.objects
              if o["metadata"].get("namespace", "") not in ("", *cluster.tenants)}
    return sorted(found)


def crds_to_declare(concerns: list[Concern], helm_releases: bool) -> list[dict[str, object]]:
    groups = {o["apiVersion"].split("/")[0] for c in concerns for o in c.objects if "/" in o["apiVersion"]}
    releases = {r.name for c in concerns for r in c.releases} if helm_releases else set()
    return [crd for crd in crd_definitions()
            if crd["spec"]["group"] in groups and CRDS_INSTALLED_BY.get(crd["spec"]["group"]) not in releases]


@functools.cache
def custom_groups() -> frozenset[str]:
    """API groups served by CustomResourceDefinitions (Volcano, Multus, snapshots), not by the API server."""
    return frozenset(crd["spec"]["group"] for crd in crd_definitions())


def is_custom(o: Obj) -> bool:
    return "/" in o["apiVersion"] and o["apiVersion"].split("/")[0] in custom_groups()


def ref(o: Obj) -> Ref:
    """The name other objects know `o` by: a CustomResourceDefinition by the kind and group it serves."""
    if o["kind"] == "CustomResourceDefinition":
        return ("CustomResourceDefinition", "", f"{o['spec']['names']['kind']}.{o['spec']['group']}")
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def definition_of(o: Obj) -> Ref:
    """The CustomResourceDefinition that serves a custom resource's kind."""
    return ("CustomResourceDefinition", "", f"{o['kind']}.{o['apiVersion'].split('/')[0]}")


def named_by(o: Obj) -> list[Ref]:
    """What `o` names and cannot work without: the Namespace it lives in, the CustomResourceDefinition of its
    kind, and for a pod template its PriorityClass, ServiceAccount and ConfigMap volumes (a pod naming a
    missing one is refused, and its controller backs off). The stack makes `o` wait for those it declares."""
    namespace = o["metadata"].get("namespace", "")
    found: list[Ref] = [("Namespace", "", namespace)] if namespace else []
    if is_custom(o):
        found.append(definition_of(o))
    for pod in _pod_specs(o):
        if pod.get("priorityClassName"):
            found.append(("PriorityClass", "", pod["priorityClassName"]))
        found.append(("ServiceAccount", namespace, pod.get("serviceAccountName") or "default"))
        found += [("ConfigMap", namespace, v["configMap"]["name"]) for v in pod.get("volumes", []) if "configMap" in v]
    return found


def _pod_specs(o: Obj) -> Iterator[Obj]:
    spec = o.get("spec") or {}
    if o["kind"] == "Pod":
        yield spec
    elif o["kind"] == "CronJob":
        yield spec["jobTemplate"]["spec"]["template"]["spec"]
    elif isinstance(spec.get("template"), dict) and "spec" in spec["template"]:
        yield spec["template"]["spec"]
