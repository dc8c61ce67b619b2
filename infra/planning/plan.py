"""The capacity and cost plan: what each pool gives the scheduler and what it costs, as data and as a table."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from infra.knowledge.gpus import gpu_models
from infra.knowledge.units import format_gib
from infra.model.capacity import combined, pool_capacity
from infra.model.conntrack import conntrack
from infra.model.kubelet import kubelet_settings
from infra.model.mig import memory_fraction
from infra.model.network import node_blocks, service_capacity, usable_addresses
from infra.model.resolve import Resolved, resolve
from infra.spec import Environment, Pool
from infra.spec.models import Machine


def _number(value: Decimal, places: int = 1) -> float | int:
    rounded = round(float(value), places)
    return int(rounded) if rounded == int(rounded) else rounded


def _sharing(pool: Pool) -> str:
    sharing = pool.vars.sharing
    if not pool.vars.is_gpu:
        return ""
    if sharing.mode == "mig":
        return f"mig {sharing.mig_config}"
    if sharing.shared:
        return f"{sharing.mode} x{sharing.replicas}"
    return "exclusive"


def _gpu_memory_allocated(pool: Pool, model: str | None) -> float | None:
    """Share of the cards' memory that the sharing layout hands out (MIG leaves slices unused)."""
    if model is None or model not in gpu_models() or not pool.vars.is_gpu:
        return None
    sharing = pool.vars.sharing
    if sharing.mode == "mig":
        if gpu_models()[model].mig is None:
            return None
        return round(100 * memory_fraction(model, sharing.mig_devices), 1)
    return 100.0


def _kubelet(view: Resolved, pool: Pool, machine: Machine) -> dict[str, Any]:
    """The kubelet settings the pool's hosts run with (what the host layer writes), as plain data."""
    kubelet = kubelet_settings(view.env.cluster, pool.vars, machine)
    table = conntrack(view.env.cluster, pool.vars, machine.cpus)
    return {
        "max_pods": kubelet.max_pods,
        "cpu_manager_policy": kubelet.cpu_manager_policy,
        "reserved_cpus": _number(kubelet.reserved_cpu),
        "reserved_system_cpus": pool.vars.kubelet_reserved_system_cpus,
        "topology_manager_policy": kubelet.topology_manager_policy,
        "memory_manager_policy": kubelet.memory_manager_policy,
        "reserved_memory": [
            {"numa_node": node, "memory_bytes": int(amount)} for node, amount in kubelet.reserved_memory
        ],
        "eviction_hard": kubelet.eviction_hard,
        "conntrack_max": table.max,
        "conntrack_buckets": table.buckets,
        "conntrack_set_by": table.set_by,
    }


def build_plan(env: Environment) -> dict[str, Any]:
    """The plan as plain data (the JSON output); figures per pool and for the whole cluster."""
    cluster = env.cluster
    view = resolve(env)
    pools = []
    capacities = []
    for pool in env.pools.values():
        capacity = pool_capacity(view, pool)
        capacities.append(capacity)
        resolved = view.of_pool(pool)
        machine = next((r.machine for r in resolved if r.machine is not None), None)
        models = view.gpu_models(pool)
        gpu_model = models[0] if len(models) == 1 else None
        pools.append({
            "name": pool.name,
            "kind": pool.vars.pool_kind,
            "machine": pool.vars.machine,
            "machines": sorted({r.machine_name for r in resolved}),
            "hosts": capacity.hosts,
            "cores": capacity.cores,
            "cpus": capacity.cpus,
            "allocatable_cpu": _number(capacity.allocatable_cpu),
            "memory_gib": _number(capacity.memory_gib),
            "hugepages_gib": _number(capacity.hugepages_gib),
            "allocatable_memory_gib": _number(capacity.allocatable_memory_gib),
            "cpu_overcommit": pool.vars.overcommit.cpu,
            "memory_overcommit": pool.vars.overcommit.memory,
            "max_pods": capacity.pods,
            "kubelet": _kubelet(view, pool, machine) if machine else None,
            "gpu_model": gpu_model,
            "gpus": capacity.gpus,
            "gpu_sharing": _sharing(pool) or None,
            "gpu_resources": dict(sorted(capacity.gpu_resources.items())),
            "gpu_memory_gib": capacity.gpus * gpu_models()[gpu_model].memory_gib if gpu_model in gpu_models() else 0,
            "gpu_memory_allocated_percent": _gpu_memory_allocated(pool, gpu_model),
            "monthly_cost": _number(capacity.monthly_cost, 2),
            "yearly_cost": _number(capacity.yearly_cost, 2),
        })
    total = combined(capacities)
    nodes = len(env.nodes)
    blocks = node_blocks(cluster)
    return {
        "environment": env.name,
        "cluster": cluster.cluster_name,
        "kubernetes": cluster.kube_version,
        "cni": cluster.kube_network_plugin,
        "currency": cluster.currency,
        "network": {
            "pod_cidr": str(cluster.kube_pods_subnet),
            "node_prefix": cluster.kube_network_node_prefix,
            "node_blocks": blocks,
            "nodes": nodes,
            "node_blocks_used_percent": round(100 * nodes / blocks, 1) if blocks else None,
            "pod_addresses_per_node": usable_addresses(cluster.kube_network_node_prefix),
            "service_cidr": str(cluster.kube_service_addresses),
            "service_addresses": service_capacity(cluster),
            "planned_services": cluster.planned_services,
        },
        "pools": pools,
        "totals": {
            "hosts": total.hosts,
            "cores": total.cores,
            "cpus": total.cpus,
            "allocatable_cpu": _number(total.allocatable_cpu),
            "memory_gib": _number(total.memory_gib),
            "allocatable_memory_gib": _number(total.allocatable_memory_gib),
            "hugepages_gib": _number(total.hugepages_gib),
            "max_pods": total.pods,
            "gpus": total.gpus,
            "gpu_resources": dict(sorted(total.gpu_resources.items())),
            "monthly_cost": _number(total.monthly_cost, 2),
            "yearly_cost": _number(total.yearly_cost, 2),
        },
    }


