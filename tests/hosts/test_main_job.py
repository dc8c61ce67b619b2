"""`python -m infra run inventories/sandbox --hosts` on the real sandbox hosts: every stage announced and
done, the report names every host. --keep-hosts, so the session's hosts stay for the other tests."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from infra.hosts.ansible_run import ROOT, STATE


def test_the_main_job_runs_the_host_stages(sandbox_hosts: dict[str, Any]) -> None:
    done = subprocess.run([sys.executable, "-m", "infra", "run", "inventories/sandbox", "--hosts", "--keep-hosts"],
                          cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "SANDBOX_STATE": str(STATE)})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for stage in ("check", "plan", "fit", "render", "start hosts", "bootstrap", "verify", "report", "clean up hosts"):
        assert f"<== {stage} done" in done.stdout, done.stdout[-4000:]
    assert "hosts kept (--keep-hosts)" in done.stdout
    report = done.stdout.split("==> [8/9] report")[1].split("<== report")[0]
    for name in sandbox_hosts:
        assert name in report, report
