"""The host suite's harness: real sandbox hosts (tests/hosts/sandbox.sh), the real playbooks run on them
with ansible-playbook, and testinfra to read their state back.

The hosts are started once per session and removed at its end (SANDBOX_KEEP=1 keeps them for a faster
next run). Nothing here is skipped: without podman the suite fails and says how to install it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import PurePosixPath
from typing import Any

import pytest
import testinfra
import yaml

# The runner and its output parser live in infra/ so the main job's host stages use the same ones.
from infra.hosts.ansible_run import (
    OVERLAY,
    ROOT,
    SANDBOX,
    SANDBOX_VARS,
    STATE,
    PlaybookRun,
    TaskResult,
    parse_recap,
    parse_results,
    run_playbook,
    sandbox,
)
from infra.hosts.ansible_run import SANDBOX_INVENTORY as INVENTORY

# Molecule's verifier runs the fixture role's own testinfra files; they are not part of this suite.
collect_ignore_glob = ["fixtures/*"]

__all__ = ["INVENTORY", "OVERLAY", "ROOT", "SANDBOX", "SANDBOX_VARS", "STATE", "PlaybookRun", "TaskResult",
           "parse_recap", "parse_results", "run_playbook", "sandbox"]


@pytest.fixture(scope="session")
def sandbox_hosts() -> Iterator[dict[str, Any]]:
    """The sandbox's hosts, running: their connection variables by name (from the overlay inventory)."""
    missing = [tool for tool in ("podman", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run `sudo tests/hosts/sandbox.sh install` once")
    up = sandbox("up")
    if up.returncode != 0:
        pytest.fail(f"tests/hosts/sandbox.sh up failed:\n{up.stdout}\n{up.stderr}")
    hosts: dict[str, Any] = yaml.safe_load(OVERLAY.read_text())["all"]["hosts"]
    yield hosts
    if os.environ.get("SANDBOX_KEEP") != "1":
        sandbox("down")


def converging(run: PlaybookRun, where: str) -> PlaybookRun:
    """The run, or the session's failure with its output's tail when site.yml did not converge."""
    if run.rc != 0:
        pytest.fail(f"site.yml failed on {where} (rc {run.rc}):\n{run.tail()}")
    return run


def testinfra_host(connection: dict[str, Any]) -> Any:
    """A testinfra host (ssh backend) from a host's connection variables in an overlay inventory."""
    return testinfra.get_host(
        f"ssh://{connection['ansible_user']}@{connection['ansible_host']}:{connection['ansible_port']}",
        ssh_identity_file=connection["ansible_ssh_private_key_file"],
        ssh_extra_args=connection["ansible_ssh_common_args"])


@pytest.fixture(scope="session")
def converged(sandbox_hosts: dict[str, Any]) -> PlaybookRun:
    """site.yml run once on the sandbox hosts; the suite's assertions read the state it left."""
    return converging(run_playbook("site.yml"), "the sandbox hosts")


@pytest.fixture(scope="session")
def host(sandbox_hosts: dict[str, Any]) -> Callable[[str], Any]:
    """A testinfra host (ssh backend) for a sandbox host's name."""
    cache: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in cache:
            cache[name] = testinfra_host(sandbox_hosts[name])
        return cache[name]

    return get


def put(h: Any, path: str, text: str, mode: str = "644") -> None:
    """Write text to path on the host (its folder made), with mode."""
    encoded = base64.b64encode(text.encode()).decode()
    h.check_output(f"mkdir -p {PurePosixPath(path).parent} && echo {encoded} | base64 -d > {path} && chmod {mode} {path}")


@contextlib.contextmanager
def kubelet_stand_in(h: Any, script: str, unit: str) -> Iterator[Any]:
    """The host with a stand-in kubelet (script at /usr/bin/kubelet, unit in /etc/systemd/system) enabled in
    place of the package's; afterwards the stand-in is gone and the package's binary and unit are back, enabled
    as the role leaves them."""
    for text, path, mode in ((script, "/usr/bin/kubelet", "755"), (unit, "/etc/systemd/system/kubelet.service", "644")):
        h.check_output(f"[ ! -e {path} ] || [ -e {path}.installed ] || mv {path} {path}.installed")
        put(h, path, text, mode)
    h.check_output("systemctl daemon-reload && systemctl enable kubelet.service")
    try:
        yield h
    finally:
        h.run("systemctl disable --now kubelet.service; rm -f /etc/systemd/system/kubelet.service /usr/bin/kubelet")
        h.run("[ ! -e /usr/bin/kubelet.installed ] || mv /usr/bin/kubelet.installed /usr/bin/kubelet;"
              " systemctl daemon-reload; [ ! -e /usr/bin/kubelet ] || systemctl enable kubelet.service")


# ---- the emulated VM tier: live kernel state ----------------------------------------------------------

VM_OVERLAY = STATE / "vm" / "inventory.yml"
# The inventory host the VM stands in for: the memory pool's, which asks for the most kernel state
# (hugepages, IRQ affinity, a local disk) besides what every pool gets (modules, sysctls, conntrack).
VM_STANDS_IN_FOR = "sb-mem-1"


@pytest.fixture(scope="session")
def vm_host() -> Iterator[dict[str, Any]]:
    """The emulated VM, booted as VM_STANDS_IN_FOR: its connection variables. Removed at the session's end
    unless SANDBOX_KEEP=1; a VM already running under that name is reused."""
    missing = [tool for tool in ("qemu-system-x86_64", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run `sudo tests/hosts/sandbox.sh install` once")
    up = sandbox("vm-up", "--as", VM_STANDS_IN_FOR)
    if up.returncode != 0:
        pytest.fail(f"tests/hosts/sandbox.sh vm-up failed:\n{up.stdout}\n{up.stderr}")
    hosts: dict[str, Any] = yaml.safe_load(VM_OVERLAY.read_text())["all"]["hosts"]
    yield hosts[VM_STANDS_IN_FOR]
    if os.environ.get("SANDBOX_KEEP") != "1":
        sandbox("vm-down")


def run_vm_playbook(playbook: str, *args: str) -> PlaybookRun:
    """ansible-playbook on the VM only: the sandbox inventory with the VM's connection overlay, limited to
    the host it stands in for (so the container of the same name is never touched). Unless ARGS choose
    tags, only the plays tagged `kernel` run: the VM proves live kernel state and disks, and each
    emulated task costs seconds; every role converges on the container hosts."""
    tags = () if "--tags" in args else ("--tags", "kernel")
    return run_playbook(playbook, "--limit", VM_STANDS_IN_FOR, *tags, *args, inventories=(INVENTORY, VM_OVERLAY))


@pytest.fixture(scope="session")
def vm_converged(vm_host: dict[str, Any]) -> PlaybookRun:
    """site.yml run once on the VM."""
    return converging(run_vm_playbook("site.yml"), "the VM")


@pytest.fixture(scope="session")
def vm(vm_host: dict[str, Any]) -> Any:
    """A testinfra host (ssh backend) for the VM."""
    return testinfra_host(vm_host)


@pytest.fixture(scope="session")
def playbook(sandbox_hosts: dict[str, Any]) -> Callable[..., PlaybookRun]:
    """run_playbook for a test module (test modules cannot import this conftest by name)."""
    return run_playbook


@pytest.fixture(scope="session")
def vm_playbook(vm_host: dict[str, Any]) -> Callable[..., PlaybookRun]:
    """run_vm_playbook for a test module."""
    return run_vm_playbook
