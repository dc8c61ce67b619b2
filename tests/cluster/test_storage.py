"""Storage: StorageClasses with exactly one default, local volume discovery where the disks are mounted,
CSI drivers and snapshot classes only where the driver has them."""

import copy
from pathlib import PurePosixPath

import kubernetes_validate
import pytest
from inventory_builder import ROOT, SHIPPED

from infra.cluster import storage
from infra.cluster.objects import key
from infra.cluster.placement import everywhere, on_pools
from infra.knowledge.chart_values import chart_values
from infra.knowledge.csi_drivers import csi_drivers, validate_csi_drivers
from infra.knowledge.versions import versions
from infra.model.resolve import resolve
from infra.spec import load_environment

DEFAULT = storage.DEFAULT_CLASS_ANNOTATION


def shipped(name):
    return resolve(load_environment(ROOT / "inventories" / name))


def view_of(write, data):
    return resolve(load_environment(write(data)))


def classes_of(data):
    return data["group_vars"]["all"]["storage_classes"]


def kinds(concern, kind):
    return {o["metadata"]["name"]: o for o in concern.objects if o["kind"] == kind}


def defaults(concern):
    return sorted(name for name, sc in kinds(concern, "StorageClass").items()
                  if sc["metadata"].get("annotations", {}).get(DEFAULT) == "true")


# --------------------------------------------------------------------------- StorageClasses and the default


@pytest.mark.parametrize(("name", "expected"), [("example", "checkpoints"), ("sandbox", "local-disk")])
def test_shipped_inventories_have_exactly_one_default(name, expected):
    concern = storage.build(shipped(name))
    assert concern.name == "storage"
    assert defaults(concern) == [expected]
    assert set(kinds(concern, "StorageClass")) == set(shipped(name).env.cluster.storage_classes)


def test_the_class_the_spec_marks_is_the_default(inventory, write):
    assert defaults(storage.build(view_of(write, inventory))) == ["nfs"]
    classes_of(inventory)["nfs"]["default"] = False
    classes_of(inventory)["local"]["default"] = True
    assert defaults(storage.build(view_of(write, inventory))) == ["local"]


def test_a_single_unmarked_class_is_the_default(inventory, write):
    del classes_of(inventory)["local"]
    inventory["group_vars"]["all"]["tenants"]["cache"]["quota"].pop("local.storageclass.storage.k8s.io/requests.storage")
    classes_of(inventory)["nfs"]["default"] = False
    assert defaults(storage.build(view_of(write, inventory))) == ["nfs"]


def test_several_classes_and_none_marked_is_refused_not_guessed(inventory, write):
    classes_of(inventory)["nfs"]["default"] = False
    with pytest.raises(ValueError, match="none of the storage classes local, nfs is marked default"):
        storage.build(view_of(write, inventory))


def test_two_marked_defaults_are_refused(inventory, write):
    classes_of(inventory)["local"]["default"] = True
    with pytest.raises(ValueError, match="all marked default"):
        storage.build(view_of(write, inventory))


def test_no_classes_no_default(inventory, write):
    inventory["group_vars"]["all"]["storage_classes"] = {}
    for tenant in inventory["group_vars"]["all"]["tenants"].values():
        tenant["quota"] = {k: v for k, v in tenant["quota"].items() if ".storageclass." not in k}
    concern = storage.build(view_of(write, inventory))
    assert concern.objects == [] and concern.releases == []


@pytest.mark.parametrize("name", SHIPPED)
def test_local_classes_wait_for_first_consumer_with_no_provisioner(name):
    view = shipped(name)
    scs = kinds(storage.build(view), "StorageClass")
    local = [n for n, spec in view.env.cluster.storage_classes.items() if spec.type == "local"]
    assert local
    for class_name in local:
        sc = scs[class_name]
        assert sc["provisioner"] == "kubernetes.io/no-provisioner"
        assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
        assert sc["reclaimPolicy"] == view.env.cluster.storage_classes[class_name].reclaim_policy
        assert "parameters" not in sc


def test_a_local_class_binding_immediately_is_refused(inventory, write):
    classes_of(inventory)["local"]["volume_binding_mode"] = "Immediate"
    with pytest.raises(ValueError, match="local storage class local binds Immediate"):
        storage.build(view_of(write, inventory))


def test_a_csi_class_takes_the_specs_provisioner_parameters_binding_and_reclaim_policy():
    sc = kinds(storage.build(shipped("example")), "StorageClass")["checkpoints"]
    assert sc["apiVersion"] == "storage.k8s.io/v1"
    assert sc["provisioner"] == "nfs.csi.k8s.io"
    assert sc["parameters"] == {"server": "nfs.storage.internal", "share": "/export/checkpoints"}
    assert (sc["volumeBindingMode"], sc["reclaimPolicy"]) == ("Immediate", "Retain")


# --------------------------------------------------------------------------- local static provisioner


