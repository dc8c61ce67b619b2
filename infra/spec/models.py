"""The environment spec, one model per inventory file.

An inventory is read by Ansible as flat variables per host, so each file gets its own model:
`group_vars/all.yml` -> ClusterVars, `group_vars/<pool>.yml` -> PoolVars, a host's vars -> HostVars.
Names follow Kubespray where Kubespray has one (kube_pods_subnet, node_taints, kubelet_*), so the
same inventory reads naturally to people who know it. Unknown keys are rejected: a misspelt
variable silently falling back to a default is how clusters end up half-configured.

Rules that need more than one file (a tenant naming a pool, a MIG layout against the GPU model)
are checks (infra.checks), so they are reported together with file and field, not one at a time.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from infra.knowledge.units import parse_cpu_list, parse_quantity

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_TAINT = re.compile(r"^(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>[A-Za-z]+)$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_INTEGER_SYSCTLS = ("net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets")


class Strict(BaseModel):
    """Base for every spec model: unknown keys are errors, values are immutable once loaded.

    Types are strict too: "false" or "110" in quotes is refused where a boolean or a number belongs,
    because Ansible hands the roles the raw string, and in Jinja the string "false" is true.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _quantity(value: object) -> str:
    parse_quantity(value)  # raises on booleans, negatives and malformed text
    return str(value)


def _cpu_list(value: str) -> str:
    parse_cpu_list(value)
    return value


def _ipv4_network(value: object) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(str(value), strict=True)
    except ValueError as error:
        raise ValueError(
            f"{value!r} is not an IPv4 network in CIDR form with its host bits zero "
            f"(e.g. 10.233.64.0/18): {error}"
        ) from None


def _threshold(value: object) -> str:
    text = str(value)
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            percent = -1.0
        if not 0 <= percent < 100:
            raise ValueError(f"{value!r}: a percentage threshold is written 0% to 99% (e.g. 5%)")
        return text
    return _quantity(value)


EvictionSignal = Literal[
    "memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree"
]
Quantity = Annotated[str, BeforeValidator(_quantity)]
Threshold = Annotated[str, BeforeValidator(_threshold)]
CpuList = Annotated[str, AfterValidator(_cpu_list)]
Cidr = Annotated[ipaddress.IPv4Network, BeforeValidator(_ipv4_network)]
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]
Version = Annotated[str, Field(pattern=r"^\d+(\.\d+){1,2}$")]
InterfaceName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,15}$", description="Linux interface name")]


