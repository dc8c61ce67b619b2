"""nvidia_driver on the sandbox hosts: the GPU pools' card-less hosts get Debian's non-free source, the
driver pinned to the pool's exact version, its user-space tools, nouveau blacklisted and the persistence
daemon enabled; the CPU and memory hosts get none of it. Also: gpu.yml runs within site.yml (whose idempotence
covers it), a GPU host without a card stops the run unless the test override is set,
and NVIDIA's repository with the fabric manager renders as it would on an NVSwitch board."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aptrepo import SigningKey, make_key
from conftest import PlaybookRun, run_playbook

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
SPEC = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"]
GPU = sorted(name for name, vars_ in SPEC.items() if vars_["nvidia"])
OTHER = sorted(name for name, vars_ in SPEC.items() if not vars_["nvidia"])
ALL = [(name, True) for name in GPU] + [(name, False) for name in OTHER]


def test_the_sandbox_has_gpu_and_other_hosts() -> None:
    assert GPU == ["sb-gpu-1", "sb-mig-1"] and OTHER == ["sb-cpu-1", "sb-mem-1"]


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_debian_non_free_source_only_on_gpu_hosts(converged: PlaybookRun, host: Callable[[str], Any],
                                                  name: str, gpu: bool) -> None:
    source = host(name).file("/etc/apt/sources.list.d/debian-nvidia.sources")
    assert source.exists is gpu
    if gpu:
        assert "Components: contrib non-free non-free-firmware" in source.content_string
        assert "Suites: bookworm bookworm-updates" in source.content_string
        assert "Suites: bookworm-security" in source.content_string
        assert not host(name).file("/etc/apt/sources.list.d/nvidia-cuda.sources").exists


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_driver_packages_are_pinned_to_the_pools_version(converged: PlaybookRun, host: Callable[[str], Any],
                                                         name: str, gpu: bool) -> None:
    pin = host(name).file("/etc/apt/preferences.d/nvidia-driver.pref")
    assert pin.exists is gpu
    if gpu:
        version = SPEC[name]["nvidia"]["driver_version"]
        assert f"Pin: version {version}-*\nPin-Priority: 1001" in pin.content_string
        assert "Package: nvidia-* libnvidia-* " in pin.content_string
        assert "fabricmanager" not in pin.content_string  # no NVSwitch in the sandbox
        # apt's own view: the pinned version is the candidate, though bookworm-security carries a newer one
        policy = host(name).check_output("apt-cache policy nvidia-smi")
        assert f"Candidate: {version}-" in policy


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_user_space_tools_installed_at_the_pinned_version(converged: PlaybookRun, host: Callable[[str], Any],
                                                          name: str, gpu: bool) -> None:
    for package in ("nvidia-smi", "libnvidia-ml1"):
        installed = host(name).package(package)
        assert installed.is_installed is gpu
        if gpu:
            assert installed.version.startswith(SPEC[name]["nvidia"]["driver_version"] + "-")
    # the full driver (DKMS) is a parameter the sandbox leaves out: it cannot load in a container
    assert not host(name).package("nvidia-kernel-dkms").is_installed


@pytest.mark.parametrize("name", GPU)
def test_nvidia_smi_runs_and_says_there_is_no_card(converged: PlaybookRun, host: Callable[[str], Any],
                                                   name: str) -> None:
    # nvidia-smi exits 255 here, which testinfra's ssh backend takes for an ssh failure: read its code apart
    smi = host(name).run("nvidia-smi -L; echo exit=$?")
    assert "Failed to initialize NVML" in smi.stdout
    assert smi.stdout.rstrip().splitlines()[-1] != "exit=0"


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_nouveau_is_blacklisted_on_gpu_hosts(converged: PlaybookRun, host: Callable[[str], Any],
                                             name: str, gpu: bool) -> None:
    blacklist = host(name).file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert blacklist.exists is gpu
    if gpu:
        assert "blacklist nouveau\noptions nouveau modeset=0\n" in blacklist.content_string


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_persistence_daemon_enabled_on_gpu_hosts_without_failing_them(
        converged: PlaybookRun, host: Callable[[str], Any], name: str, gpu: bool) -> None:
    daemon = host(name).service("nvidia-persistenced")
    assert host(name).package("nvidia-persistenced").is_installed is gpu
    if gpu:
        assert daemon.is_enabled
        assert not daemon.is_running  # no card: enabled for the next boot, not started
    # the package's failed start on a card-less host is cleared, so the host is not left degraded
    assert host(name).run("systemctl is-failed --quiet nvidia-persistenced.service").rc != 0


def test_gpu_yml_runs_within_site_yml() -> None:
    """gpu.yml's plays are site.yml's too, so site.yml's idempotence and check-mode proofs (test_site.py, a
    drift repaired with nothing else changed) cover them: no second and check-mode run of gpu.yml alone."""
    site = yaml.safe_load((ROOT / "ansible" / "site.yml").read_text())
    assert [entry.get("ansible.builtin.import_playbook") for entry in site].count("gpu.yml") == 1


def test_a_gpu_host_without_a_card_stops_the_run(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    before = host("sb-gpu-1").check_output("md5sum /etc/apt/preferences.d/nvidia-driver.pref")
    run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver",
                       "-e", "nvidia_driver_require_device=true")
    assert run.rc != 0
    assert run.failed() == {"sb-gpu-1": 1}
    assert "sb-gpu-1 is in a GPU pool but `lspci -d 10de:` finds no NVIDIA device" in run.output
    assert "Nothing was changed." in run.output
    assert run.recap["sb-gpu-1"]["changed"] == 0
    assert host("sb-gpu-1").check_output("md5sum /etc/apt/preferences.d/nvidia-driver.pref") == before


@pytest.fixture(scope="module")
def repo_key(tmp_path_factory: pytest.TempPathFactory) -> SigningKey:
    return make_key(tmp_path_factory.mktemp("gnupg"), "stand-in for NVIDIA's CUDA repository key")


def test_nvidia_repository_and_fabric_manager_render_in_check_mode(converged: PlaybookRun, host: Callable[[str], Any],
                                                                    repo_key: SigningKey) -> None:
    """An NVSwitch board on NVIDIA's repository, forced on a sandbox host in check mode (nothing written):
    the repository, its key, and the fabric manager pinned to exactly the driver's version."""
    forced = {"nvidia_driver_source": "nvidia", "nvidia_driver_fabric_manager": True,
              "nvidia_driver_repo_key": repo_key.armored, "nvidia_driver_repo_key_fingerprints": [repo_key.fingerprint]}
    run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver_repository", "--check", "--diff",
                       "-e", json.dumps(forced))
    assert run.rc == 0, run.tail()
    version = SPEC["sb-gpu-1"]["nvidia"]["driver_version"]
    assert "URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/" in run.output
    assert "Signed-By: /usr/share/keyrings/nvidia-cuda.asc" in run.output
    branch = version.split(".")[0]
    assert f"xserver-xorg-video-nvidia nvidia-fabricmanager-{branch}\n" in run.output  # pinned with the driver
    assert f"Pin: version {version}-*" in run.output
    # check mode: the host still has Debian's source and no NVIDIA repository
    assert host("sb-gpu-1").file("/etc/apt/sources.list.d/debian-nvidia.sources").exists
    assert not host("sb-gpu-1").file("/etc/apt/sources.list.d/nvidia-cuda.sources").exists
    assert not host("sb-gpu-1").file("/usr/share/keyrings/nvidia-cuda.asc").exists


