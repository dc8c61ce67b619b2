"""`molecule test` of a role on a sandbox host, through the shared delegated scenario
(ansible/molecule/sandbox: create and destroy call tests/hosts/sandbox.sh, so a scenario gets the same
hosts as this suite and never podman's default bridge network). The role is a one-task fixture;
the host layer's roles use the same scenario files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra.hosts.ansible_run import ROOT

ROLE = ROOT / "tests" / "hosts" / "fixtures" / "molecule_probe"


def test_molecule_test_converges_checks_idempotence_verifies_and_destroys() -> None:
    bin_dir = Path(sys.executable).parent
    molecule = shutil.which("molecule", path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    if molecule is None:
        pytest.fail("molecule is not installed: ./dev.sh test installs the test extras (pip install -e .[test])")
    done = subprocess.run([molecule, "test"], cwd=ROLE, capture_output=True, text=True, check=False,
                          env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                               "NO_COLOR": "1", "ANSIBLE_NOCOLOR": "1"})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    for action in ("create", "converge", "idempotence", "verify", "destroy"):
        assert f"{action}: Executed: Successful" in output, output[-6000:]
    assert "1 passed" in output
    status = subprocess.run([str(ROOT / "tests" / "hosts" / "sandbox.sh"), "status"], capture_output=True, text=True,
                            env={**os.environ, "SANDBOX_STATE": str(ROOT / ".state" / "molecule" / "molecule_probe-default")})
    assert "sb-molecule-probe" not in status.stdout, "destroy left the scenario's host running"
