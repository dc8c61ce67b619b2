"""Address arithmetic of the cluster's networks: pure functions shared by the checks and the plan."""

from __future__ import annotations

from infra.spec.models import ClusterVars


def usable_addresses(prefix: int) -> int:
    """IPv4 addresses of a subnet minus network and broadcast."""
    return max((1 << (32 - prefix)) - 2, 0)


def node_blocks(cluster: ClusterVars) -> int:
    """Per-node Pod CIDR blocks the Pod CIDR holds (0 when the per-node prefix is wider than the CIDR)."""
    node_prefix, pod_prefix = cluster.kube_network_node_prefix, cluster.kube_pods_subnet.prefixlen
    return 1 << (node_prefix - pod_prefix) if node_prefix >= pod_prefix else 0


def service_capacity(cluster: ClusterVars) -> int:
    """Services the Service CIDR holds: its usable addresses less the `kubernetes` Service's own."""
    return usable_addresses(cluster.kube_service_addresses.prefixlen) - 1