def check_label_key(key: str) -> None:
    """Raise ValueError unless `key` is a valid Kubernetes label key ([prefix/]name)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(f"label key {key!r}: prefix {prefix!r} must be a lowercase DNS subdomain")
    if not _LABEL_NAME.match(name):
        raise ValueError(
            f"label key {key!r}: name {name!r} must be 1-63 characters of letters, digits, '-', '_', '.' "
            "starting and ending with a letter or digit"
        )


def check_label_value(key: str, value: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ValueError(
            f"label {key}={value!r}: values are at most 63 characters of letters, digits, '-', '_', '.', "
            "starting and ending with a letter or digit"
        )


def parse_taint(text: str) -> tuple[str, str, str]:
    """Split a Kubespray taint string "key=value:Effect" into (key, value, effect), validated."""
    match = _TAINT.match(text)
    if not match:
        raise ValueError(f"taint {text!r} must be written key=value:Effect (e.g. nvidia.com/gpu=present:NoSchedule)")
    key, value, effect = match["key"], match["value"] or "", match["effect"]
    check_label_key(key)
    if value:
        check_label_value(key, value)
    if effect not in TAINT_EFFECTS:
        raise ValueError(f"taint {text!r}: effect {effect!r} must be one of {', '.join(TAINT_EFFECTS)}")
    return key, value, effect


# ---------------------------------------------------------------- group_vars/all.yml


class Machine(Strict):
    """A machine model: what one server of this kind has, and what it costs."""

    description: str = ""
    cores: int = Field(ge=1, le=1024, description="physical CPU cores, all sockets together")
    threads_per_core: Literal[1, 2] = Field(2, description="2 with SMT/Hyper-Threading on")
    numa_nodes: int = Field(1, ge=1, le=16)
    memory_gib: int = Field(ge=1, le=65536)
    gpu_model: str | None = Field(None, description="a name from infra/knowledge/gpus.yml")
    gpu_count: int = Field(0, ge=0, le=16)
    root_disk_gib: int = Field(100, ge=1, le=1_048_576,
                               description="the disk holding /var/lib/kubelet and the container images: the kubelet "
                                           "reports it as ephemeral-storage, less its nodefs.available threshold")
    gpu_interconnect: Literal["nvswitch", "nvlink", "pcie"] | None = Field(
        None, description="nvswitch: NVLink through NVSwitch (HGX/DGX 8-GPU boards; needs nvidia-fabricmanager), "
                          "nvlink: cards linked directly or by bridges, pcie: no NVLink")
    monthly_price: float = Field(0, ge=0, description="per machine, in the cluster's currency")
    yearly_discount_percent: float = Field(0, ge=0, lt=100, description="discount on a one-year commitment")

    @model_validator(mode="after")
    def _gpu_fields_go_together(self) -> Machine:
        if self.gpu_count and not self.gpu_model:
            raise ValueError("gpu_count is set but gpu_model is not; name the card, e.g. gpu_model: A100-80GB")
        if self.gpu_model and not self.gpu_count:
            raise ValueError("gpu_model is set but gpu_count is 0; say how many cards the machine holds")
        if self.gpu_count and not self.gpu_interconnect:
            raise ValueError("gpu_interconnect is required with GPUs: nvswitch, nvlink or pcie")
        return self

    @property
    def cpus(self) -> int:
        """Logical CPUs: what the kubelet reports as capacity and kube-proxy counts for conntrack."""
        return self.cores * self.threads_per_core


class PriorityClass(Strict):
    value: int = Field(ge=-2147483648, le=1000000000, description="higher schedules (and preempts) first")
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    description: str = ""


class LimitRangeSpec(Strict):
    """Container defaults for a namespace, so no pod arrives without requests (mirrors LimitRange)."""

    default: dict[str, Quantity] = Field(default_factory=dict, description="default limits")
    default_request: dict[str, Quantity] = Field(default_factory=dict)
    max: dict[str, Quantity] = Field(default_factory=dict)
    max_limit_request_ratio: dict[str, Quantity] = Field(default_factory=dict)


_QUOTA_KEYS = re.compile(
    r"^(cpu|memory|requests\.(cpu|memory|storage|ephemeral-storage)|limits\.(cpu|memory|ephemeral-storage)"
    r"|pods|services|services\.loadbalancers|services\.nodeports|persistentvolumeclaims|configmaps|secrets"
    r"|replicationcontrollers|resourcequotas|count/[a-z0-9.-]+"
    r"|hugepages-(2Mi|1Gi)|requests\.hugepages-(2Mi|1Gi)"
    r"|[a-z0-9][-a-z0-9.]*\.storageclass\.storage\.k8s\.io/(requests\.storage|persistentvolumeclaims)"
    r"|requests\.[a-z0-9][-a-z0-9.]*/[A-Za-z0-9][-A-Za-z0-9_.]*)$"
)


_RESOURCE_NAME = re.compile(
    r"^(cpu|memory|ephemeral-storage|pods|hugepages-(2Mi|1Gi))$"
    r"|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class Queue(Strict):
    """The tenant's Volcano queue (Queue.spec): its share of the cluster under contention."""

    weight: int = Field(1, ge=1, le=65535)
    capability: dict[str, Quantity] = Field(default_factory=dict, description="hard ceiling of the queue")
    reclaimable: bool = True

    @field_validator("capability")
    @classmethod
    def _capability_keys_are_resource_names(cls, capability: dict[str, str]) -> dict[str, str]:
        for key in capability:
            if key.startswith(("requests.", "limits.")):
                raise ValueError(
                    f"capability key {key!r}: a queue caps resources, not quota keys; write "
                    f"{key.split('.', 1)[1]!r}"
                )
            if not _RESOURCE_NAME.match(key):
                raise ValueError(
                    f"capability key {key!r} is not a resource name; use cpu, memory, pods, hugepages-1Gi "
                    "or an extended resource such as nvidia.com/gpu"
                )
        return capability


