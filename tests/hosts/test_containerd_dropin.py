"""The container_runtime role's drop-in keeps containerd's own CRI settings: containerd 1.6 replaces a
plugin's whole table with an imported file's, so a drop-in naming only the nvidia runtime would drop them."""

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


def dropin(text: str, default: bool = True) -> dict:
    return tomllib.loads(containerd.containerd_nvidia_dropin(text, "nvidia", "/usr/bin/nvidia-container-runtime", default))


def test_the_dropin_keeps_config_toml_cri_settings_and_runc() -> None:
    cri = dropin(DEBIAN)["plugins"][CRI]
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": "/etc/cni/net.d"}
    assert cri["containerd"]["runtimes"]["runc"] == {"runtime_type": "io.containerd.runc.v2"}
    assert cri["containerd"]["runtimes"]["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"}}
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert list(dropin(DEBIAN)["plugins"]) == [CRI]  # other plugins' tables stay config.toml's


def test_the_nvidia_runtime_takes_runcs_cgroup_driver() -> None:
    text = DEBIAN + '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\nSystemdCgroup = true\n'
    runtimes = dropin(text, default=False)["plugins"][CRI]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["runc"]["options"] == {"SystemdCgroup": True}
    assert "default_runtime_name" not in dropin(text, default=False)["plugins"][CRI]["containerd"]


def test_an_empty_or_missing_config_gives_a_dropin_too() -> None:
    assert dropin("")["plugins"][CRI]["containerd"]["runtimes"]["nvidia"]["runtime_type"] == "io.containerd.runc.v2"


@pytest.mark.parametrize(("text", "imports"), [
    (DEBIAN, None),
    ('imports = ["/etc/containerd/conf.d/*.toml"]\n' + DEBIAN, ["/etc/containerd/conf.d/*.toml"]),
])
def test_imports_are_read(text: str, imports: list[str] | None) -> None:
    assert containerd.containerd_imports(text) == imports


def test_a_broken_config_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match=r"config\.toml is not valid TOML"):
        containerd.containerd_imports("version = \n")
