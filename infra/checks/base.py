"""Findings, the rule registry every check module writes into, and the facts a finding breaks.

A rule is declared once, with what it guards against and how to fix it; the README's table of checks
is generated from these declarations (`python -m infra rules --markdown`), so the two cannot drift.

One cause, one finding: a finding can mark a fact broken (a pool's machine, its GPU resources, a
storage class's backing), and the rules that depend on that fact stay silent about it, so a typo in a
MIG layout is reported as itself, not again as four quota problems downstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.spec import Pool

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Rule:
    code: str
    severity: Severity
    guards: str
    fix: str


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    file: str
    field: str
    message: str
    fix: str
    stage: int = 0  # the position of the check that found it: causes come before consequences

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "file": self.file, "field": self.field,
                "message": self.message, "fix": self.fix}


RULES: dict[str, Rule] = {}


def rule(code: str, severity: Severity, guards: str, fix: str) -> Rule:
    """Declare a rule; codes are public API (scripts filter on them), so they never change meaning."""
    if code in RULES:
        raise ValueError(f"rule {code} declared twice")
    RULES[code] = Rule(code, severity, guards, fix)
    return RULES[code]


def machine_fact(pool: str) -> str:
    """The pool's hardware is known and usable (machine models defined, one GPU model, allocatable > 0)."""
    return f"pool:{pool}:machine"


def gpu_fact(pool: str) -> str:
    """The pool's GPU resources are what the plan says (a valid sharing layout on a known card)."""
    return f"pool:{pool}:gpu"


def storage_fact(name: str) -> str:
    """A storage class's backing is known (every pool it names exists)."""
    return f"storage_class:{name}"


class Report:
    """Collects findings so that every problem is reported at once, and the facts they break."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.stage = 0
        self._broken: set[str] = set()

    def add(self, which: Rule, file: str, field: str, message: str, fix: str | None = None,
            breaks: tuple[str, ...] = ()) -> None:
        self.findings.append(Finding(which.code, which.severity, str(file), field, message, fix or which.fix,
                                     self.stage))
        self._broken.update(breaks)

    def at_pool(self, which: Rule, pool: Pool, field: str, message: str, fix: str | None = None,
                breaks: tuple[str, ...] = ()) -> None:
        """A finding about a pool variable, in the file that sets it (group_vars/<pool>/ may be split)."""
        self.add(which, pool.file_of(field), field, message, fix, breaks)

    def mark(self, *facts: str) -> None:
        """Mark facts broken by a finding reported elsewhere (e.g. once per machine model, not per pool)."""
        self._broken.update(facts)

    def broken(self, *facts: str) -> bool:
        """Whether any of `facts` was broken by an earlier finding (then dependent rules stay silent)."""
        return not self._broken.isdisjoint(facts)
