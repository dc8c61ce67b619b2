"""The VM tier: the kernel state a container host cannot hold, live on the emulated VM standing in for the
memory pool's host (sb-mem-1): conntrack sysctls and hash size, modules, forwarding and bridge-nf-call,
huge pages allocated and mounted, the NIC's interrupts pinned and banned from irqbalance. Then a drift is reported
by check mode and repaired by a run of every VM play that changes nothing else (irqbalance restarted): the VM's
idempotence proof. That a power cycle brings it all back from the files alone (modules before sysctls) is
proven on the one power cycle the VM tier makes (tests/hosts/test_vm_local_disks.py). Slow: every module runs
under software emulation."""

from __future__ import annotations

from typing import Any

from vm_state import NAME, SETTINGS, expected_state, irqbalance, live_state, nic_irqs, sysctl


def test_the_vm_stands_in_for_the_memory_pool(vm: Any) -> None:
    assert vm.check_output("hostname") == NAME
    assert vm.interface("eth0").exists
    assert vm.block_device("/dev/vdb").size == 4 * 2**30
    assert SETTINGS["hugepages"]["2Mi"] > 0 and SETTINGS["irq_affinity"]["interfaces"] == ["eth0"]


def test_live_kernel_state_matches_the_pool(vm_converged: Any, vm: Any) -> None:
    assert live_state(vm) == expected_state(vm)


def test_the_nic_has_interrupts_to_pin(vm_converged: Any, vm: Any) -> None:
    # A list of none would make the affinity check above vacuous.
    assert len(nic_irqs(vm, "eth0")) >= 2


def test_hugetlbfs_is_mounted_for_2mi_pages(vm_converged: Any, vm: Any) -> None:
    mount = vm.mount_point("/dev/hugepages2M")
    assert mount.exists and mount.filesystem == "hugetlbfs"
    assert "pagesize=2M" in mount.options
    assert not vm.mount_point("/dev/hugepages1G").exists


def test_time_sync_runs_where_the_host_owns_its_clock(vm_converged: Any, vm: Any) -> None:
    assert vm.service("chrony").is_running


# What the repairing run changes after the drift below, and nothing else: the live sysctl, the drifted
# interrupt, and irqbalance restarted to read its new --banirq list.
REPAIR_TASKS = ["base : Apply the sysctls that differ now.", "irq_affinity : Find interrupts whose affinity drifted.",
                "irq_affinity : Pin the interrupts again.", "irq_affinity : Restart irqbalance where it runs."]


def test_drift_is_reported_by_check_mode_and_repaired_by_a_run_that_changes_nothing_else(
        vm_converged: Any, vm: Any, vm_playbook: Any) -> None:
    """A drifted sysctl and interrupt: check mode reports them and changes nothing; the next run of every VM play
    repairs them and changes nothing else (the VM's idempotence proof, in the same run)."""
    irq = nic_irqs(vm, "eth0")[0]
    uuid = vm.check_output("blkid -s UUID -o value /dev/disk/by-id/virtio-k8s-data-1")
    vm.check_output("sysctl -w vm.max_map_count=65530")
    vm.check_output(f"echo 1 > /proc/irq/{irq}/smp_affinity_list")
    check = vm_playbook("site.yml", "--check", "--diff", "--tags", "base_run,irq_affinity_run")
    assert check.rc == 0, check.tail()
    # The sysctl and the drifted interrupt (and the unit restart that would repair it).
    assert check.changed().get(NAME, 0) >= 2, check.tail()
    assert sysctl(vm, "vm.max_map_count") == "65530"  # check mode changed nothing
    invocation = irqbalance(vm)[0]
    repair = vm_playbook("site.yml")  # every play the VM runs (tag kernel)
    assert repair.rc == 0, repair.tail()
    assert repair.changed_tasks() == {NAME: REPAIR_TASKS}, repair.describe_changes()
    assert live_state(vm) == expected_state(vm)
    # The re-pin rewrote irqbalance's --banirq list; irqbalance reads it only at start, so it was restarted.
    assert irqbalance(vm)[0] not in ("", invocation)
    assert vm.check_output("blkid -s UUID -o value /dev/disk/by-id/virtio-k8s-data-1") == uuid  # disk untouched
