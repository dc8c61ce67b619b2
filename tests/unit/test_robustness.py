"""Whatever a user writes, the answer is a list of problems or findings, never a traceback.

Every variable of every file of the base inventory is replaced in turn by values of the wrong
shape; loading must either refuse it (SpecError) or accept it, and then check and plan must run.
"""

import pytest
from inventory_builder import base_inventory, pools_of

from infra.checks import has_errors, run_checks
from infra.plan import build_plan
from infra.spec import SpecError, load_environment

WRONG = [None, "", "x", -1, 0, 10**12, 1.5, True, [], ["x"], {}, {"x": "y"}]


def _paths():
    data = base_inventory()
    for file, values in data["group_vars"].items():
        for key, value in values.items():
            yield (file, key)
            if isinstance(value, dict):
                for inner in value:
                    yield (file, key, inner)
    yield ("host", "cpu-1", "zone")
    yield ("host", "gpu-1", "hardware")


PATHS = list(_paths())


def _set(data, path, value):
    if path[0] == "host":
        pools_of(data)["cpu" if path[1] == "cpu-1" else "gpu"]["hosts"][path[1]][path[2]] = value
        return
    target = data["group_vars"][path[0]]
    for part in path[1:-1]:
        target = target[part]
    target[path[-1]] = value


@pytest.mark.parametrize("path", PATHS, ids=[".".join(p) for p in PATHS])
def test_wrong_values_are_refused_or_checked_never_crash(write, path):
    for value in WRONG:
        data = base_inventory()
        _set(data, path, value)
        try:
            env = load_environment(write(data))
        except SpecError as error:
            assert error.problems and all(isinstance(p, str) and p for p in error.problems)
            continue
        findings = run_checks(env)
        if not has_errors(findings):
            build_plan(env)
