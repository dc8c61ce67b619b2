from decimal import Decimal

import pytest

from infra.knowledge.units import parse_cpu_list, parse_quantity


@pytest.mark.parametrize("text, value", [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), (2, Decimal(2)), (0.25, Decimal("0.25")),
    ("4Gi", Decimal(4 * 2**30)), ("1.5Ti", Decimal("1.5") * 2**40), ("100M", Decimal(10**8)), (".5", Decimal("0.5")),
])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["4GB", "1.5 cores", "-1", -1, True, "", "Gi"])
def test_bad_quantities_say_what_to_write(text):
    with pytest.raises(ValueError, match="quantit"):
        parse_quantity(text)


def test_cpu_lists():
    assert parse_cpu_list("0-3,8,10-11") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert parse_cpu_list("5") == frozenset({5})


@pytest.mark.parametrize("text", ["0-", "a", "3-1", "1,,2"])
def test_bad_cpu_lists(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)
