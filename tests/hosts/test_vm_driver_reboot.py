"""The VM tier: the nvidia_driver role's opt-in reboot (issue 14, item 7). A host whose kernel runs another NVIDIA
module than the pin - a first install with nouveau bound, a version bump - is cordoned and drained, rebooted (the
VM's own reboot, through Ansible's reboot module) and uncordoned only once it runs the pinned module; without
nvidia_driver_reboot the run stops naming the host, and a host whose pinned module still does not load after the
reboot stops the run and stays cordoned.

Stand-ins, since the VM has no card and no nvidia module: the module's version file is /run/stub-nvidia/version
(tmpfs, so a reboot clears it), which a boot-time unit writes from /etc/stub-nvidia/next-version - what the
kernel would load from the installed packages on the next boot; kubectl is a script on the VM that records each
call with the boot it ran in."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ROOT, PlaybookRun

NAME = "sb-mem-1"
PIN, OLD = "580.95.05", "570.172.08"
VERSION_FILE = "/run/stub-nvidia/version"
NEXT = "/etc/stub-nvidia/next-version"
UNIT = "/etc/systemd/system/stub-nvidia-module.service"
KUBECTL = "/usr/local/bin/stub-kubectl"
LOG = "/var/lib/stub-kubectl.log"
PLAYBOOK = str(ROOT / "tests" / "hosts" / "playbooks" / "driver-module.yml")

STUB_UNIT = f"""[Unit]
Description=Stand-in for the nvidia module the kernel loads at boot (tests/hosts/test_vm_driver_reboot.py)

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /run/stub-nvidia && cp {NEXT} {VERSION_FILE}'

[Install]
WantedBy=multi-user.target
"""
STUB_KUBECTL = f"#!/bin/sh\necho \"$(cat /proc/sys/kernel/random/boot_id) $*\" >> {LOG}\n"


def write(path: str, text: str) -> str:
    """A shell command that writes TEXT to PATH on the VM, whatever quotes it holds."""
    return f"echo {base64.b64encode(text.encode()).decode()} | base64 -d > {path}"


def boot_id(vm: Any) -> str:
    return str(vm.check_output("cat /proc/sys/kernel/random/boot_id")).strip()


def calls(vm: Any) -> list[tuple[str, str]]:
    """Each kubectl call as (the boot it ran in, its first argument and the node)."""
    lines = str(vm.run(f"cat {LOG}").stdout).splitlines()
    return [(line.split()[0], " ".join(line.split()[1:3])) for line in lines]


@pytest.fixture
def stale(vm_converged: PlaybookRun, vm: Any) -> Iterator[Any]:
    """The VM running module OLD while the packages' module, loaded at the next boot, is PIN."""
    vm.check_output(f"mkdir -p /etc/stub-nvidia /run/stub-nvidia && echo {PIN} > {NEXT} && echo {OLD} > {VERSION_FILE}"
                    f" && {write(UNIT, STUB_UNIT)} && {write(KUBECTL, STUB_KUBECTL)} && chmod 755 {KUBECTL}"
                    f" && rm -f {LOG} && systemctl daemon-reload && systemctl enable stub-nvidia-module.service")
    yield vm
    vm.check_output(f"systemctl disable stub-nvidia-module.service; rm -rf {UNIT} /etc/stub-nvidia /run/stub-nvidia"
                    f" {KUBECTL} {LOG} && systemctl daemon-reload")


def play(vm_playbook: Any, reboot: bool) -> PlaybookRun:
    extra = {"nvidia_driver_version": PIN, "nvidia_driver_check_module": True,
             "nvidia_driver_module_version_file": VERSION_FILE, "nvidia_driver_reboot": reboot,
             "nvidia_driver_drain_delegate": NAME, "nvidia_driver_kubectl": KUBECTL}
    run: PlaybookRun = vm_playbook(PLAYBOOK, "--tags", "all", "-e", json.dumps(extra))
    return run


def test_a_host_on_an_old_module_is_drained_rebooted_and_uncordoned(stale: Any, vm_playbook: Any) -> None:
    before = boot_id(stale)
    run = play(vm_playbook, reboot=True)
    assert run.rc == 0, run.tail()
    after = boot_id(stale)
    assert after != before, "the role did not reboot the VM"
    assert stale.file(VERSION_FILE).content_string.strip() == PIN
    assert calls(stale) == [(before, f"cordon {NAME}"), (before, f"drain {NAME}"), (after, f"uncordon {NAME}")]
    again = play(vm_playbook, reboot=True)  # the host runs the pin now: nothing to reboot
    assert again.rc == 0 and boot_id(stale) == after, again.tail()
    assert len(calls(stale)) == 3


def test_without_the_opt_in_the_run_stops_naming_the_host(stale: Any, vm_playbook: Any) -> None:
    before = boot_id(stale)
    run = play(vm_playbook, reboot=False)
    assert run.rc != 0
    assert f"{NAME} runs NVIDIA kernel module {OLD}, but the driver is pinned at {PIN}" in run.output
    assert "or set nvidia_driver_reboot to let the run do it one host at a time" in run.output
    assert boot_id(stale) == before and calls(stale) == []


def test_a_module_that_still_does_not_load_stops_the_run_and_keeps_the_node_cordoned(stale: Any,
                                                                                      vm_playbook: Any) -> None:
    stale.check_output(f"echo {OLD} > {NEXT}")  # the pinned module fails to load: the old one comes back
    before = boot_id(stale)
    run = play(vm_playbook, reboot=True)
    assert run.rc != 0
    assert boot_id(stale) != before
    assert (f"{NAME} still runs NVIDIA kernel module {OLD} after the reboot, not the pinned {PIN}: the node stays "
            "cordoned") in run.output
    assert [call for _, call in calls(stale)] == [f"cordon {NAME}", f"drain {NAME}"]
