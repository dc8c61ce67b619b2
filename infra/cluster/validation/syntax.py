"""The API server's grammars for names, labels and quantities, worded as apimachinery's validation words them.

Pure functions from a value to the list of what is wrong with it (empty: valid), and the types every check
of this package shares: a field path, and the callback a check reports a problem through.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from decimal import Decimal, DecimalException
from typing import Any, Protocol

PathPart = str | int
Path = tuple[PathPart, ...]


class Report(Protocol):
    def __call__(self, path: Path, message: str) -> None: ...


Check = Callable[[Any, Path, Report], None]


# --- names and labels --------------------------------------------------------------------------------

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
ANNOTATIONS_TOTAL_MAX = 256 * 1024  # bytes, keys and values together
CRONJOB_NAME_MAX = 52  # the Job controller appends an 11-character suffix to the CronJob's name

_SUBDOMAIN_WORDS = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character")
_LABEL_WORDS = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character")
_DNS1035_WORDS = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                  "start with an alphabetic character, and end with an alphanumeric character")
_NAME_PART_WORDS = ("must consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")


def _name_problems(value: str, limit: int, pattern: re.Pattern[str], words: str) -> list[str]:
    problems = []
    if len(value) > limit:
        problems.append(f"must be no more than {limit} characters")
    if not pattern.fullmatch(value):
        problems.append(words)
    return problems


def dns1123_subdomain(value: str) -> list[str]:
    return _name_problems(value, DNS1123_SUBDOMAIN_MAX, _DNS1123_SUBDOMAIN, _SUBDOMAIN_WORDS)


def dns1123_label(value: str) -> list[str]:
    return _name_problems(value, DNS1123_LABEL_MAX, _DNS1123_LABEL, _LABEL_WORDS)


def dns1035_label(value: str) -> list[str]:
    return _name_problems(value, DNS1123_LABEL_MAX, _DNS1035_LABEL, _DNS1035_WORDS)


def path_segment_name(value: str) -> list[str]:
    """RBAC objects' names (e.g. system:controller:foo): anything that is safe in a URL path segment."""
    if value in (".", ".."):
        return [f"may not be {value!r}"]
    return [f"may not contain {bad!r}" for bad in ("/", "%") if bad in value]


def cronjob_name(value: str) -> list[str]:
    problems = dns1123_subdomain(value)
    if len(value) > CRONJOB_NAME_MAX:
        problems.append(f"must be no more than {CRONJOB_NAME_MAX} characters")
    return problems


def qualified_name(value: str) -> list[str]:
    """A label, annotation or taint key: an optional DNS-subdomain prefix and '/', then a name of <= 63."""
    parts = value.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
    else:
        return ["a qualified name must consist of an optional DNS subdomain prefix and '/', then a name part "
                "(e.g. 'example.com/MyName')"]
    problems = [f"prefix part {message}" for message in dns1123_subdomain(prefix)] if prefix else []
    if not name:
        problems.append("name part must be non-empty")
    else:
        if len(name) > QUALIFIED_NAME_MAX:
            problems.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
        if not _QUALIFIED_NAME_PART.fullmatch(name):
            problems.append(f"name part {_NAME_PART_WORDS}")
    return problems


def label_value(value: str) -> list[str]:
    problems = []
    if len(value) > LABEL_VALUE_MAX:
        problems.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.fullmatch(value):
        problems.append(f"a valid label must be an empty string or {_NAME_PART_WORDS}")
    return problems


def not_one_of(value: object, allowed: Iterable[str]) -> str:
    """The schema layer's enum wording, so both layers read alike."""
    return f"{value!r} is not one of {list(allowed)!r}"


# --- quantities --------------------------------------------------------------------------------------

# <quantity> ::= <sign>? <number> <suffix>; number: 1, 1., 1.5, .5; suffix: binary SI (Ki..Ei), decimal
# SI (n u m "" k M G T P E) or a decimal exponent (e3, E-2). Kubernetes parses the exponent as an int32.
_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_MULTIPLIERS = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal("1e3"),
    "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    **{f"{prefix}i": Decimal(2) ** (10 * power) for power, prefix in enumerate("KMGTPE", start=1)},
}
_INT32_MAX = 2**31 - 1
_QUANTITY_WORDS = ("quantities must match the regular expression "
                   r"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (e.g. 500m, 2, 1.5Gi, 1e3)")


def parse_quantity(value: object) -> Decimal:
    """Return a Kubernetes quantity (a string such as "250m", "4Gi", "1e3", or a JSON number) as a number.

    The full grammar of the API server (signs, exponents, n and u), which is wider than what the
    inventory accepts (infra.knowledge.units.parse_quantity). Raises ValueError with the server's wording.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a quantity: {_QUANTITY_WORDS}")
    text = value if isinstance(value, str) else repr(value)
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise ValueError(f"{value!r} is not a quantity: {_QUANTITY_WORDS}")
    sign, number, suffix = match[1], match[2], match[3] or ""
    try:
        if suffix[:1] in ("e", "E") and suffix not in _MULTIPLIERS:
            exponent = int(suffix[1:])
            if abs(exponent) > _INT32_MAX:
                raise ValueError(f"{value!r} is not a quantity: the exponent is out of range")
            magnitude = Decimal(number).scaleb(exponent)
        else:
            magnitude = Decimal(number) * _MULTIPLIERS[suffix]
    except DecimalException as error:  # an exponent beyond what a decimal holds
        raise ValueError(f"{value!r} is not a quantity: it is out of range") from error
    return -magnitude if sign == "-" else magnitude

