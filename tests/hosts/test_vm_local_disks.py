"""The local_disks role: on the emulated VM standing in for sb-mem-1, the memory pool's blank disk (by id,
the kernel's /dev/vdb) is formatted with the pool's filesystem (labelled for its mount point), mounted at its mount path and in fstab by
UUID (that a second run changes nothing is part of test_vm_kernel.py's repair run, which runs every VM play and
allows only the repaired tasks to change); after the kernel's names of two disks swap (the VM booted with their
order reversed), a pool naming them by kernel name is refused and one naming them by /dev/disk/by-id is not; a disk holding a foreign filesystem or partition table is refused by name and left untouched (and
formatted only when forced). Container hosts have no disks of their own (test_local_disks.py).

The renumbering is the VM tier's one power cycle, and it also proves that the kernel state comes back from the
files alone: modules before systemd-sysctl applies the drop-in, the conntrack hash size from the module option,
the pages from the sysctl, the pinning from the unit, with no Ansible after the boot."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ROOT, VM_STANDS_IN_FOR, run_vm_playbook, sandbox
from vm_state import expected_state, live_state

# The pool names the disk by id (its serial number); the kernel calls it vdb.
DEVICE, KERNEL_NAME, MOUNT, FS_TYPE = "/dev/disk/by-id/virtio-k8s-data-1", "/dev/vdb", "/mnt/disks/vdb", "xfs"


def label(mount: str) -> str:
    """The filesystem label the role gives the disk of MOUNT: one per disk, naming the mount it belongs to."""
    return "k8s-" + hashlib.sha1(mount.encode()).hexdigest()[:8]


LABEL = label(MOUNT)
TAGS = ("--tags", "local_disks_install,local_disks_configure")


def probe(h: Any) -> dict[str, str]:
    out = h.run(f"blkid --probe --output export {DEVICE}").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_the_pool_declares_the_vm_s_disk():
    out = subprocess.run([sys.executable, "-m", "infra", "hostvars", "inventories/sandbox"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    disks = json.loads(out)["hosts"][VM_STANDS_IN_FOR]["local_disks"]
    assert disks == [{"device": DEVICE, "size_gib": 4, "mount": MOUNT, "fs_type": FS_TYPE}]


def test_the_disk_is_formatted_with_the_pool_s_filesystem(vm_converged, vm):
    found = probe(vm)
    assert found["TYPE"] == FS_TYPE and found["LABEL"] == LABEL and "PTTYPE" not in found


def test_the_disk_is_mounted_at_its_mount_path(vm_converged, vm):
    source, fstype, target = vm.check_output(f"findmnt -n -o SOURCE,FSTYPE,TARGET --mountpoint {MOUNT}").split()
    assert (source, fstype, target) == (KERNEL_NAME, FS_TYPE, MOUNT)
    assert vm.check_output(f"readlink -f {DEVICE}") == KERNEL_NAME
    assert vm.mount_point(MOUNT).exists


def test_the_mount_is_in_fstab_by_uuid(vm_converged, vm):
    uuid = probe(vm)["UUID"]
    entries = [line.split() for line in vm.file("/etc/fstab").content_string.splitlines()
               if line.strip() and not line.startswith("#")]
    assert [f"UUID={uuid}", MOUNT, FS_TYPE, "defaults,nofail", "0", "0"] in entries
    assert not any(entry[0] in (DEVICE, KERNEL_NAME) for entry in entries)  # by UUID only


# An MBR with one Linux partition (sectors 2048-6143): what blkid reports as PTTYPE=dos.
MBR = (f"import struct; d = open({DEVICE!r}, 'r+b'); d.seek(446); "
       "d.write(struct.pack('<B3sB3sII', 0, bytes(3), 0x83, bytes(3), 2048, 4096)); "
       "d.seek(510); d.write(bytes([0x55, 0xAA])); d.close()")
# What another owner may have left on a disk: a filesystem, or a partition table.
FOREIGN = {
    "ext4 filesystem": (f"mkfs.ext4 -q -F -L data {DEVICE}", "TYPE=ext4"),
    "dos partition table": (f"python3 -c {shlex.quote(MBR)}", "PTTYPE=dos"),
}


def test_a_disk_holding_something_else_is_refused_and_left_untouched(vm_converged, vm):
    """Each foreign signature in turn is refused and left as it was; then, told to, the role wipes the disk
    and makes the pool's filesystem: the host is back to its converged state."""
    for what, (make, shown) in FOREIGN.items():
        assert vm.run(f"umount -q {MOUNT}; wipefs --all --quiet {DEVICE}").rc == 0, what
        assert vm.run(make).rc == 0, what
        before = probe(vm)
        assert shown.split("=")[1] in before.values(), what

        run = run_vm_playbook("site.yml", *TAGS)
        assert run.rc != 0, what
        assert f"{DEVICE} on {VM_STANDS_IN_FOR} already holds" in run.output and shown in run.output, what
        assert "no disk was changed" in run.output, what
        assert probe(vm) == before, what  # the same signature, the same UUID: not touched
        assert not vm.mount_point(MOUNT).exists, what

    forced = run_vm_playbook("site.yml", *TAGS, "-e", '{"local_disks_force": true}')
    assert forced.rc == 0, forced.tail()
    after = probe(vm)
    assert after["TYPE"] == FS_TYPE and after["LABEL"] == LABEL and "PTTYPE" not in after
    assert vm.mount_point(MOUNT).exists


