"""The container runtime every node runs: a containerd release containerd recommends for the cluster's
Kubernetes minor (infra/knowledge/containerd.yml, from containerd's RELEASES.md)."""

from __future__ import annotations

from infra.checks.base import Report, rule
from infra.knowledge.containerd import containerd_support
from infra.model.resolve import Resolved

CONTAINERD_VERSION = rule(
    "CONTAINERD-VERSION", "error",
    "A containerd release below what containerd recommends for kube_version (Debian 12's own 1.6.20 is, for "
    "every supported minor): an end-of-life line or a patch without the CRI fixes that Kubernetes minor relies on.",
    "Set containerd_version in group_vars/all.yml to a release the table lists for kube_version (the host layer "
    "installs it from the containerd.io repository).",
)
CONTAINERD_UNLISTED = rule(
    "CONTAINERD-UNLISTED", "warning",
    "containerd's table names no release for this Kubernetes minor yet, so containerd_version is not checked.",
    "Check containerd's RELEASES.md (Kubernetes Support) and add the row to infra/knowledge/containerd.yml.",
)


def check(view: Resolved, report: Report) -> None:
    if any(finding.code == "KUBE-VERSION" for finding in report.findings):
        return  # a minor the project does not support: that finding says it
    cluster = view.env.cluster
    minor = ".".join(cluster.kube_version.split(".")[:2])
    support = containerd_support()
    row = support.recommended(minor)
    where = view.env.cluster_source("containerd_version")
    if row is None:
        report.add(CONTAINERD_UNLISTED, where, "containerd_version",
                   f"{cluster.containerd_version} for Kubernetes {minor}: containerd's table ({support.source}) "
                   "has no row for it")
    elif (why := support.refusal(minor, cluster.containerd_version)) is not None:
        report.add(CONTAINERD_VERSION, where, "containerd_version",
                   f"{why} ({support.source}); recommended: {', '.join(m + '+' for m in row)}")
