"""Role base on the sandbox's container hosts: the files that set the kernel at boot, per pool, and time
sync. Container hosts share their machine's kernel, so the live values are proven on the VM
(test_vm_kernel.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"]
HOSTS = sorted(SETTINGS)
SYSCTL_FILE = "/etc/sysctl.d/90-k8s-node-pools.conf"


def sysctl_lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


@pytest.mark.parametrize("name", HOSTS)
def test_modules_load_at_boot(converged: Any, host: Callable[[str], Any], name: str) -> None:
    modules = host(name).file("/etc/modules-load.d/k8s-node-pools.conf")
    assert modules.is_file
    listed = [line for line in modules.content_string.splitlines() if line and not line.startswith("#")]
    assert listed == ["overlay", "br_netfilter", "nf_conntrack"]


@pytest.mark.parametrize("name", HOSTS)
def test_sysctl_drop_in_holds_the_defaults_and_the_pools_sysctls(
        converged: Any, host: Callable[[str], Any], name: str) -> None:
    written = sysctl_lines(host(name).file(SYSCTL_FILE).content_string)
    wanted = {"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1",
              "net.bridge.bridge-nf-call-ip6tables": "1",
              **{key: str(value) for key, value in SETTINGS[name]["sysctls"].items()}}
    assert written == wanted
    assert written["net.netfilter.nf_conntrack_max"] == str(SETTINGS[name]["conntrack"]["max"])


@pytest.mark.parametrize(("name", "key", "value"), [
    ("sb-cpu-1", "net.core.somaxconn", "4096"),
    ("sb-mem-1", "net.core.somaxconn", None),
    ("sb-mem-1", "vm.max_map_count", "262144"),
    ("sb-cpu-1", "vm.max_map_count", None),
    ("sb-gpu-1", "vm.max_map_count", None),
])
def test_a_pools_sysctl_reaches_only_its_hosts(converged: Any, host: Callable[[str], Any], name: str,
                                               key: str, value: str | None) -> None:
    assert sysctl_lines(host(name).file(SYSCTL_FILE).content_string).get(key) == value


def test_every_sysctl_says_why(converged: Any, host: Callable[[str], Any]) -> None:
    lines = host("sb-cpu-1").file(SYSCTL_FILE).content_string.splitlines()
    for index, line in enumerate(lines):
        if line and not line.startswith("#"):
            assert lines[index - 1].startswith("# "), f"{line} has no comment above it"


@pytest.mark.parametrize("name", HOSTS)
def test_conntrack_hash_size_is_a_module_option(converged: Any, host: Callable[[str], Any],
                                                name: str) -> None:
    option = host(name).file("/etc/modprobe.d/k8s-node-pools-conntrack.conf")
    assert f"options nf_conntrack hashsize={SETTINGS[name]['conntrack']['hashsize']}\n" in option.content_string


@pytest.mark.parametrize("name", HOSTS)
def test_swap_stays_off_at_boot(converged: Any, host: Callable[[str], Any], name: str) -> None:
    assert host(name).run("systemctl is-enabled swap.target").stdout.strip() == "masked"


@pytest.mark.parametrize("name", HOSTS)
def test_time_sync_is_enabled(converged: Any, host: Callable[[str], Any], name: str) -> None:
    # A container host lacks CAP_SYS_TIME: chrony's unit is enabled and skipped, never failed.
    target = host(name)
    assert target.package("chrony").is_installed
    assert target.service("chrony").is_enabled
    assert target.run("systemctl is-failed chrony").stdout.strip() != "failed"


def test_a_swap_entry_in_fstab_is_commented_out(converged: Any, host: Callable[[str], Any],
                                                playbook: Callable[..., Any]) -> None:
    target = host("sb-gpu-1")
    target.run("cp /etc/fstab /etc/fstab.before-test && echo '/swapfile none swap sw 0 0' >> /etc/fstab")
    try:
        run = playbook("site.yml", "--limit", "sb-gpu-1", "--tags", "base_configure")
        assert run.rc == 0, run.tail()
        assert run.changed() == {"sb-gpu-1": 1}
        assert "\n# /swapfile none swap sw 0 0" in target.file("/etc/fstab").content_string
    finally:
        target.run("mv /etc/fstab.before-test /etc/fstab")
