"""The host suite's harness: real sandbox hosts (tests/hosts/sandbox.sh), the real playbooks run on them
with ansible-playbook, and testinfra to read their state back.

The hosts are started once per session and removed at its end (SANDBOX_KEEP=1 keeps them for a faster
next run). Nothing here is skipped: without podman the suite fails and says how to install it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import testinfra
import yaml

# The runner and its output parser live in infra/ so the main job's host stages use the same ones.
from infra.ansible_run import (
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
from infra.ansible_run import SANDBOX_INVENTORY as INVENTORY

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
