"""The last check: the cluster layer can build every object from the spec.

The concern builders (infra/cluster/) refuse a few specs the rules above cannot see without repeating
the builders' logic: an RDMA pool whose hosts' slices pass one ConfigMap's 1 MiB, local disks mounted under
different folders, a tenant named like a system namespace or a queue Volcano creates itself, Calico
without kube-proxy. Building here, once every other rule passed, makes `check` refuse exactly what
`render` and `pulumi up` would, before anything is touched.
"""

from __future__ import annotations

from infra.checks.base import Report, rule
from infra.model.resolve import Resolved

CLUSTER_BUILD = rule(
    "CLUSTER-BUILD", "error",
    "A spec the other rules accept but the cluster layer cannot turn into objects (an RDMA pool too big for "
    "one ConfigMap, local disks under different folders, a tenant named like a system namespace or a Volcano "
    "queue, Calico without kube-proxy): `render` and `pulumi up` would stop.",
    "Change the spec as the finding says.",
)


def check(view: Resolved, report: Report) -> None:
    if any(finding.severity == "error" for finding in report.findings):
        return  # the builders assume a spec without errors
    from infra.cluster.concerns import build_concerns  # heavy (schemas, chart facts): only when it can run

    try:
        build_concerns(view)
    except ValueError as error:
        report.add(CLUSTER_BUILD, str(view.env.path), "cluster layer", str(error))