def test_a_repository_key_without_the_pinned_fingerprint_stops_the_run(converged: PlaybookRun,
                                                                       host: Callable[[str], Any],
                                                                       repo_key: SigningKey) -> None:
    """The twin: the same key against the role's default pin (NVIDIA's 3bf863cc) is refused, nothing written."""
    run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver_repository",
                       "-e", json.dumps({"nvidia_driver_source": "nvidia", "nvidia_driver_repo_key": repo_key.armored}))
    assert run.rc != 0
    assert (f"sb-gpu-1: the nvidia-cuda repository key from apt_repository_key_text has fingerprint "
            f"{repo_key.fingerprint}, which is none of the pinned EB693B3035CD5710E231E123A4B469963BF863CC") in run.output
    assert run.changed() == {}
    assert host("sb-gpu-1").file("/etc/apt/sources.list.d/debian-nvidia.sources").exists
    assert not host("sb-gpu-1").file("/etc/apt/sources.list.d/nvidia-cuda.sources").exists
    assert not host("sb-gpu-1").file("/usr/share/keyrings/nvidia-cuda.asc").exists


def test_the_debian_source_refuses_the_fabric_manager(converged: PlaybookRun) -> None:
    run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver", "--check",
                       "-e", '{"nvidia_driver_fabric_manager": true}')
    assert run.rc != 0
    assert "nvidia_driver_fabric_manager needs nvidia_driver_source 'nvidia'" in run.output


def test_a_host_without_lspci_stops_the_driver_role(converged, host):
    """The card check runs lspci: a host without it must not read as a host without a card. (The GPU host's
    NVIDIA packages depend on pciutils, so the binary is moved away rather than the package removed.)"""
    gpu = host("sb-gpu-1")
    gpu.check_output("mv /usr/bin/lspci /usr/bin/lspci.hidden")
    try:
        run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver")
        assert run.rc != 0
        assert "sb-gpu-1 has no lspci, which finds the NVIDIA cards: install pciutils" in run.output, run.tail()
        assert run.changed() == {}
    finally:
        gpu.check_output("mv /usr/bin/lspci.hidden /usr/bin/lspci")


