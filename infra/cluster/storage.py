"""Storage: a StorageClass per spec class, the provisioners behind them, and snapshots where the driver has them.

- Local classes are static local PVs: provisioner kubernetes.io/no-provisioner and binding
  WaitForFirstConsumer, so the volume is chosen after the pod is scheduled, on its node. The local
  static provisioner publishes each disk the host layer mounted as one PV; it only discovers mount
  points directly under its discovery directory, so that directory is the parent of the pool's
  local_disks mounts (/mnt/disks/nvme0 -> /mnt/disks). One provisioner release per local class, placed
  on that class's pools: the provisioner's config is the same on every node it runs on, so one release
  for two classes would publish one class's disks under the other's name wherever both run.
- CSI classes take the spec's provisioner, parameters, binding and reclaim policy. A driver this
  project deploys (infra/knowledge/csi_drivers.yml) gets its pinned release, node plugin on every
  node; a driver that implements snapshots gets a VolumeSnapshotClass.
- Exactly one class is the cluster default: the one the spec marks, or the only class there is.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from infra.cluster import rollout
from infra.cluster.networking import values_tree
from infra.cluster.objects import SYSTEM_NAMESPACE, Concern, HelmRelease, Obj, obj
from infra.cluster.placement import everywhere, on_pools
from infra.knowledge.chart_values import chart_values
from infra.knowledge.csi_drivers import csi_drivers
from infra.model.resolve import Resolved
from infra.spec import Environment, Pool
from infra.spec.models import StorageClassSpec

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
LOCAL_VOLUME_MODE = "Filesystem"  # the host layer formats and mounts each disk; PVs are its filesystem
LOCAL_ACCESS_MODE = "ReadWriteOnce"
HELM_RELEASE_NAME_MAX = 53  # Helm refuses longer release names


def default_class(env: Environment) -> str | None:
    """The default StorageClass: the one the spec marks, else the only class; None without classes.

    Several classes and none marked is refused rather than guessed: a claim without a class would land
    on whichever was picked, and a local class picked by accident pins pods to one node.
    """
    classes = env.cluster.storage_classes
    marked = sorted(name for name, spec in classes.items() if spec.default)
    if len(marked) > 1:
        raise ValueError(f"storage classes {', '.join(marked)} are all marked default; mark exactly one")
    if marked:
        return marked[0]
    if len(classes) == 1:
        return next(iter(classes))
    if classes:
        raise ValueError(f"none of the storage classes {', '.join(sorted(classes))} is marked default: true; "
                         "mark exactly one")
    return None


def storage_class(name: str, spec: StorageClassSpec, default: bool) -> Obj:
    """The StorageClass of a spec class."""
    annotations = {DEFAULT_CLASS_ANNOTATION: "true"} if default else None
    fields: dict[str, Any] = {"reclaimPolicy": spec.reclaim_policy, "volumeBindingMode": spec.volume_binding_mode}
    if spec.type == "local":
        local = chart_values().local_static_provisioner.storage_class
        if spec.volume_binding_mode != local.volume_binding_mode:
            raise ValueError(f"local storage class {name} binds {spec.volume_binding_mode}; static local volumes "
                             f"need {local.volume_binding_mode} so the volume is chosen on the pod's node")
        fields["provisioner"] = local.provisioner
    else:
        assert spec.provisioner is not None
        fields["provisioner"] = spec.provisioner
        if spec.parameters:
            fields["parameters"] = dict(sorted(spec.parameters.items()))
    return obj("storage.k8s.io/v1", "StorageClass", name, annotations=annotations, **fields)


def storage_classes(env: Environment) -> list[Obj]:
    default = default_class(env)
    return [storage_class(name, spec, name == default) for name, spec in sorted(env.cluster.storage_classes.items())]


# --------------------------------------------------------------------------- local volumes


def discovery_dir(pool: Pool) -> str:
    """Where the provisioner looks for the pool's disks: the one directory all its local_disks are mounted in."""
    parents = sorted({str(PurePosixPath(disk.mount).parent) for disk in pool.vars.local_disks})
    if not parents:
        raise ValueError(f"pool {pool.name} declares no local_disks")
    if len(parents) > 1:
        raise ValueError(f"pool {pool.name} mounts its local_disks under {', '.join(parents)}; the provisioner "
                         "discovers one directory per class, so mount them side by side")
    if parents[0] == "/":
        raise ValueError(f"pool {pool.name} mounts a local disk directly under /; the provisioner would publish "
                         "every mount point under / as a volume")
    return parents[0]


def _fs_type(pools: list[Pool]) -> str | None:
    """The disks' filesystem when they all share one (the provisioner applies it only to block devices)."""
    types = {disk.fs_type for pool in pools for disk in pool.vars.local_disks}
    return types.pop() if len(types) == 1 else None