# Two small disks with serial numbers the VM can boot in either order (tests/hosts/sandbox.sh vm-restart
# --swap-disks): kernel name, /dev/disk/by-id name, mount point.
SWAP = {"a": ("/dev/vdc", "/dev/disk/by-id/virtio-k8s-swap-a", "/mnt/swap-a"),
        "b": ("/dev/vdd", "/dev/disk/by-id/virtio-k8s-swap-b", "/mnt/swap-b")}


def swap_disks(by_id: bool) -> str:
    return json.dumps({"local_disks_disks": [{"device": by_id_name if by_id else kernel, "mount": mount,
                                              "fs_type": "ext4", "size_gib": 1}
                                             for kernel, by_id_name, mount in SWAP.values()]})


@pytest.fixture(scope="module")
def renumbered(vm_converged: Any, vm: Any) -> Iterator[Any]:
    """The two disks prepared by kernel name, each mount point given a file naming its disk, then the VM
    booted with the two disks in the other order (vdc is now disk b)."""
    run = run_vm_playbook("site.yml", *TAGS, "-e", swap_disks(by_id=False))
    assert run.rc == 0, run.tail()
    for disk, (_, _, mount) in SWAP.items():
        vm.check_output(f"echo {disk} > {mount}/disk")
    restarted = sandbox("vm-restart", "--swap-disks")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    yield vm


def test_the_kernel_s_names_changed_and_each_mount_kept_its_disk(renumbered: Any) -> None:
    vm = renumbered
    for disk, (_, by_id, mount) in SWAP.items():
        other = SWAP["b" if disk == "a" else "a"][0]
        assert vm.check_output(f"readlink -f {by_id}") == other  # the renumbering
        assert vm.file(f"{mount}/disk").content_string == f"{disk}\n"  # fstab mounts by UUID
        assert vm.check_output(f"blkid --probe --match-tag LABEL --output value {by_id}") == label(mount)


def test_kernel_names_that_now_point_at_the_other_disk_are_refused(renumbered: Any) -> None:
    vm = renumbered
    fstab = vm.file("/etc/fstab").content_string
    uuid_b = vm.check_output(f"blkid --probe --match-tag UUID --output value {SWAP['b'][1]}")
    run = run_vm_playbook("site.yml", *TAGS, "-e", swap_disks(by_id=False))
    assert run.rc != 0
    assert (f"/dev/vdc on {VM_STANDS_IN_FOR} is not the disk mounted at /mnt/swap-a: fstab mounts UUID=") in run.output
    assert f"/dev/vdc holds UUID={uuid_b} (label {label('/mnt/swap-b')}, mounted at /mnt/swap-b)" in run.output
    assert "name the pool's disks by /dev/disk/by-id/" in run.output
    assert run.recap[VM_STANDS_IN_FOR]["changed"] == 0
    assert vm.file("/etc/fstab").content_string == fstab
    assert vm.file("/mnt/swap-a/disk").content_string == "a\n"


def test_by_id_names_follow_the_disks(renumbered: Any) -> None:
    vm = renumbered
    run = run_vm_playbook("site.yml", *TAGS, "-e", swap_disks(by_id=True))
    assert run.rc == 0, run.tail()
    assert run.changed() == {}, run.describe_changes()
    assert vm.file("/mnt/swap-a/disk").content_string == "a\n"


def test_the_power_cycle_brought_the_kernel_state_back_from_the_files(renumbered: Any) -> None:
    vm = renumbered
    assert vm.run("systemctl is-system-running --wait").stdout.strip() in ("running", "degraded")
    assert live_state(vm) == expected_state(vm)
    journal = vm.check_output("journalctl -b -u systemd-sysctl.service -u systemd-modules-load.service")
    assert "Couldn't write" not in journal and "Failed" not in journal, journal
    assert vm.service("k8s-node-pools-irq-affinity.service").is_enabled
    assert vm.run("systemctl is-active k8s-node-pools-irq-affinity.service").stdout.strip() == "active"
