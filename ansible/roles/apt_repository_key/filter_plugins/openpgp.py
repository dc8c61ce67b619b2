"""The `openpgp_key_problem` filter: infra.hosts.openpgp's key_problem, so that the OpenPGP parsing is the
project's tested Python (the hosts have no gpg to ask)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[4])
if ROOT not in sys.path:  # the playbooks run from the checkout; infra is its package
    sys.path.insert(0, ROOT)

from infra.hosts.openpgp import key_problem  # noqa: E402


def openpgp_key_problem(text: str, pins: list[str]) -> str:
    """"" when the armored key TEXT carries one of the PINS, else what is wrong with it."""
    return key_problem(str(text), [str(pin) for pin in pins])


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"openpgp_key_problem": openpgp_key_problem}
