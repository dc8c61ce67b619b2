"""A repartition during a run, on the MIG pool's host with a card that is in use: `kubectl drain
--ignore-daemonsets` leaves the device plugin, GFD and dcgm-exporter running, each holding /dev/nvidia*
open, and a GPU reset fails while any process holds the card. The role pauses those clients with the
cluster layer's node label (their affinity excludes it, so the DaemonSet controller deletes their pods),
waits until no process holds a card, applies, and resumes them; a process that does not let go stops the
run with the card untouched.

Stand-ins, all on sb-mig-1: /dev/nvidia0 is a plain file, held open by real processes (systemd units); the
stub nvidia-mig-parted refuses to apply while any process holds a /dev/nvidia* file, as the real one's reset
does; a stub nvidia-smi lists one card and no compute process; kubectl records its calls and, for the
pause label, stops the stand-in clients a few seconds later, as the DaemonSet controller and the kubelet
would. What the label does to real DaemonSet pods is tests/cluster/test_gpu.py's (the rendered affinity)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PlaybookRun, put, run_playbook

from infra.cluster.gpu import GPU_CLIENTS_LABEL, GPU_CLIENTS_PAUSED

FIXTURES = Path(__file__).parent / "fixtures" / "mig"
NAME = "sb-mig-1"
PAUSE = f"{GPU_CLIENTS_LABEL}={GPU_CLIENTS_PAUSED}"
STUB_STATE = "/var/lib/stub-mig-parted"
NVIDIA_SMI = """#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA A30 (UUID: GPU-5a3c1f0e-0000-0000-0000-000000000000)" ;;
  --query-compute-apps=*) ;;
  *) echo "stand-in nvidia-smi: $*" >&2; exit 2 ;;
esac
"""
# The pause label does, a few seconds later, what the DaemonSet controller and the kubelet do: the clients'
# pods end. Clients are the gpu-client-* units; anything else holding the card is not the cluster's.
KUBECTL = f"""#!/bin/sh
echo "$*" >> /run/fake-kubectl.log
case "$*" in
  "label --overwrite node {NAME} {PAUSE}") systemd-run --quiet --collect /bin/sh -c "sleep 6; systemctl stop 'gpu-client-*'" ;;
esac
"""
FILES = {"/usr/bin/nvidia-mig-parted": (FIXTURES / "nvidia-mig-parted").read_text(),
         "/usr/local/bin/nvidia-smi": NVIDIA_SMI, "/usr/local/bin/kubectl": KUBECTL}


def hold_the_card(h: Any, unit: str) -> None:
    h.check_output(f"systemd-run --quiet --unit={unit} --collect /bin/sh -c 'exec 3</dev/nvidia0; exec sleep 600'")


def repartition(**extra: str) -> PlaybookRun:
    args = [arg for key, value in {"mig_drain_delegate": NAME, **extra}.items() for arg in ("-e", f"{key}={value}")]
    return run_playbook("gpu.yml", "--limit", NAME, "--tags", "mig", *args)


def kubectl_calls(h: Any) -> list[str]:
    return str(h.run("cat /run/fake-kubectl.log").stdout).splitlines()


@pytest.fixture
def card_in_use(converged: PlaybookRun, host: Callable[[str], Any]) -> Iterator[Any]:
    """sb-mig-1 with a card that is not in the pool's layout yet and is held open by the device plugin and
    dcgm-exporter stand-ins. Everything is removed afterwards: the host is as site.yml left it."""
    h = host(NAME)
    for path, text in FILES.items():
        put(h, path, text, "755")
    h.check_output(f"touch /dev/nvidia0 && rm -rf {STUB_STATE} /run/fake-kubectl.log")
    for unit in ("gpu-client-device-plugin", "gpu-client-dcgm-exporter"):
        hold_the_card(h, unit)
    try:
        yield h
    finally:
        h.run("systemctl stop 'gpu-client-*' stray-cuda-job; rm -f /dev/nvidia0 /run/fake-kubectl.log "
              + " ".join(FILES) + f" && rm -rf {STUB_STATE}")


def test_the_gpu_clients_are_paused_and_gone_before_the_card_is_reset(card_in_use: Any) -> None:
    h = card_in_use
    run = repartition()
    assert run.rc == 0, run.tail()
    assert h.file(f"{STUB_STATE}/layout").content_string.strip() == "sb-a30-mixed"
    assert [call.split()[0] for call in kubectl_calls(h)] == ["cordon", "drain", "label", "label", "uncordon"]
    assert kubectl_calls(h)[2:4] == [f"label --overwrite node {NAME} {PAUSE}", f"label node {NAME} {GPU_CLIENTS_LABEL}-"]
    assert "gpu-client-" not in h.check_output("systemctl list-units --plain --no-legend 'gpu-client-*'")
    # Run again: the card is in the layout, nothing is paused or drained.
    h.check_output("rm -f /run/fake-kubectl.log")
    again = repartition()
    assert again.rc == 0 and again.recap[NAME]["changed"] == 0, again.tail()
    assert kubectl_calls(h) == []


def test_a_process_that_keeps_the_card_stops_the_run_before_the_card_is_touched(card_in_use: Any) -> None:
    h = card_in_use
    hold_the_card(h, "stray-cuda-job")  # not a cluster client: the pause does not end it
    run = repartition(mig_gpu_clients_timeout="6")
    assert run.rc != 0
    assert f"Not repartitioning {NAME} to MIG layout sb-a30-mixed: after 6 s these processes still hold" in run.output, run.tail()
    pid = h.check_output("systemctl show -p MainPID --value stray-cuda-job")
    assert f"(pid command: {pid} sleep)" in run.output, run.tail()
    assert f"The node stays cordoned and labelled {PAUSE}" in run.output
    assert not h.file(f"{STUB_STATE}/layout").exists  # apply never ran
    assert "apply" not in h.file(f"{STUB_STATE}/calls").content_string
    # cordoned, drained and paused; neither resumed nor uncordoned
    assert [call.split()[0] for call in kubectl_calls(h)] == ["cordon", "drain", "label"]
