"""Names that point elsewhere in the spec: machine models, pools, zones, priority classes, GPU models."""

from __future__ import annotations

from infra.checks.base import Report, gpu_fact, machine_fact, rule, storage_fact
from infra.knowledge.gpus import gpu_models
from infra.knowledge.platform import platform
from infra.model.resolve import Resolved

KUBE_VERSION = rule(
    "KUBE-VERSION", "error",
    "A Kubernetes version this project cannot render or validate objects for.",
    "Set kube_version to a release within the supported range (see infra/knowledge/platform.yml).",
)
REF_MACHINE = rule(
    "REF-MACHINE", "error",
    "A pool or host naming a machine model that `machines` does not define: no hardware, no price, no plan.",
    "Add the model under `machines` in group_vars/all.yml, or fix the name.",
)
REF_GPU_MODEL = rule(
    "REF-GPU-MODEL", "error",
    "A machine with a GPU model the planner has no facts for (memory, MIG geometry).",
    "Use a name from infra/knowledge/gpus.yml, or add the model there.",
)
REF_POOL = rule(
    "REF-POOL", "error",
    "A tenant or storage class naming a pool that hosts.yml does not define.",
    "Name a child group of node_pools in hosts.yml.",
)
REF_PRIORITY = rule(
    "REF-PRIORITY", "error",
    "A tenant naming a PriorityClass that `priority_classes` does not define: its pods would be rejected.",
    "Define the class under priority_classes in group_vars/all.yml, or fix the name.",
)
REF_ZONE = rule(
    "REF-ZONE", "error",
    "A host in a zone that `zones` does not list (a typo splits a failure domain in two).",
    "Add the zone to `zones` in group_vars/all.yml, or fix the host's zone.",
)
PRIORITY_RESERVED_NAME = rule(
    "PRIORITY-RESERVED-NAME", "error",
    "A PriorityClass name with the `system-` prefix, which Kubernetes reserves for its own classes: the API "
    "server refuses to create it, and every tenant naming it is left without a priority.",
    "Rename the class (and the tenants' priority_class) without the system- prefix.",
)
REF_STORAGE_CLASS = rule(
    "REF-STORAGE-CLASS", "error",
    "A quota for a storage class that `storage_classes` does not define: the quota limits nothing.",
    "Define the class under storage_classes, or fix the quota key.",
)


def check(view: Resolved, report: Report) -> None:
    env = view.env
    cluster = env.cluster
    platform_range = platform().kubernetes
    if not platform_range.oldest_minor <= cluster.kube_minor <= platform_range.newest_minor:
        report.add(
            KUBE_VERSION, env.cluster_source("kube_version"), "kube_version",
            f"{cluster.kube_version} is outside the supported 1.{platform_range.oldest_minor}"
            f"-1.{platform_range.newest_minor}",
        )

    known_gpus = gpu_models()
    unknown_gpu_machines = set()
    for name, machine in cluster.machines.items():
        if machine.gpu_model and machine.gpu_model not in known_gpus:
            unknown_gpu_machines.add(name)
            report.add(
                REF_GPU_MODEL, env.cluster_source("machines"), f"machines.{name}.gpu_model",
                f"unknown GPU model {machine.gpu_model!r}; known: {', '.join(sorted(known_gpus))}",
            )

    for pool in env.pools.values():
        broken = (machine_fact(pool.name), gpu_fact(pool.name))
        if pool.vars.machine not in cluster.machines:
            report.add(
                REF_MACHINE, pool.file_of("machine"), "machine",
                f"pool {pool.name}: machine {pool.vars.machine!r} is not defined; "
                f"defined: {', '.join(sorted(cluster.machines))}", breaks=broken,
            )
        for host in pool.hosts:
            if host.vars.machine and host.vars.machine not in cluster.machines:
                report.add(REF_MACHINE, host.source("machine"), f"{host.name}.machine",
                           f"machine {host.vars.machine!r} is not defined", breaks=broken)
        if any(r.machine_name in unknown_gpu_machines for r in view.of_pool(pool)):
            report.mark(*broken)  # reported once, at the machine model

    for host in env.nodes:
        if cluster.zones and host.vars.zone and host.vars.zone not in cluster.zones:
            report.add(REF_ZONE, host.source("zone"), f"{host.name}.zone",
                       f"zone {host.vars.zone!r} is not one of {', '.join(cluster.zones)}")

    priority_file = env.cluster_source("priority_classes")
    for name in cluster.priority_classes:
        if name.startswith("system-"):
            report.add(PRIORITY_RESERVED_NAME, priority_file, f"priority_classes.{name}",
                       f"{name}: names starting with system- are reserved for Kubernetes' own classes")

    tenants_file = env.cluster_source("tenants")
    for name, tenant in cluster.tenants.items():
        for index, pool_name in enumerate(tenant.pools):
            if pool_name not in env.pools:
                report.add(REF_POOL, tenants_file, f"tenants.{name}.pools[{index}]", f"no pool named {pool_name!r}")
        if tenant.priority_class and tenant.priority_class not in cluster.priority_classes:
            report.add(REF_PRIORITY, tenants_file, f"tenants.{name}.priority_class",
                       f"no priority class named {tenant.priority_class!r}")
        for key in tenant.quota:
            if ".storageclass.storage.k8s.io/" in key:
                class_name = key.split(".storageclass.", 1)[0]
                if class_name not in cluster.storage_classes:
                    report.add(REF_STORAGE_CLASS, tenants_file, f"tenants.{name}.quota.{key}",
                               f"no storage class named {class_name!r}")

    for name, storage_class in cluster.storage_classes.items():
        for index, pool_name in enumerate(storage_class.pools):
            if pool_name not in env.pools:
                report.add(REF_POOL, env.cluster_source("storage_classes"),
                           f"storage_classes.{name}.pools[{index}]", f"no pool named {pool_name!r}",
                           breaks=(storage_fact(name),))
