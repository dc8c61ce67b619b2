"""container_runtime on the sandbox hosts: containerd everywhere, with the node's CRI settings in
/etc/containerd/conf.d/50-k8s-node-pools.toml, which containerd's own config.toml only imports (never rewritten):
CNI plugins looked for in /opt/cni/bin (where every CNI installs them, not Debian's /usr/lib/cni), runc on the
kubelet's cgroup driver (systemd) and, on the GPU hosts, NVIDIA's runtime as the default - all proven with
containerd's merged view (`containerd config dump`). The toolkit's repository is written disabled and pinned
(NVIDIA's repository is not reachable here). CPU and memory hosts get no nvidia runtime."""

from __future__ import annotations

import tomllib
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
DROPIN = "/etc/containerd/conf.d/50-k8s-node-pools.toml"
CRI = "io.containerd.grpc.v1.cri"


def cri_dump(host: Any) -> dict[str, Any]:
    """containerd's CRI table as containerd itself merges config.toml and its imports."""
    table: dict[str, Any] = tomllib.loads(host.check_output("containerd config dump"))["plugins"][CRI]
    return table
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
def test_every_node_looks_for_cni_plugins_where_the_cni_installs_them(converged: PlaybookRun,
                                                                      host: Callable[[str], Any],
                                                                      name: str, gpu: bool) -> None:
    assert SPEC[name]["container_runtime"]["cni_bin_dir"] == "/opt/cni/bin"
    assert 'bin_dir = "/usr/lib/cni"' in host(name).file("/etc/containerd/config.toml").content_string  # Debian's
    cni = cri_dump(host(name))["cni"]
    assert cni["bin_dir"] == "/opt/cni/bin"
    assert cni["conf_dir"] == "/etc/cni/net.d"  # config.toml's other CRI settings survive the drop-in


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_every_runtime_drives_cgroups_with_systemd_as_the_kubelet_does(converged: PlaybookRun,
                                                                       host: Callable[[str], Any],
                                                                       name: str, gpu: bool) -> None:
    runtimes = cri_dump(host(name))["containerd"]["runtimes"]
    assert set(runtimes) == ({"runc", "nvidia"} if gpu else {"runc"})
    for runtime in runtimes.values():
        assert runtime["options"]["SystemdCgroup"] is True
    assert SPEC[name]["kubelet"]["config"]["cgroupDriver"] == "systemd"


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_nvidia_runtime_only_on_gpu_hosts(converged: PlaybookRun, host: Callable[[str], Any], name: str, gpu: bool) -> None:
    assert host(name).file(DROPIN).exists
    assert not host(name).file("/etc/containerd/conf.d/99-nvidia.toml").exists  # the earlier role's file
    containerd = cri_dump(host(name))["containerd"]
    assert containerd["default_runtime_name"] == ("nvidia" if gpu else "runc")
    if gpu:
        assert containerd["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # what the drop-in must not lose (containerd 1.6 replaces the whole CRI table on import)
    assert containerd["runtimes"]["runc"]["runtime_type"] == "io.containerd.runc.v2"


def test_a_later_import_that_replaces_the_cri_settings_stops_the_role(converged: PlaybookRun,
                                                                      host: Callable[[str], Any]) -> None:
    """Another tool's drop-in, imported after the role's, replaces its whole CRI table (containerd 1.6): the role
    reads containerd's merged view after the restart and stops, naming what containerd runs with."""
    cpu = host("sb-cpu-1")
    foreign = "/etc/containerd/conf.d/90-other.toml"
    cpu.check_output(f"printf '%s\\n' 'version = 2' '[plugins.\"{CRI}\".cni]' 'bin_dir = \"/usr/lib/cni\"' > {foreign}")
    try:
        assert cri_dump(cpu)["cni"]["bin_dir"] == "/usr/lib/cni"
        run = run_playbook("gpu.yml", "--limit", "sb-cpu-1", "--tags", "container_runtime")
        assert run.rc != 0
        assert 'containerd on sb-cpu-1 runs with cni.bin_dir "/usr/lib/cni" and the cgroupfs cgroup driver' in run.output
        assert 'not "/opt/cni/bin" and systemd' in run.output
    finally:
        cpu.check_output(f"rm -f {foreign}")
    run = run_playbook("gpu.yml", "--limit", "sb-cpu-1", "--tags", "container_runtime")
    assert run.rc == 0, run.tail()
    assert cri_dump(cpu)["cni"]["bin_dir"] == "/opt/cni/bin"


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
        assert 'conf_dir = "/etc/cni/edited.d"' in gpu.file(DROPIN).content_string
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
