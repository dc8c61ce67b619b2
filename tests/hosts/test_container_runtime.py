"""container_runtime on the sandbox hosts: containerd everywhere; on the GPU hosts NVIDIA's runtime through
/etc/containerd/conf.d/99-nvidia.toml, which containerd's own config.toml only imports (never rewritten),
proven with containerd's merged view (`containerd config dump`); the toolkit's repository written disabled
and pinned (NVIDIA's repository is not reachable here). CPU and memory hosts get no nvidia runtime."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PlaybookRun, run_playbook

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
SPEC = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"]
ALL = [(name, bool(vars_["nvidia"])) for name, vars_ in sorted(SPEC.items())]
IMPORTS = 'imports = ["/etc/containerd/conf.d/*.toml"]'
DEBIAN_CONFIG_LINES = ('version = 2', '      bin_dir = "/usr/lib/cni"', '    path = "/var/lib/containerd/opt"')


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_containerd_runs_everywhere(converged: PlaybookRun, host: Callable[[str], Any], name: str, gpu: bool) -> None:
    assert host(name).package("containerd").is_installed
    service = host(name).service("containerd")
    assert service.is_enabled and service.is_running


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_config_toml_only_gains_the_imports_line(converged: PlaybookRun, host: Callable[[str], Any],
                                                 name: str, gpu: bool) -> None:
    lines = host(name).file("/etc/containerd/config.toml").content_string.splitlines()
    assert lines[0] == IMPORTS and lines.count(IMPORTS) == 1
    for line in DEBIAN_CONFIG_LINES:  # the package's own settings are still there, untouched
        assert line in lines
    assert "nvidia" not in "\n".join(lines)


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_nvidia_runtime_only_on_gpu_hosts(converged: PlaybookRun, host: Callable[[str], Any], name: str, gpu: bool) -> None:
    assert host(name).file("/etc/containerd/conf.d/99-nvidia.toml").exists is gpu
    dump = host(name).check_output("containerd config dump")
    assert ('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in dump) is gpu
    assert ('BinaryName = "/usr/bin/nvidia-container-runtime"' in dump) is gpu
    assert ('default_runtime_name = "nvidia"' in dump) is gpu
    assert ('default_runtime_name = "runc"' in dump) is not gpu
    # what the drop-in must not lose (containerd 1.6 replaces the whole CRI table on import)
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]' in dump
    assert 'bin_dir = "/usr/lib/cni"' in dump


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_toolkit_repository_written_disabled_and_pinned(converged: PlaybookRun, host: Callable[[str], Any],
                                                        name: str, gpu: bool) -> None:
    source = host(name).file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources")
    pin = host(name).file("/etc/apt/preferences.d/nvidia-container-toolkit.pref")
    assert source.exists is gpu and pin.exists is gpu
    if gpu:
        assert "URIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64" in source.content_string
        assert "Enabled: no" in source.content_string
        assert "Pin: version 1.17.8-*\nPin-Priority: 1001" in pin.content_string
        assert "Package: nvidia-container-toolkit nvidia-container-toolkit-base" in pin.content_string
    assert not host(name).package("nvidia-container-toolkit").is_installed  # unreachable here


def test_an_edited_config_toml_is_kept_and_followed_by_the_dropin(converged: PlaybookRun,
                                                                  host: Callable[[str], Any]) -> None:
    """A setting another tool adds to config.toml's CRI table survives the role and reaches the drop-in
    (else containerd 1.6 would drop it: the drop-in's CRI table replaces config.toml's)."""
    gpu = host("sb-gpu-1")
    config = "/etc/containerd/config.toml"
    original = gpu.file(config).content_string
    gpu.check_output(f"sed -i 's#conf_dir = \"/etc/cni/net.d\"#conf_dir = \"/etc/cni/edited.d\"#' {config}")
    try:
        run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "container_runtime")
        assert run.rc == 0, run.tail()
        assert run.recap["sb-gpu-1"]["changed"] == 2, run.tail(80)  # the drop-in, the restart
        assert 'conf_dir = "/etc/cni/edited.d"' in gpu.file(config).content_string
        assert 'conf_dir = "/etc/cni/edited.d"' in gpu.file("/etc/containerd/conf.d/99-nvidia.toml").content_string
        assert 'conf_dir = "/etc/cni/edited.d"' in gpu.check_output("containerd config dump")
        assert gpu.service("containerd").is_running
    finally:
        gpu.check_output(f"cat > {config} <<'EOF'\n{original}EOF")
        restored = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "container_runtime")
        assert restored.rc == 0, restored.tail()


def test_a_foreign_imports_line_stops_the_role(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    gpu = host("sb-gpu-1")
    config = "/etc/containerd/config.toml"
    original = gpu.file(config).content_string
    gpu.check_output(f"sed -i '1s#.*#imports = [\"/etc/other/*.toml\"]#' {config}")
    try:
        run = run_playbook("gpu.yml", "--limit", "sb-gpu-1", "--tags", "container_runtime")
        assert run.rc != 0
        assert 'already has imports = ["/etc/other/*.toml"] without /etc/containerd/conf.d/*.toml' in run.output
        assert gpu.file(config).content_string.startswith('imports = ["/etc/other/*.toml"]')
    finally:
        gpu.check_output(f"cat > {config} <<'EOF'\n{original}EOF")