class Tenant(Strict):
    """A namespace and what it may use."""

    tier: Literal["production", "inference", "training", "offline", "dev"]
    pools: list[str] = Field(min_length=1, description="pools whose nodes this tenant's pods may use")
    priority_class: str | None = None
    quota: dict[str, Quantity] = Field(default_factory=dict, description="ResourceQuota spec.hard")
    limit_range: LimitRangeSpec | None = None
    queue: Queue | None = None

    @field_validator("quota")
    @classmethod
    def _quota_keys_are_kubernetes_names(cls, quota: dict[str, object]) -> dict[str, object]:
        for key in quota:
            if key.startswith("limits.") and "/" in key:
                raise ValueError(
                    f"quota key {key!r}: Kubernetes quotas extended resources by requests only; "
                    f"write {'requests.' + key.removeprefix('limits.')!r}"
                )
            if not _QUOTA_KEYS.match(key):
                raise ValueError(
                    f"quota key {key!r} is not a ResourceQuota resource name; use e.g. requests.cpu, "
                    "requests.memory, requests.nvidia.com/gpu, pods, "
                    "<class>.storageclass.storage.k8s.io/requests.storage"
                )
        return quota


class StorageClassSpec(Strict):
    """A storage class and the capacity behind it."""

    type: Literal["local", "csi"]
    provisioner: str | None = Field(None, description="CSI driver name; local classes use no provisioner")
    pools: list[str] = Field(default_factory=list, description="local: pools whose local_disks back the class")
    capacity: Quantity | None = Field(None, description="csi: usable capacity of the backend (e.g. 200Ti)")
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "WaitForFirstConsumer"
    reclaim_policy: Literal["Delete", "Retain"] = Field(
        "Delete", description="what happens to a volume when its claim is deleted; unset: Retain for local "
                              "classes (the disk's data stays until an admin frees it), Delete for csi")
    default: bool = False
    parameters: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _local_volumes_are_retained_unless_told(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") == "local" and "reclaim_policy" not in data:
            return {**data, "reclaim_policy": "Retain"}
        return data

    @model_validator(mode="after")
    def _fields_match_the_type(self) -> StorageClassSpec:
        if self.type == "csi":
            if not self.provisioner:
                raise ValueError("a csi storage class needs provisioner (the CSI driver name, e.g. nfs.csi.k8s.io)")
            if self.capacity is None:
                raise ValueError("a csi storage class needs capacity (usable size of the backend, e.g. 200Ti)")
            if self.pools:
                raise ValueError("pools applies to local storage classes; a csi class is reachable from every node")
        else:
            if self.provisioner:
                raise ValueError(
                    "a local storage class has no provisioner; remove it (kubernetes.io/no-provisioner is implied)"
                )
            if self.capacity is not None:
                raise ValueError(
                    "a local storage class takes its capacity from the pools' local_disks; remove capacity"
                )
            if not self.pools:
                raise ValueError("a local storage class needs pools: the pools whose local_disks back it")
        return self


def _count_or_share(unit: str) -> AfterValidator:
    """A number of UNITs (at least 1) or a share of them from 1% to 100%, as Ansible's serial and a DaemonSet's
    maxUnavailable take them."""
    def check(value: int | str) -> int | str:
        if isinstance(value, int):
            if value < 1:
                raise ValueError(f"{value}: at least one {unit} at a time")
        elif not re.fullmatch(r"([1-9]\d?|100)%", value):
            raise ValueError(f'{value!r}: a number of {unit}s (10) or a share of them from 1% to 100% ("10%")')
        return value
    return AfterValidator(check)


class HostRollout(Strict):
    """How the host layer's playbooks roll over the hosts: each play that changes hosts runs on batch_size hosts at
    a time (Ansible's serial) and the run stops when more than max_fail_percentage of a batch fails, leaving the
    later batches untouched. The defaults are Ansible's: every host at once, stop only when all fail."""

    batch_size: Annotated[int | str, _count_or_share("host")] = Field(
        "100%", description="hosts per batch, or a share of them (\"10%\")")
    max_fail_percentage: int = Field(100, ge=0, le=100, description="stop when more of a batch fails (0: any)")


class AgentRollout(Strict):
    """How the node agents the cluster layer declares (the CNI, Multus, the device plugin, dcgm-exporter, the
    storage node plugins) roll out: each DaemonSet replaces max_unavailable of its pods at a time, and Pulumi and
    Helm wait wave_seconds per wave before calling the rollout failed. Kubernetes' default, one pod at a time,
    is a thousand waves on a thousand nodes; Helm's default wait, 300 s, ends long before."""

    max_unavailable: Annotated[int | str, _count_or_share("node")] = Field(
        "10%", description="nodes whose agent restarts at once, or a share (\"10%\")")
    wave_seconds: int = Field(120, ge=10, le=3600, description="how long one wave may take: pull, start, ready")


class ClusterVars(Strict):
    """group_vars/all.yml: what the whole cluster shares."""

    cluster_name: DnsLabel
    kube_version: Version = Field(description="Kubernetes version, e.g. 1.34.2")
    containerd_version: str = Field(
        "2.3.7", pattern=r"^\d+\.\d+\.\d+$", description="Kubespray's: the containerd release every node runs "
        "(the containerd.io package of the host layer's repository); refused below what containerd recommends for "
        "kube_version (infra/knowledge/containerd.yml)")
    kube_network_plugin: Literal["calico", "cilium"]
    kube_pods_subnet: Cidr
    kube_service_addresses: Cidr
    kube_network_node_prefix: int = Field(24, ge=16, le=28, description="per-node Pod CIDR prefix length")
    kubelet_max_pods: int = Field(110, ge=10, le=1024)
    kube_proxy_remove: bool = Field(False, description="true when the CNI replaces kube-proxy (Cilium, Calico eBPF)")
    kube_proxy_conntrack_max_per_core: int | None = Field(
        None, ge=0, le=1048576, description="kube-proxy conntrack.maxPerCore; 0 leaves nf_conntrack_max alone"
    )
    kube_proxy_conntrack_min: int | None = Field(None, ge=0, le=67108864, description="kube-proxy conntrack.min")
    planned_services: int = Field(0, ge=0, description="Services the cluster is expected to hold")
    reserved_networks: dict[str, Cidr] = Field(
        default_factory=dict, description="networks the cluster must not overlap: machine room, VPNs, other sites"
    )
    zones: list[DnsLabel] = Field(default_factory=list)
    currency: str = Field("EUR", pattern=r"^[A-Z]{3}$")
    machines: dict[str, Machine] = Field(min_length=1)
    priority_classes: dict[DnsLabel, PriorityClass] = Field(default_factory=dict)
    tenants: dict[DnsLabel, Tenant] = Field(default_factory=dict)
    system_namespaces: list[DnsLabel] = Field(
        default_factory=list, description="namespaces of cluster components the stack does not deploy (an "
        "ingress controller, monitoring): their pods are exempt from the tenant admission policies, as kube-system's")
    storage_classes: dict[DnsLabel, StorageClassSpec] = Field(default_factory=dict)
    host_rollout: HostRollout = Field(default_factory=HostRollout)
    agent_rollout: AgentRollout = Field(default_factory=AgentRollout)
    kube_scheduler_profiles: list[dict[str, Any]] | None = Field(
        None, description="Kubespray's: kube-scheduler's profiles; unset, fit simulates the project's bin-packing "
        "profile, which `python -m infra scheduler INVENTORY --kubespray` prints for Kubespray to apply")
    kube_scheduler_config_extra_opts: dict[str, Any] = Field(
        default_factory=dict, description="Kubespray's: more KubeSchedulerConfiguration fields "
        "(percentageOfNodesToScore)")

    @field_validator("kube_version", mode="before")
    @classmethod
    def _strip_v(cls, value: object) -> object:
        return value[1:] if isinstance(value, str) and value.startswith("v") else value

    @field_validator("system_namespaces")
    @classmethod
    def _system_namespaces_are_no_tenants(cls, names: list[str], info: ValidationInfo) -> list[str]:
        if both := sorted(set(names) & set(info.data.get("tenants") or {})):
            raise ValueError(f"{both} are also tenants: a tenant's pods are held to its pools, so remove them here")
        return names

    @property
    def kube_minor(self) -> int:
        return int(self.kube_version.split(".")[1])


# ---------------------------------------------------------------- group_vars/<pool>.yml


class IrqAffinity(Strict):
    """Pin the interrupts of the named NICs to these CPUs, away from the pods' exclusive CPUs."""

    interfaces: list[InterfaceName] = Field(min_length=1)
    cpus: CpuList


class LocalDisk(Strict):
    """A local NVMe disk, formatted and mounted for the local static provisioner to discover."""

    # /dev/disk/by-id/... or by-path/... (which survive NVMe renumbering; by-path names hold ':') or a kernel name
    device: str = Field(pattern=r"^/dev/[A-Za-z0-9/_.:-]+$")
    size_gib: int = Field(ge=1)
    mount: str = Field(pattern=r"^/[A-Za-z0-9/_.-]+$")
    fs_type: Literal["ext4", "xfs"] = "xfs"


class Overcommit(Strict):
    """Limit-to-request ratios a pool accepts: 1.0 means requests are guaranteed (request = limit)."""

    cpu: float = Field(1.0, ge=1.0, le=20.0)
    memory: float = Field(1.0, ge=1.0, le=4.0)


class GpuSharing(Strict):
    """How a pool's GPUs are handed out, in the NVIDIA device plugin's and mig-parted's terms.

    exclusive     whole cards (nvidia.com/gpu)
    mig           hardware partitions, same layout on every card (nvidia.com/mig-<profile>)
    time-slicing  `replicas` pods take turns on a card, no memory isolation (nvidia.com/gpu.shared)
    mps           `replicas` pods share a card through MPS (nvidia.com/gpu.shared); whole cards only
    """

    mode: Literal["exclusive", "mig", "time-slicing", "mps"] = "exclusive"
    mig_config: str | None = Field(None, pattern=r"^[a-z0-9][-a-z0-9.]*$", description="mig-parted config name")
    mig_devices: dict[str, int] = Field(default_factory=dict, description="profile -> instances per card")
    replicas: int | None = Field(None, ge=2, le=64)

    @model_validator(mode="after")
    def _fields_match_the_mode(self) -> GpuSharing:
        mig = self.mode == "mig"
        shared = self.shared
        if mig and not (self.mig_config and self.mig_devices):
            raise ValueError("mode mig needs mig_config (a name, e.g. all-1g.10gb) and mig_devices ({profile: count})")
        if not mig and (self.mig_config or self.mig_devices):
            raise ValueError(f"mig_config and mig_devices apply only to mode mig, not {self.mode}")
        if shared and self.replicas is None:
            raise ValueError(f"mode {self.mode} needs replicas (pods per card, 2 or more)")
        if not shared and self.replicas is not None:
            raise ValueError(f"replicas applies only to time-slicing and mps, not {self.mode}")
        if any(count < 1 for count in self.mig_devices.values()):
            raise ValueError("mig_devices counts are instances per card and must be 1 or more")
        return self

    @property
    def shared(self) -> bool:
        """Whether several pods take turns on one card, with no memory isolation between them."""
        return self.mode in ("time-slicing", "mps")


class RdmaNetwork(Strict):
    """The secondary RDMA/RoCE interface attached to pods through Multus."""

    interface: InterfaceName
    cidr: Cidr
    mtu: int = Field(9000, ge=1280, le=9216)
    host_prefix: int = Field(
        26, ge=1, le=30,
        description="each host's slice of cidr, a /host_prefix (26: 64 addresses): slot N of rdma_slots is the "
                    "Nth such slice, so a host's addresses never move when others join or leave")


class PoolVars(Strict):
    """group_vars/<pool>.yml: one node pool, every host in it the same."""

    pool_kind: Literal["cpu", "memory", "gpu", "gpu_bigmem"]
    pool_description: str = ""
    machine: str = Field(description="a key of `machines` in group_vars/all.yml")
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[str] = Field(default_factory=list, description='Kubespray form: ["key=value:NoSchedule"]')
    kubelet_max_pods: int | None = Field(None, ge=10, le=1024, description="overrides the cluster's value")
    kubelet_cpu_manager_policy: Literal["none", "static"] = "none"
    kubelet_reserved_system_cpus: CpuList | None = None
    kubelet_topology_manager_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = "none"
    kubelet_memory_manager_policy: Literal["None", "Static"] = "None"
    kube_cpu_reserved: Quantity = "100m"
    kube_memory_reserved: Quantity = "256Mi"
    system_cpu_reserved: Quantity = "100m"
    system_memory_reserved: Quantity = "512Mi"
    eviction_hard: dict[EvictionSignal, Threshold] = Field(
        default_factory=dict, description="kubelet evictionHard, merged over the kubelet's defaults: quantity or %"
    )
    overcommit: Overcommit = Field(default_factory=Overcommit)
    hugepages: dict[Literal["2Mi", "1Gi"], int] = Field(default_factory=dict, description="pages per host")
    sysctls: dict[str, int | str] = Field(default_factory=dict)
    irq_affinity: IrqAffinity | None = None
    local_disks: list[LocalDisk] = Field(default_factory=list)
    nvidia_driver_version: Version | None = None
    cuda_version: Version | None = None
    gpu_sharing: GpuSharing | None = None
    rdma_network: RdmaNetwork | None = None
    rdma_slots: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict,
        description="host -> its slice of rdma_network.cidr, given once and never changed; a host that left "
                    "keeps its slot reserved until its line is removed")

    @field_validator("node_labels")
    @classmethod
    def _labels_are_kubernetes_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            check_label_key(key)
            check_label_value(key, str(value))
        return labels

    @field_validator("node_taints")
    @classmethod
    def _taints_are_kubespray_taints(cls, taints: list[str]) -> list[str]:
        for taint in taints:
            parse_taint(taint)
        return taints

    @field_validator("local_disks")
    @classmethod
    def _disks_are_distinct(cls, disks: list[LocalDisk]) -> list[LocalDisk]:
        for attribute in ("device", "mount"):
            values = [getattr(disk, attribute) for disk in disks]
            repeated = sorted({value for value in values if values.count(value) > 1})
            if repeated:
                raise ValueError(f"local_disks: {attribute} {', '.join(repeated)} listed more than once")
        return disks

    @field_validator("hugepages")
    @classmethod
    def _page_counts_are_non_negative(cls, pages: dict[str, int]) -> dict[str, int]:
        for size, count in pages.items():
            if count < 0:
                raise ValueError(f"hugepages {size}: {count} pages; write 0 or more")
        return pages

    @field_validator("sysctls")
    @classmethod
    def _sysctl_names(cls, sysctls: dict[str, object]) -> dict[str, object]:
        for name, value in sysctls.items():
            if not re.fullmatch(r"[a-z0-9_]+(\.[A-Za-z0-9_-]+)+", name):
                raise ValueError(f"sysctl {name!r} is not a dotted kernel parameter name (e.g. net.core.somaxconn)")
            if name in _INTEGER_SYSCTLS and (isinstance(value, bool) or not str(value).isdigit()):
                raise ValueError(f"sysctl {name} is a count; write a whole number, not {value!r}")
        return sysctls

    @model_validator(mode="after")
    def _gpu_fields_only_on_gpu_pools(self) -> PoolVars:
        gpu_kind = self.is_gpu
        gpu_fields = {
            "nvidia_driver_version": self.nvidia_driver_version,
            "cuda_version": self.cuda_version,
            "gpu_sharing": self.gpu_sharing,
            "rdma_network": self.rdma_network,
            "rdma_slots": self.rdma_slots or None,
        }
        if not gpu_kind:
            stray = [name for name, value in gpu_fields.items() if value is not None]
            if stray:
                raise ValueError(f"{', '.join(stray)} apply only to pool_kind gpu or gpu_bigmem, not {self.pool_kind}")
        elif not (self.nvidia_driver_version and self.cuda_version):
            raise ValueError("GPU pools need nvidia_driver_version (e.g. 550.127.08) and cuda_version (e.g. 12.4)")
        return self

    @property
    def is_gpu(self) -> bool:
        return self.pool_kind in ("gpu", "gpu_bigmem")

    @property
    def sharing(self) -> GpuSharing:
        return self.gpu_sharing or GpuSharing()


