"""The Pulumi edge: load the stack's environment, refuse it on errors, declare what follows from it.

Cluster components (node pools, tenancy, GPU sharing, scheduling, networking, storage) are added here
one per concern; each is built from the same pure functions as `python -m infra`.
"""

from __future__ import annotations

import pulumi

from infra.checks import has_errors, run_checks
from infra.plan import build_plan
from infra.spec import SpecError, load_environment


def declare(inventory: str) -> dict:
    """Check `inventory` and export its plan; raise pulumi.RunError (nothing declared) on any error."""
    try:
        env = load_environment(inventory)
    except SpecError as error:
        raise pulumi.RunError(f"{inventory}: unusable input:\n" + "\n".join(error.problems)) from None
    findings = run_checks(env)
    for finding in findings:
        line = f"{finding.code} {finding.file}: {finding.field}: {finding.message} (fix: {finding.fix})"
        (pulumi.log.error if finding.severity == "error" else pulumi.log.warn)(line)
    if has_errors(findings):
        raise pulumi.RunError(f"{inventory}: preflight found errors; run `python -m infra check {inventory}`")
    plan = build_plan(env)
    pulumi.export("plan", plan)
    return plan
