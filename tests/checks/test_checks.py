"""Every preflight rule, failing and passing: each case changes the valid base inventory in one way.

A failing case must produce the rule's code; its passing twin (the nearest change that is still fine,
at the boundary where there is one) must not. A rule without a case here fails
`test_every_rule_has_a_failing_case`, so new rules arrive with tests.
"""

from __future__ import annotations

import pytest
import yaml
from inventory_builder import add_control_plane, base_inventory, pools_of, write_text

from infra.checks import RULES


def cluster(data):
    return data["group_vars"]["all"]


def pool(data, name):
    return data["group_vars"][name]


def tenant(data, name):
    return cluster(data)["tenants"][name]


def host(data, pool_name, host_name):
    return pools_of(data)[pool_name]["hosts"][host_name]


def set_in(path: str, value):
    """A mutation that sets a dotted path inside data["group_vars"] (first part: the file)."""

    def mutate(data):
        *parents, last = path.split(".")
        target = data["group_vars"]
        for part in parents:
            target = target[part]
        target[last] = value

    return mutate


def both(*mutations):
    def mutate(data):
        for mutation in mutations:
            mutation(data)

    return mutate


def add_cpu_hosts(count):
    def mutate(data):
        for i in range(3, 3 + count):
            pools_of(data)["cpu"]["hosts"][f"cpu-{i}"] = {"zone": "a"}

    return mutate


def quota(tenant_name, key, value):
    def mutate(data):
        tenant(data, tenant_name)["quota"][key] = value

    return mutate


def second_cpu_tenant(cpu):
    def mutate(data):
        cluster(data)["tenants"]["web"] = {**tenant(data, "svc"), "quota": {"requests.cpu": cpu, "requests.memory": "1Gi"}}

    return mutate


def host_var(pool_name, host_name, key, value):
    def mutate(data):
        host(data, pool_name, host_name)[key] = value

    return mutate


def delete(path: str):
    def mutate(data):
        *parents, last = path.split(".")
        target = data["group_vars"]
        for part in parents:
            target = target[part]
        del target[last]

    return mutate


def add_host(pool_name, host_name, **host_vars):
    def mutate(data):
        pools_of(data)[pool_name]["hosts"][host_name] = {"zone": "a", **host_vars}

    return mutate


def control_plane(count, **host_vars):
    def mutate(data):
        add_control_plane(data, {f"cp-{i}": {"zone": "a", **host_vars} for i in range(1, count + 1)})

    return mutate


def rename_tenant(old, new):
    def mutate(data):
        tenants = cluster(data)["tenants"]
        tenants[new] = tenants.pop(old)

    return mutate


def priority_class(name):
    def mutate(data):
        cluster(data)["priority_classes"][name] = {"value": 5}

    return mutate


def rdma(gpu, t4=None, gpu_prefix=26, t4_prefix=26):
    """Pools gpu (and t4) on the RDMA fabric 192.168.100.0/24 with the given slots and host_prefix."""
    def mutate(data):
        for name, slots, prefix in (("gpu", gpu, gpu_prefix), ("t4", t4, t4_prefix)):
            if slots is not None:
                pool(data, name)["rdma_network"] = {"interface": "ib0", "cidr": "192.168.100.0/24", "host_prefix": prefix}
                pool(data, name)["rdma_slots"] = slots

    return mutate


