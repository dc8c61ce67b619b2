"""Every concern of the cluster layer, in the order they are declared and rendered."""

from __future__ import annotations

from infra.cluster import gpu, networking, nodes, scheduling, storage, tenancy
from infra.cluster.objects import Concern
from infra.resolve import Resolved

# The CNI first: every later release runs pods that need pod networking; then storage and tenancy,
# which releases and pods rely on; the GPU and scheduling releases last.
BUILDERS = (nodes.build, networking.build, storage.build, tenancy.build, gpu.build, scheduling.build)


def build_concerns(view: Resolved) -> list[Concern]:
    """The objects, releases and files of every concern, from the same view `render` and Pulumi use."""
    return [build(view) for build in BUILDERS]
