"""The container_runtime role's drop-in sets what every node needs - the CNI plugin folder and the kubelet's cgroup
driver - in the configuration version the installed containerd writes. In version 2 (containerd 1.x, which replaces
a plugin's whole table with an imported file's) it keeps containerd's own CRI settings under them; from version 3
(containerd 2.x, which merges key by key: tests/hosts/test_container_runtime.py proves it on the hosts) it holds only
the role's. The live check reads them back from `containerd config dump`, as the kubelet role does for the cgroup
driver, and config.toml's disabled_plugins loses the CRI plugin (Docker's containerd.io disables it)."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "containerd_filters", ROOT / "ansible" / "roles" / "container_runtime" / "filter_plugins" / "containerd.py")
assert _spec and _spec.loader
containerd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(containerd)
_spec = importlib.util.spec_from_file_location(
    "kubelet_runtime_filters", ROOT / "ansible" / "roles" / "kubelet" / "filter_plugins" / "runtime.py")
assert _spec and _spec.loader
kubelet_runtime = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kubelet_runtime)

# Debian bookworm's /etc/containerd/config.toml (containerd 1.6.20~ds1-1+deb12u3), as the package ships it.
DEBIAN = """\
version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""
CRI = "io.containerd.grpc.v1.cri"


CRI_RUNTIME = "io.containerd.cri.v1.runtime"
# What containerd 2.3.7's `containerd config default` begins with, and Docker's containerd.io config.toml.
DEFAULT_V4 = "version = 4\nroot = '/var/lib/containerd'\nstate = '/run/containerd'\n"
DOCKER = '#   Copyright 2018-2022 Docker Inc.\n\ndisabled_plugins = ["cri"]\n\n#root = "/var/lib/containerd"\n'


def dropin(text: str, nvidia: bool = True, default: bool = True, cgroup_driver: str = "systemd",
           version: int = 2) -> dict:
    binary = "/usr/bin/nvidia-container-runtime" if nvidia else ""
    return tomllib.loads(containerd.containerd_cri_dropin(text, "/opt/cni/bin", cgroup_driver, binary, default,
                                                          "config.toml", version))


def test_the_dropin_keeps_config_toml_cri_settings_and_runc() -> None:
    cri = dropin(DEBIAN)["plugins"][CRI]
    assert cri["cni"]["conf_dir"] == "/etc/cni/net.d"
    assert cri["containerd"]["runtimes"]["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert cri["containerd"]["runtimes"]["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}}
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert list(dropin(DEBIAN)["plugins"]) == [CRI]  # other plugins' tables stay config.toml's


@pytest.mark.parametrize("nvidia", [True, False])
def test_every_node_finds_cni_plugins_where_the_cni_installs_them(nvidia: bool) -> None:
    """Debian's package points cni.bin_dir at /usr/lib/cni; Calico, Cilium and Multus install into /opt/cni/bin."""
    assert 'bin_dir = "/usr/lib/cni"' in DEBIAN
    assert dropin(DEBIAN, nvidia=nvidia)["plugins"][CRI]["cni"]["bin_dir"] == "/opt/cni/bin"


@pytest.mark.parametrize("nvidia", [True, False])
def test_runc_takes_the_kubelets_cgroup_driver_whatever_config_toml_says(nvidia: bool) -> None:
    text = DEBIAN + '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\nSystemdCgroup = false\n'
    for driver, systemd in (("systemd", True), ("cgroupfs", False)):
        runtimes = dropin(text, nvidia=nvidia, cgroup_driver=driver)["plugins"][CRI]["containerd"]["runtimes"]
        assert runtimes["runc"]["options"] == {"SystemdCgroup": systemd}
        assert runtimes.get("nvidia", {"options": {"SystemdCgroup": systemd}})["options"]["SystemdCgroup"] is systemd


def test_a_node_without_gpus_gets_no_nvidia_runtime() -> None:
    containerd_table = dropin(DEBIAN, nvidia=False)["plugins"][CRI]["containerd"]
    assert set(containerd_table["runtimes"]) == {"runc"}
    assert "default_runtime_name" not in containerd_table
    assert "default_runtime_name" not in dropin(DEBIAN, default=False)["plugins"][CRI]["containerd"]


def test_an_unknown_cgroup_driver_is_refused() -> None:
    with pytest.raises(AnsibleFilterError, match="'systemd-ish': the kubelet and runc know systemd and cgroupfs"):
        dropin(DEBIAN, cgroup_driver="systemd-ish")


def test_an_empty_or_missing_config_gives_a_dropin_too() -> None:
    assert dropin("")["plugins"][CRI]["containerd"]["runtimes"]["nvidia"]["runtime_type"] == "io.containerd.runc.v2"


@pytest.mark.parametrize(("systemd", "default", "driver"), [
    ("true", "", "systemd"),
    ("false", "", "cgroupfs"),
    (None, "", "cgroupfs"),  # runc's own default
    ("true", 'default_runtime_name = "nvidia"\n', "cgroupfs"),  # the default runtime's options decide
])
def test_the_live_settings_are_read_from_containerds_dump(systemd: str | None, default: str, driver: str) -> None:
    dump = ('[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/opt/cni/bin"\n'
            f'[plugins."io.containerd.grpc.v1.cri".containerd]\n{default}'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
            + (f"SystemdCgroup = {systemd}\n" if systemd else ""))
    settings = containerd.containerd_cri_settings(dump + f'[plugins."{CRI}"]\nsandbox_image = "registry.k8s.io/pause:3.6"\n')
    assert settings["cgroup_driver"] == driver
    assert settings["sandbox_image"] == "registry.k8s.io/pause:3.6"  # version 2 names it in the CRI's own table
    assert settings["cni_bin_dir"] == "/opt/cni/bin"
    assert settings["default_runtime"] == ("nvidia" if default else "runc")
    assert kubelet_runtime.containerd_runtime_cgroup_driver(dump) == driver  # the kubelet role reads it alike


