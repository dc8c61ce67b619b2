"""Address planning: Pod, Service and every declared network apart; enough room for nodes, pods, Services."""

from __future__ import annotations

import ipaddress
import itertools

from infra.checks.base import Report, rule
from infra.knowledge.platform import platform
from infra.model.network import (
    fabric_slots,
    missing_slots,
    node_blocks,
    rdma_fabrics,
    service_capacity,
    usable_addresses,
)
from infra.model.resolve import Resolved
from infra.spec import Pool

NET_OVERLAP = rule(
    "NET-OVERLAP", "error",
    "Pod, Service, RDMA and site networks that overlap: traffic to the overlapped range is routed into "
    "the cluster (or out of it) and silently lost.",
    "Move one of the two networks to a free range.",
)
NET_POD_CIDR = rule(
    "NET-POD-CIDR", "error",
    "A Pod CIDR with fewer per-node blocks than nodes: the extra nodes never get a Pod CIDR and stay NotReady.",
    "Widen kube_pods_subnet (smaller prefix) or lengthen kube_network_node_prefix.",
)
NET_POD_CIDR_HEADROOM = rule(
    "NET-POD-CIDR-HEADROOM", "warning",
    "A Pod CIDR more than 80% used by today's nodes: the next rack will not fit, and the Pod CIDR "
    "cannot be changed on a running cluster.",
    "Widen kube_pods_subnet now, while the cluster is being planned.",
)
NET_MAX_PODS = rule(
    "NET-MAX-PODS", "error",
    "kubelet_max_pods above the addresses of one node's Pod CIDR: pods past the limit fail with "
    "'no IP addresses available'.",
    "Lower kubelet_max_pods to at most 2^(32-prefix)-2, or shorten kube_network_node_prefix.",
)
NET_SERVICE_CIDR = rule(
    "NET-SERVICE-CIDR", "error",
    "A Service CIDR wider than Kubernetes accepts (IPv4 /12): kube-apiserver refuses to start.",
    "Use a kube_service_addresses prefix of /12 or longer.",
)
NET_SERVICE_CAPACITY = rule(
    "NET-SERVICE-CAPACITY", "error",
    "A Service CIDR too small for the planned Services: creation fails once it is exhausted.",
    "Widen kube_service_addresses or lower planned_services.",
)
NET_HOST_ADDRESS = rule(
    "NET-HOST-ADDRESS", "error",
    "A host address inside the Pod or Service CIDR: traffic to the host is routed to pods or Services "
    "instead, and the node cannot be reached once the CNI is up.",
    "Move the Pod or Service CIDR off the machine network, or fix the host's ansible_host.",
)
NET_HOST_DUPLICATE = rule(
    "NET-HOST-DUPLICATE", "error",
    "Two hosts with one address: Ansible configures one machine twice and the other never, and two nodes "
    "claim one InternalIP.",
    "Give every host its own ansible_host.",
)

NET_RDMA_SLICE = rule(
    "NET-RDMA-SLICE", "error",
    "RDMA host slices that cannot be cut from the fabric: a host_prefix wider than the fabric's CIDR, or "
    "pools sharing a fabric with different slice sizes, whose slices would overlap.",
    "Set rdma_network.host_prefix to at least the fabric's prefix, and to one value on every pool of a fabric.",
)
NET_RDMA_SLOT = rule(
    "NET-RDMA-SLOT", "error",
    "An RDMA host without a slot, with a slot outside its fabric, or sharing a slot with another host: "
    "its pods get no address on the fabric, or the same addresses as another host's.",
    "Give each RDMA host its own slot in its pool's rdma_slots, below the fabric's slot count; a slot, "
    "once given, never changes.",
)


def check(view: Resolved, report: Report) -> None:
    env = view.env
    cluster = env.cluster
    networks = [
        ("kube_pods_subnet", cluster.kube_pods_subnet, env.cluster_source("kube_pods_subnet")),
        ("kube_service_addresses", cluster.kube_service_addresses, env.cluster_source("kube_service_addresses")),
    ]
    networks += [
        (f"reserved_networks.{name}", cidr, env.cluster_source("reserved_networks"))
        for name, cidr in cluster.reserved_networks.items()
    ]
    networks += [
        (f"{pool.name}: rdma_network.cidr", pool.vars.rdma_network.cidr, pool.file_of("rdma_network"))
        for pool in env.pools.values()
        if pool.vars.rdma_network
    ]
    for (name_a, net_a, _), (name_b, net_b, file_b) in itertools.combinations(networks, 2):
        both_rdma = "rdma_network" in name_a and "rdma_network" in name_b
        if net_a.overlaps(net_b) and not (both_rdma and net_a == net_b):  # pools may share one RDMA fabric
            report.add(NET_OVERLAP, file_b, name_b.split(": ")[-1], f"{name_b} {net_b} overlaps {name_a} {net_a}")

    pods_file = env.cluster_source("kube_pods_subnet")
    node_prefix = cluster.kube_network_node_prefix
    nodes = len(env.nodes)  # pool hosts and control-plane hosts: every kubelet needs a Pod CIDR block
    blocks = node_blocks(cluster)
    if not blocks:
        report.add(NET_POD_CIDR, pods_file, "kube_network_node_prefix",
                   f"per-node /{node_prefix} is wider than the Pod CIDR {cluster.kube_pods_subnet} itself")
    elif nodes > blocks:
        report.add(
            NET_POD_CIDR, pods_file, "kube_pods_subnet",
            f"{cluster.kube_pods_subnet} holds {blocks} per-node /{node_prefix} blocks for {nodes} nodes",
        )
    elif nodes > 0.8 * blocks:
        report.add(
            NET_POD_CIDR_HEADROOM, pods_file, "kube_pods_subnet",
            f"{nodes} of {blocks} per-node /{node_prefix} blocks used ({100 * nodes / blocks:.0f}%)",
        )

    per_node = usable_addresses(node_prefix)
    if cluster.kubelet_max_pods > per_node:
        report.add(NET_MAX_PODS, env.cluster_source("kubelet_max_pods"), "kubelet_max_pods",
                   f"{cluster.kubelet_max_pods} pods per node, but a /{node_prefix} holds {per_node} addresses")
    for pool in env.pools.values():
        if pool.vars.kubelet_max_pods and pool.vars.kubelet_max_pods > per_node:
            report.at_pool(NET_MAX_PODS, pool, "kubelet_max_pods",
                       f"pool {pool.name}: {pool.vars.kubelet_max_pods} pods per node, "
                       f"but a /{node_prefix} holds {per_node} addresses")

    services = cluster.kube_service_addresses
    services_file = env.cluster_source("kube_service_addresses")
    widest = platform().service_cidr_min_prefix_ipv4
    if services.prefixlen < widest:
        report.add(NET_SERVICE_CIDR, services_file, "kube_service_addresses",
                   f"/{services.prefixlen} is wider than the /{widest} Kubernetes accepts")
    capacity = service_capacity(cluster)
    if cluster.planned_services > capacity:
        report.add(NET_SERVICE_CAPACITY, services_file, "kube_service_addresses",
                   f"{services} holds {capacity} Services; {cluster.planned_services} are planned")
    _host_addresses(view, report)
    _rdma_slots(view, report)


