"""container_runtime on the sandbox hosts: containerd.io at the spec's containerd_version everywhere, installed by
the role's real apt path from the sandbox's local repository (tests/hosts/aptrepo.py: containerd 2.3.7 built from
its Go module, signed, shaped as Docker's download.docker.com), with the node's CRI settings in
/etc/containerd/conf.d/50-k8s-node-pools.toml, which containerd's own config.toml only imports: CNI plugins looked
for in /opt/cni/bin (where every CNI installs them), runc on the kubelet's cgroup driver (systemd) and, on the GPU
hosts, NVIDIA's runtime as the default - all proven with containerd's own views (`containerd --version`,
`containerd config dump`, `ctr plugins ls` of the running daemon). The package's config.toml disables the CRI
plugin, as Docker's does; the role takes it out of that line. The toolkit's repository is written disabled and
pinned (NVIDIA's repository is not reachable here). CPU and memory hosts get no nvidia runtime.

The hosts reach no registry: the role imports the images the sandbox gives it as archives (tests/hosts/ociimage.py:
containerd's own sandbox image, running the project's pause, and the probe) into the CRI's namespace, and the CRI
itself marks the sandbox image as the one it pins (`ctr images ls`' label): the runtime configuration stays
production's. The container hosts cannot start a container (no CAP_SYS_ADMIN), so the images are imported without
unpacking, as the CRI unpacks an image at its first container."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PlaybookRun, run_playbook

from infra.hosts.ansible_run import SANDBOX_APT_VARS
from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
SPEC = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"]
ALL = [(name, bool(vars_["nvidia"])) for name, vars_ in sorted(SPEC.items())]
VERSION = load_environment(ROOT / "inventories" / "sandbox").cluster.containerd_version
IMPORTS = 'imports = ["/etc/containerd/conf.d/*.toml"]'
CONFIG = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/50-k8s-node-pools.toml"
FOREIGN = "/etc/containerd/conf.d/90-other.toml"
CRI = "io.containerd.cri.v1.runtime"
PACKAGE_CONFIG_LINES = ("#   containerd.io stand-in (tests/hosts/aptrepo.py): as Docker's package ships it",)


def dump(host: Any) -> dict[str, Any]:
    """containerd's configuration as containerd itself merges config.toml and its imports."""
    merged: dict[str, Any] = tomllib.loads(host.check_output("containerd config dump 2>/dev/null"))
    return merged


def cri_dump(host: Any) -> dict[str, Any]:
    table: dict[str, Any] = dump(host)["plugins"][CRI]
    return table


def cri_loaded(host: Any) -> bool:
    """Whether the running containerd lists its CRI plugin as loaded (`ctr plugins ls`)."""
    return any(line.split()[:2] == ["io.containerd.grpc.v1", "cri"] and line.split()[-1] == "ok"
               for line in host.check_output("ctr plugins ls 2>/dev/null").splitlines())


def converge(name: str) -> PlaybookRun:
    return run_playbook("gpu.yml", "--limit", name, "--tags", "container_runtime")


@pytest.fixture
def restored(host: Callable[[str], Any]) -> Iterator[Callable[[str], Any]]:
    """A host whose config.toml, foreign drop-in and containerd are put back after the test, and the role run."""
    touched: dict[str, str] = {}

    def get(name: str) -> Any:
        touched[name] = host(name).file(CONFIG).content_string
        return host(name)

    yield get
    for name, original in touched.items():
        host(name).check_output(f"rm -f {FOREIGN} /usr/local/bin/containerd && cat > {CONFIG} <<'EOF'\n{original}EOF\n"
                                "systemctl restart containerd")
        again = converge(name)
        assert again.rc == 0, again.tail()


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_containerd_io_runs_everywhere_at_the_pinned_release_from_the_repository(
        converged: PlaybookRun, host: Callable[[str], Any], name: str, gpu: bool) -> None:
    h = host(name)
    assert h.package("containerd.io").version == f"{VERSION}-1"
    assert not h.package("containerd").is_installed  # Debian's 1.6.20, below containerd's table for 1.34
    assert h.check_output("containerd --version").split()[2] == f"v{VERSION}"
    policy = h.check_output("apt-cache policy containerd.io")
    assert f"*** {VERSION}-1 1001" in policy and "file:/srv/k8s-node-pools-apt bookworm/stable amd64" in policy
    service = h.service("containerd")
    assert service.is_enabled and service.is_running


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_config_toml_only_gains_the_imports_line_and_loses_the_cri_from_disabled_plugins(
        converged: PlaybookRun, host: Callable[[str], Any], name: str, gpu: bool) -> None:
    lines = host(name).file(CONFIG).content_string.splitlines()
    assert lines[0] == IMPORTS and lines.count(IMPORTS) == 1
    for line in PACKAGE_CONFIG_LINES:  # the package's own lines are still there, untouched
        assert line in lines
    assert "disabled_plugins = []" in lines  # the package ships ["cri"]
    assert "nvidia" not in "\n".join(lines)
    assert cri_loaded(host(name))
    assert dump(host(name))["version"] == tomllib.loads(host(name).file(DROPIN).content_string)["version"]


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_every_node_looks_for_cni_plugins_where_the_cni_installs_them(converged: PlaybookRun,
                                                                      host: Callable[[str], Any],
                                                                      name: str, gpu: bool) -> None:
    assert SPEC[name]["container_runtime"]["cni_bin_dir"] == "/opt/cni/bin"
    cni = cri_dump(host(name))["cni"]
    assert cni["bin_dirs"] == ["/opt/cni/bin"]
    assert cni["conf_dir"] == "/etc/cni/net.d"  # containerd's own default, which the drop-in leaves alone


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
    assert containerd["runtimes"]["runc"]["runtime_type"] == "io.containerd.runc.v2"


