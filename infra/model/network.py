"""Address arithmetic of the cluster's networks and RDMA fabrics: pure functions shared by the checks, the plan
and the cluster layer."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from infra.spec import Pool
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


def slot_range(fabric: ipaddress.IPv4Network, host_prefix: int, slot: int) -> tuple[int, int]:
    """The first and last address (as integers) of slot `slot` of a fabric cut into /host_prefix slices.

    Never the network or broadcast address, nor .1, which host-local claims as the gateway: slot 0 and
    the fabric's last slot are that much shorter. Raises ValueError for a slot outside the fabric.
    """
    count = fabric_slots(fabric, host_prefix)
    if not 0 <= slot < count:
        raise ValueError(f"slot {slot} is outside RDMA fabric {fabric}, which holds slots 0-{count - 1} "
                         f"of /{host_prefix}")
    size = 1 << (fabric.max_prefixlen - host_prefix)
    start = int(fabric.network_address) + slot * size
    first = max(start, int(fabric.network_address) + 2)
    last = min(start + size - 1, int(fabric.broadcast_address) - 1)
    if first > last:
        raise ValueError(f"slot {slot} of RDMA fabric {fabric} in /{host_prefix} slices holds no address")
    return first, last


def fabric_slots(fabric: ipaddress.IPv4Network, host_prefix: int) -> int:
    """How many /host_prefix slices a fabric holds (0 when host_prefix is wider than the fabric)."""
    return 1 << (host_prefix - fabric.prefixlen) if host_prefix >= fabric.prefixlen else 0


def smallest_slice(fabric: ipaddress.IPv4Network, host_prefix: int) -> int:
    """The fewest addresses any slot of the fabric holds, whoever holds the slots: what a host can rely on."""
    return min(last - first + 1 for slot in {0, fabric_slots(fabric, host_prefix) - 1}
               for first, last in [slot_range(fabric, host_prefix, slot)])


def rdma_fabrics(pools: Iterable[Pool]) -> dict[ipaddress.IPv4Network, list[Pool]]:
    """The RDMA pools by fabric (their rdma_network's CIDR), fabrics and pools in order."""
    fabrics: dict[ipaddress.IPv4Network, list[Pool]] = {}
    for pool in sorted(pools, key=lambda p: p.name):
        if pool.vars.rdma_network is not None:
            fabrics.setdefault(pool.vars.rdma_network.cidr, []).append(pool)
    return dict(sorted(fabrics.items()))


def missing_slots(pools: Iterable[Pool]) -> dict[str, dict[str, int]]:
    """pool -> {host: slot} for the RDMA hosts that have no slot: the lowest slots no pool on their fabric
    gives (a departed host's reserved slot included), in pool then host order, as far as the fabric has
    free slots. What `check` suggests and what `propose` gives the hosts it adds."""
    given: dict[str, dict[str, int]] = {}
    for fabric, members in rdma_fabrics(pools).items():
        assert members[0].vars.rdma_network is not None
        taken = {slot for pool in members for slot in pool.vars.rdma_slots.values()}
        free = (slot for slot in range(fabric_slots(fabric, members[0].vars.rdma_network.host_prefix))
                if slot not in taken)
        for pool in members:
            missing = sorted(host.name for host in pool.hosts if host.name not in pool.vars.rdma_slots)
            given[pool.name] = dict(zip(missing, free, strict=False))
    return given
