"""The kernel state the memory pool's host must hold, read live from the emulated VM (sb-mem-1) and as the
inventory says it should be: shared by the VM's converge, drift and power-cycle proofs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
NAME = "sb-mem-1"
SETTINGS = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"][NAME]


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
