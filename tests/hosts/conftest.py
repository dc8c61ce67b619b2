"""The host suite's harness: real sandbox hosts (tests/hosts/sandbox.sh), the real playbooks run on them
with ansible-playbook, and testinfra to read their state back.

The hosts are started once per session and removed at its end (SANDBOX_KEEP=1 keeps them for a faster
next run). Nothing here is skipped: without podman the suite fails and says how to install it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import testinfra
import yaml

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = ROOT / "tests" / "hosts" / "sandbox.sh"
STATE = Path(os.environ.get("SANDBOX_STATE", ROOT / ".state"))
OVERLAY = STATE / "hosts" / "inventory.yml"
INVENTORY = ROOT / "inventories" / "sandbox"
ANSIBLE_BIN = Path(sys.executable).parent
RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$", re.MULTILINE)


@dataclass(frozen=True)
class PlaybookRun:
    """One ansible-playbook run: exit code, whole output, and the PLAY RECAP counts per host."""

    rc: int
    output: str
    recap: dict[str, dict[str, int]]

    def changed(self) -> dict[str, int]:
        return {host: counts["changed"] for host, counts in self.recap.items() if counts["changed"]}

    def failed(self) -> dict[str, int]:
        return {host: counts["failed"] + counts["unreachable"] for host, counts in self.recap.items()
                if counts["failed"] or counts["unreachable"]}

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    recap = output.rpartition("PLAY RECAP")[2]
    return {match["host"]: {key: int(value) for key, value in (pair.split("=") for pair in match["counts"].split())}
            for match in RECAP.finditer(recap)}


def run_playbook(playbook: str, *args: str, inventories: tuple[Path, ...] = (INVENTORY, OVERLAY),
                 env: dict[str, str] | None = None) -> PlaybookRun:
    """ansible-playbook ansible/PLAYBOOK on the sandbox hosts (the environment first, then the connection overlay)."""
    command = [str(ANSIBLE_BIN / "ansible-playbook")]
    for inventory in inventories:
        command += ["-i", str(inventory)]
    command += [str(ROOT / "ansible" / playbook), *args]
    full_env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_FORCE_COLOR": "0", "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run(command, cwd=ROOT, env=full_env, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    return PlaybookRun(done.returncode, output, parse_recap(output))


def sandbox(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SANDBOX), *args], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "SANDBOX_STATE": str(STATE)})


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


@pytest.fixture(scope="session")
def converged(sandbox_hosts: dict[str, Any]) -> PlaybookRun:
    """site.yml run once on the sandbox hosts; the suite's assertions read the state it left."""
    run = run_playbook("site.yml")
    if run.rc != 0:
        pytest.fail(f"site.yml failed on the sandbox hosts (rc {run.rc}):\n{run.tail()}")
    return run


@pytest.fixture(scope="session")
def host(sandbox_hosts: dict[str, Any]) -> Callable[[str], Any]:
    """A testinfra host (ssh backend) for a sandbox host's name."""
    cache: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in cache:
            vars_ = sandbox_hosts[name]
            cache[name] = testinfra.get_host(
                f"ssh://{vars_['ansible_user']}@{vars_['ansible_host']}:{vars_['ansible_port']}",
                ssh_identity_file=vars_["ansible_ssh_private_key_file"],
                ssh_extra_args=vars_["ansible_ssh_common_args"])
        return cache[name]

    return get


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
    the host it stands in for (so the container of the same name is never touched)."""
    return run_playbook(playbook, "--limit", VM_STANDS_IN_FOR, *args, inventories=(INVENTORY, VM_OVERLAY))


@pytest.fixture(scope="session")
def vm_converged(vm_host: dict[str, Any]) -> PlaybookRun:
    """site.yml run once on the VM."""
    run = run_vm_playbook("site.yml")
    if run.rc != 0:
        pytest.fail(f"site.yml failed on the VM (rc {run.rc}):\n{run.tail()}")
    return run


@pytest.fixture(scope="session")
def vm(vm_host: dict[str, Any]) -> Any:
    """A testinfra host (ssh backend) for the VM."""
    return testinfra.get_host(
        f"ssh://{vm_host['ansible_user']}@{vm_host['ansible_host']}:{vm_host['ansible_port']}",
        ssh_identity_file=vm_host["ansible_ssh_private_key_file"],
        ssh_extra_args=vm_host["ansible_ssh_common_args"])


@pytest.fixture(scope="session")
def playbook(sandbox_hosts: dict[str, Any]) -> Callable[..., PlaybookRun]:
    """run_playbook for a test module (test modules cannot import this conftest by name)."""
    return run_playbook


@pytest.fixture(scope="session")
def vm_playbook(vm_host: dict[str, Any]) -> Callable[..., PlaybookRun]:
    """run_vm_playbook for a test module."""
    return run_vm_playbook
