"""Role hugepages on the sandbox's container hosts: the memory pool's 2Mi pages reserved through the
sysctl drop-in with a hugetlbfs mount unit, nothing on the pools that ask for none, the kernel command
line path for 1Gi and large 2Mi counts, and a clean removal. The allocation itself is proven on the VM."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

SYSCTL_FILE = "/etc/sysctl.d/91-k8s-node-pools-hugepages.conf"
GRUB_FILE = "/etc/default/grub.d/91-k8s-node-pools-hugepages.cfg"
UNIT_2M = "/etc/systemd/system/dev-hugepages2M.mount"
UNIT_1G = "/etc/systemd/system/dev-hugepages1G.mount"
WITHOUT = ["sb-cpu-1", "sb-gpu-1", "sb-mig-1"]


def test_the_memory_pool_reserves_its_2mi_pages_at_boot(converged: Any, host: Callable[[str], Any]) -> None:
    target = host("sb-mem-1")
    assert "\nvm.nr_hugepages=64\n" in target.file(SYSCTL_FILE).content_string
    assert not target.file(GRUB_FILE).exists  # 64 pages: below the command line threshold


def test_the_memory_pool_mounts_hugetlbfs_for_2mi_only(converged: Any, host: Callable[[str], Any]) -> None:
    target = host("sb-mem-1")
    unit = target.file(UNIT_2M).content_string
    assert "Where=/dev/hugepages2M\n" in unit
    assert "Options=pagesize=2M\n" in unit
    assert target.service("dev-hugepages2M.mount").is_enabled
    assert not target.file(UNIT_1G).exists


@pytest.mark.parametrize("name", WITHOUT)
def test_a_pool_without_hugepages_gets_none(converged: Any, host: Callable[[str], Any], name: str) -> None:
    target = host(name)
    for path in (SYSCTL_FILE, GRUB_FILE, UNIT_2M, UNIT_1G):
        assert not target.file(path).exists, path


def test_boot_time_pages_go_on_the_kernel_command_line_and_go_away_again(
        converged: Any, host: Callable[[str], Any], playbook: Callable[..., Any]) -> None:
    """1Gi pages and a 2Mi count above the threshold, on a host whose pool asks for none, then back to
    the pool's none: every file the role wrote is removed."""
    target = host("sb-cpu-1")
    pages = json.dumps({"hugepages_1gi_count": 1, "hugepages_2mi_count": 2048})
    try:
        run = playbook("site.yml", "--limit", "sb-cpu-1", "--tags", "hugepages_configure", "-e", pages)
        assert run.rc == 0, run.tail()
        grub = target.file(GRUB_FILE).content_string
        assert ('GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX default_hugepagesz=2M hugepagesz=1G hugepages=1 '
                'hugepagesz=2M hugepages=2048"\n') in grub
        assert not target.file(SYSCTL_FILE).exists  # 2048 > the threshold: the command line reserves them
        assert target.service("dev-hugepages2M.mount").is_enabled
        assert target.service("dev-hugepages1G.mount").is_enabled
        assert "Options=pagesize=1G\n" in target.file(UNIT_1G).content_string
    finally:
        back = playbook("site.yml", "--limit", "sb-cpu-1", "--tags", "hugepages_configure")
    assert back.rc == 0, back.tail()
    for path in (SYSCTL_FILE, GRUB_FILE, UNIT_2M, UNIT_1G):
        assert not target.file(path).exists, path
    assert target.run("systemctl is-enabled dev-hugepages1G.mount").rc != 0


def test_bad_counts_stop_the_role_before_any_change(converged: Any, host: Callable[[str], Any],
                                                    playbook: Callable[..., Any]) -> None:
    before = host("sb-cpu-1").run("ls -la --time-style=full-iso /etc/sysctl.d /etc/systemd/system").stdout
    run = playbook("site.yml", "--limit", "sb-cpu-1", "--tags", "hugepages_configure",
                   "-e", json.dumps({"hugepages_2mi_count": -1}))
    assert run.rc != 0
    assert "hugepages_2mi_count, hugepages_1gi_count and hugepages_boot_threshold_2mi must be 0 or more" in run.output
    assert run.changed() == {}
    assert host("sb-cpu-1").run("ls -la --time-style=full-iso /etc/sysctl.d /etc/systemd/system").stdout == before
