"""Kubernetes quantities and Linux CPU lists, parsed once so every rule compares numbers.

Kubernetes writes sizes as quantities ("500m", "4Gi", "1.5"); the kernel and kubelet write CPU sets
as lists ("0-3,8,10-11"). Both appear in the inventory, and both are easy to get subtly wrong.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[a-zA-Z]*)$")
GIB = Decimal(2) ** 30


def parse_quantity(value: object) -> Decimal:
    """Return a Kubernetes quantity ("250m", "4Gi", 2) as a number of base units.

    Raises ValueError with the accepted forms, so a model validator can pass the message on.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean, not a quantity; write e.g. 500m, 2, 4Gi")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{value!r} is negative; quantities here are >= 0")
        return Decimal(str(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match or match["suffix"] not in _SUFFIXES:
        raise ValueError(
            f"{value!r} is not a Kubernetes quantity; write a number with an optional suffix "
            "m, k, M, G, T, Ki, Mi, Gi, Ti (e.g. 500m, 2, 4Gi)"
        )
    try:
        return Decimal(match["number"]) * _SUFFIXES[match["suffix"]]
    except InvalidOperation as error:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"{value!r} is not a number") from error


def parse_cpu_list(text: str) -> frozenset[int]:
    """Return the CPUs named by a Linux CPU list such as "0-3,8,10-11"."""
    cpus: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise ValueError(f"{text!r} is not a CPU list; write ranges and numbers like 0-3,8,10-11")
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise ValueError(f"{text!r}: range {part} runs backwards; write {last}-{first}")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_gib(value: Decimal | float) -> str:
    """Render a GiB figure for tables: whole numbers without decimals, others with one."""
    number = float(value)
    return f"{number:.0f}" if abs(number - round(number)) < 0.05 else f"{number:.1f}"
