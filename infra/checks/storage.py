"""Storage classes: local volumes that bind where the pod runs, and quotas the backends can honour."""

from __future__ import annotations

from decimal import Decimal

from infra.checks.base import Report, rule, storage_fact
from infra.knowledge.units import GIB, parse_quantity
from infra.model.resolve import Resolved
from infra.spec import Environment

STORAGE_LOCAL_BINDING = rule(
    "STORAGE-LOCAL-BINDING", "error",
    "A local-volume class binding Immediately: the volume is chosen before the pod is scheduled, so the "
    "pod is pinned to whichever node holds it, often one without room or without the GPU it needs.",
    "Set volume_binding_mode: WaitForFirstConsumer.",
)
STORAGE_NO_DISKS = rule(
    "STORAGE-NO-DISKS", "error",
    "A local class backed by a pool with no local_disks: the provisioner discovers nothing and claims stay Pending.",
    "Declare the pool's local_disks, or remove the pool from the class.",
)
STORAGE_CAPACITY = rule(
    "STORAGE-CAPACITY", "error",
    "Tenant storage quotas for a class adding up to more than its backend holds: claims fail once it is "
    "full, and storage cannot be preempted back.",
    "Lower the quotas or add capacity (disks for local classes, backend capacity for CSI).",
)
STORAGE_DEFAULT = rule(
    "STORAGE-DEFAULT", "error",
    "Not exactly one default storage class: with two, which one a claim without a class gets depends on the "
    "version; with several and none, such claims stay Pending (and guessing one could pin pods to a local disk).",
    "Mark exactly one class default: true (a single class is the default without it).",
)

STORAGE_DISK_NAME = rule(
    "STORAGE-DISK-NAME", "warning",
    "A local disk named by the kernel's name (/dev/nvme0n1, /dev/sdb): those follow probe order and may name "
    "another disk after a reboot; the host layer then refuses to prepare it until the name is fixed.",
    "Name the disk by /dev/disk/by-path/... (the same slot on every host of the pool) or /dev/disk/by-id/...",
)


def disk_names(env: Environment, report: Report) -> None:
    for pool in env.pools.values():
        for index, disk in enumerate(pool.vars.local_disks):
            if not disk.device.startswith("/dev/disk/"):
                report.add(STORAGE_DISK_NAME, pool.file_of("local_disks"), f"{pool.name}.local_disks[{index}].device",
                           f"pool {pool.name} names a disk {disk.device}, the kernel's name")


def class_capacity(env: Environment, name: str) -> Decimal:
    """Bytes behind a storage class: the local disks of its pools' hosts, or the CSI backend's capacity."""
    storage_class = env.cluster.storage_classes[name]
    if storage_class.type == "csi":
        return parse_quantity(storage_class.capacity)
    per_host = {
        pool: sum(disk.size_gib for disk in env.pools[pool].vars.local_disks)
        for pool in storage_class.pools
        if pool in env.pools
    }
    return sum((Decimal(size * len(env.pools[pool].hosts)) * GIB for pool, size in per_host.items()), Decimal(0))


def check(view: Resolved, report: Report) -> None:
    env = view.env
    disk_names(env, report)
    classes = env.cluster.storage_classes
    source = env.cluster_source("storage_classes")
    defaults = [name for name, storage_class in classes.items() if storage_class.default]
    if len(defaults) > 1:
        report.add(STORAGE_DEFAULT, source, "storage_classes", f"{', '.join(defaults)} are all marked default")
    elif not defaults and len(classes) > 1:
        report.add(STORAGE_DEFAULT, source, "storage_classes",
                   f"none of {', '.join(sorted(classes))} is marked default")
    for name, storage_class in classes.items():
        if storage_class.type == "local":
            if storage_class.volume_binding_mode != "WaitForFirstConsumer":
                report.add(STORAGE_LOCAL_BINDING, source, f"storage_classes.{name}.volume_binding_mode",
                           f"local class {name} binds {storage_class.volume_binding_mode}")
            for pool in storage_class.pools:
                if pool in env.pools and not env.pools[pool].vars.local_disks:
                    report.add(STORAGE_NO_DISKS, source, f"storage_classes.{name}.pools",
                               f"local class {name}: pool {pool} declares no local_disks")

    requested: dict[str, Decimal] = {}
    for tenant in env.cluster.tenants.values():
        for key, value in tenant.quota.items():
            if key.endswith(".storageclass.storage.k8s.io/requests.storage"):
                class_name = key.split(".storageclass.", 1)[0]
                requested[class_name] = requested.get(class_name, Decimal(0)) + parse_quantity(value)
    for name, amount in sorted(requested.items()):
        if name not in classes or report.broken(storage_fact(name)):
            continue  # reported by REF-STORAGE-CLASS or REF-POOL
        capacity = class_capacity(env, name)
        if amount > capacity:
            report.add(STORAGE_CAPACITY, env.cluster_source("tenants"), "tenants",
                       f"storage class {name}: tenant quotas total {amount / GIB:.0f} GiB, "
                       f"the backend holds {capacity / GIB:.0f} GiB")