CASES = [
    # code, failing change, passing change (the nearest change that is still fine, at the boundary)
    ("KUBE-VERSION", set_in("all.kube_version", "1.29.9"), set_in("all.kube_version", "1.30.0")),
    ("KUBE-VERSION", set_in("all.kube_version", "1.38.0"), set_in("all.kube_version", "1.37.1")),
    # Debian 12's containerd; a patch below the table's; a line older than every listed one; the newest line.
    ("CONTAINERD-VERSION", set_in("all.containerd_version", "1.6.20"), set_in("all.containerd_version", "1.6.39")),
    ("CONTAINERD-VERSION", set_in("all.containerd_version", "2.1.2"), set_in("all.containerd_version", "2.1.3")),
    ("CONTAINERD-VERSION", set_in("all.containerd_version", "1.5.18"), set_in("all.containerd_version", "2.4.0")),
    ("CONTAINERD-UNLISTED", set_in("all.kube_version", "1.37.1"), set_in("all.kube_version", "1.36.0")),
    ("REF-MACHINE", set_in("cpu.machine", "nosuch"), set_in("cpu.machine", "a100box")),
    ("REF-MACHINE", host_var("cpu", "cpu-1", "machine", "nosuch"), host_var("cpu", "cpu-1", "machine", "small")),
    ("REF-GPU-MODEL", set_in("all.machines.a100box.gpu_model", "A200-1TB"),
     set_in("all.machines.a100box.gpu_model", "H100-80GB")),
    ("REF-POOL", set_in("all.tenants.svc.pools", ["cpu", "nope"]), set_in("all.tenants.svc.pools", ["cpu", "t4"])),
    ("REF-POOL", set_in("all.storage_classes.local.pools", ["mem", "nope"]),
     set_in("all.storage_classes.local.pools", ["mem", "cpu"])),
    ("REF-PRIORITY", set_in("all.tenants.svc.priority_class", "nope"), set_in("all.tenants.svc.priority_class", "low")),
    ("REF-ZONE", host_var("cpu", "cpu-1", "zone", "c"), host_var("cpu", "cpu-1", "zone", "b")),
    ("REF-STORAGE-CLASS", quota("svc", "nope.storageclass.storage.k8s.io/requests.storage", "1Gi"),
     quota("svc", "nfs.storageclass.storage.k8s.io/requests.storage", "1Gi")),
    ("PRIORITY-RESERVED-NAME", priority_class("system-batch"), priority_class("batch-system")),
    ("NET-OVERLAP", set_in("all.reserved_networks.lab", "10.244.4.0/22"),
     set_in("all.reserved_networks.lab", "10.244.8.0/22")),
    ("NET-OVERLAP", set_in("gpu.rdma_network", {"interface": "ens8f0", "cidr": "10.96.0.0/24"}),
     set_in("gpu.rdma_network", {"interface": "ens8f0", "cidr": "192.168.100.0/24"})),
    ("NET-OVERLAP", both(set_in("gpu.rdma_network", {"interface": "ib0", "cidr": "192.168.100.0/24"}),
                         set_in("t4.rdma_network", {"interface": "ib0", "cidr": "192.168.100.0/25"})),
     both(set_in("gpu.rdma_network", {"interface": "ib0", "cidr": "192.168.100.0/24"}),
          set_in("t4.rdma_network", {"interface": "ib0", "cidr": "192.168.100.0/24"}))),
    # RDMA slots: gpu-1 (pool gpu) and t4-1 (pool t4) on one /24 fabric of /26 slices, slots 0-3
    ("NET-RDMA-SLICE", rdma(gpu={"gpu-1": 0}, gpu_prefix=23), rdma(gpu={"gpu-1": 0}, gpu_prefix=24)),
    ("NET-RDMA-SLICE", rdma(gpu={"gpu-1": 0}, t4={"t4-1": 1}, t4_prefix=27),
     rdma(gpu={"gpu-1": 0}, t4={"t4-1": 1}, t4_prefix=26)),
    ("NET-RDMA-SLOT", rdma(gpu={}), rdma(gpu={"gpu-1": 0})),
    ("NET-RDMA-SLOT", rdma(gpu={"gpu-1": 4}), rdma(gpu={"gpu-1": 3})),
    ("NET-RDMA-SLOT", rdma(gpu={"gpu-1": 1}, t4={"t4-1": 1}), rdma(gpu={"gpu-1": 1}, t4={"t4-1": 2})),
    # /21 with /24 per node: 8 blocks; the base has 5 nodes
    ("NET-POD-CIDR", add_cpu_hosts(4), add_cpu_hosts(3)),
    ("NET-POD-CIDR", set_in("all.kube_network_node_prefix", 20), set_in("all.kube_network_node_prefix", 25)),
    ("NET-POD-CIDR", control_plane(4), control_plane(3)),  # control-plane kubelets need blocks too
    ("NET-POD-CIDR-HEADROOM", add_cpu_hosts(2), add_cpu_hosts(1)),
    ("NET-MAX-PODS", set_in("all.kubelet_max_pods", 255), set_in("all.kubelet_max_pods", 254)),
    ("NET-MAX-PODS", set_in("cpu.kubelet_max_pods", 300), set_in("cpu.kubelet_max_pods", 254)),
    ("NET-SERVICE-CIDR", set_in("all.kube_service_addresses", "172.0.0.0/11"),
     set_in("all.kube_service_addresses", "172.16.0.0/12")),
    ("NET-SERVICE-CAPACITY", set_in("all.planned_services", 4094), set_in("all.planned_services", 4093)),
    # Pods 10.244.0.0/21, Services 10.96.0.0/20
    ("NET-HOST-ADDRESS", host_var("cpu", "cpu-1", "ansible_host", "10.244.7.254"),
     host_var("cpu", "cpu-1", "ansible_host", "10.244.8.1")),
    ("NET-HOST-ADDRESS", host_var("cpu", "cpu-1", "ansible_host", "10.96.15.254"),
     host_var("cpu", "cpu-1", "ansible_host", "10.96.16.1")),
    ("NET-HOST-DUPLICATE", host_var("cpu", "cpu-1", "ansible_host", "192.0.2.10"),
     host_var("cpu", "cpu-1", "ansible_host", "192.0.2.11")),
    ("NET-HOST-DUPLICATE", control_plane(1, ansible_host="192.0.2.10"), control_plane(1, ansible_host="192.0.2.9")),
    ("POOL-GPU-TAINT", set_in("gpu.node_taints", ["nvidia.com/gpu=present:PreferNoSchedule"]),
     set_in("gpu.node_taints", ["nvidia.com/gpu=present:NoExecute"])),
    ("POOL-GPU-TAINT", delete("t4.node_taints"), set_in("t4.node_taints", ["gpu:NoSchedule"])),
    ("POOL-MEMORY-TAINT", set_in("mem.node_taints", ["pool=mem:PreferNoSchedule"]),
     set_in("mem.node_taints", ["pool=mem:NoExecute"])),
    ("POOL-MEMORY-OVERCOMMIT", set_in("mem.overcommit", {"memory": 1.5}), set_in("mem.overcommit", {"cpu": 2.0})),
    ("HOST-ALLOCATABLE", set_in("mem.hugepages", {"1Gi": 64}), set_in("mem.hugepages", {"1Gi": 56})),
    ("HOST-ALLOCATABLE", set_in("cpu.kube_cpu_reserved", "16"), set_in("cpu.kube_cpu_reserved", "15")),
    ("HOST-ALLOCATABLE", set_in("cpu.kubelet_reserved_system_cpus", "0-15"),
     set_in("cpu.kubelet_reserved_system_cpus", "0-14")),
    ("HOST-ALLOCATABLE-LOW", set_in("mem.hugepages", {"1Gi": 60}), set_in("mem.hugepages", {"1Gi": 56, "2Mi": 256})),
    ("HOST-GPU-VARS", host_var("cpu", "cpu-1", "nvidia_driver_version", "550.127.08"),
     host_var("gpu", "gpu-1", "nvidia_driver_version", "550.127.08")),
    ("HOST-GPU-VARS", host_var("mem", "mem-1", "cuda_version", "12.4"), host_var("t4", "t4-1", "cuda_version", "12.2")),
    ("HOST-GPU-VARS", control_plane(1, cuda_version="12.4"), control_plane(1, zone="b")),
    ("KUBELET-STATIC-CPU",
     both(set_in("cpu.kubelet_cpu_manager_policy", "static"), set_in("cpu.kube_cpu_reserved", 0),
          set_in("cpu.system_cpu_reserved", "0")),
     both(set_in("cpu.kubelet_cpu_manager_policy", "static"), set_in("cpu.kube_cpu_reserved", 0),
          set_in("cpu.system_cpu_reserved", "1m"))),
    ("KUBELET-RESERVED-CPUS", set_in("cpu.kubelet_reserved_system_cpus", "0,16"),
     set_in("cpu.kubelet_reserved_system_cpus", "0,15")),
    ("KUBELET-RESERVED-CPUS-IGNORED",
     both(set_in("cpu.kubelet_reserved_system_cpus", "0-1"), set_in("cpu.system_cpu_reserved", "100m")),
     both(set_in("cpu.kubelet_reserved_system_cpus", "0-1"), set_in("cpu.system_memory_reserved", "1Gi"))),
    # whole-machine pools span both sockets; one NUMA node is fine
    ("KUBELET-TOPOLOGY-FIT",
     both(set_in("gpu.pool_kind", "gpu_bigmem"), set_in("gpu.gpu_sharing", {"mode": "exclusive"}),
          set_in("gpu.kubelet_topology_manager_policy", "single-numa-node"), set_in("all.machines.a100box.numa_nodes", 2)),
     both(set_in("gpu.pool_kind", "gpu_bigmem"), set_in("gpu.gpu_sharing", {"mode": "exclusive"}),
          set_in("gpu.kubelet_topology_manager_policy", "restricted"), set_in("all.machines.a100box.numa_nodes", 2))),
    # mem: 64 GiB - 256Mi - 512Mi - 100Mi = 63.15 GiB over 2 NUMA nodes: 31.58 GiB each
    ("KUBELET-TOPOLOGY-FIT",
     both(set_in("mem.kubelet_topology_manager_policy", "single-numa-node"), set_in("all.machines.small.numa_nodes", 2),
          set_in("all.tenants.cache.limit_range.max", {"memory": "32Gi"})),
     both(set_in("mem.kubelet_topology_manager_policy", "single-numa-node"), set_in("all.machines.small.numa_nodes", 2),
          set_in("all.tenants.cache.limit_range.max", {"memory": "31Gi"}))),
    ("IRQ-CPUS", set_in("cpu.irq_affinity", {"interfaces": ["eth0"], "cpus": "14-16"}),
     set_in("cpu.irq_affinity", {"interfaces": ["eth0"], "cpus": "14-15"})),
    ("IRQ-EXCLUSIVE",
     both(set_in("cpu.kubelet_cpu_manager_policy", "static"), set_in("cpu.kubelet_reserved_system_cpus", "0-1"),
          set_in("cpu.irq_affinity", {"interfaces": ["eth0"], "cpus": "0-2"})),
     both(set_in("cpu.kubelet_cpu_manager_policy", "static"), set_in("cpu.kubelet_reserved_system_cpus", "0-1"),
          set_in("cpu.irq_affinity", {"interfaces": ["eth0"], "cpus": "0-1"}))),
    # small: 8 cores x 2 threads = 16 CPUs -> kube-proxy sets max(131072, 32768 x 16) = 524288, up or down
    ("SYSCTL-CONNTRACK-MAX", set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 524287}),
     set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 524288})),
    ("SYSCTL-CONNTRACK-MAX", set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 524289}),
     both(set_in("all.kube_proxy_remove", True), set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 524289}))),
    ("SYSCTL-CONNTRACK-MAX",
     both(set_in("all.kube_proxy_conntrack_max_per_core", 65536), set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 524288})),
     both(set_in("all.kube_proxy_conntrack_max_per_core", 65536), set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 1048576}))),
    # without kube-proxy the host layer sets max = 524288 and nobody raises the buckets
    ("SYSCTL-CONNTRACK-BUCKETS",
     both(set_in("all.kube_proxy_remove", True), set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_buckets": 131071})),
     both(set_in("all.kube_proxy_remove", True), set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_buckets": 131072}))),
    # kube-proxy raises a low hash size itself: not a finding
    ("SYSCTL-CONNTRACK-BUCKETS",
     both(set_in("all.kube_proxy_conntrack_max_per_core", 0), set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_buckets": 32767})),
     set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_buckets": 32767})),
    ("SYSCTL-CONNTRACK-BUCKETS",
     both(set_in("all.kube_proxy_remove", True),
          set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 1048576, "net.netfilter.nf_conntrack_buckets": 262143})),
     both(set_in("all.kube_proxy_remove", True),
          set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 1048576, "net.netfilter.nf_conntrack_buckets": 262144}))),
    ("GPU-NO-GPUS", host_var("gpu", "gpu-1", "hardware", {"gpu_count": 0}),
     host_var("gpu", "gpu-1", "hardware", {"gpu_count": 1})),
    ("GPU-IDLE", host_var("cpu", "cpu-1", "machine", "t4box"),
     both(host_var("cpu", "cpu-1", "machine", "t4box"), host_var("cpu", "cpu-1", "hardware", {"gpu_count": 0}))),
    ("GPU-MIXED-MODELS", add_host("gpu", "gpu-2", machine="t4box"), add_host("gpu", "gpu-2", machine="a100box")),
    ("GPU-MIG-UNSUPPORTED", set_in("t4.gpu_sharing", {"mode": "mig", "mig_config": "x", "mig_devices": {"1g.6gb": 4}}),
     both(set_in("t4.gpu_sharing", {"mode": "mig", "mig_config": "x", "mig_devices": {"1g.6gb": 4}}),
          set_in("all.machines.t4box.gpu_model", "A30-24GB"))),
    ("GPU-MIG-PROFILE", set_in("gpu.gpu_sharing.mig_devices", {"1g.5gb": 7}),
     set_in("gpu.gpu_sharing.mig_devices", {"1g.20gb": 4})),
    # 3g+3g+1g adds up to 7 compute slices but needs 9 memory slices at fixed starts
    ("GPU-MIG-FIT", set_in("gpu.gpu_sharing.mig_devices", {"3g.40gb": 2, "1g.10gb": 1}),
     set_in("gpu.gpu_sharing.mig_devices", {"4g.40gb": 1, "3g.40gb": 1})),
    ("GPU-MIG-FIT", set_in("gpu.gpu_sharing.mig_devices", {"1g.10gb": 8}),
     set_in("gpu.gpu_sharing.mig_devices", {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1})),
    ("GPU-MIG-CONFIG-CONFLICT",
     both(set_in("all.machines.t4box.gpu_model", "A100-80GB"),
          set_in("t4.gpu_sharing", {"mode": "mig", "mig_config": "all-1g.10gb", "mig_devices": {"1g.10gb": 6}})),
     both(set_in("all.machines.t4box.gpu_model", "A100-80GB"),
          set_in("t4.gpu_sharing", {"mode": "mig", "mig_config": "all-1g.10gb", "mig_devices": {"1g.10gb": 7}}))),
    ("GPU-MPS-REPLICAS", set_in("t4.gpu_sharing", {"mode": "mps", "replicas": 49}),
     set_in("t4.gpu_sharing", {"mode": "mps", "replicas": 48})),
    ("GPU-DRIVER-DRIFT", host_var("gpu", "gpu-1", "nvidia_driver_version", "550.90.07"),
     host_var("gpu", "gpu-1", "nvidia_driver_version", "550.127.08")),
    ("GPU-DRIVER-DRIFT", host_var("t4", "t4-1", "cuda_version", "12.4"), host_var("t4", "t4-1", "cuda_version", "12.2")),
    # CUDA 12.x runs from 525.60.13 (minor-version compatibility); 12.2.0 is fully supported from 535.54.03
    ("GPU-CUDA-DRIVER", both(set_in("t4.nvidia_driver_version", "470.82.01"), set_in("t4.cuda_version", "12.2")),
     both(set_in("t4.nvidia_driver_version", "525.60.13"), set_in("t4.cuda_version", "12.2"))),
    # 11.2.0's own minimum is 460.27.03 (NVIDIA's), below the 11.x floor 450.80.02 only the release minimum counts
    ("GPU-CUDA-DRIVER", both(set_in("t4.nvidia_driver_version", "450.80.01"), set_in("t4.cuda_version", "11.2")),
     both(set_in("t4.nvidia_driver_version", "460.27.03"), set_in("t4.cuda_version", "11.2"))),
    ("GPU-CUDA-MINOR", both(set_in("t4.nvidia_driver_version", "535.54.03"), set_in("t4.cuda_version", "12.4")),
     both(set_in("t4.nvidia_driver_version", "550.54.15"), set_in("t4.cuda_version", "12.4.1"))),
    ("GPU-CUDA-MINOR", both(set_in("t4.nvidia_driver_version", "470.82.01"), set_in("t4.cuda_version", "11.5")),
     both(set_in("t4.nvidia_driver_version", "495.29.05"), set_in("t4.cuda_version", "11.5"))),
    ("GPU-CUDA-UNKNOWN", both(set_in("t4.nvidia_driver_version", "580.65.06"), set_in("t4.cuda_version", "13.4")),
     both(set_in("t4.nvidia_driver_version", "580.65.06"), set_in("t4.cuda_version", "13.0"))),
    ("GPU-DRIVER-UNSUPPORTED",
     both(set_in("all.machines.a100box.gpu_model", "H100-80GB"), set_in("gpu.nvidia_driver_version", "470.82.01"),
          set_in("gpu.cuda_version", "11.4")),
     both(set_in("all.machines.a100box.gpu_model", "H100-80GB"), set_in("gpu.nvidia_driver_version", "520.61.05"),
          set_in("gpu.cuda_version", "11.8"))),
    ("GPU-BIGMEM-SHARED", set_in("gpu.pool_kind", "gpu_bigmem"),
     both(set_in("gpu.pool_kind", "gpu_bigmem"), set_in("gpu.gpu_sharing", {"mode": "exclusive"}))),
    ("HOST-CORES-PER-GPU", set_in("all.machines.a100box.cores", 63),
     both(set_in("all.machines.a100box.cores", 63), host_var("gpu", "gpu-1", "hardware", {"gpu_count": 7}))),
    ("HOST-CORES-PER-GPU", host_var("gpu", "gpu-1", "hardware", {"cores": 55}),
     host_var("gpu", "gpu-1", "hardware", {"cores": 56, "gpu_count": 7})),
    ("HOST-MEMORY-PER-GPU", set_in("all.machines.a100box.memory_gib", 511),
     set_in("all.machines.a100box.memory_gib", 512)),
    ("TEN-SHARED-GPU", set_in("all.tenants.svc.pools", ["cpu", "t4"]),
     both(set_in("all.tenants.svc.pools", ["cpu", "t4"]), set_in("all.tenants.svc.tier", "dev"))),
    ("TEN-SHARED-GPU", set_in("all.tenants.batch.tier", "inference"), set_in("all.tenants.batch.tier", "training")),
    ("TEN-MEMORY-OVERCOMMIT", set_in("all.tenants.cache.limit_range.default_request.memory", "1Gi"),
     set_in("all.tenants.cache.limit_range.default_request.memory", "2048Mi")),
    ("TEN-MEMORY-OVERCOMMIT", set_in("all.tenants.cache.limit_range.max_limit_request_ratio", {"memory": 2}),
     set_in("all.tenants.cache.limit_range.max_limit_request_ratio", {"memory": 1})),
    ("TEN-MEMORY-OVERCOMMIT", set_in("all.tenants.svc.pools", ["cpu", "mem"]),
     both(set_in("all.tenants.svc.pools", ["cpu", "mem"]), set_in("all.tenants.svc.limit_range.default_request.memory", "1Gi"))),
    ("TEN-NO-DEFAULTS", delete("all.tenants.svc.limit_range"),
     set_in("all.tenants.svc.limit_range", {"default_request": {"cpu": "1", "memory": "1Gi"}})),
    ("TEN-NO-QUOTA", set_in("all.tenants.svc.quota", {"pods": 10}),
     set_in("all.tenants.svc.quota", {"cpu": 1, "memory": "1Gi"})),
    ("QUOTA-GPU-RESOURCE", quota("infer", "requests.nvidia.com/gpu", 1), quota("infer", "requests.nvidia.com/mig-1g.10gb", 1)),
    ("QUOTA-GPU-RESOURCE", set_in("all.tenants.batch.queue.capability", {"nvidia.com/gpu": 4}),
     set_in("all.tenants.batch.queue.capability", {"nvidia.com/gpu.shared": 4})),
    ("QUOTA-GPU-RESOURCE", set_in("all.tenants.batch.queue.capability", {"nvidia.con/gpu.shared": 4}),
     set_in("all.tenants.batch.queue.capability", {"nvidia.com/gpu.shared": 3})),
    ("QUOTA-HUGEPAGES", quota("cache", "requests.hugepages-1Gi", "2Gi"),
     both(set_in("mem.hugepages", {"1Gi": 2}), quota("cache", "requests.hugepages-1Gi", "2Gi"))),
    ("QUOTA-HUGEPAGES", both(set_in("mem.hugepages", {"2Mi": 1024}), quota("cache", "hugepages-1Gi", "2Gi")),
     both(set_in("mem.hugepages", {"2Mi": 1024}), quota("cache", "hugepages-2Mi", "2Gi"))),
    # cpu pool: 2 hosts x (16 CPUs - 200m reserved) = 31.6 allocatable CPUs
    ("QUOTA-OVER-POOLS", quota("svc", "requests.cpu", 32), quota("svc", "requests.cpu", "31600m")),
    # with reservedSystemCPUs the kubelet withholds the listed CPUs: 2 x (16 - 4) = 24
    ("QUOTA-OVER-POOLS", both(set_in("cpu.kubelet_reserved_system_cpus", "0-3"), quota("svc", "requests.cpu", "24001m")),
     both(set_in("cpu.kubelet_reserved_system_cpus", "0-3"), quota("svc", "requests.cpu", 24))),
    ("QUOTA-OVER-POOLS", host_var("gpu", "gpu-1", "hardware", {"gpu_count": 7}),
     both(host_var("gpu", "gpu-1", "hardware", {"gpu_count": 7}), quota("infer", "requests.nvidia.com/mig-1g.10gb", 49))),
    ("QUOTA-OVER-POOLS", both(set_in("mem.hugepages", {"1Gi": 2}), quota("cache", "requests.hugepages-1Gi", "3Gi")),
     both(set_in("mem.hugepages", {"1Gi": 3}), quota("cache", "requests.hugepages-1Gi", "3Gi"))),
    ("QUOTA-OVERSUBSCRIBED", both(quota("svc", "requests.cpu", 20), second_cpu_tenant(12)),
     both(quota("svc", "requests.cpu", 20), second_cpu_tenant(11))),
    # tenancy refuses a tenant that would take over a namespace Kubernetes owns
    ("CLUSTER-BUILD", rename_tenant("svc", "default"), rename_tenant("svc", "defaults")),
    ("CLUSTER-BUILD", rename_tenant("svc", "kube-system"), rename_tenant("svc", "system-kube")),
    ("STORAGE-LOCAL-BINDING", set_in("all.storage_classes.local.volume_binding_mode", "Immediate"),
     set_in("all.storage_classes.local.volume_binding_mode", "WaitForFirstConsumer")),
    ("STORAGE-NO-DISKS", set_in("all.storage_classes.local.pools", ["mem", "cpu"]),
     both(set_in("all.storage_classes.local.pools", ["mem", "cpu"]),
          set_in("cpu.local_disks", [{"device": "/dev/sdb", "size_gib": 10, "mount": "/mnt/disks/sdb"}]))),
    ("STORAGE-DISK-NAME", set_in("mem.local_disks", [{"device": "/dev/nvme1n1", "size_gib": 100, "mount": "/mnt/a"}]),
     set_in("mem.local_disks", [{"device": "/dev/disk/by-path/pci-0000:5e:00.0-nvme-1", "size_gib": 100,
                                 "mount": "/mnt/a"}])),
    ("STORAGE-CAPACITY", quota("infer", "nfs.storageclass.storage.k8s.io/requests.storage", "11Ti"),
     quota("infer", "nfs.storageclass.storage.k8s.io/requests.storage", "10Ti")),
    ("STORAGE-CAPACITY", quota("cache", "local.storageclass.storage.k8s.io/requests.storage", "101Gi"),
     quota("cache", "local.storageclass.storage.k8s.io/requests.storage", "100Gi")),
    ("STORAGE-DEFAULT", set_in("all.storage_classes.nfs.default", False),
     both(set_in("all.storage_classes.nfs.default", False), set_in("all.storage_classes.local.default", True))),
    ("STORAGE-DEFAULT", set_in("all.storage_classes.local.default", True),
     both(set_in("all.storage_classes.local.default", True), set_in("all.storage_classes.nfs.default", False))),
]


