"""The VM tier: the hugepages role's reboot for boot-time pages comes after update-grub, so the host boots the new
kernel command line. The VM boots its kernel directly (qemu -kernel, no GRUB), so a stand-in update-grub records
the boot it ran in; the reboot is the VM's own, through Ansible's reboot module."""

from __future__ import annotations

from typing import Any

NAME = "sb-mem-1"
STUB = "/usr/sbin/update-grub"
RUNS = "/var/lib/update-grub-runs"
# Records the boot it ran in, as update-grub would write /boot/grub/grub.cfg for the next one.
STAND_IN = f"#!/bin/sh\ncat /proc/sys/kernel/random/boot_id >> {RUNS}\n"


def boot_id(vm: Any) -> str:
    return str(vm.check_output("cat /proc/sys/kernel/random/boot_id")).strip()


def test_the_reboot_for_boot_time_pages_comes_after_update_grub(vm_converged: Any, vm: Any, vm_playbook: Any) -> None:
    assert not vm.file(STUB).exists  # no GRUB in the VM: the stand-in below is the only update-grub
    vm.check_output(f"printf '%s' '{STAND_IN}' > {STUB} && chmod 755 {STUB} && rm -f {RUNS}")
    before = boot_id(vm)
    try:
        # The memory pool's 2Mi pages moved to the kernel command line (a threshold below its count), with the
        # role allowed to reboot: the GRUB drop-in changes, update-grub must run, then the reboot.
        run = vm_playbook("site.yml", "--tags", "hugepages",
                          "-e", '{"hugepages_reboot": true, "hugepages_boot_threshold_2mi": 32}')
        assert run.rc == 0, run.tail()
        assert boot_id(vm) != before, "the role did not reboot the VM"
        runs = vm.file(RUNS).content_string.split()
        assert runs == [before], f"update-grub ran in boots {runs}, the reboot came from boot {before}"
    finally:
        restored = vm_playbook("site.yml", "--tags", "hugepages")
        vm.check_output(f"rm -f {STUB} {RUNS}")
    assert restored.rc == 0, restored.tail()
    assert vm.file("/proc/sys/vm/nr_hugepages").content_string.strip() == "64"
