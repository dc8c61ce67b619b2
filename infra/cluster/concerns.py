"""Every concern of the cluster layer, in the order they are declared and rendered.

Order matters on a real cluster: tenants' namespaces before the NetworkAttachmentDefinitions placed in
them; the CNI before every release whose pods need pod networking; the GPU and scheduling releases last.
Custom resources need their definitions: a release installs some (Volcano's chart its Queue, the NFS
driver's chart the snapshot CRDs); the project declares the rest (Multus' NetworkAttachmentDefinition,
which no chart brings) and, when releases are left out, all of them.
"""

from __future__ import annotations

from dataclasses import replace

from infra.cluster import gpu, networking, nodes, scheduling, storage, tenancy
from infra.cluster.objects import Concern, key
from infra.cluster.validation.validate import crd_definitions
from infra.knowledge.platform import platform
from infra.model.resolve import Resolved

BUILDERS = (nodes.build, tenancy.build, networking.build, storage.build, gpu.build, scheduling.build)

# What each concern must wait for on a real cluster. Nothing waits for the node patches: a dependency on
# a component is a dependency on each of its children, and the nodes are thousands.
AFTER = {
    "networking": ("crds", "tenancy"),  # NetworkAttachmentDefinitions: their CRD, the tenants' namespaces
    "storage": ("crds", "networking"),  # provisioner pods need pod networking
    "gpu": ("networking",),
    "scheduling": ("crds", "networking"),
}

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
