"""The supported Python versions are those ansible-core 2.19 supports (3.11-3.13), everywhere they are named."""

import re
import tomllib

from inventory_builder import ROOT
from packaging.specifiers import SpecifierSet

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_pyproject_accepts_python_3_11_to_3_13():
    supported = SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert [version for version in ("3.10", "3.11", "3.12", "3.13", "3.14") if version in supported] == [
        "3.11", "3.12", "3.13"]


def test_dev_sh_gate_names_the_same_range():
    gate = re.search(r"not \((\d+), (\d+)\) <= sys.version_info\[:2\] <= \((\d+), (\d+)\)",
                     (ROOT / "dev.sh").read_text())
    assert gate and gate.groups() == ("3", "11", "3", "13")


def test_the_test_command_runs_ruff_and_strict_mypy():
    from inventory_builder import ROOT

    dev = (ROOT / "dev.sh").read_text()
    test_branch = dev[dev.index("  test)"):dev.index(";;", dev.index("  test)"))]
    assert "ruff\" check" in test_branch and "mypy\"" in test_branch and "pytest" in test_branch
    assert "strict = true" in (ROOT / "pyproject.toml").read_text()


def test_a_run_ends_with_the_time_of_each_tier_it_ran_then_pytests_closing_line():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/knowledge/test_units.py",
                           "tests/model/test_drivers.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "time per tier" in line)
    tiers = [line.split()[0] for line in lines[header + 1:-1]]
    assert tiers == ["tests/knowledge", "tests/model", "whole"], lines[header:]
    assert re.fullmatch(r"\d+ passed in [\d.]+s(?: \(.*\))?", lines[-1]), lines[-1]
