import sys
import time
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


# Time per tier (tests/<folder>, the mirror of infra/'s layers; tests/test_*.py are the entry points), printed
# at the end of every run so that CI shows where its budget goes.
_TIERS: dict[str, list[float]] = {}  # tier -> [seconds, tests]
_MODULES: dict[str, float] = {}  # test module -> seconds, for the slowest few
_STARTED = time.monotonic()


def tier_of(nodeid: str) -> str:
    parts = Path(nodeid.split("::")[0]).parts
    if parts[:2] == ("tests", "hosts") and parts[-1].startswith("test_vm_"):
        return "tests/hosts (VM)"  # the emulated VM's modules: ./dev.sh test runs them beside the rest
    return f"tests/{parts[1]}" if len(parts) > 2 and parts[0] == "tests" else "tests/test_*.py"


def pytest_runtest_logreport(report):
    entry = _TIERS.setdefault(tier_of(report.nodeid), [0.0, 0])
    entry[0] += report.duration
    entry[1] += report.when == "call"
    module = report.nodeid.split("::")[0]
    _MODULES[module] = _MODULES.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _TIERS:
        return
    terminalreporter.write_sep("-", "time per tier: setup, call and teardown of its tests")
    for tier, (seconds, tests) in _TIERS.items():
        terminalreporter.write_line(f"{tier:18} {tests:5d} tests {seconds:8.1f} s")
    terminalreporter.write_line(f"{'whole run':18} {sum(n for _, n in _TIERS.values()):5d} tests "
                                f"{time.monotonic() - _STARTED:8.1f} s (collection included)")
    terminalreporter.write_sep("-", "slowest modules")
    for module, seconds in sorted(_MODULES.items(), key=lambda item: -item[1])[:12]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {module}")
