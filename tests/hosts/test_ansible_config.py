"""The README's commands run ansible-playbook from the repository's root: Ansible must read the project's ansible.cfg
there (its forks, callbacks and pipelining), asked of Ansible itself (`ansible-config dump`), and every play that
changes hosts must escalate, so that a non-root ssh user works (proven on a sandbox host in test_site.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from infra.hosts.ansible_run import ANSIBLE_BIN, PLAYBOOKS, ROOT


def config_dump(cwd: Path) -> str:
    env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_CONFIG"}
    return subprocess.run([str(ANSIBLE_BIN / "ansible-config"), "dump", "--only-changed"], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize(("cwd", "read"), [(ROOT, True), (PLAYBOOKS / "roles", False)])
def test_ansible_reads_the_projects_config_from_the_repository_root(cwd: Path, read: bool) -> None:
    dump = config_dump(cwd)
    assert (f"CONFIG_FILE() = {ROOT / 'ansible.cfg'}" in dump) is read
    assert ("rollout_summary" in dump and "DEFAULT_FORKS(" in dump) is read


def rollout_plays(playbook: str) -> list[dict]:
    return [play for play in yaml.safe_load((PLAYBOOKS / playbook).read_text()) if "roles" in play]


@pytest.mark.parametrize("playbook", ["site.yml", "gpu.yml"])
def test_every_play_that_changes_hosts_escalates(playbook: str) -> None:
    plays = rollout_plays(playbook)
    assert plays
    assert [play["name"] for play in plays if play.get("become") is not True] == []


def test_the_controller_side_preflight_never_escalates() -> None:
    """The spec check runs on the controller (delegate_to: localhost): sudo there would ask the user's password."""
    for play in yaml.safe_load((PLAYBOOKS / "preflight.yml").read_text()):
        assert "become" not in play
        assert all("become" not in task for task in play["tasks"])