@pytest.mark.parametrize("name", SHIPPED)
def test_discovery_dirs_are_the_parents_of_the_pools_disk_mounts(name):
    view = shipped(name)
    env = view.env
    releases = {r.name: r for r in storage.build(view).releases if r.component == "local-static-provisioner"}
    for class_name, spec in env.cluster.storage_classes.items():
        if spec.type != "local":
            continue
        (entry,) = releases[f"local-{class_name}"].values["classes"]
        parents = {str(PurePosixPath(d.mount).parent) for p in spec.pools for d in env.pools[p].vars.local_disks}
        assert {entry["hostDir"]} == parents == {"/mnt/disks"}
        assert entry["mountDir"] == entry["hostDir"]
        assert entry["name"] == class_name
        assert entry["volumeMode"] == "Filesystem"
        assert entry["fsType"] == "xfs"  # the pools' local_disks fs_type
        assert entry["storageClass"] is False  # ours is the only StorageClass of that name


@pytest.mark.parametrize("name", SHIPPED)
def test_the_provisioner_runs_on_its_class_pools_only(name):
    view = shipped(name)
    for rel in storage.build(view).releases:
        if rel.component != "local-static-provisioner":
            continue
        class_name = rel.name.removeprefix("local-")
        pools = [view.env.pools[p] for p in sorted(view.env.cluster.storage_classes[class_name].pools)]
        placement = on_pools(pools)
        assert rel.values["affinity"] == placement["affinity"]
        assert rel.values["tolerations"] == placement["tolerations"]
        assert set(rel.values) <= {k.split(".")[0] for k in chart_values().local_static_provisioner.keys}


def test_each_local_class_gets_its_own_provisioner(inventory, write):
    inventory["group_vars"]["gpu"]["local_disks"] = [{"device": "/dev/nvme1n1", "size_gib": 100,
                                                      "mount": "/mnt/fast/nvme1", "fs_type": "ext4"}]
    classes_of(inventory)["scratch"] = {"type": "local", "pools": ["gpu"]}
    releases = {r.name: r for r in storage.build(view_of(write, inventory)).releases}
    assert releases["local-local"].values["classes"][0]["hostDir"] == "/mnt/disks"
    assert releases["local-scratch"].values["classes"][0]["hostDir"] == "/mnt/fast"
    assert releases["local-scratch"].values["classes"][0]["fsType"] == "ext4"
    assert releases["local-scratch"].values["affinity"] != releases["local-local"].values["affinity"]


def test_a_pool_backing_two_local_classes_is_refused(inventory, write):
    classes_of(inventory)["scratch"] = {"type": "local", "pools": ["mem"]}
    with pytest.raises(ValueError, match="pool mem backs local classes local and scratch"):
        storage.build(view_of(write, inventory))


@pytest.mark.parametrize(("mounts", "message"), [
    (["/mnt/disks/nvme0", "/mnt/other/nvme1"], "mounts its local_disks under /mnt/disks, /mnt/other"),
    (["/nvme0"], "directly under /"),
])
def test_disks_the_provisioner_cannot_discover_as_one_class_are_refused(inventory, write, mounts, message):
    inventory["group_vars"]["mem"]["local_disks"] = [
        {"device": f"/dev/nvme{i}n1", "size_gib": 100, "mount": mount} for i, mount in enumerate(mounts)]
    with pytest.raises(ValueError, match=message):
        storage.build(view_of(write, inventory))


def test_pools_of_one_class_mounting_under_different_directories_are_refused(inventory, write):
    inventory["group_vars"]["cpu"]["local_disks"] = [{"device": "/dev/sdb", "size_gib": 100, "mount": "/data/sdb"}]
    classes_of(inventory)["local"]["pools"] = ["cpu", "mem"]
    with pytest.raises(ValueError, match="local class local: its pools mount their disks under /data, /mnt/disks"):
        storage.build(view_of(write, inventory))


def test_mixed_filesystems_leave_fs_type_unset(inventory, write):
    inventory["group_vars"]["mem"]["local_disks"] = [
        {"device": "/dev/nvme0n1", "size_gib": 100, "mount": "/mnt/disks/nvme0", "fs_type": "ext4"},
        {"device": "/dev/nvme1n1", "size_gib": 100, "mount": "/mnt/disks/nvme1", "fs_type": "xfs"}]
    (rel,) = [r for r in storage.build(view_of(write, inventory)).releases if r.name == "local-local"]
    assert "fsType" not in rel.values["classes"][0]


# --------------------------------------------------------------------------- CSI drivers and snapshots


@pytest.mark.parametrize("name", SHIPPED)
def test_releases_pin_the_versions_file_charts(name):
    for rel in storage.build(shipped(name)).releases:
        chart = versions()[rel.component].chart
        written = rel.as_dict()
        assert (written["chart"], written["repository"], written["version"]) == (chart.name, chart.repository, chart.version)


