"""The supported Python versions are those ansible-core 2.19 supports (3.11-3.13), everywhere they are named."""

import re
import subprocess
import tomllib

import pytest
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


def test_a_run_ends_with_the_time_of_each_tier_and_its_slowest_modules_then_pytests_closing_line():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/knowledge/test_units.py",
                           "tests/model/test_drivers.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "time per tier" in line)
    slowest = next(i for i, line in enumerate(lines) if "slowest modules" in line)
    tiers = [line.split()[0] for line in lines[header + 1:slowest]]
    assert tiers == ["tests/knowledge", "tests/model", "whole"], lines[header:]
    modules = sorted(line.split()[-1] for line in lines[slowest + 1:-1])
    assert modules == ["tests/knowledge/test_units.py", "tests/model/test_drivers.py"], lines[slowest:]
    assert re.fullmatch(r"\d+ passed in [\d.]+s(?: \(.*\))?", lines[-1]), lines[-1]


def test_the_vm_modules_are_a_tier_of_their_own(request):
    # tests/conftest.py as pytest loaded it (`import conftest` finds whichever folder's came first)
    root = next(plugin for plugin in request.config.pluginmanager.get_plugins()
                if getattr(plugin, "__file__", None) == str(ROOT / "tests" / "conftest.py"))
    tier_of = root.tier_of
    assert tier_of("tests/hosts/test_vm_kernel.py::test_x") == "tests/hosts (VM)"
    assert tier_of("tests/hosts/test_base.py::test_x[sb-cpu-1]") == "tests/hosts"
    assert tier_of("tests/test_cli.py::test_x") == "tests/test_*.py"


@pytest.mark.parametrize(("args", "names"), [
    ((), False), (("-q",), False), (("-q", "-k", "fit"), False), (("-x", "--durations=25"), False),
    (("tests/spec",), True), (("-q", "tests/hosts/test_vm_kernel.py::test_live_kernel_state_matches_the_pool"), True),
    (("tests/test_cli.py",), True)])
def test_the_test_command_splits_off_the_vm_tier_only_for_the_whole_suite(args, names):
    """./dev.sh test runs the VM tier beside the rest only when pytest's arguments name no tests."""
    dev = (ROOT / "dev.sh").read_text()
    function = dev[dev.index("names_tests() {"):dev.index("\n}\n", dev.index("names_tests() {")) + 3]
    done = subprocess.run(["bash", "-c", f'{function}\nnames_tests "$@"', "names_tests", *args], cwd=ROOT, check=False)
    assert (done.returncode == 0) == names
