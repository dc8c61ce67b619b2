"""Preflight rules: an Environment in, every finding out, before any host or cluster is touched.

Each module holds the rules of one concern and a `check(env, report)` function. Rules that depend on
a reference (a pool's machine model, a tenant's pool) skip what the references module already
reported, so one typo yields one finding, not a cascade.
"""

from __future__ import annotations

from infra.checks import gpu, network, pools, references, storage, tenants
from infra.checks.base import RULES, Finding, Report, Rule
from infra.spec import Environment

CHECKS = (references.check, network.check, pools.check, gpu.check, tenants.check, storage.check)


def run_checks(env: Environment) -> list[Finding]:
    report = Report()
    for check in CHECKS:
        check(env, report)
    return sorted(report.findings, key=lambda f: (f.severity != "error", f.file, f.code, f.field))


def has_errors(findings: list[Finding]) -> bool:
    return any(finding.severity == "error" for finding in findings)


__all__ = ["RULES", "Finding", "Report", "Rule", "has_errors", "run_checks"]