@pytest.mark.parametrize(("text", "imports"), [
    (DEBIAN, None),
    ('imports = ["/etc/containerd/conf.d/*.toml"]\n' + DEBIAN, ["/etc/containerd/conf.d/*.toml"]),
])
def test_imports_are_read(text: str, imports: list[str] | None) -> None:
    assert containerd.containerd_imports(text) == imports


def test_a_broken_config_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match=r"config\.toml is not valid TOML"):
        containerd.containerd_imports("version = \n")


@pytest.mark.parametrize("version", [3, 4])
def test_a_containerd_2_dropin_holds_only_the_roles_settings_in_containerds_own_version(version: int) -> None:
    written = dropin(DEBIAN + DOCKER.replace('disabled_plugins = ["cri"]', ""), version=version)
    assert written["version"] == version and list(written["plugins"]) == [CRI_RUNTIME]
    cri = written["plugins"][CRI_RUNTIME]
    assert cri["cni"] == {"bin_dirs": ["/opt/cni/bin"]}  # config.toml's conf_dir is not carried: containerd merges
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert {name: runtime["options"]["SystemdCgroup"] for name, runtime in cri["containerd"]["runtimes"].items()} == {
        "runc": True, "nvidia": True}
    assert dropin("", nvidia=False, version=version)["plugins"][CRI_RUNTIME]["containerd"] == {
        "runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}}}


def test_the_configuration_version_is_containerds_own() -> None:
    assert containerd.containerd_config_version(DEFAULT_V4) == 4
    assert containerd.containerd_config_version("version = 2\n") == 2
    for text in ("root = '/var/lib/containerd'\n", "version = 1\n"):
        with pytest.raises(AnsibleFilterError, match="the role writes configuration versions 2 to 4"):
            containerd.containerd_config_version(text)
    with pytest.raises(AnsibleFilterError, match="configuration version 5: the role writes versions 2 to 4"):
        dropin("", version=5)


@pytest.mark.parametrize(("text", "kept"), [
    (DOCKER, []),
    ('disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs"]\n',
     ["io.containerd.snapshotter.v1.btrfs"]),
    ('disabled_plugins = ["io.containerd.snapshotter.v1.btrfs"]\n', None),  # the CRI plugin is not disabled
    (DEBIAN, None),
])
def test_the_cri_plugin_is_taken_out_of_disabled_plugins(text: str, kept: list[str] | None) -> None:
    assert containerd.containerd_enabled_cri(text) == kept


def test_a_disabled_plugins_that_is_no_list_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match=r"config\.toml: disabled_plugins must be a list of plugin names"):
        containerd.containerd_enabled_cri('disabled_plugins = "cri"\n')


@pytest.mark.parametrize(("systemd", "driver"), [("true", "systemd"), ("false", "cgroupfs")])
def test_the_live_settings_are_read_from_a_containerd_2_dump(systemd: str, driver: str) -> None:
    dump = (f'version = 4\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n[plugins."{CRI_RUNTIME}".cni]\n'
            'bin_dir = ""\nbin_dirs = ["/opt/cni/bin"]\n'
            f'[plugins."{CRI_RUNTIME}".containerd]\ndefault_runtime_name = "runc"\n'
            f'[plugins."{CRI_RUNTIME}".containerd.runtimes.runc.options]\nSystemdCgroup = {systemd}\n'
            # a version 2 table in a version 4 dump is not what containerd reads
            f'[plugins."{CRI}".containerd.runtimes.runc.options]\nSystemdCgroup = {"false" if systemd == "true" else "true"}\n'
            '[plugins."io.containerd.cri.v1.images".pinned_images]\nsandbox = "registry.k8s.io/pause:3.10.2"\n'
            f'[plugins."{CRI}"]\nsandbox_image = "registry.k8s.io/pause:3.6"\n')
    settings = containerd.containerd_cri_settings(dump)
    assert settings == {"cni_bin_dir": "/opt/cni/bin", "default_runtime": "runc", "cgroup_driver": driver,
                        "cri_disabled": True, "sandbox_image": "registry.k8s.io/pause:3.10.2"}
    assert kubelet_runtime.containerd_runtime_cgroup_driver(dump) == driver  # the kubelet role reads it alike


# `ctr -n k8s.io images ls` of containerd 2.3.7 after the sandbox's imports (columns cut after LABELS' first).
IMAGES_LS = """\
REF                                           TYPE                                       DIGEST        SIZE    PLATFORMS   LABELS
k8s-node-pools.invalid/probe:a1bb40571af6     application/vnd.oci.image.manifest.v1+json sha256:4415  2.6 MiB linux/amd64 io.cri-containerd.image=managed
registry.k8s.io/pause:3.10.2                  application/vnd.oci.image.manifest.v1+json sha256:781d  2.3 MiB linux/amd64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned
sha256:333365d666b7417f764dc440e6096b984fe405 application/vnd.oci.image.manifest.v1+json sha256:781d  2.3 MiB linux/amd64 io.cri-containerd.image=managed
"""


def test_image_digests_are_read_by_name_from_ctrs_listing() -> None:
    assert containerd.containerd_image_digests(IMAGES_LS) == {
        "k8s-node-pools.invalid/probe:a1bb40571af6": "sha256:4415", "registry.k8s.io/pause:3.10.2": "sha256:781d"}
    assert containerd.containerd_image_digests(IMAGES_LS.splitlines()[0]) == {}  # the header alone: no image
