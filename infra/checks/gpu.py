"""GPU pools: MIG layouts that fit the card, drivers that match, hosts big enough to feed their GPUs."""

from __future__ import annotations

from infra.capacity import describe_hosts, machine_groups
from infra.checks.base import Report, rule
from infra.knowledge import gpu_models, platform
from infra.mig import placement
from infra.spec import Environment, Host, Pool
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
    "A MIG profile name the card does not offer (1g.10gb is an A100-80GB profile, not an A100-40GB one).",
    "Use a profile listed for the model in infra/knowledge/gpus.yml.",
)
GPU_MIG_FIT = rule(
    "GPU-MIG-FIT", "error",
    "A MIG layout with no valid placement on the card: instances need fixed, non-overlapping memory-slice "
    "positions, so a layout can fail even when its compute slices add up to 7.",
    "Choose a layout from NVIDIA's supported combinations (e.g. 3g+2g+1g+1g, 4g+2g+1g, 7x1g).",
)
GPU_DRIVER_DRIFT = rule(
    "GPU-DRIVER-DRIFT", "error",
    "Hosts of one GPU pool on different driver or CUDA versions: the same pod behaves differently per "
    "node, and the device plugin's config assumes one driver.",
    "Remove the host override, or move the host to its own pool during the upgrade.",
)
GPU_CUDA_DRIVER = rule(
    "GPU-CUDA-DRIVER", "error",
    "A CUDA major release newer than the driver supports: CUDA applications fail to initialise.",
    "Raise nvidia_driver_version to at least the driver named in the finding, or lower cuda_version.",
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


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def check(env: Environment, report: Report) -> None:
    for pool in env.pools.values():
        groups = machine_groups(env, pool)
        gpu_pool = pool.vars.is_gpu
        for machine, hosts in groups.items():
            if gpu_pool and not machine.gpu_count:
                report.add(GPU_NO_GPUS, pool.source, "machine",
                           f"pool {pool.name} ({describe_hosts(hosts)}): machine has no GPUs")
            if not gpu_pool and machine.gpu_count:
                report.add(GPU_IDLE, pool.source, "pool_kind",
                           f"{pool.vars.pool_kind} pool {pool.name} runs on machines with "
                           f"{machine.gpu_count} x {machine.gpu_model}")
            _host_per_gpu(pool, machine, hosts, report)
        if gpu_pool:
            models = {machine.gpu_model for machine in groups if machine.gpu_model in gpu_models()}
            for model in sorted(models):
                _sharing(pool, model, report)
            _drivers(pool, report)


def _sharing(pool: Pool, model: str, report: Report) -> None:
    sharing = pool.vars.sharing
    if pool.vars.pool_kind == "gpu_bigmem" and sharing.mode != "exclusive":
        report.add(GPU_BIGMEM_SHARED, pool.source, "gpu_sharing.mode",
                   f"gpu_bigmem pool {pool.name} shares its cards by {sharing.mode}")
    if sharing.mode != "mig":
        return
    geometry = gpu_models()[model].mig
    if geometry is None:
        report.add(GPU_MIG_UNSUPPORTED, pool.source, "gpu_sharing.mode", f"pool {pool.name}: {model} has no MIG")
        return
    unknown = [name for name in sharing.mig_devices if name not in geometry.profiles]
    for name in unknown:
        report.add(GPU_MIG_PROFILE, pool.source, f"gpu_sharing.mig_devices.{name}",
                   f"{model} has no profile {name}; it has {', '.join(geometry.profiles)}")
    if unknown:
        return
    if placement(model, sharing.mig_devices) is None:
        compute = sum(geometry.profiles[name].compute * count for name, count in sharing.mig_devices.items())
        memory = sum(geometry.profiles[name].memory * count for name, count in sharing.mig_devices.items())
        layout = " + ".join(f"{count}x{name}" for name, count in sharing.mig_devices.items())
        report.add(GPU_MIG_FIT, pool.source, "gpu_sharing.mig_devices",
                   f"{layout} has no placement on {model}: {compute}/{geometry.compute_slices} compute slices, "
                   f"{memory}/{geometry.memory_slices} memory slices at fixed start positions")


def _drivers(pool: Pool, report: Report) -> None:
    driver, cuda = pool.vars.nvidia_driver_version, pool.vars.cuda_version
    for host in pool.hosts:
        for field, pool_value in (("nvidia_driver_version", driver), ("cuda_version", cuda)):
            host_value = getattr(host.vars, field)
            if host_value and host_value != pool_value:
                report.add(GPU_DRIVER_DRIFT, host.source(field), f"{host.name}.{field}",
                           f"host {host.name} sets {host_value}, pool {pool.name} runs {pool_value}")
    if not (driver and cuda):
        return
    table = platform().cuda_min_driver
    cuda_minor = ".".join(cuda.split(".")[:2])
    major = cuda_minor.split(".")[0]
    known = sorted((v for v in table if v.split(".")[0] == major), key=_version)
    if not known:
        return
    first_of_major = table[known[0]]
    released = [v for v in known if _version(v) <= _version(cuda_minor)] or known[:1]
    needed = table[max(released, key=_version)]
    if _version(driver) < _version(first_of_major):
        report.add(GPU_CUDA_DRIVER, pool.source, "nvidia_driver_version",
                   f"pool {pool.name}: CUDA {cuda} needs driver {first_of_major} or newer; {driver} is set")
    elif _version(driver) < _version(needed):
        report.add(GPU_CUDA_MINOR, pool.source, "nvidia_driver_version",
                   f"pool {pool.name}: CUDA {cuda} is fully supported from driver {needed}; {driver} is set")


def _host_per_gpu(pool: Pool, machine: Machine, hosts: list[Host], report: Report) -> None:
    ratio = platform().host_per_gpu.get(machine.gpu_model or "")
    if ratio is None or not machine.gpu_count:
        return
    where = f"pool {pool.name} ({describe_hosts(hosts)})"
    if machine.cores < ratio.cores * machine.gpu_count:
        report.add(HOST_CORES_PER_GPU, pool.source, "machine",
                   f"{where}: {machine.cores} cores for {machine.gpu_count} x {machine.gpu_model}; "
                   f"want {ratio.cores * machine.gpu_count}")
    if machine.memory_gib < ratio.memory_gib * machine.gpu_count:
        report.add(HOST_MEMORY_PER_GPU, pool.source, "machine",
                   f"{where}: {machine.memory_gib} GiB for {machine.gpu_count} x {machine.gpu_model}; "
                   f"want {ratio.memory_gib * machine.gpu_count}")
