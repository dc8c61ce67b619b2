"""The container_runtime role's drop-in keeps containerd's own CRI settings (containerd 1.6 replaces a plugin's
whole table with an imported file's, so a drop-in naming only the nvidia runtime would drop them) and sets over them
what every node needs: the CNI plugin folder and the kubelet's cgroup driver. The live check reads them back from
`containerd config dump`, as the kubelet role does for the cgroup driver."""

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


def dropin(text: str, nvidia: bool = True, default: bool = True, cgroup_driver: str = "systemd") -> dict:
    binary = "/usr/bin/nvidia-container-runtime" if nvidia else ""
    return tomllib.loads(containerd.containerd_cri_dropin(text, "/opt/cni/bin", cgroup_driver, binary, default))


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
    settings = containerd.containerd_cri_settings(dump)
    assert settings["cgroup_driver"] == driver
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
