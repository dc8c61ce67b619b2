"""GPU pools: MIG layouts that fit the card, drivers that match, hosts big enough to feed their GPUs."""

from __future__ import annotations

from infra.checks.base import Report, gpu_fact, machine_fact, rule
from infra.knowledge.gpus import gpu_models
from infra.knowledge.platform import platform
from infra.model.capacity import describe_hosts
from infra.model.drivers import driver_verdict
from infra.model.mig import placement
from infra.model.resolve import Resolved
from infra.spec import Host, Pool
from infra.spec.models import Machine

GPU_NO_GPUS = rule(
    "GPU-NO-GPUS", "error",
    "A GPU pool on a machine model without GPUs: the pool advertises nothing and its jobs never schedule.",
    "Give the machine model gpu_model and gpu_count, or change pool_kind.",
)
GPU_IDLE = rule(
    "GPU-IDLE", "warning",
    "A CPU or memory pool on machines with GPUs: the cards sit idle (or get used by pods nobody planned).",
    "Make the pool a GPU pool, or use a machine model without GPUs.",
)
GPU_MIG_UNSUPPORTED = rule(
    "GPU-MIG-UNSUPPORTED", "error",
    "MIG asked of a card without MIG (T4, L4, L40S, V100, RTX): mig-parted fails on every node.",
    "Use time-slicing or whole GPUs on this card, or a MIG-capable model (A30, A100, H100, H200).",
)
GPU_MIG_PROFILE = rule(
    "GPU-MIG-PROFILE", "error",
    "A MIG profile name the card does not offer (2g.20gb is an A100-80GB profile; the A100-40GB's is 2g.10gb).",
    "Use a profile listed for the model in infra/knowledge/gpus.yml.",
)
GPU_MIG_FIT = rule(
    "GPU-MIG-FIT", "error",
    "A MIG layout with no valid placement on the card: instances need fixed, non-overlapping memory-slice "
    "positions, so a layout can fail even when its compute slices add up to 7.",
    "Choose a layout from NVIDIA's supported combinations (e.g. 3g+2g+1g+1g, 4g+2g+1g, 7x1g).",
)
GPU_MIG_CONFIG_CONFLICT = rule(
    "GPU-MIG-CONFIG-CONFLICT", "error",
    "Two pools giving one mig_config name different layouts: the mig-parted config file holds one layout "
    "per name, so one of the pools gets the other's partitions and advertises resources it does not have.",
    "Give each distinct layout its own mig_config name, or make the layouts the same.",
)
GPU_MIXED_MODELS = rule(
    "GPU-MIXED-MODELS", "error",
    "Hosts of one GPU pool carrying different GPU models: the pool's MIG layout, device-plugin config and "
    "quotas assume one card, and a pod cannot tell which one it gets.",
    "Put each GPU model in its own pool.",
)
GPU_MPS_REPLICAS = rule(
    "GPU-MPS-REPLICAS", "error",
    "MPS replicas above the card's MPS client limit (48 per GPU on Volta and newer): the clients past the "
    "limit fail to start their CUDA context.",
    "Lower gpu_sharing.replicas to the limit named in the finding.",
)
GPU_DRIVER_DRIFT = rule(
    "GPU-DRIVER-DRIFT", "error",
    "Hosts of one GPU pool on different driver or CUDA versions: the same pod behaves differently per "
    "node, and the device plugin's config assumes one driver.",
    "Remove the host override, or move the host to its own pool during the upgrade.",
)
GPU_CUDA_DRIVER = rule(
    "GPU-CUDA-DRIVER", "error",
    "A driver below what the CUDA release runs on at all (its own minimum, and the major's minor-version "
    "compatibility floor): CUDA applications fail to initialise.",
    "Raise nvidia_driver_version to at least the driver named in the finding, or lower cuda_version.",
)
GPU_CUDA_UNKNOWN = rule(
    "GPU-CUDA-UNKNOWN", "warning",
    "A CUDA release the driver table (infra/knowledge/platform.yml) does not list: whether the driver runs "
    "it cannot be checked.",
    "Use a released CUDA version (e.g. 12.4 or 12.4.1), or add the release and its minimum driver to "
    "platform.yml from NVIDIA's release notes.",
)
GPU_DRIVER_UNSUPPORTED = rule(
    "GPU-DRIVER-UNSUPPORTED", "error",
    "A driver branch older than the card (an H100 on R470): the driver does not know the device and no "
    "GPU appears on the node.",
    "Raise nvidia_driver_version to the card's first supported branch named in the finding, or newer.",
)
GPU_CUDA_MINOR = rule(
    "GPU-CUDA-MINOR", "warning",
    "A CUDA minor release newer than the driver fully supports: it runs only under minor-version "
    "compatibility (no PTX JIT of newer code).",
    "Raise nvidia_driver_version to the driver named in the finding.",
)
GPU_BIGMEM_SHARED = rule(
    "GPU-BIGMEM-SHARED", "error",
    "A big-memory GPU pool that shares its cards: large-model training needs the whole machine.",
    "Use gpu_sharing.mode exclusive for gpu_bigmem pools; share cards in a gpu pool instead.",
)
HOST_CORES_PER_GPU = rule(
    "HOST-CORES-PER-GPU", "warning",
    "Too few CPU cores per GPU (8 per A100, 12 per H100/H200): data loading starves the GPUs.",
    "Use a machine with more cores, or fewer GPUs per machine.",
)
HOST_MEMORY_PER_GPU = rule(
    "HOST-MEMORY-PER-GPU", "warning",
    "Too little host memory per GPU (64 GiB per A100, 128 GiB per H100/H200): pinned buffers and "
    "dataloaders swap or get OOM-killed.",
    "Use a machine with more memory, or fewer GPUs per machine.",
)