def test_the_nfs_driver_is_deployed_with_the_snapshot_controller_and_its_node_plugin_everywhere():
    view = shipped("example")
    (nfs,) = [r for r in storage.build(view).releases if r.component == "csi-driver-nfs"]
    values = nfs.values
    assert values["driver"]["name"] == "nfs.csi.k8s.io"
    assert values["node"]["tolerations"] == everywhere(view.env)["tolerations"]
    # the chart's own copy of the snapshot CRDs: the complete set its snapshot controller needs
    assert values["externalSnapshotter"] == {"enabled": True, "customResourceDefinitions": {"enabled": True}}
    assert values["controller"]["enableSnapshotter"] is True
    assert values["storageClass"]["create"] is False and values["volumeSnapshotClass"]["create"] is False


def test_no_nfs_class_no_nfs_driver(inventory, write):
    assert [r.component for r in storage.build(view_of(write, inventory)).releases] == [
        "local-static-provisioner", "csi-driver-nfs"]
    del classes_of(inventory)["nfs"]
    inventory["group_vars"]["all"]["tenants"]["infer"]["quota"].pop("nfs.storageclass.storage.k8s.io/requests.storage")
    classes_of(inventory)["local"]["default"] = True
    concern = storage.build(view_of(write, inventory))
    assert [r.component for r in concern.releases] == ["local-static-provisioner"]
    assert not kinds(concern, "VolumeSnapshotClass")


def test_a_snapshot_class_for_each_class_whose_driver_snapshots():
    concern = storage.build(shipped("example"))
    (snapshot_class,) = kinds(concern, "VolumeSnapshotClass").values()
    crds = chart_values().external_snapshotter_crds
    assert snapshot_class["apiVersion"] == f"{crds.group}/{crds.served_version}" == "snapshot.storage.k8s.io/v1"
    assert snapshot_class["metadata"]["name"] == "checkpoints"
    assert snapshot_class["driver"] == "nfs.csi.k8s.io"
    assert snapshot_class["deletionPolicy"] == "Retain"  # as the class keeps its volumes
    assert not kinds(storage.build(shipped("sandbox")), "VolumeSnapshotClass")  # local volumes cannot snapshot


def test_an_external_driver_gets_its_storage_class_only(inventory, write):
    classes_of(inventory)["nfs"]["provisioner"] = "rbd.csi.ceph.com"
    classes_of(inventory)["nfs"]["parameters"] = {"clusterID": "ceph", "pool": "kube"}
    concern = storage.build(view_of(write, inventory))
    assert kinds(concern, "StorageClass")["nfs"]["provisioner"] == "rbd.csi.ceph.com"
    assert kinds(concern, "StorageClass")["nfs"]["parameters"] == {"clusterID": "ceph", "pool": "kube"}
    assert [r.component for r in concern.releases] == ["local-static-provisioner"]
    assert not kinds(concern, "VolumeSnapshotClass")  # snapshot support unknown: no class that could fail


def test_the_csi_driver_table_agrees_with_the_chart_facts():
    nfs = chart_values().csi_driver_nfs
    table = csi_drivers()
    assert table[nfs.keys["driver.name"].default].component == "csi-driver-nfs"
    assert table[nfs.keys["driver.name"].default].snapshots is nfs.supports_snapshots


@pytest.mark.parametrize(("change", "message"), [
    (lambda raw: raw["nfs.csi.k8s.io"].update(component="csi-driver-nsf"), "not pinned"),
    (lambda raw: raw.update({"NFS_Driver": raw["nfs.csi.k8s.io"]}), "not a CSI driver name"),
    (lambda raw: raw["nfs.csi.k8s.io"].update(source="https://github.com/x/y/blob/master/a.go"), "branch"),
    (lambda raw: raw["nfs.csi.k8s.io"].pop("snapshots"), "snapshots"),
])
def test_a_broken_csi_driver_table_is_refused(change, message):
    raw = {name: driver.model_dump() for name, driver in csi_drivers().items()}
    raw = copy.deepcopy(raw)
    change(raw)
    with pytest.raises(ValueError, match=message):
        validate_csi_drivers(raw, versions())


# --------------------------------------------------------------------------- the whole concern


@pytest.mark.parametrize("name", SHIPPED)
def test_the_concern_is_deterministic_with_unique_objects(name):
    first, second = storage.build(shipped(name)), storage.build(shipped(name))
    assert first == second
    keys = [key(o) for o in first.objects]
    assert len(keys) == len(set(keys))
    names = [r.name for r in first.releases]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("minor", ["1.30", "1.37"])
def test_built_in_objects_validate_strictly(name, minor):
    for o in storage.build(shipped(name)).objects:
        if o["kind"] != "VolumeSnapshotClass":  # a CRD from external-snapshotter-crds
            kubernetes_validate.validate(o, minor, strict=True)