def test_base_installs_pciutils_on_every_node(converged, host):
    cpu = host("sb-cpu-1")
    cpu.check_output("dpkg --purge pciutils")
    try:
        run = run_playbook("site.yml", "--limit", "sb-cpu-1", "--tags", "base")
        assert run.rc == 0, run.tail()
        (task,) = run.changed_tasks()["sb-cpu-1"]  # the reinstall, nothing else
        assert "pciutils' lspci" in task
    finally:
        cpu.run("apt-get install -y -q pciutils")
    assert cpu.package("pciutils").is_installed


# The unit NVIDIA's own nvidia-persistenced package installs (CUDA repository), as a stand-in: the sandbox installs
# Debian's package, whose unit starts the daemon without the flag.
NVIDIA_PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced
[Install]
WantedBy=multi-user.target
"""


def exec_start(h: Any) -> str:
    """The command line systemd will run, as systemd itself reports it."""
    return str(h.check_output("systemctl show --property=ExecStart --value nvidia-persistenced.service"))


def test_the_persistence_daemon_keeps_persistence_mode_on(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    gpu = host("sb-gpu-1")
    assert "--no-persistence-mode" not in exec_start(gpu)  # Debian's unit: no drop-in needed
    assert not gpu.file("/etc/systemd/system/nvidia-persistenced.service.d/k8s-node-pools.conf").exists
    gpu.check_output(f"printf '%s' '{NVIDIA_PERSISTENCED_UNIT}' > /etc/systemd/system/nvidia-persistenced.service"
                     " && systemctl daemon-reload")
    try:
        assert "--no-persistence-mode" in exec_start(gpu)
        run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver")
        assert run.rc == 0, run.tail()
        started = exec_start(gpu)
        assert "argv[]=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose ;" in started, started
        again = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver")
        assert again.rc == 0 and again.changed() == {}, again.tail()
    finally:
        gpu.check_output("rm -f /etc/systemd/system/nvidia-persistenced.service && systemctl daemon-reload")
    restored = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver")
    assert restored.rc == 0, restored.tail()
    assert not gpu.file("/etc/systemd/system/nvidia-persistenced.service.d/k8s-node-pools.conf").exists
    assert "argv[]=/usr/bin/nvidia-persistenced --user nvpd ;" in exec_start(gpu)


# The loaded module's version, as /sys/module/nvidia/version reports it: a stand-in file on the container host
# (it shares the test machine's kernel, which has no nvidia module), the role's check run against it.
MODULE_FILE = "/run/stand-in-nvidia-module-version"


def check_module() -> PlaybookRun:
    return run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver_run",
                        "-e", json.dumps({"nvidia_driver_check_module": True,
                                          "nvidia_driver_module_version_file": MODULE_FILE}))


@pytest.mark.parametrize(("loaded", "says"), [
    ("535.247.01", "sb-gpu-1 runs NVIDIA kernel module 535.247.01, but the driver is pinned at 535.261.03"),
    (None, "sb-gpu-1 runs NVIDIA kernel module none (modprobe nvidia: modprobe: FATAL: Module nvidia not found"),
])
def test_a_kernel_running_another_module_stops_the_run(converged: PlaybookRun, host: Callable[[str], Any],
                                                       loaded: str | None, says: str) -> None:
    h = host("sb-gpu-1")
    h.run(f"rm -f {MODULE_FILE}" if loaded is None else f"echo {loaded} > {MODULE_FILE}")
    try:
        run = check_module()
    finally:
        h.run(f"rm -f {MODULE_FILE}")
    assert run.rc != 0 and run.failed() == {"sb-gpu-1": 1}
    assert says in run.output
    assert "Drain the node and reboot it" in run.output


def test_the_pinned_module_passes_the_check(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    h = host("sb-gpu-1")
    h.run(f"echo {SPEC['sb-gpu-1']['nvidia']['driver_version']} > {MODULE_FILE}")
    try:
        run = check_module()
    finally:
        h.run(f"rm -f {MODULE_FILE}")
    assert run.rc == 0, run.tail()
    assert "Stop unless the kernel runs the pinned driver's module." in [r.task.split(" : ")[-1] for r in run.results
                                                                          if r.status == "ok"]


def test_a_card_less_host_says_its_module_is_not_checked(converged: PlaybookRun) -> None:
    assert "nvidia_driver_check_module is false: the kernel module of sb-gpu-1 is not compared" in converged.output


def test_the_running_kernels_headers_are_asked_for(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    # The container runs the test machine's kernel, which Debian has no headers for: apt's refusal names the
    # package the role asks for. On a Debian kernel (the sandbox's run skips it: nvidia_driver_kernel_module
    # false) it installs.
    kernel = host("sb-gpu-1").check_output("uname -r")
    run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "nvidia_driver_install", "--check",
                       "-e", json.dumps({"nvidia_driver_kernel_module": True}))
    assert run.rc != 0
    assert f"No package matching 'linux-headers-{kernel}' is available" in run.output
    headers = "nvidia_driver : Install the running kernel's headers (DKMS builds the driver's module against them)."
    assert [r.status for r in converged.results if r.host == "sb-gpu-1" and r.task == headers] == ["skipping"]
