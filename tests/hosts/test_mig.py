"""mig on the sandbox hosts: only the MIG pool's host (sb-mig-1, an A30 in the spec) gets the mig-parted
config (the cluster layer's very text), and the boot-time unit that applies then asserts its layout before
the kubelet; the T4 host and the CPU/memory hosts get none of it. Without a card the run skips the apply
and says why; a bad layout name stops the run before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PlaybookRun, run_playbook

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
SPEC = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"]
ALL = [(name, vars_["mig"] is not None) for name, vars_ in sorted(SPEC.items())]
UNIT = "/etc/systemd/system/nvidia-mig-apply.service"
# Outside /etc/nvidia-mig-manager/, which NVIDIA's package regenerates at boot (test_mig_boot.py).
CONFIG = "/etc/k8s-node-pools/mig/config.yaml"
KUBELET_DROPIN = "/etc/systemd/system/kubelet.service.d/30-mig-layout.conf"


def test_only_the_mig_pool_has_a_layout() -> None:
    assert [name for name, mig in ALL if mig] == ["sb-mig-1"]
    assert SPEC["sb-gpu-1"]["nvidia"]["gpu_model"] == "T4-16GB"  # a card without MIG: no layout at all


@pytest.mark.parametrize(("name", "mig"), ALL)
def test_the_config_is_the_cluster_layers_text(converged: PlaybookRun, host: Callable[[str], Any],
                                               name: str, mig: bool) -> None:
    config = host(name).file(CONFIG)
    assert config.exists is mig
    if mig:
        assert config.content_string == SPEC[name]["mig"]["file"]
        assert "sb-a30-mixed:" in config.content_string and "2g.12gb: 1" in config.content_string


@pytest.mark.parametrize(("name", "mig"), ALL)
def test_boot_unit_applies_then_asserts_before_the_kubelet(converged: PlaybookRun, host: Callable[[str], Any],
                                                           name: str, mig: bool) -> None:
    unit = host(name).file(UNIT)
    assert unit.exists is mig
    if not mig:
        assert not host(name).service("nvidia-mig-apply").is_enabled
        assert not host(name).file(KUBELET_DROPIN).exists
        return
    text = unit.content_string
    layout = SPEC[name]["mig"]["config"]
    assert f"ExecStart=/usr/bin/nvidia-mig-parted apply -f {CONFIG} -c {layout}\n" in text
    assert f"ExecStartPost=/usr/bin/nvidia-mig-parted assert -f {CONFIG} -c {layout}\n" in text
    assert "Type=oneshot\n" in text
    service = host(name).service("nvidia-mig-apply")
    assert service.is_enabled
    show = host(name).check_output("systemctl show -p Before -p WantedBy -p ConditionResult nvidia-mig-apply")
    assert "kubelet.service" in show.split("Before=")[1].splitlines()[0]
    assert "nvidia-persistenced.service" in show.split("Before=")[1].splitlines()[0]
    # the kubelet requires it (its drop-in; what that does at boot is test_mig_boot.py's), and it is skipped,
    # not failed, without the binary
    dropin = host(name).file(KUBELET_DROPIN).content_string
    assert "Requires=nvidia-mig-apply.service\nAfter=nvidia-mig-apply.service\n" in dropin
    assert host(name).run("systemctl is-failed --quiet nvidia-mig-apply").rc != 0


def test_the_run_says_why_the_layout_was_not_applied(converged: PlaybookRun) -> None:
    assert ("MIG layout sb-a30-mixed NOT applied on sb-mig-1 during this run: no usable GPU (nvidia-smi -L: "
            "Failed to initialize NVML") in converged.output
    assert "NOT applied on sb-gpu-1" not in converged.output


def test_a_layout_missing_from_the_config_stops_the_run(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    before = host("sb-mig-1").file(UNIT).content_string
    run = run_playbook("gpu.yml", "--limit", "sb-mig-1", "--tags", "mig", "-e", "mig_config=sb-a30-typo")
    assert run.rc != 0
    assert "mig_config 'sb-a30-typo' is not a layout of mig_config_file, which has all-disabled, sb-a30-mixed" in run.output
    assert run.recap["sb-mig-1"]["changed"] == 0
    assert host("sb-mig-1").file(UNIT).content_string == before


def test_a_config_that_is_not_mig_parted_stops_the_run(converged: PlaybookRun) -> None:
    run = run_playbook("gpu.yml", "--limit", "sb-mig-1", "--tags", "mig", "-e", '{"mig_config_file": "version: v2\\n"}')
    assert run.rc != 0
    assert "mig_config_file must be a mig-parted config (version: v1" in run.output


def test_a_config_path_the_package_rewrites_is_refused(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    run = run_playbook("gpu.yml", "--limit", "sb-mig-1", "--tags", "mig",
                       "-e", "mig_config_path=/etc/nvidia-mig-manager/config.yaml")
    assert run.rc != 0
    assert ("mig_config_path '/etc/nvidia-mig-manager/config.yaml' is under /etc/nvidia-mig-manager/, which NVIDIA's "
            "nvidia-mig-manager package regenerates from the hardware at every boot") in run.output
    assert run.recap["sb-mig-1"]["changed"] == 0
    assert host("sb-mig-1").file(CONFIG).exists
