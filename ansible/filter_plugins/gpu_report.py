"""The `gpu_report` filter of ansible/verify.yml: infra.hosts.gpu_report's host_report over a registered
nvidia-smi result, so that the parsing is the project's tested Python, not Jinja."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:  # the playbooks run from the checkout; infra is its package
    sys.path.insert(0, ROOT)

from infra.hosts.gpu_report import host_report  # noqa: E402


def gpu_report(result: dict[str, Any], host: str, expected_driver: str | None = None,
               expected_mig: bool | None = None) -> dict[str, Any]:
    """The report of HOST from a registered `command` result of infra.hosts.gpu_report.QUERY."""
    rc = int(result.get("rc", 1) if result.get("rc") is not None else 1)
    stdout, stderr = str(result.get("stdout", "")), str(result.get("stderr", ""))
    if not (stdout.strip() or stderr.strip()):  # nvidia-smi absent: the command module says why in msg
        stderr = str(result.get("msg", ""))
    return host_report(host, rc, stdout, stderr, expected_driver or None, expected_mig)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"gpu_report": gpu_report}
