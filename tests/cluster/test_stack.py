"""The Pulumi program under mocks: a good spec exports its plan, a bad one declares nothing."""

import pulumi
import pytest
from inventory_builder import ROOT

from infra.stack import declare


def test_a_good_spec_exports_its_plan():
    plan = declare(str(ROOT / "inventories" / "example"))
    assert plan["environment"] == "example"
    assert {p["name"] for p in plan["pools"]} == {
        "cpu_general", "mem_cache", "gpu_a100", "gpu_t4_offline", "gpu_h100_bigmem"}


def test_a_spec_with_errors_is_refused(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    with pytest.raises(pulumi.RunError, match="preflight found errors"):
        declare(str(write(inventory)))


def test_an_unusable_spec_is_refused_with_its_problems(tmp_path):
    with pytest.raises(pulumi.RunError, match="no such inventory folder"):
        declare(str(tmp_path / "nope"))
