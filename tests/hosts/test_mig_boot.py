"""mig at boot, on the MIG pool's host with NVIDIA's nvidia-mig-manager package beside the role: the
package's unit (a stand-in with the upstream unit's ordering, tests/hosts/fixtures/mig/) regenerates
/etc/nvidia-mig-manager/config.yaml and applies all-disabled at every boot. The pool's layout must survive
a reboot all the same, the kubelet must start only once the layout is applied and asserted, and a failed
apply or assert must keep the kubelet down. mig-parted is a stub that behaves like it (the card's layout
kept in a file); the reboot is real: systemd shuts the host down and boots it again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PlaybookRun, kubelet_stand_in, put, run_playbook, sandbox

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "mig"
NAME = "sb-mig-1"
MIG = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"][NAME]["mig"]
CONFIG = "/etc/k8s-node-pools/mig/config.yaml"
STUB = "/var/lib/stub-mig-parted"

# What the package puts on the host (its unit enabled, as its postinst does), and a stand-in kubelet.
PACKAGE = {
    "/usr/bin/nvidia-mig-parted": "nvidia-mig-parted",
    "/usr/lib/systemd/system/nvidia-mig-manager.service": "nvidia-mig-manager.service",
    "/etc/systemd/system/nvidia-mig-manager.service.d/override.conf": "override.conf",
    "/etc/nvidia-mig-manager/service.sh": "service.sh",
}
PACKAGE_WANTS = ["multi-user.target.wants", "nvidia-gpu-reset.target.wants"]
KUBELET_UNIT = """[Unit]
Description=stand-in kubelet for the MIG boot test
[Service]
ExecStart=/usr/bin/kubelet
[Install]
WantedBy=multi-user.target
"""
KUBELET = "#!/bin/sh\nexec sleep infinity\n"


def show(h: Any, unit: str, prop: str) -> str:
    return str(h.check_output(f"systemctl show -p {prop} --value {unit}"))


def reboot() -> None:
    done = sandbox("restart", NAME)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def with_package(converged: PlaybookRun, host: Callable[[str], Any]) -> Iterator[tuple[Any, PlaybookRun]]:
    """sb-mig-1 with the package's files and a stand-in kubelet installed after site.yml, the mig role run
    again (as the next site.yml would), then rebooted. Everything but the role's own files is removed
    afterwards and the host rebooted clean, in the state site.yml left it."""
    h = host(NAME)
    for path, fixture in PACKAGE.items():
        put(h, path, (FIXTURES / fixture).read_text(), "755" if path.endswith(("parted", ".sh")) else "644")
    for wants in PACKAGE_WANTS:
        h.check_output(f"mkdir -p /etc/systemd/system/{wants} && ln -sf "
                       f"/usr/lib/systemd/system/nvidia-mig-manager.service /etc/systemd/system/{wants}/")
    with kubelet_stand_in(h, KUBELET, KUBELET_UNIT):
        try:
            run = run_playbook("gpu.yml", "--limit", NAME, "--tags", "mig")
            assert run.rc == 0, run.tail()
            # The card's record starts with this boot: site.yml's start of the installed kubelet applied the
            # layout once already (the kubelet requires the role's unit).
            h.check_output(f"rm -f {STUB}/calls")
            reboot()
            yield h, run
        finally:
            h.run("rm -rf /etc/stub-mig-parted " + STUB + " " + " ".join(PACKAGE)
                  + " /etc/nvidia-mig-manager /etc/systemd/system/nvidia-mig-manager.service.d "
                  + " ".join(f"/etc/systemd/system/{w}/nvidia-mig-manager.service" for w in PACKAGE_WANTS))
    reboot()
    # The boot started the enabled persistence daemon, which fails on this card-less host, and the package's
    # kubelet, which has no cluster to join yet and restarts every 10 s; both stopped, so that the tests after
    # this module find a quiet host.
    h.run("systemctl stop kubelet.service; systemctl reset-failed nvidia-persistenced.service kubelet.service")


def test_the_role_masks_the_packages_unit(with_package: tuple[Any, PlaybookRun]) -> None:
    h, run = with_package
    assert show(h, "nvidia-mig-manager.service", "LoadState") == "masked"
    assert h.file("/etc/systemd/system/nvidia-mig-manager.service").linked_to == "/dev/null"
    assert run.recap[NAME]["failed"] == 0


def test_the_pools_layout_survives_a_reboot(with_package: tuple[Any, PlaybookRun]) -> None:
    h, _ = with_package
    # the card (the stub's state) has the pool's layout, applied and asserted by the role's unit alone
    assert h.file(f"{STUB}/layout").content_string.strip() == MIG["config"] == "sb-a30-mixed"
    # every call came from the role's unit: the package's unit never ran
    apply_unit = show(h, "nvidia-mig-apply.service", "InvocationID")
    calls = h.file(f"{STUB}/calls").content_string.splitlines()
    assert calls == [f"{apply_unit}: apply -f {CONFIG} -c {MIG['config']}",
                     f"{apply_unit}: assert -f {CONFIG} -c {MIG['config']}"]
    assert show(h, "nvidia-mig-manager.service", "InvocationID") == ""
    assert h.file(CONFIG).content_string == MIG["file"]
    assert show(h, "nvidia-mig-apply.service", "ActiveState") == "active"


def test_the_kubelet_starts_after_the_layout_is_asserted(with_package: tuple[Any, PlaybookRun]) -> None:
    h, _ = with_package
    assert "nvidia-mig-apply.service" in show(h, "kubelet.service", "Requires").split()
    assert show(h, "kubelet.service", "ActiveState") == "active"
    applied = int(show(h, "nvidia-mig-apply.service", "ActiveEnterTimestampMonotonic"))
    started = int(show(h, "kubelet.service", "ExecMainStartTimestampMonotonic"))
    assert 0 < applied <= started


@pytest.mark.parametrize("step", ["apply", "assert"])
def test_a_failed_layout_keeps_the_kubelet_down(with_package: tuple[Any, PlaybookRun], step: str) -> None:
    h, _ = with_package
    h.check_output(f"mkdir -p /etc/stub-mig-parted && touch /etc/stub-mig-parted/fail-{step}")
    try:
        reboot()
        assert show(h, "nvidia-mig-apply.service", "ActiveState") == "failed"
        assert show(h, "kubelet.service", "ActiveState") == "inactive"
        assert "Dependency failed" in h.check_output("journalctl -b --no-pager -u kubelet.service")
    finally:
        h.run(f"rm -f /etc/stub-mig-parted/fail-{step}")
    # the twin: the same boot with the card taking its layout starts the kubelet
    reboot()
    assert show(h, "kubelet.service", "ActiveState") == "active"