# ---------------------------------------------------------------- hosts.yml / host_vars/<host>.yml


class HardwareOverride(Strict):
    """Facts where one host differs from its machine model (a pulled DIMM, a failed card)."""

    cores: int | None = Field(None, ge=1, le=1024)
    threads_per_core: Literal[1, 2] | None = None
    numa_nodes: int | None = Field(None, ge=1, le=16)
    memory_gib: int | None = Field(None, ge=1, le=65536)
    gpu_count: int | None = Field(None, ge=0, le=16)


class HostVars(Strict):
    """A host's own variables. Ansible connection variables (ansible_*) are passed through untouched."""

    zone: DnsLabel | None = None
    machine: str | None = Field(None, description="overrides the pool's machine model")
    hardware: HardwareOverride | None = None
    nvidia_driver_version: Version | None = None
    cuda_version: Version | None = None


# ---------------------------------------------------------------- group_vars/all: workloads


WORKLOADS_KEY = "workloads"
WorkloadResource = Literal["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "hugepages-1Gi"]
_MIG_PROFILE = re.compile(r"^[1-8]g\.[0-9]+gb(\+me)?$")


class GpuNeed(Strict):
    """What one replica asks of GPUs, in the device plugin's resources.

    whole   `count` whole cards (nvidia.com/gpu), of `model` if set (node label k8s-node-pools.io/gpu-model)
    mig     `count` MIG instances of `profile` (nvidia.com/mig-<profile>)
    shared  `count` time-sliced or MPS slices (nvidia.com/gpu.shared); no memory isolation
    memory  `count` devices of at least `memory_gib` each: the smallest MIG instance or whole card the
            tenant's pools advertise that has it (a pod names one resource, so this is resolved once)
    """

    type: Literal["whole", "mig", "shared", "memory"]
    count: int = Field(1, ge=1, le=64, description="devices per replica")
    model: str | None = Field(None, description="whole, memory: only cards of this GPU model")
    profile: str | None = Field(None, description="mig: a MIG profile of the card, e.g. 3g.40gb")
    memory_gib: int | None = Field(None, ge=1, le=1024, description="memory: at least this much per device")

    @model_validator(mode="after")
    def _fields_match_the_type(self) -> GpuNeed:
        if (self.profile is not None) != (self.type == "mig"):
            raise ValueError("profile (a MIG profile such as 3g.40gb) goes with type mig, and only with it")
        if self.profile is not None and not _MIG_PROFILE.match(self.profile):
            raise ValueError(f"profile {self.profile!r} is not a MIG profile name; write e.g. 1g.10gb, 3g.40gb")
        if (self.memory_gib is not None) != (self.type == "memory"):
            raise ValueError("memory_gib goes with type memory, and only with it")
        if self.model is not None and self.type not in ("whole", "memory"):
            raise ValueError(f"model applies to type whole or memory, not {self.type}: the {self.type} resource "
                             "already names what the pod gets")
        return self


class StorageNeed(Strict):
    """One PersistentVolumeClaim per replica (a StatefulSet's volumeClaimTemplate)."""

    storage_class: DnsLabel = Field(description="a key of storage_classes")
    size: Quantity = Field(description="requested capacity, e.g. 500Gi")


class Workload(Strict):
    """A service or job of one tenant: how many replicas, and what each one asks of a node.

    Requests and limits follow Kubernetes: a request left out falls back to the limit, then to the
    tenant's LimitRange defaults (as the API server and the LimitRanger admission plugin fill them).
    """

    kind: Literal["service", "job"] = Field("service", description="service: Deployment/StatefulSet; job: batch")
    description: str = ""
    replicas: int = Field(ge=1, le=100000)
    requests: dict[WorkloadResource, Quantity] = Field(default_factory=dict, description="per replica")
    limits: dict[WorkloadResource, Quantity] = Field(default_factory=dict, description="per replica")
    gpu: GpuNeed | None = None
    gang: int | None = Field(None, ge=1, description="jobs: Volcano minAvailable, replicas placed all or none")
    numa_aligned: bool = Field(False, description="CPUs, memory and devices from one NUMA node (Topology Manager)")
    storage: StorageNeed | None = None
    priority_class: str | None = Field(None, description="a key of priority_classes; default: the tenant's")

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        for resource, request in self.requests.items():
            limit = self.limits.get(resource)
            if limit is not None and parse_quantity(request) > parse_quantity(limit):
                raise ValueError(f"requests.{resource} {request} is above limits.{resource} {limit}; Kubernetes "
                                 "refuses a request above its limit")
            if resource.startswith("hugepages-") and limit is not None and parse_quantity(request) != parse_quantity(
                    limit):
                raise ValueError(f"{resource}: request {request} and limit {limit} differ; hugepages are not "
                                 "overcommitted, so write the same value (or only the limit)")
        if self.gang is not None:
            if self.kind != "job":
                raise ValueError("gang applies to kind job (a Volcano job's minAvailable); services roll one by one")
            if self.gang > self.replicas:
                raise ValueError(f"gang {self.gang} is above replicas {self.replicas}; minAvailable counts replicas")
        return self


class WorkloadVars(Strict):
    """The `workloads` variable of group_vars/all: tenant -> workload name -> workload."""

    workloads: dict[DnsLabel, dict[DnsLabel, Workload]] = Field(default_factory=dict)
