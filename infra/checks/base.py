"""Findings and the rule registry every check module writes into.

A rule is declared once, with what it guards against and how to fix it; the README's table of checks
is generated from these declarations (`python -m infra rules --markdown`), so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

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

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


RULES: dict[str, Rule] = {}


def rule(code: str, severity: Severity, guards: str, fix: str) -> Rule:
    """Declare a rule; codes are public API (scripts filter on them), so they never change meaning."""
    if code in RULES:
        raise ValueError(f"rule {code} declared twice")
    RULES[code] = Rule(code, severity, guards, fix)
    return RULES[code]


class Report:
    """Collects findings so that every problem is reported at once."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, which: Rule, file: str, field: str, message: str, fix: str | None = None) -> None:
        self.findings.append(Finding(which.code, which.severity, str(file), field, message, fix or which.fix))
