"""The local_disks role on the container hosts: they have no disks of their own, so the role prepares none
there, even on the memory pool's host whose pool declares one (the emulated VM formats and mounts it:
test_vm_local_disks.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

HOSTS = ["sb-cpu-1", "sb-gpu-1", "sb-mem-1", "sb-mig-1"]


def declared_mounts() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "infra", "hostvars", "inventories/sandbox"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return [disk["mount"] for host in json.loads(out)["hosts"].values() for disk in host.get("local_disks", [])]


MOUNTS = declared_mounts()


def test_a_pool_of_the_sandbox_declares_a_disk():
    # Without one, the test below would hold for a role that ignores its disks.
    assert MOUNTS


@pytest.mark.parametrize("name", HOSTS)
def test_container_hosts_prepare_no_disks(converged, host, name):
    assert f"local_disks: no disks to prepare on {name}" in converged.output
    fstab = host(name).file("/etc/fstab").content_string
    for mount in MOUNTS:
        assert not host(name).file(mount).exists
        assert mount not in fstab
