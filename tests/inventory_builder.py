"""Small valid inventories written to disk, for tests that change one thing and look at the result.

`base_inventory()` returns a spec with one pool of each kind that passes every check; tests mutate
the returned dicts, then `write_inventory()` lays them out exactly as a user's inventory folder.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from infra.model.scheduler import Scoring, kubespray_variables, scheduler_configuration

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p.name for p in (ROOT / "inventories").iterdir() if p.is_dir())

_BASE = {
    "hosts": {"all": {"children": {"node_pools": {"children": {
        "cpu": {"hosts": {"cpu-1": {"zone": "a"}, "cpu-2": {"zone": "b"}}},
        "mem": {"hosts": {"mem-1": {"zone": "a"}}},
        "gpu": {"hosts": {"gpu-1": {"zone": "a", "ansible_host": "192.0.2.10"}}},
        "t4": {"hosts": {"t4-1": {"zone": "b"}}},
    }}}}},
    "group_vars": {
        "all": {
            "cluster_name": "test",
            "kube_version": "1.34.2",
            "kube_network_plugin": "calico",
            "kube_pods_subnet": "10.244.0.0/21",
            "kube_service_addresses": "10.96.0.0/20",
            "kube_network_node_prefix": 24,
            "kubelet_max_pods": 110,
            "planned_services": 100,
            "reserved_networks": {"office": "10.8.0.0/16"},
            "zones": ["a", "b"],
            "machines": {
                "small": {"cores": 8, "memory_gib": 64, "monthly_price": 100, "yearly_discount_percent": 10},
                "a100box": {"cores": 64, "memory_gib": 1024, "gpu_model": "A100-80GB", "gpu_count": 8,
                            "gpu_interconnect": "nvlink", "monthly_price": 5000},
                "t4box": {"cores": 16, "memory_gib": 128, "gpu_model": "T4-16GB", "gpu_count": 2,
                          "gpu_interconnect": "pcie", "monthly_price": 800},
            },
            "priority_classes": {"high": {"value": 1000}, "low": {"value": 10, "preemption_policy": "Never"}},
            "tenants": {
                "svc": {"tier": "production", "pools": ["cpu"], "priority_class": "high",
                        "quota": {"requests.cpu": 8, "requests.memory": "16Gi"},
                        "limit_range": {"default": {"cpu": "1", "memory": "1Gi"},
                                        "default_request": {"cpu": "500m", "memory": "512Mi"}}},
                "cache": {"tier": "production", "pools": ["mem"], "priority_class": "high",
                          "quota": {"requests.cpu": 4, "requests.memory": "32Gi",
                                    "local.storageclass.storage.k8s.io/requests.storage": "50Gi"},
                          "limit_range": {"default": {"cpu": "1", "memory": "2Gi"},
                                          "default_request": {"cpu": "1", "memory": "2Gi"}}},
                "infer": {"tier": "inference", "pools": ["gpu"], "priority_class": "high",
                          "quota": {"requests.cpu": 32, "requests.memory": "256Gi",
                                    "requests.nvidia.com/mig-1g.10gb": 56,
                                    "nfs.storageclass.storage.k8s.io/requests.storage": "1Ti"},
                          "limit_range": {"default": {"cpu": "1", "memory": "4Gi"},
                                          "default_request": {"cpu": "1", "memory": "4Gi"}}},
                "batch": {"tier": "offline", "pools": ["t4"], "priority_class": "low",
                          "quota": {"requests.cpu": 8, "requests.memory": "64Gi",
                                    "requests.nvidia.com/gpu.shared": 4},
                          "limit_range": {"default": {"cpu": "1", "memory": "1Gi"},
                                          "default_request": {"cpu": "250m", "memory": "512Mi"}},
                          "queue": {"weight": 2, "capability": {"cpu": 8, "nvidia.com/gpu.shared": 4}}},
            },
            "storage_classes": {
                "local": {"type": "local", "pools": ["mem"]},
                "nfs": {"type": "csi", "provisioner": "nfs.csi.k8s.io", "capacity": "10Ti",
                        "volume_binding_mode": "Immediate", "default": True},
            },
        },
        "cpu": {"pool_kind": "cpu", "machine": "small", "overcommit": {"cpu": 4.0}},
        "mem": {"pool_kind": "memory", "machine": "small", "node_taints": ["pool=mem:NoSchedule"],
                "local_disks": [{"device": "/dev/disk/by-path/pci-0000:5e:00.0-nvme-1", "size_gib": 100,
                                 "mount": "/mnt/disks/nvme0"}]},
        "gpu": {"pool_kind": "gpu", "machine": "a100box", "node_taints": ["nvidia.com/gpu=present:NoSchedule"],
                "nvidia_driver_version": "550.127.08", "cuda_version": "12.4",
                "gpu_sharing": {"mode": "mig", "mig_config": "all-1g.10gb", "mig_devices": {"1g.10gb": 7}}},
        "t4": {"pool_kind": "gpu", "machine": "t4box", "node_taints": ["nvidia.com/gpu=present:NoSchedule"],
               "nvidia_driver_version": "535.216.03", "cuda_version": "12.2",
               "gpu_sharing": {"mode": "time-slicing", "replicas": 2}},
    },
    "host_vars": {},
}


# kube-scheduler's configuration as Kubespray's variables: the project's profile for the base's resources
_BASE["group_vars"]["all"].update(kubespray_variables(scheduler_configuration(Scoring("MostAllocated", (
    ("cpu", 1), ("memory", 1), ("nvidia.com/gpu.shared", 1), ("nvidia.com/mig-1g.10gb", 1))))))


def base_inventory() -> dict:
    return copy.deepcopy(_BASE)


def pools_of(data: dict) -> dict:
    """The node_pools children of an inventory dict (pool name -> {"hosts": {...}})."""
    return data["hosts"]["all"]["children"]["node_pools"]["children"]


def write_inventory(folder: Path, data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hosts.yml").write_text(yaml.safe_dump(data["hosts"], sort_keys=False))
    for kind in ("group_vars", "host_vars"):
        if data.get(kind):
            (folder / kind).mkdir(exist_ok=True)
        for name, values in data.get(kind, {}).items():
            (folder / kind / f"{name}.yml").write_text(yaml.safe_dump(values, sort_keys=False))
    return folder


def add_control_plane(data: dict, control_plane: dict, etcd: dict | None = None) -> dict:
    """Add Kubespray's groups beside node_pools: kube_control_plane (and etcd) with these hosts -> vars."""
    children = data["hosts"]["all"]["children"]
    children["kube_control_plane"] = {"hosts": control_plane}
    if etcd is not None:
        children["etcd"] = {"hosts": etcd}
    return data


def write_text(folder: Path, relative: str, text: str | bytes) -> Path:
    """Write one file of an inventory folder (any name, any content), creating its folders."""
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path
