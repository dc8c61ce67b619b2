"""The command line as a user and a CI job meet it: exit codes, messages, JSON, help."""

import json
import subprocess
import sys

import pytest
from inventory_builder import ROOT, SHIPPED


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "infra", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("env", SHIPPED)
def test_shipped_environments_pass_check_and_plan(env):
    check = run("check", f"inventories/{env}")
    assert check.returncode == 0, check.stderr
    assert "0 error(s)" in check.stderr
    plan = run("plan", f"inventories/{env}")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith(f"Plan for {env}")
    data = json.loads(run("plan", "--json", f"inventories/{env}").stdout)
    assert data["environment"] == env and data["pools"]


def test_errors_exit_1_with_code_file_field_and_fix(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("check", str(write(inventory)))
    assert result.returncode == 1
    assert "ERROR   POOL-GPU-TAINT" in result.stderr
    assert "group_vars/gpu.yml: node_taints" in result.stderr
    assert "fix: Add a taint" in result.stderr
    assert "1 error(s), 0 warning(s)" in result.stderr


def test_warnings_alone_exit_0(inventory, write):
    inventory["group_vars"]["mem"]["node_taints"] = []
    result = run("check", str(write(inventory)))
    assert result.returncode == 0
    assert "WARNING POOL-MEMORY-TAINT" in result.stderr


def test_check_json(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("check", "--json", str(write(inventory)))
    data = json.loads(result.stdout)
    assert result.returncode == 1
    assert data["errors"] == 1
    [finding] = data["findings"]
    assert set(finding) == {"code", "severity", "file", "field", "message", "fix"}


def test_plan_refuses_a_spec_with_errors(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("plan", str(write(inventory)))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "fix them before planning" in result.stderr


@pytest.mark.parametrize("breakage", ["missing", "yaml", "unknown-key"])
def test_unusable_input_exits_2_without_a_traceback(inventory, write, tmp_path, breakage):
    if breakage == "missing":
        path = tmp_path / "nope"
    else:
        path = write(inventory)
        target = path / "group_vars" / "all.yml"
        target.write_text("cluster_name: [x\n" if breakage == "yaml" else target.read_text() + "clustr_size: 3\n")
    for command in ("check", "plan"):
        result = run(command, str(path))
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        error_lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert len(error_lines) == 1, result.stderr
    data = json.loads(run("check", "--json", str(path)).stdout)
    assert len(data["unusable"]) == 1


def test_help_lists_commands_and_exit_codes():
    result = run("--help")
    assert result.returncode == 0
    for word in ("check INVENTORY", "plan INVENTORY", "rules", "exit codes"):
        assert word in result.stdout


def test_no_command_is_a_usage_error():
    result = run()
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_rules_lists_every_code():
    from infra.checks import RULES

    result = run("rules")
    assert all(code in result.stdout for code in RULES)
