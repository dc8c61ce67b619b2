"""The VM tier: the kernel state a container host cannot hold, live on the emulated VM standing in for the
memory pool's host (sb-mem-1): conntrack sysctls and hash size, modules, forwarding and bridge-nf-call,
huge pages allocated and mounted, the NIC's interrupts pinned and banned from irqbalance. Then a drift is reported
by check mode and repaired by a run that changes nothing else (irqbalance restarted), and a reboot
brings it all back from the files alone (modules before sysctls). Slow: every module runs under software emulation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
NAME = "sb-mem-1"
SETTINGS = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"][NAME]
REBOOT_TIMEOUT = 600


def sysctl(vm: Any, key: str) -> str:
    return str(vm.check_output(f"sysctl -n {key}")).strip()


def nic_irqs(vm: Any, interface: str) -> list[int]:
    """The interface's interrupts as the kernel lists them: a virtio NIC's MSI vectors sit on its PCI function."""
    out = vm.check_output(f"ls /sys/class/net/{interface}/device/../msi_irqs")
    return sorted(int(irq) for irq in out.split())


def irqbalance(vm: Any) -> tuple[str, list[int]]:
    """irqbalance's invocation and the interrupts it was told to leave alone, from its own command line."""
    pid = vm.check_output("systemctl show -p MainPID --value irqbalance.service")
    argv = vm.check_output(f"tr '\\0' ' ' < /proc/{pid}/cmdline").split() if pid != "0" else []
    return (vm.check_output("systemctl show -p InvocationID --value irqbalance.service"),
            sorted(int(arg.split("=", 1)[1]) for arg in argv if arg.startswith("--banirq=")))


def live_state(vm: Any) -> dict[str, Any]:
    meminfo = dict(line.split(":", 1) for line in vm.file("/proc/meminfo").content_string.splitlines())
    interface = SETTINGS["irq_affinity"]["interfaces"][0]
    return {
        "nf_conntrack_max": int(sysctl(vm, "net.netfilter.nf_conntrack_max")),
        "hashsize": int(vm.file("/sys/module/nf_conntrack/parameters/hashsize").content_string),
        "modules": sorted(line.split()[0] for line in vm.file("/proc/modules").content_string.splitlines()
                          if line.split()[0] in ("overlay", "br_netfilter", "nf_conntrack")),
        "ip_forward": sysctl(vm, "net.ipv4.ip_forward"),
        "bridge-nf-call-iptables": sysctl(vm, "net.bridge.bridge-nf-call-iptables"),
        "vm.max_map_count": int(sysctl(vm, "vm.max_map_count")),
        "HugePages_Total": int(meminfo["HugePages_Total"]),
        "Hugepagesize": meminfo["Hugepagesize"].strip(),
        "irq_affinity": {irq: vm.file(f"/proc/irq/{irq}/smp_affinity_list").content_string.strip()
                         for irq in nic_irqs(vm, interface)},
        "irqbalance_banned": irqbalance(vm)[1],
    }


def expected_state(vm: Any) -> dict[str, Any]:
    return {
        "nf_conntrack_max": SETTINGS["conntrack"]["max"],
        "hashsize": SETTINGS["conntrack"]["hashsize"],
        "modules": ["br_netfilter", "nf_conntrack", "overlay"],
        "ip_forward": "1",
        "bridge-nf-call-iptables": "1",
        "vm.max_map_count": SETTINGS["sysctls"]["vm.max_map_count"],
        "HugePages_Total": SETTINGS["hugepages"]["2Mi"],
        "Hugepagesize": "2048 kB",
        "irq_affinity": dict.fromkeys(nic_irqs(vm, SETTINGS["irq_affinity"]["interfaces"][0]),
                                      SETTINGS["irq_affinity"]["cpus"]),
        "irqbalance_banned": nic_irqs(vm, SETTINGS["irq_affinity"]["interfaces"][0]),
    }


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


def test_a_reboot_brings_the_state_back_from_the_files(vm_converged: Any, vm: Any) -> None:
    """Modules load before systemd-sysctl applies the drop-in, the hash size comes from the module option,
    the pages from the sysctl, the pinning from the unit: no Ansible after the reboot."""
    boot_id = vm.file("/proc/sys/kernel/random/boot_id").content_string
    vm.run("systemd-run --on-active=1 systemctl reboot")
    deadline = time.monotonic() + REBOOT_TIMEOUT
    while True:
        time.sleep(5)
        try:
            if vm.run("cat /proc/sys/kernel/random/boot_id").stdout not in ("", boot_id) \
                    and vm.run("systemctl is-system-running --wait").stdout.strip() in ("running", "degraded"):
                break
        except Exception:  # ssh refused while the VM reboots
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the VM did not come back within {REBOOT_TIMEOUT} s")
    assert live_state(vm) == expected_state(vm)
    journal = vm.check_output("journalctl -b -u systemd-sysctl.service -u systemd-modules-load.service")
    assert "Couldn't write" not in journal and "Failed" not in journal, journal
    assert vm.service("k8s-node-pools-irq-affinity.service").is_enabled
    assert vm.run("systemctl is-active k8s-node-pools-irq-affinity.service").stdout.strip() == "active"