def workloads(tenant_name, **workload):
    """A mutation that declares one workload `w` for a tenant (replicas 1 unless given)."""
    return set_in("all.workloads", {tenant_name: {"w": {"replicas": 1, **workload}}})


MIG = {"type": "mig", "profile": "1g.10gb"}
CASES += [
    ("WORKLOAD-TENANT", set_in("all.workloads", {"nope": {"w": {"replicas": 1}}}), workloads("svc")),
    ("WORKLOAD-PRIORITY", workloads("svc", priority_class="nope"), workloads("svc", priority_class="low")),
    # svc has no Volcano queue, batch has one
    ("WORKLOAD-GANG-QUEUE", workloads("svc", kind="job", gang=1), workloads("batch", kind="job", gang=1)),
    # the gpu pool cuts every A100 into 7x 1g.10gb
    ("WORKLOAD-RESOURCE", workloads("infer", gpu={"type": "mig", "profile": "2g.20gb"}), workloads("infer", gpu=MIG)),
    ("WORKLOAD-RESOURCE", workloads("infer", gpu={"type": "whole"}), workloads("batch", gpu={"type": "shared"})),
    ("WORKLOAD-RESOURCE", workloads("infer", gpu={"type": "memory", "memory_gib": 11}),
     workloads("infer", gpu={"type": "memory", "memory_gib": 10})),
    ("WORKLOAD-RESOURCE", workloads("infer", gpu={"type": "memory", "memory_gib": 10, "model": "H100-80GB"}),
     workloads("infer", gpu={"type": "memory", "memory_gib": 10, "model": "A100-80GB"})),
    ("WORKLOAD-RESOURCE", workloads("cache", requests={"hugepages-1Gi": "1Gi"}),
     both(set_in("mem.hugepages", {"1Gi": 1}), workloads("cache", requests={"hugepages-1Gi": "1Gi"}))),
    ("WORKLOAD-STORAGE", workloads("cache", storage={"storage_class": "nope", "size": "1Gi"}),
     workloads("cache", storage={"storage_class": "local", "size": "1Gi"})),
    ("WORKLOAD-STORAGE", workloads("svc", storage={"storage_class": "local", "size": "1Gi"}),
     workloads("svc", storage={"storage_class": "nfs", "size": "1Gi"})),
    # svc's LimitRange: default limits cpu 1, memory 1Gi; a request above a defaulted limit is refused
    ("WORKLOAD-LIMIT-RANGE", workloads("svc", requests={"cpu": "1001m"}), workloads("svc", requests={"cpu": "1"})),
    ("WORKLOAD-LIMIT-RANGE", both(set_in("all.tenants.svc.limit_range.max", {"memory": "2Gi"}),
                                  workloads("svc", limits={"memory": "2049Mi"})),
     both(set_in("all.tenants.svc.limit_range.max", {"memory": "2Gi"}), workloads("svc", limits={"memory": "2Gi"}))),
    ("WORKLOAD-LIMIT-RANGE", both(set_in("all.tenants.svc.limit_range.max_limit_request_ratio", {"cpu": 2}),
                                  workloads("svc", requests={"cpu": "499m"})),
     both(set_in("all.tenants.svc.limit_range.max_limit_request_ratio", {"cpu": 2}),
          workloads("svc", requests={"cpu": "500m"}))),
    # cpu pool: 16 CPUs - 200m reserved = 15.8 per node
    ("WORKLOAD-TOO-BIG", workloads("svc", requests={"cpu": "15801m"}, limits={"cpu": "15801m"}),
     workloads("svc", requests={"cpu": "15800m"}, limits={"cpu": "15800m"})),
    ("WORKLOAD-TOO-BIG", workloads("infer", gpu={**MIG, "count": 57}), workloads("infer", gpu={**MIG, "count": 56})),
    ("WORKLOAD-TOO-BIG", workloads("cache", storage={"storage_class": "local", "size": "101Gi"}),
     workloads("cache", storage={"storage_class": "local", "size": "100Gi"})),
    # 56 MIG instances on 2 NUMA nodes: 28 per node; the device manager aligns every GPU pod
    ("WORKLOAD-NUMA", both(set_in("gpu.kubelet_topology_manager_policy", "single-numa-node"),
                           set_in("all.machines.a100box.numa_nodes", 2), workloads("infer", gpu={**MIG, "count": 29})),
     both(set_in("gpu.kubelet_topology_manager_policy", "single-numa-node"),
          set_in("all.machines.a100box.numa_nodes", 2), workloads("infer", gpu={**MIG, "count": 28}))),
    ("WORKLOAD-NUMA-POLICY", workloads("svc", numa_aligned=True), workloads("svc", numa_aligned=False)),
    # aligned only with exclusive CPUs: Guaranteed (requests = limits) with whole CPUs
    ("WORKLOAD-NUMA-POLICY",
     both(set_in("cpu.kubelet_cpu_manager_policy", "static"), set_in("cpu.kubelet_topology_manager_policy", "restricted"),
          workloads("svc", numa_aligned=True, requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "2Gi"})),
     both(set_in("cpu.kubelet_cpu_manager_policy", "static"), set_in("cpu.kubelet_topology_manager_policy", "restricted"),
          workloads("svc", numa_aligned=True, requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"}))),
]

def scoring(**changes):
    """A mutation of the declared profile's NodeResourcesFit scoringStrategy."""
    def mutate(data):
        data["group_vars"]["all"]["kube_scheduler_profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"].update(
            changes)
    return mutate


def undeclared(data):
    del data["group_vars"]["all"]["kube_scheduler_profiles"]


CASES += [
    ("SCHEDULER-UNDECLARED", undeclared, scoring(resources=[{"name": "cpu", "weight": 1}])),
    ("SCHEDULER-PROFILE", scoring(type="RequestedToCapacityRatio"), scoring(type="LeastAllocated")),
    ("SCHEDULER-PROFILE", set_in("all.kube_scheduler_config_extra_opts", {"percentageOfNodesToScore": 50}),
     set_in("all.kube_scheduler_config_extra_opts", {"percentageOfNodesToScore": 100, "podMaxBackoffSeconds": 5})),
    # without the profile, the project's is used, and the extra fields still apply
    ("SCHEDULER-PROFILE", both(undeclared, set_in("all.kube_scheduler_config_extra_opts", {"percentageOfNodesToScore": 50})),
     both(undeclared, set_in("all.kube_scheduler_config_extra_opts", {"parallelism": 8}))),
]


@pytest.mark.parametrize("code, failing, passing", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_fails_and_passes(inventory, findings, code, failing, passing):
    bad = inventory
    failing(bad)
    found = [f for f in findings(bad) if f.code == code]
    assert found, f"{code} not reported"
    assert all(f.severity == RULES[code].severity for f in found)
    assert all(f.file and f.field and f.message and f.fix for f in found)

    good = base_inventory()
    passing(good)
    assert good != base_inventory(), "a passing twin must change something, at the boundary where there is one"
    assert [f for f in findings(good) if f.code == code] == []


def test_the_base_inventory_is_clean(inventory, findings):
    assert findings(inventory) == []


def test_every_rule_has_a_failing_case():
    assert sorted(RULES) == sorted({case[0] for case in CASES})


def test_findings_name_the_file_that_holds_the_problem(inventory, findings):
    set_in("gpu.node_taints", [])(inventory)
    host_var("gpu", "gpu-1", "nvidia_driver_version", "550.90.07")(inventory)
    by_code = {f.code: f for f in findings(inventory)}
    assert by_code["POOL-GPU-TAINT"].file.endswith("group_vars/gpu.yml")
    assert by_code["POOL-GPU-TAINT"].field == "node_taints"
    assert by_code["GPU-DRIVER-DRIFT"].file.endswith("hosts.yml")
    assert by_code["GPU-DRIVER-DRIFT"].field == "gpu-1.nvidia_driver_version"


def test_a_pool_finding_names_the_file_of_a_split_group_vars_folder(inventory, write):
    """group_vars/<pool>/ may split a pool's variables over several files: name the one that holds the field."""
    from infra.checks import run_checks
    from infra.spec import load_environment

    gpu = inventory["group_vars"].pop("gpu")
    gpu["node_taints"] = ["nvidia.com/gpu=present:PreferNoSchedule"]
    taints = {"node_taints": gpu.pop("node_taints")}
    path = write(inventory)
    write_text(path, "group_vars/gpu/main.yml", yaml.safe_dump(gpu))
    write_text(path, "group_vars/gpu/taints.yml", yaml.safe_dump(taints))
    [finding] = run_checks(load_environment(path))
    assert (finding.code, finding.field) == ("POOL-GPU-TAINT", "node_taints")
    assert finding.file.endswith("group_vars/gpu/taints.yml")


def test_a_host_finding_names_the_host_vars_file_that_sets_the_value(inventory, findings):
    inventory["host_vars"]["gpu-1"] = {"cuda_version": "12.6"}
    [drift] = [f for f in findings(inventory) if f.code == "GPU-DRIVER-DRIFT"]
    assert drift.file.endswith("host_vars/gpu-1.yml")


def test_every_problem_is_reported_at_once(inventory, findings):
    set_in("gpu.node_taints", [])(inventory)
    set_in("all.kube_version", "1.20.0")(inventory)
    set_in("all.reserved_networks.lab", "10.96.0.0/16")(inventory)
    assert {"POOL-GPU-TAINT", "KUBE-VERSION", "NET-OVERLAP"} <= {f.code for f in findings(inventory)}


def test_a_broken_reference_is_reported_once_not_as_a_cascade(inventory, findings):
    set_in("gpu.machine", "nosuch")(inventory)
    assert [f.code for f in findings(inventory)] == ["REF-MACHINE"]


def test_a_finding_is_reported_once_per_kind_of_host_not_per_host(inventory, findings):
    add_cpu_hosts(2)(inventory)
    set_in("cpu.sysctls", {"net.netfilter.nf_conntrack_max": 1000})(inventory)
    found = [f for f in findings(inventory) if f.code == "SYSCTL-CONNTRACK-MAX"]
    assert len(found) == 1
    assert "cpu-1, cpu-2, cpu-3 and 1 more" in found[0].message


# ------------------------------------------------------------------ one cause, one finding


@pytest.mark.parametrize("cause, mutation", [
    ("GPU-MIG-FIT", set_in("gpu.gpu_sharing.mig_devices", {"3g.40gb": 2, "1g.10gb": 1})),
    ("GPU-MIG-PROFILE", set_in("gpu.gpu_sharing.mig_devices", {"1g.5gb": 7})),
    ("GPU-MIG-UNSUPPORTED", set_in("all.machines.a100box.gpu_model", "T4-16GB")),
    ("GPU-MIXED-MODELS", add_host("gpu", "gpu-2", machine="t4box")),
    ("GPU-NO-GPUS", set_in("gpu.machine", "small")),
    ("REF-GPU-MODEL", set_in("all.machines.a100box.gpu_model", "A200-1TB")),
    ("REF-MACHINE", set_in("gpu.machine", "nosuch")),
    ("REF-POOL", set_in("all.storage_classes.local.pools", ["mme"])),
    ("HOST-ALLOCATABLE", set_in("mem.hugepages", {"1Gi": 64})),
])
def test_a_broken_fact_is_reported_once_not_as_a_cascade(inventory, findings, cause, mutation):
    """Rules that depend on a broken fact (quotas on the pool's GPU resources or capacity, a storage
    class's backing) stay silent: the cause is the only finding."""
    mutation(inventory)
    assert [f.code for f in findings(inventory)] == [cause]


def test_the_same_broken_facts_did_cascade_without_prerequisites(inventory, findings, monkeypatch):
    """The guard above is what silences the consequences: without it the MIG typo is reported 4 more times."""
    from infra.checks.base import Report

    monkeypatch.setattr(Report, "broken", lambda self, *facts: False)
    set_in("gpu.gpu_sharing.mig_devices", {"1g.5gb": 7})(inventory)
    codes = [f.code for f in findings(inventory)]
    assert codes[0] == "GPU-MIG-PROFILE" and "QUOTA-GPU-RESOURCE" in codes


def test_causes_print_before_consequences(inventory, findings):
    set_in("all.tenants.svc.quota", {"pods": 10})(inventory)  # a warning about a tenant
    set_in("all.kube_version", "1.20.0")(inventory)  # an error about the cluster
    set_in("cpu.kubelet_reserved_system_cpus", "0,99")(inventory)  # an error about a pool
    codes = [f.code for f in findings(inventory)]
    assert codes == ["KUBE-VERSION", "KUBELET-RESERVED-CPUS", "TEN-NO-QUOTA"]


def test_hosts_without_an_rdma_slot_are_offered_the_lowest_free_ones(inventory, findings):
    rdma(gpu={"gpu-gone": 0}, t4={"t4-1": 2})(inventory)  # gpu-gone left the pool: its slot stays reserved
    add_host("gpu", "gpu-2", zone="a")(inventory)
    (finding,) = [f for f in findings(inventory) if f.code == "NET-RDMA-SLOT"]
    assert (finding.file.rsplit("/", 2)[-2:], finding.field) == (["group_vars", "gpu.yml"], "rdma_slots")
    assert "hosts gpu-1, gpu-2 have no slot on RDMA fabric 192.168.100.0/24" in finding.message
    assert finding.fix == "Add to rdma_slots of pool gpu, the lowest free slots: {gpu-1: 1, gpu-2: 3}"


def test_a_full_rdma_fabric_says_how_many_hosts_get_no_slot(inventory, findings):
    rdma(gpu={}, t4={"t4-1": 0}, gpu_prefix=25, t4_prefix=25)(inventory)  # two slots
    add_host("gpu", "gpu-2", zone="a")(inventory)
    (finding,) = [f for f in findings(inventory) if f.code == "NET-RDMA-SLOT"]
    assert finding.fix.startswith("Add to rdma_slots of pool gpu, the lowest free slots: {gpu-1: 1}; ")
    assert "no slot left for 1 more host(s)" in finding.fix