def check(view: Resolved, report: Report) -> None:
    layouts: dict[str, tuple[Pool, dict[str, int]]] = {}
    for pool in view.env.pools.values():
        groups = view.machine_groups(pool)
        gpu_pool = pool.vars.is_gpu
        for machine, hosts in groups.items():
            if gpu_pool and not machine.gpu_count:
                report.at_pool(GPU_NO_GPUS, pool, "machine",
                           f"pool {pool.name} ({describe_hosts(hosts)}): machine has no GPUs",
                           breaks=(gpu_fact(pool.name), machine_fact(pool.name)))
            if not gpu_pool and machine.gpu_count:
                report.at_pool(GPU_IDLE, pool, "pool_kind",
                           f"{pool.vars.pool_kind} pool {pool.name} runs on machines with "
                           f"{machine.gpu_count} x {machine.gpu_model}")
            _host_per_gpu(pool, machine, hosts, report)
        if not gpu_pool:
            continue
        models = view.gpu_models(pool)
        if len(models) > 1:
            report.at_pool(GPU_MIXED_MODELS, pool, "machine",
                       f"pool {pool.name} mixes {', '.join(models)}", breaks=(gpu_fact(pool.name),))
        elif models and not report.broken(gpu_fact(pool.name)):
            _sharing(pool, models[0], report)
        _drivers(pool, models[0] if len(models) == 1 else None, report)
        sharing = pool.vars.sharing
        if sharing.mig_config:
            first = layouts.setdefault(sharing.mig_config, (pool, dict(sharing.mig_devices)))
            if first[1] != dict(sharing.mig_devices):
                report.at_pool(GPU_MIG_CONFIG_CONFLICT, pool, "gpu_sharing.mig_config",
                           f"pools {first[0].name} and {pool.name} both name {sharing.mig_config!r}, with layouts "
                           f"{_layout(first[1])} and {_layout(sharing.mig_devices)}",
                           breaks=(gpu_fact(pool.name), gpu_fact(first[0].name)))


def _layout(devices: dict[str, int]) -> str:
    return " + ".join(f"{count}x{name}" for name, count in devices.items())


