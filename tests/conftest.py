import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from inventory_builder import base_inventory, write_inventory

from infra.checks import run_checks
from infra.spec import load_environment


@pytest.fixture
def inventory():
    """A fresh, valid inventory as dicts: mutate it, then pass it to `findings` or `write`."""
    return base_inventory()


@pytest.fixture
def write(tmp_path):
    counter = iter(range(1000))

    def _write(data: dict) -> Path:
        return write_inventory(tmp_path / f"env{next(counter)}", data)

    return _write


@pytest.fixture
def findings(write):
    def _findings(data: dict):
        return run_checks(load_environment(write(data)))

    return _findings