def render_table(plan: dict[str, Any]) -> str:
    """The plan for a terminal: one row per pool, a totals row, GPU resources and the address plan."""
    money = plan["currency"]
    header = ["POOL", "KIND", "HOSTS", "CORES", "CPU alloc/total", "MEM GiB alloc/total", "HUGEPAGES GiB",
              "GPUS", "SHARING", "GPU MEM USED", f"{money}/MONTH", f"{money}/YEAR"]
    rows = []
    for pool in plan["pools"] + [dict(plan["totals"], name="total", kind="", gpu_sharing=None,
                                      gpu_memory_allocated_percent=None, gpu_model=None)]:
        gpus = f"{pool['gpus']} x {pool['gpu_model']}" if pool.get("gpu_model") else str(pool["gpus"] or "")
        used = pool["gpu_memory_allocated_percent"]
        rows.append([
            pool["name"], pool["kind"], str(pool["hosts"]), str(pool["cores"]),
            f"{pool['allocatable_cpu']:g}/{pool['cpus']}",
            f"{format_gib(pool['allocatable_memory_gib'])}/{format_gib(pool['memory_gib'])}",
            format_gib(pool["hugepages_gib"]) if pool["hugepages_gib"] else "",
            gpus, pool["gpu_sharing"] or "", "" if used is None else f"{used:g}%",
            f"{pool['monthly_cost']:,.0f}", f"{pool['yearly_cost']:,.0f}",
        ])
    lines = [f"Plan for {plan['environment']} (cluster {plan['cluster']}, Kubernetes {plan['kubernetes']}, "
             f"{plan['cni']})", ""]
    lines += _table(header, rows, numeric={2, 3, 4, 5, 6, 10, 11})
    gpu_lines = [
        f"  {pool['name']}: " + ", ".join(f"{name} {count}" for name, count in pool["gpu_resources"].items())
        for pool in plan["pools"] if pool["gpu_resources"]
    ]
    if gpu_lines:
        lines += ["", "GPU resources advertised (per pool, for quotas and Volcano queues):", *gpu_lines]
    net = plan["network"]
    lines += [
        "",
        f"Pods: {net['pod_cidr']} as /{net['node_prefix']} per node: {net['nodes']} of {net['node_blocks']} "
        f"blocks used ({net['node_blocks_used_percent']:g}%), {net['pod_addresses_per_node']} addresses per node.",
        f"Services: {net['service_cidr']}: {net['service_addresses']} addresses, {net['planned_services']} planned.",
    ]
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[str]], numeric: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.rjust(w) if i in numeric else cell.ljust(w)
                         for i, (cell, w) in enumerate(zip(cells, widths, strict=False))).rstrip()

    separator = "  ".join("-" * w for w in widths)
    return [line(header), separator] + [line(row) for row in rows[:-1]] + [separator, line(rows[-1])]
