"""What the host layer applies to each host: the spec's variables turned into role parameters.

The inventory says a pool's hugepages, sysctls, kubelet policies, driver and MIG layout once; this
module derives what a host needs from them (the whole KubeletConfiguration, the conntrack table, the
mig-parted file and selection, the labels and taints the kubelet registers with) with the same
functions the plan and the cluster layer use, so the three layers cannot disagree. The playbooks get
the result through `python -m infra hostvars`, in their preflight play, and map it onto each role's
parameters in the play that applies the role: the roles stay reusable and read nothing of the spec.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from infra.cluster.gpu import GPU_CLIENTS_LABEL, GPU_CLIENTS_PAUSED, host_mig_parted
from infra.cluster.nodes import kubelet_registration
from infra.knowledge.platform import platform
from infra.model.conntrack import BUCKETS_SYSCTL, MAX_SYSCTL, conntrack
from infra.model.kubelet import kubelet_settings
from infra.model.resolve import Resolved, ResolvedHost, resolve
from infra.spec import Environment, Pool

KUBELET_API = "kubelet.config.k8s.io/v1beta1"
RDMA_MEMLOCK = "infinity"  # LimitMEMLOCK on RDMA hosts; a pod's memory limit still bounds what it pins


def environment_host_vars(env: Environment) -> dict[str, Any]:
    """Every node host's parameters, as `python -m infra hostvars` prints them, and how the plays roll over them."""
    view = resolve(env)
    return {"environment": env.name, "rollout": env.cluster.host_rollout.model_dump(),
            "hosts": {name: host_vars(view, name) for name in sorted(view.hosts)}}


def host_vars(view: Resolved, host_name: str) -> dict[str, Any]:
    resolved = view.hosts[host_name]
    pool = view.env.pools[resolved.host.pool]
    machine = resolved.machine
    if machine is None:  # CHECK refuses an unknown machine model; the host layer never sees one
        raise ValueError(f"{host_name}: machine {resolved.machine_name!r} is not defined")
    table = conntrack(view.env.cluster, pool.vars, machine.cores * machine.threads_per_core)
    sysctls: dict[str, int | str] = {k: v for k, v in sorted(pool.vars.sysctls.items())
                                     if k not in (MAX_SYSCTL, BUCKETS_SYSCTL)}
    # Written on every host, kube-proxy or not: the table is right from boot, before kube-proxy starts,
    # and kube-proxy sets the same value (infra.model.conntrack), so nothing fights over it.
    sysctls[MAX_SYSCTL] = table.max
    return {
        "pool": pool.name,
        "pool_kind": pool.vars.pool_kind,
        "kube_version": view.env.cluster.kube_version,
        "sysctls": sysctls,
        "conntrack": {"max": table.max, "hashsize": table.buckets, "set_by": table.set_by},
        "hugepages": {size: pool.vars.hugepages.get(size, 0) for size in ("2Mi", "1Gi")},
        "irq_affinity": pool.vars.irq_affinity.model_dump() if pool.vars.irq_affinity else None,
        "local_disks": [disk.model_dump() for disk in pool.vars.local_disks],
        "container_runtime": container_runtime(view.env, pool),
        "kubelet": kubelet(view, resolved, pool),
        "nvidia": nvidia(resolved, pool),
        "mig": mig(view.env, resolved, pool),
    }


def kubelet(view: Resolved, resolved: ResolvedHost, pool: Pool) -> dict[str, Any]:
    """The KubeletConfiguration of the host (written whole as a drop-in) and its --node-labels."""
    assert resolved.machine is not None
    settings = kubelet_settings(view.env.cluster, pool.vars, resolved.machine)
    registration = kubelet_registration(view, resolved.name)
    config: dict[str, Any] = {
        "apiVersion": KUBELET_API,
        "kind": "KubeletConfiguration",
        "maxPods": settings.max_pods,
        "cpuManagerPolicy": settings.cpu_manager_policy,
        "topologyManagerPolicy": settings.topology_manager_policy,
        "memoryManagerPolicy": settings.memory_manager_policy,
        "kubeReserved": {"cpu": pool.vars.kube_cpu_reserved, "memory": pool.vars.kube_memory_reserved},
        "systemReserved": {"cpu": pool.vars.system_cpu_reserved, "memory": pool.vars.system_memory_reserved},
        "evictionHard": dict(sorted(settings.eviction_hard.items())),
        "registerWithTaints": registration["register_with_taints"],
        "cgroupDriver": platform().node_runtime.cgroup_driver,  # containerd's runc gets the same (container_runtime)
    }
    if pool.vars.kubelet_reserved_system_cpus:
        config["reservedSystemCPUs"] = pool.vars.kubelet_reserved_system_cpus
    if settings.reserved_memory:
        config["reservedMemory"] = [{"numaNode": numa, "limits": {"memory": _bytes(amount)}}
                                    for numa, amount in settings.reserved_memory]
    return {"config": config, "node_labels": registration["node_labels"]}


def container_runtime(env: Environment, pool: Pool) -> dict[str, Any]:
    """What containerd must agree on with the kubelet and the CNI (one cgroup driver, one plugin folder), and
    NVIDIA's toolkit with the device plugin (GPUs only as the kubelet's mounts; used on GPU hosts). On RDMA pools
    containerd's locked-memory limit is lifted: its containers inherit it, and RDMA pods register pinned memory
    without IPC_LOCK, which their namespaces' Pod Security level refuses (infra/cluster/tenancy.py)."""
    runtime = platform().node_runtime
    return {"containerd_version": env.cluster.containerd_version,
            "cgroup_driver": runtime.cgroup_driver, "cni_bin_dir": runtime.cni_bin_dir,
            "memlock": RDMA_MEMLOCK if pool.vars.rdma_network is not None else "",
            "nvidia_toolkit_settings": dict(platform().gpu_isolation.toolkit_settings)}


def nvidia(resolved: ResolvedHost, pool: Pool) -> dict[str, Any] | None:
    machine = resolved.machine
    if machine is None or not machine.gpu_count:
        return None
    return {
        "driver_version": resolved.host.vars.nvidia_driver_version or pool.vars.nvidia_driver_version,
        "cuda_version": resolved.host.vars.cuda_version or pool.vars.cuda_version,
        "gpu_model": machine.gpu_model,
        "gpu_count": machine.gpu_count,
        # NVSwitch boards need nvidia-fabricmanager running at exactly the driver's version before CUDA sees the
        # GPUs; cards linked directly or by bridges do not, however many there are.
        "fabric_manager": machine.gpu_interconnect == "nvswitch",
    }


def mig(env: Environment, resolved: ResolvedHost, pool: Pool) -> dict[str, Any] | None:
    """The mig-parted file (the same text as the cluster layer's rendered mig-parted.yaml) and this pool's entry in it:
    its layout on MIG pools, all-disabled on the other pools' MIG-capable cards; None where no card has MIG.
    `pause_label` is the node label that takes the cluster layer's GPU clients off the node while it repartitions."""
    selection = host_mig_parted(env, pool)
    if selection is None or resolved.gpu is None or resolved.gpu.mig is None:
        return None
    return {"config": selection.config, "file": selection.text,
            "pause_label": {"key": GPU_CLIENTS_LABEL, "value": GPU_CLIENTS_PAUSED}}


def _bytes(amount: Decimal) -> str:
    """A byte count as the kubelet reads it: Mi when whole mebibytes, else plain bytes."""
    whole = int(amount)
    return f"{whole // 2**20}Mi" if whole % 2**20 == 0 else str(whole)
