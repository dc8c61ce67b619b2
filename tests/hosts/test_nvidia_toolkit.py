"""container_runtime on a GPU host: NVIDIA's toolkit takes a container's GPUs only as the device plugin
passes them (the kubelet's volume mounts), never from an image's NVIDIA_VISIBLE_DEVICES. NVIDIA's repository
is not reachable, so the toolkit's own nvidia-ctk (built from its Go module at the role's pinned version,
tools/nvidia-container-toolkit) is put where the package puts it, with a config.toml as the package ships it
plus a setting of the user's; the role writes the settings with it and the test reads them back through it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import PlaybookRun, run_playbook
from go_tools import go_tool

NAME = "sb-gpu-1"
CTK = "/usr/bin/nvidia-ctk"
CONFIG = "/etc/nvidia-container-runtime/config.toml"
TASK = "container_runtime : Set what the toolkit accepts as a container's GPU list."
CLOSED = ["accept-nvidia-visible-devices-envvar-when-unprivileged = false",
          "accept-nvidia-visible-devices-as-volume-mounts = true"]
USERS = 'debug = "/var/log/gpu-debug.log"'


def toolkit_view(h: Any) -> list[str]:
    """The toolkit's effective configuration, as nvidia-ctk loads it."""
    return str(h.check_output(f"{CTK} config --config-file {CONFIG}")).splitlines()


def converge() -> PlaybookRun:
    return run_playbook("gpu.yml", "--limit", NAME, "--tags", "container_runtime")


@pytest.fixture(scope="module")
def with_toolkit(converged: PlaybookRun, sandbox_hosts: dict[str, Any],
                 host: Callable[[str], Any]) -> Iterator[tuple[Any, PlaybookRun]]:
    """sb-gpu-1 with nvidia-ctk and the package's config.toml (a user's debug log set in it), then the role run."""
    h, conn = host(NAME), sandbox_hosts[NAME]
    copied = subprocess.run(["scp", "-q", "-P", str(conn["ansible_port"]), "-i", conn["ansible_ssh_private_key_file"],
                             *conn["ansible_ssh_common_args"].split(), str(go_tool("nvidia-container-toolkit", "nvidia-ctk")),
                             f"root@127.0.0.1:{CTK}"], capture_output=True, text=True, check=False)
    assert copied.returncode == 0, copied.stderr
    try:
        h.check_output(f"mkdir -p {CONFIG.rsplit('/', 1)[0]} && {CTK} config default --output {CONFIG}"
                       f" && {CTK} config --in-place --config-file {CONFIG}"
                       " --set nvidia-container-cli.debug=/var/log/gpu-debug.log")
        assert not set(CLOSED) & set(toolkit_view(h))  # the package's defaults: the variable is accepted
        yield h, converge()
    finally:
        h.run(f"rm -rf {CTK} {CONFIG.rsplit('/', 1)[0]}")


def test_without_the_toolkit_the_run_says_the_settings_wait(converged: PlaybookRun) -> None:
    assert f"No {CTK} on {NAME} (the toolkit is not installed" in converged.output
    assert not [r for r in converged.results if r.task == TASK and r.status == "changed"]


def test_a_toolkit_installed_without_nvidia_ctk_stops_the_run(converged: PlaybookRun) -> None:
    # as after the package's install from NVIDIA's repository (enabled), with nvidia-ctk gone
    run = run_playbook("gpu.yml", "--limit", NAME, "--tags", "container_runtime_configure",
                       "-e", "container_runtime_nvidia_repo_enabled=true")
    assert run.rc != 0
    assert f"{NAME} has no {CTK} after installing nvidia-container-toolkit 1.17.8" in run.output


def test_the_toolkit_ignores_the_variable_and_takes_the_mounts(with_toolkit: tuple[Any, PlaybookRun]) -> None:
    h, run = with_toolkit
    assert run.rc == 0, run.tail()
    assert TASK in run.changed_tasks()[NAME]
    view = toolkit_view(h)
    assert set(CLOSED) <= set(view)
    assert USERS in view  # the rest of the user's file is kept


def test_a_second_run_changes_nothing(with_toolkit: tuple[Any, PlaybookRun]) -> None:
    again = converge()
    assert again.rc == 0 and NAME not in again.changed(), again.describe_changes()


def test_a_setting_reopened_by_hand_is_closed_again(with_toolkit: tuple[Any, PlaybookRun]) -> None:
    h, _ = with_toolkit
    h.check_output(f"{CTK} config --in-place --config-file {CONFIG}"
                   " --set accept-nvidia-visible-devices-envvar-when-unprivileged=true")
    assert CLOSED[0] not in toolkit_view(h)
    run = converge()
    assert TASK in run.changed_tasks()[NAME]
    assert set(CLOSED) <= set(toolkit_view(h))
