"""What every fact file shares: strict, frozen models, the loader of the YAML files beside this
module, and dotted versions compared as numbers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

HERE = Path(__file__).parent


class Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


def version_key(text: str) -> tuple[int, ...]:
    """Numeric sort key of a dotted version ("550.54.14" -> (550, 54, 14)); "570.26" sorts below "570.26.1"."""
    if not VERSION.match(text):
        raise ValueError(f"{text!r} is not a dotted version such as 550.54.14")
    return tuple(int(part) for part in text.split("."))


def load(name: str) -> Any:
    with open(HERE / name, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=yaml.CSafeLoader)
