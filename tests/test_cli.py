"""The command line as a user and a CI job meet it: exit codes, messages, JSON, help."""

import json
import os
import subprocess
import sys

import pytest
from inventory_builder import ROOT, SHIPPED


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "infra", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("env", SHIPPED)
def test_shipped_environments_pass_check_and_plan(env):
    check = run("check", f"inventories/{env}")
    assert check.returncode == 0, check.stdout
    assert "0 error(s), 0 warning(s)" in check.stdout
    plan = run("plan", f"inventories/{env}")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith(f"Plan for {env}")
    data = json.loads(run("plan", "--json", f"inventories/{env}").stdout)
    assert data["environment"] == env and data["pools"]


def test_errors_exit_1_with_code_file_field_and_fix(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("check", str(write(inventory)))
    assert result.returncode == 1
    assert "ERROR   POOL-GPU-TAINT" in result.stdout
    assert "group_vars/gpu.yml: node_taints" in result.stdout
    assert "fix: Add a taint" in result.stdout
    assert "1 error(s), 0 warning(s)" in result.stdout
    assert result.stderr == ""  # the report goes to stdout: `check ... > report.txt` keeps all of it


def test_warnings_alone_exit_0(inventory, write):
    inventory["group_vars"]["mem"]["node_taints"] = []
    result = run("check", str(write(inventory)))
    assert result.returncode == 0
    assert "WARNING POOL-MEMORY-TAINT" in result.stdout


def test_check_json(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("check", "--json", str(write(inventory)))
    data = json.loads(result.stdout)  # JSON alone on stdout
    assert result.returncode == 1
    assert data["errors"] == 1
    [finding] = data["findings"]
    assert set(finding) == {"code", "severity", "file", "field", "message", "fix"}


def test_plan_json_on_errors_prints_the_findings_as_json(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("plan", "--json", str(write(inventory)))
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert [f["code"] for f in data["findings"]] == ["POOL-GPU-TAINT"]


def test_plan_prints_warnings_on_stderr_and_the_plan_alone_on_stdout(inventory, write):
    inventory["group_vars"]["mem"]["node_taints"] = []
    result = run("plan", "--json", str(write(inventory)))
    assert result.returncode == 0
    assert json.loads(result.stdout)["pools"]
    assert "POOL-MEMORY-TAINT" not in result.stdout


def test_run_shows_each_stage_and_each_finding_once(inventory, write, tmp_path):
    inventory["group_vars"]["mem"]["node_taints"] = []
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run([sys.executable, "-m", "infra", "run", str(write(inventory))], capture_output=True,
                            text=True, cwd=work, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("POOL-MEMORY-TAINT") == 1
    assert "==> [1/4] check" in result.stdout and "==> [2/4] plan" in result.stdout
    assert "==> [3/4] fit" in result.stdout and "no workloads declared" in result.stdout
    assert "<== fit done in" in result.stdout
    assert "==> [4/4] render" in result.stdout and "main job done: 4 stages" in result.stdout
    assert (work / "build" / "render" / "env0" / "nodes.yaml").is_file()


def test_run_shows_the_fit_and_fails_when_a_replica_does_not_fit(inventory, write):
    inventory["group_vars"]["all"]["workloads"] = {"svc": {"web": {"replicas": 9, "requests": {"cpu": "1"}}}}
    result = run("run", str(write(inventory)))  # svc's quota holds 8 CPUs
    assert result.returncode == 1
    assert "==> [3/4] fit" in result.stdout and "Refused by quota" in result.stdout
    assert "[4/4] render" not in result.stdout
    assert "<== fit FAILED" in result.stdout


def test_run_on_the_example_ends_with_the_fit_summary():
    result = run("run", "inventories/example")
    assert result.returncode == 0, result.stdout
    assert "106 of 106 replicas placed; N-1: 3 of 5 pools keep every pod placed" in result.stdout


def test_run_stops_at_the_failing_stage(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("run", str(write(inventory)))
    assert result.returncode == 1
    assert "<== check FAILED" in result.stdout and "[1/4] check" in result.stdout
    assert "[2/4] plan" not in result.stdout


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
    for command in ("check", "plan", "fit", "run"):
        result = run(command, str(path))
        assert result.returncode == 2
        output = result.stdout + result.stderr
        assert "Traceback" not in output
        error_lines = [line for line in output.splitlines() if line.startswith("error: ")]
        assert len(error_lines) == 1, output
    data = json.loads(run("check", "--json", str(path)).stdout)
    assert len(data["unusable"]) == 1


@pytest.mark.parametrize("env", SHIPPED)
def test_scheduler_prints_the_configuration_the_inventory_declares(env):
    """--kubespray prints exactly the Kubespray variables of the shipped inventory (so the inventory is what fit
    simulates), and without it the KubeSchedulerConfiguration kube-scheduler takes with --config."""
    import yaml

    declared = yaml.safe_load((ROOT / "inventories" / env / "group_vars" / "all.yml").read_text())
    kubespray = run("scheduler", f"inventories/{env}", "--kubespray")
    assert kubespray.returncode == 0, kubespray.stderr
    assert yaml.safe_load(kubespray.stdout) == {key: declared[key] for key in
                                                ("kube_scheduler_profiles", "kube_scheduler_config_extra_opts")}
    config = yaml.safe_load(run("scheduler", f"inventories/{env}").stdout)
    assert config["kind"] == "KubeSchedulerConfiguration" and config["percentageOfNodesToScore"] == 100
    assert config["profiles"] == declared["kube_scheduler_profiles"]


def test_scheduler_without_the_declaration_prints_the_project_s_profile_and_warns(inventory, write):
    import yaml

    del inventory["group_vars"]["all"]["kube_scheduler_profiles"]
    result = run("scheduler", str(write(inventory)), "--kubespray")
    assert result.returncode == 0
    assert "WARNING SCHEDULER-UNDECLARED" in result.stderr
    resources = yaml.safe_load(result.stdout)["kube_scheduler_profiles"][0]["pluginConfig"][0]["args"][
        "scoringStrategy"]["resources"]
    assert [r["name"] for r in resources] == ["cpu", "memory", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"]


def test_scheduler_refuses_a_profile_fit_cannot_simulate(inventory, write):
    inventory["group_vars"]["all"]["kube_scheduler_config_extra_opts"] = {"percentageOfNodesToScore": 30}
    result = run("scheduler", str(write(inventory)))
    assert result.returncode == 1 and result.stdout == ""
    assert "ERROR   SCHEDULER-PROFILE" in result.stderr and "percentageOfNodesToScore must be 100" in result.stderr


def test_help_lists_commands_and_exit_codes():
    result = run("--help")
    assert result.returncode == 0
    for word in ("check INVENTORY", "plan INVENTORY", "fit INVENTORY", "scheduler INVENTORY", "run INVENTORY", "rules",
                 "exit codes"):
        assert word in result.stdout


def test_no_command_is_a_usage_error():
    result = run()
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_rules_lists_every_code():
    from infra.checks import RULES

    result = run("rules")
    assert all(code in result.stdout for code in RULES)
