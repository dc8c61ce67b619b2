"""Role irq_affinity on the sandbox's container hosts: the memory pool's boot-time unit, its script and
settings, and irqbalance's drop-in; nothing on the pools that name no NIC. A container host shares its
machine's interrupts, so the unit is enabled but skipped there; the pinning is proven on the VM."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

UNIT = "k8s-node-pools-irq-affinity.service"
FILES = ["/usr/local/sbin/k8s-node-pools-irq-affinity", "/etc/default/k8s-node-pools-irq-affinity",
         f"/etc/systemd/system/{UNIT}", "/etc/systemd/system/irqbalance.service.d/k8s-node-pools-irq-affinity.conf"]


def test_the_memory_pool_pins_eth0_to_cpu_0(converged: Any, host: Callable[[str], Any]) -> None:
    settings = host("sb-mem-1").file("/etc/default/k8s-node-pools-irq-affinity").content_string
    assert 'IRQ_AFFINITY_INTERFACES="eth0"\n' in settings
    assert 'IRQ_AFFINITY_CPUS="0"\n' in settings


def test_the_unit_runs_at_boot_before_the_kubelet(converged: Any, host: Callable[[str], Any]) -> None:
    target = host("sb-mem-1")
    assert target.file("/usr/local/sbin/k8s-node-pools-irq-affinity").mode == 0o755
    assert target.service(UNIT).is_enabled
    assert target.run(f"systemctl is-failed {UNIT}").stdout.strip() != "failed"
    unit = target.file(f"/etc/systemd/system/{UNIT}").content_string
    assert "Before=irqbalance.service kubelet.service\n" in unit
    assert "ConditionVirtualization=!container\n" in unit


def test_irqbalance_reads_the_banned_interrupts(converged: Any, host: Callable[[str], Any]) -> None:
    drop_in = host("sb-mem-1").file(FILES[3]).content_string
    assert "EnvironmentFile=-/run/k8s-node-pools/irqbalance.env\n" in drop_in
    assert f"After={UNIT}\n" in drop_in


@pytest.mark.parametrize("name", ["sb-cpu-1", "sb-gpu-1", "sb-mig-1"])
def test_a_pool_naming_no_nic_gets_nothing(converged: Any, host: Callable[[str], Any], name: str) -> None:
    target = host(name)
    for path in FILES:
        assert not target.file(path).exists, path
    assert target.run(f"systemctl is-enabled {UNIT}").rc != 0
