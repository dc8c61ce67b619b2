"""container_runtime's locked-memory limit (issue 15, item 6): on RDMA pools containerd runs with LimitMEMLOCK=infinity,
which every container inherits, so RDMA pods register pinned memory without the IPC_LOCK capability their Pod
Security level refuses. Asked of containerd's own limits (/proc/<its pid>/limits) after systemd restarted it.

The sandbox has no RDMA pool, so the limit is set here through the role's parameter. This machine holds no
CAP_SYS_RESOURCE and gives its containers a hard limit of 8 MiB, which systemd inside them cannot raise: `infinity`
is proven only by the role's refusal on such a host (what a container without the capability, or a later drop-in,
leaves), and the drop-in's path through systemd with a limit below that hard limit. On a bare-metal host, systemd
(root, every capability) sets infinity itself."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from conftest import PlaybookRun, run_playbook

NAME = "sb-cpu-1"
UNIT_DROPIN = "/etc/systemd/system/containerd.service.d/50-k8s-node-pools-memlock.conf"
FOUR_MIB = "4194304"


def memlock(host: Any) -> list[str]:
    """containerd's soft and hard locked-memory limit, as its process holds them."""
    pid = host.check_output("systemctl show --property=MainPID --value containerd.service").strip()
    line = next(line for line in host.file(f"/proc/{pid}/limits").content_string.splitlines()
                if line.startswith("Max locked memory"))
    return line.split()[3:5]


def role(*extra: str) -> PlaybookRun:
    return run_playbook("gpu.yml", "--limit", NAME, "--tags", "container_runtime", *extra)


def test_containerd_runs_with_the_limit_the_role_sets_and_loses_it_with_the_parameter(
        converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    cpu = host(NAME)
    default = memlock(cpu)
    assert default != [FOUR_MIB, FOUR_MIB] and not cpu.file(UNIT_DROPIN).exists  # no RDMA pool: systemd's default
    try:
        run = role("-e", json.dumps({"container_runtime_memlock": FOUR_MIB}))
        assert run.rc == 0, run.tail()
        assert memlock(cpu) == [FOUR_MIB, FOUR_MIB]
        assert cpu.service("containerd").is_running
    finally:
        restored = role()
    assert restored.rc == 0, restored.tail()
    assert not cpu.file(UNIT_DROPIN).exists
    assert memlock(cpu) == default


def test_the_role_stops_when_containerd_does_not_get_the_limit(converged: PlaybookRun,
                                                               host: Callable[[str], Any]) -> None:
    """infinity on a host whose service manager cannot raise the hard limit: systemd starts containerd with the
    closest limit it may set, and the role, reading containerd's own limits, stops and names them."""
    cpu = host(NAME)
    try:
        run = role("-e", json.dumps({"container_runtime_memlock": "infinity"}))
        assert run.rc != 0
        assert f"containerd on {NAME} runs with 'Max locked memory" in run.output
        assert f"not unlimited as {UNIT_DROPIN} sets (LimitMEMLOCK=infinity)" in run.output
        assert memlock(cpu) != ["unlimited", "unlimited"]
    finally:
        restored = role()
    assert restored.rc == 0, restored.tail()
    assert not cpu.file(UNIT_DROPIN).exists
