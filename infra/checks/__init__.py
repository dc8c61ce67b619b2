"""Preflight rules: an Environment in, every finding out, before any host or cluster is touched.

Each module holds the rules of one concern and a `check(view, report)` function over the resolved
environment. They run in CHECKS order, causes first: a finding marks the facts it breaks (a pool's
machine, its GPU resources, a storage class's backing) and later rules stay silent about them, so one
typo yields one finding, not a cascade. Findings print in that order too: causes before consequences.
"""

from __future__ import annotations

from infra.checks import (
    cluster,
    gpu,
    network,
    pools,
    references,
    runtime,
    scheduler,
    storage,
    tenants,
    workloads,
)
from infra.checks.base import RULES, Finding, Report, Rule
from infra.model.resolve import resolve
from infra.spec import Environment

CHECKS = (references.check, runtime.check, pools.check, gpu.check, network.check, tenants.check, storage.check,
          workloads.check, cluster.check, scheduler.check)


def run_checks(env: Environment) -> list[Finding]:
    report = Report()
    view = resolve(env)
    for stage, check in enumerate(CHECKS):
        report.stage = stage
        check(view, report)
    return sorted(report.findings, key=lambda f: (f.stage, f.severity != "error", f.file, f.code, f.field))


def has_errors(findings: list[Finding]) -> bool:
    return any(finding.severity == "error" for finding in findings)


__all__ = ["RULES", "Finding", "Report", "Rule", "has_errors", "run_checks"]