def _host_addresses(view: Resolved, report: Report) -> None:
    cluster = view.env.cluster
    inside = {"kube_pods_subnet": cluster.kube_pods_subnet, "kube_service_addresses": cluster.kube_service_addresses}
    seen: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, str] = {}
    for host in view.env.nodes:
        try:
            address = ipaddress.ip_address(host.address or "")
        except ValueError:
            continue  # no address, or a DNS name: nothing to compare
        field = f"{host.name}.ansible_host"
        for name, network in inside.items():
            if address in network:
                report.add(NET_HOST_ADDRESS, host.source("ansible_host"), field,
                           f"host {host.name} at {address} is inside {name} {network}")
        if address in seen:
            report.add(NET_HOST_DUPLICATE, host.source("ansible_host"), field,
                       f"hosts {seen[address]} and {host.name} both have address {address}")
        seen.setdefault(address, host.name)


def _rdma_slots(view: Resolved, report: Report) -> None:
    """Every RDMA host holds its own slot of its fabric; missing slots get the lowest free ones suggested."""
    for fabric, pools in rdma_fabrics(view.env.pools.values()).items():
        prefix = _slice_prefix(fabric, pools, report)
        if prefix is None:
            continue
        count = fabric_slots(fabric, prefix)
        holders: dict[int, str] = {}
        for pool in pools:
            for host, slot in sorted(pool.vars.rdma_slots.items(), key=lambda item: item[1]):
                if slot >= count:
                    report.at_pool(NET_RDMA_SLOT, pool, f"rdma_slots.{host}",
                                   f"pool {pool.name}: slot {slot} of host {host} is outside RDMA fabric {fabric}, "
                                   f"whose /{prefix} slices are slots 0-{count - 1}")
                elif slot in holders:
                    report.at_pool(NET_RDMA_SLOT, pool, f"rdma_slots.{host}",
                                   f"pool {pool.name}: slot {slot} of RDMA fabric {fabric} is given to {holders[slot]} "
                                   f"and to host {host}: both would hand out the same addresses",
                                   "Keep the slot for the host that holds it now and give the other a free one.")
                else:
                    holders[slot] = f"host {host} (pool {pool.name})"
        suggested = missing_slots(pools)
        for pool in pools:
            missing = sorted(host.name for host in pool.hosts if host.name not in pool.vars.rdma_slots)
            if not missing:
                continue
            given = suggested[pool.name]
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            fix = ("Add to rdma_slots of pool " + pool.name + ", the lowest free slots: {"
                   + ", ".join(f"{host}: {slot}" for host, slot in given.items()) + "}")
            if len(given) < len(missing):
                fix += (f"; fabric {fabric} has no slot left for {len(missing) - len(given)} more host(s): "
                        "widen rdma_network.cidr (existing hosts keep their slots) or lengthen host_prefix")
            report.at_pool(NET_RDMA_SLOT, pool, "rdma_slots",
                           f"pool {pool.name}: hosts {shown} have no slot on RDMA fabric {fabric}", fix)


def _slice_prefix(fabric: ipaddress.IPv4Network, pools: list[Pool], report: Report) -> int | None:
    """The fabric's slice size, when every pool on it can cut the same slices; else report and None."""
    prefixes: dict[int, str] = {}
    for pool in pools:
        assert pool.vars.rdma_network is not None
        prefix = pool.vars.rdma_network.host_prefix
        if prefix < fabric.prefixlen:
            report.at_pool(NET_RDMA_SLICE, pool, "rdma_network.host_prefix",
                           f"pool {pool.name}: /{prefix} host slices are wider than its RDMA fabric {fabric}")
        prefixes.setdefault(prefix, pool.name)
    if len(prefixes) > 1:
        (prefix_a, pool_a), (prefix_b, pool_b) = sorted(prefixes.items())[:2]
        report.at_pool(NET_RDMA_SLICE, next(p for p in pools if p.name == pool_b), "rdma_network.host_prefix",
                       f"pools {pool_a} and {pool_b} share RDMA fabric {fabric} with /{prefix_a} and /{prefix_b} "
                       "slices: their slices would overlap")
        return None
    (prefix,) = prefixes
    return prefix if prefix >= fabric.prefixlen else None