def test_a_later_import_that_moves_the_cni_folder_stops_the_role(converged: PlaybookRun,
                                                                  restored: Callable[[str], Any]) -> None:
    """Another tool's drop-in, imported after the role's, sets another CNI folder: the role reads containerd's
    merged view after the restart and stops, naming what containerd runs with."""
    cpu = restored("sb-cpu-1")
    cpu.check_output(f"printf '%s\\n' 'version = 3' '[plugins.\"{CRI}\".cni]' 'bin_dirs = [\"/usr/lib/cni\"]' > {FOREIGN}")
    assert cri_dump(cpu)["cni"]["bin_dirs"] == ["/usr/lib/cni"]
    run = converge("sb-cpu-1")
    assert run.rc != 0
    assert 'containerd on sb-cpu-1 runs with the CNI plugin folder "/usr/lib/cni" and the systemd cgroup' in run.output
    assert 'not "/opt/cni/bin" and systemd' in run.output
    cpu.check_output(f"rm -f {FOREIGN}")
    run = converge("sb-cpu-1")
    assert run.rc == 0, run.tail()
    assert cri_dump(cpu)["cni"]["bin_dirs"] == ["/opt/cni/bin"]


def test_config_toml_as_the_package_ships_it_gets_the_cri_plugin_back(converged: PlaybookRun,
                                                                      restored: Callable[[str], Any]) -> None:
    """Docker's containerd.io (and the sandbox's) ships config.toml with the CRI plugin disabled: without the role
    the running containerd has no CRI plugin (a kubelet could not start a pod); the role enables it."""
    gpu = restored("sb-gpu-1")
    shipped = gpu.check_output(f"dpkg-deb --fsys-tarfile /srv/k8s-node-pools-apt/pool/stable/containerd.io_{VERSION}-1"
                               "_amd64.deb | tar -xOf - ./etc/containerd/config.toml")
    assert 'disabled_plugins = ["cri"]' in shipped
    gpu.check_output(f"cat > {CONFIG} <<'EOF'\n{shipped}\nEOF\nsystemctl restart containerd")
    assert not cri_loaded(gpu)
    run = converge("sb-gpu-1")
    assert run.rc == 0, run.tail()
    assert run.recap["sb-gpu-1"]["changed"] == 3, run.tail(80)  # the imports line, disabled_plugins, the restart
    assert cri_loaded(gpu)


def test_a_drop_in_that_disables_the_cri_plugin_stops_the_role(converged: PlaybookRun,
                                                               restored: Callable[[str], Any]) -> None:
    """The role cannot take a plugin out of another file's disabled_plugins (containerd joins the lists): it
    reads the running containerd's plugins and stops, naming the host."""
    cpu = restored("sb-cpu-1")
    cpu.check_output(f"printf '%s\\n' 'version = 3' 'disabled_plugins = [\"io.containerd.grpc.v1.cri\"]' > {FOREIGN}"
                     " && systemctl restart containerd")
    assert not cri_loaded(cpu)
    run = converge("sb-cpu-1")
    assert run.rc != 0
    assert "containerd on sb-cpu-1 has not loaded its CRI plugin" in run.output
    assert "a drop-in disables it (it does now)" in run.output


def test_another_containerd_first_on_path_stops_the_role(converged: PlaybookRun,
                                                         restored: Callable[[str], Any]) -> None:
    cpu = restored("sb-cpu-1")
    cpu.check_output("printf '#!/bin/sh\\necho containerd github.com/containerd/containerd v1.6.20 1.6.20\\n'"
                     " > /usr/local/bin/containerd && chmod 0755 /usr/local/bin/containerd")
    run = converge("sb-cpu-1")
    assert run.rc != 0
    assert (f"sb-cpu-1: `containerd --version` says 'containerd github.com/containerd/containerd v1.6.20 1.6.20', "
            f"not {VERSION} (containerd_version)") in run.output


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