def local_pools(env: Environment) -> dict[str, list[Pool]]:
    """Local class -> the pools backing it; a pool backs at most one local class, or its disks would be
    published twice, once per class."""
    owner: dict[str, str] = {}
    backing: dict[str, list[Pool]] = {}
    for name, spec in sorted(env.cluster.storage_classes.items()):
        if spec.type != "local":
            continue
        for pool_name in sorted(spec.pools):
            if pool_name in owner:
                raise ValueError(f"pool {pool_name} backs local classes {owner[pool_name]} and {name}; "
                                 "each disk can be published for one class only")
            owner[pool_name] = name
        backing[name] = [env.pools[pool_name] for pool_name in sorted(spec.pools)]
    return backing


def local_release_name(class_name: str) -> str:
    name = f"local-{class_name}"
    if len(name) > HELM_RELEASE_NAME_MAX:
        raise ValueError(f"storage class name {class_name!r} makes the Helm release name {name!r} longer "
                         f"than {HELM_RELEASE_NAME_MAX} characters")
    return name


def local_provisioner_values(env: Environment, class_name: str, pools: list[Pool]) -> Obj:
    """Values of a local class's provisioner: discovery in the pools' mount directory, on those pools only."""
    dirs = sorted({discovery_dir(pool) for pool in pools})
    if len(dirs) > 1:
        raise ValueError(f"local class {class_name}: its pools mount their disks under {', '.join(dirs)}; "
                         "the provisioner discovers one directory per class")
    entry: Obj = {"name": class_name, "hostDir": dirs[0], "mountDir": dirs[0], "volumeMode": LOCAL_VOLUME_MODE,
                  "accessMode": LOCAL_ACCESS_MODE, "namePattern": "*",
                  "storageClass": False}  # the StorageClass is ours (storage_class), the chart must not add one
    fs_type = _fs_type(pools)
    if fs_type is not None:
        entry["fsType"] = fs_type
    placement = on_pools(pools)
    return values_tree(chart_values().local_static_provisioner.keys, {
        "classes": [entry], "affinity": placement["affinity"], "tolerations": placement["tolerations"],
        "updateStrategy": rollout.strategy(env)})


def local_releases(env: Environment) -> list[HelmRelease]:
    return [HelmRelease(local_release_name(name), SYSTEM_NAMESPACE, "local-static-provisioner",
                        local_provisioner_values(env, name, pools), rollout.timeout_seconds(env))
            for name, pools in local_pools(env).items()]


# --------------------------------------------------------------------------- CSI drivers and snapshots


def csi_provisioners(env: Environment) -> list[str]:
    return sorted({spec.provisioner for spec in env.cluster.storage_classes.values()
                   if spec.type == "csi" and spec.provisioner})


def csi_driver_nfs_values(env: Environment, driver: str) -> Obj:
    """csi-driver-nfs: our driver name, node plugin on every node, the snapshot controller without the
    chart's older copy of the snapshot CRDs (those come from external-snapshotter-crds), no chart-made
    StorageClass or VolumeSnapshotClass (this concern renders them)."""
    snapshots = csi_drivers()[driver].snapshots
    settings: dict[str, Any] = {
        "driver.name": driver,
        "node.tolerations": everywhere(env)["tolerations"],
        "node.maxUnavailable": rollout.max_unavailable(env),
        "storageClass.create": False,
        "volumeSnapshotClass.create": False,
        "controller.enableSnapshotter": snapshots,
        "externalSnapshotter.enabled": snapshots,
        # the chart's copy of the snapshot CRDs: the complete set the snapshot controller needs, owned by
        # the release (infra/cluster/concerns.py declares them itself only when releases are left out)
        "externalSnapshotter.customResourceDefinitions.enabled": snapshots,
    }
    return values_tree(chart_values().csi_driver_nfs.keys, settings)


_DRIVER_VALUES = {"csi-driver-nfs": csi_driver_nfs_values}


def csi_releases(env: Environment) -> list[HelmRelease]:
    """A pinned release for each CSI driver a class uses that this project deploys; others are external."""
    releases = []
    known = csi_drivers()
    for driver in csi_provisioners(env):
        component = known[driver].component if driver in known else None
        if component is None:
            continue
        if component not in _DRIVER_VALUES:
            raise ValueError(f"CSI driver {driver}: no values are written for component {component}")
        releases.append(HelmRelease(component, SYSTEM_NAMESPACE, component, _DRIVER_VALUES[component](env, driver),
                                    rollout.timeout_seconds(env)))
    return releases


def snapshot_classes(env: Environment) -> list[Obj]:
    """A VolumeSnapshotClass per CSI class whose driver implements snapshots; snapshots are kept or deleted
    with their content as the class keeps or deletes volumes (its reclaim policy)."""
    crds = chart_values().external_snapshotter_crds
    api_version = f"{crds.group}/{crds.served_version}"
    known = csi_drivers()
    classes = []
    for name, spec in sorted(env.cluster.storage_classes.items()):
        if spec.type == "csi" and spec.provisioner in known and known[spec.provisioner].snapshots:
            classes.append(obj(api_version, "VolumeSnapshotClass", name, driver=spec.provisioner,
                               deletionPolicy=spec.reclaim_policy))
    return classes


# --------------------------------------------------------------------------- the concern


def build(view: Resolved) -> Concern:
    env = view.env
    return Concern("storage", [*storage_classes(env), *snapshot_classes(env)],
                   [*local_releases(env), *csi_releases(env)])