def _sharing(pool: Pool, model: str, report: Report) -> None:
    sharing = pool.vars.sharing
    broken = (gpu_fact(pool.name),)
    if pool.vars.pool_kind == "gpu_bigmem" and sharing.mode != "exclusive":
        report.at_pool(GPU_BIGMEM_SHARED, pool, "gpu_sharing.mode",
                   f"gpu_bigmem pool {pool.name} shares its cards by {sharing.mode}")
    if sharing.mode == "mps" and sharing.replicas and sharing.replicas > gpu_models()[model].mps_max_clients:
        report.at_pool(GPU_MPS_REPLICAS, pool, "gpu_sharing.replicas",
                   f"pool {pool.name}: {sharing.replicas} MPS clients per {model}; the limit is "
                   f"{gpu_models()[model].mps_max_clients}")
    if sharing.mode != "mig":
        return
    geometry = gpu_models()[model].mig
    if geometry is None:
        report.at_pool(GPU_MIG_UNSUPPORTED, pool, "gpu_sharing.mode", f"pool {pool.name}: {model} has no MIG",
                   breaks=broken)
        return
    unknown = [name for name in sharing.mig_devices if name not in geometry.profiles]
    for name in unknown:
        report.at_pool(GPU_MIG_PROFILE, pool, f"gpu_sharing.mig_devices.{name}",
                   f"{model} has no profile {name}; it has {', '.join(geometry.profiles)}", breaks=broken)
    if unknown:
        return
    if placement(model, sharing.mig_devices) is None:
        compute = sum(geometry.profiles[name].compute * count for name, count in sharing.mig_devices.items())
        memory = sum(geometry.profiles[name].memory * count for name, count in sharing.mig_devices.items())
        report.at_pool(GPU_MIG_FIT, pool, "gpu_sharing.mig_devices",
                   f"{_layout(sharing.mig_devices)} has no placement on {model}: {compute}/{geometry.compute_slices} "
                   f"compute slices, {memory}/{geometry.memory_slices} memory slices at fixed start positions",
                   breaks=broken)


def _drivers(pool: Pool, model: str | None, report: Report) -> None:
    driver, cuda = pool.vars.nvidia_driver_version, pool.vars.cuda_version
    for host in pool.hosts:
        for field, pool_value in (("nvidia_driver_version", driver), ("cuda_version", cuda)):
            host_value = getattr(host.vars, field)
            if host_value and host_value != pool_value:
                report.add(GPU_DRIVER_DRIFT, host.source(field), f"{host.name}.{field}",
                           f"host {host.name} sets {host_value}, pool {pool.name} runs {pool_value}")
    if not (driver and cuda):
        return
    verdict = driver_verdict(cuda, driver, model)
    which = {"too-old": GPU_CUDA_DRIVER, "minor-compat": GPU_CUDA_MINOR, "unknown-cuda": GPU_CUDA_UNKNOWN,
             "gpu-unsupported": GPU_DRIVER_UNSUPPORTED}.get(verdict.status)
    if which is not None:
        field = "cuda_version" if verdict.status == "unknown-cuda" else "nvidia_driver_version"
        report.at_pool(which, pool, field, f"pool {pool.name}: {verdict.detail}")


def _host_per_gpu(pool: Pool, machine: Machine, hosts: list[Host], report: Report) -> None:
    ratio = platform().host_per_gpu.get(machine.gpu_model or "")
    if ratio is None or not machine.gpu_count:
        return
    where = f"pool {pool.name} ({describe_hosts(hosts)})"
    if machine.cores < ratio.cores * machine.gpu_count:
        report.at_pool(HOST_CORES_PER_GPU, pool, "machine",
                   f"{where}: {machine.cores} cores for {machine.gpu_count} x {machine.gpu_model}; "
                   f"want {ratio.cores * machine.gpu_count}")
    if machine.memory_gib < ratio.memory_gib * machine.gpu_count:
        report.at_pool(HOST_MEMORY_PER_GPU, pool, "machine",
                   f"{where}: {machine.memory_gib} GiB for {machine.gpu_count} x {machine.gpu_model}; "
                   f"want {ratio.memory_gib * machine.gpu_count}")