def test_config_toml_settings_stay_beside_the_dropin(converged: PlaybookRun, restored: Callable[[str], Any]) -> None:
    """A CRI setting another tool adds to config.toml survives beside the drop-in's: containerd 2.x merges imports
    key by key, so the drop-in holds only the role's settings and need not change."""
    gpu = restored("sb-gpu-1")
    dropin = gpu.file(DROPIN).content_string
    gpu.check_output(f"printf '%s\\n' '[plugins.\"{CRI}\".cni]' 'conf_dir = \"/etc/cni/edited.d\"' >> {CONFIG}")
    run = converge("sb-gpu-1")
    assert run.rc == 0, run.tail()
    assert run.recap["sb-gpu-1"]["changed"] == 0, run.tail(80)
    assert gpu.file(DROPIN).content_string == dropin
    cni = cri_dump(gpu)["cni"]
    assert cni["conf_dir"] == "/etc/cni/edited.d" and cni["bin_dirs"] == ["/opt/cni/bin"]


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


def images() -> list[dict[str, str]]:
    """The images the sandbox gives the role (written by `sandbox.sh up` with the repository)."""
    given: list[dict[str, str]] = yaml.safe_load(SANDBOX_APT_VARS.read_text())["container_runtime_images"]
    return given


def listed(h: Any) -> dict[str, list[str]]:
    """The CRI namespace's images as containerd lists them: name -> [digest, labels]."""
    rows = [line.split() for line in h.check_output("ctr -n k8s.io images ls").splitlines()[1:]]
    return {row[0]: [row[2], row[-1]] for row in rows}


def run_images(name: str, *extra: str) -> PlaybookRun:
    return run_playbook("gpu.yml", "--limit", name, "--tags", "container_runtime_run", *extra)


@pytest.mark.parametrize(("name", "gpu"), ALL)
def test_every_host_holds_the_sandbox_image_the_cri_runs_pods_with(converged: PlaybookRun,
                                                                    host: Callable[[str], Any],
                                                                    name: str, gpu: bool) -> None:
    h = host(name)
    sandbox = dump(h)["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"]
    assert sandbox == "registry.k8s.io/pause:3.10.2"  # containerd 2.3.7's own default: production's name
    have = listed(h)
    for image in images():
        digest, labels = have[image["name"]]
        assert digest == image["digest"]
        assert "io.cri-containerd.image=managed" in labels  # the CRI took it in
        # ... and pins the very image it is configured with as its sandbox image, and only that one
        assert ("io.cri-containerd.pinned=pinned" in labels) is (image["name"] == sandbox)
    assert {image["name"] for image in images()} >= {sandbox}
    check = {line.split()[0]: line for line in h.check_output("ctr -n k8s.io images check").splitlines()[1:]}
    assert all("complete (2/2)" in check[image["name"]] for image in images())  # every blob is in the store


def test_a_removed_image_is_imported_again(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    cpu = host("sb-cpu-1")
    pause = images()[0]["name"]
    cpu.check_output(f"ctr -n k8s.io images rm {pause}")
    assert pause not in listed(cpu)
    run = run_images("sb-cpu-1")
    assert run.rc == 0, run.tail()
    assert run.changed_tasks()["sb-cpu-1"] == [
        "container_runtime : Import each image whose name does not point at its digest yet (the CRI unpacks it at its "
        "first container)."]
    assert listed(cpu)[pause][0] == images()[0]["digest"]


def test_an_archive_that_holds_another_image_than_its_digest_stops_the_role(converged: PlaybookRun) -> None:
    wrong = [{**image, "digest": "sha256:" + "0" * 64} if index == 1 else image for index, image in enumerate(images())]
    run = run_images("sb-cpu-1", "-e", json.dumps({"container_runtime_images": wrong}))
    assert run.rc != 0
    assert (f"sb-cpu-1: after importing {wrong[1]['archive']}, {wrong[1]['name']} points at {images()[1]['digest']}, "
            f"not sha256:{'0' * 64} (container_runtime_images)") in run.output


def test_images_without_the_sandbox_image_stop_the_role_before_importing(converged: PlaybookRun) -> None:
    probe_only = [image for image in images() if "pause" not in image["name"]]
    run = run_images("sb-cpu-1", "-e", json.dumps({"container_runtime_images": probe_only}))
    assert run.rc != 0
    assert (f"sb-cpu-1: container_runtime_images ({probe_only[0]['name']}) lacks registry.k8s.io/pause:3.10.2, the "
            "sandbox image containerd runs every pod with") in run.output
    assert "Import each image" not in run.output
