"""Every concern of the cluster layer, in the order they are declared and rendered.

Order matters on a real cluster: tenants' namespaces before the NetworkAttachmentDefinitions placed in
them; the CNI before every release whose pods need pod networking; the GPU and scheduling releases last.
Custom resources need their definitions: a release installs some (Volcano's chart its Queue, the NFS
driver's chart the snapshot CRDs); the project declares the rest (Multus' NetworkAttachmentDefinition,
which no chart brings) and, when releases are left out, all of them.
"""

from __future__ import annotations

from infra.cluster import gpu, networking, nodes, scheduling, storage, tenancy
from infra.cluster.objects import Concern
from infra.cluster.validation.validate import crd_definitions
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
    first the CustomResourceDefinitions the project must declare itself."""
    concerns = [build(view) for build in BUILDERS]
    crds = crds_to_declare(concerns, helm_releases)
    return ([Concern("crds", crds)] if crds else []) + concerns


def crds_to_declare(concerns: list[Concern], helm_releases: bool) -> list[dict[str, object]]:
    groups = {o["apiVersion"].split("/")[0] for c in concerns for o in c.objects if "/" in o["apiVersion"]}
    releases = {r.name for c in concerns for r in c.releases} if helm_releases else set()
    return [crd for crd in crd_definitions()
            if crd["spec"]["group"] in groups and CRDS_INSTALLED_BY.get(crd["spec"]["group"]) not in releases]
