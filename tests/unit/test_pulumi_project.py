"""The Pulumi project files and the pull-request preview workflow agree with the inventories."""

from importlib.metadata import version

import yaml
from inventory_builder import ROOT, SHIPPED

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
STACKS = sorted(p.name.split(".")[1] for p in ROOT.glob("Pulumi.*.yaml"))


def test_every_stack_names_a_shipped_inventory():
    assert STACKS == SHIPPED
    for stack in STACKS:
        config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        assert config == {"k8s-node-pools:inventory": f"inventories/{stack}"}


def test_the_project_declares_the_inventory_setting_without_a_default():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["runtime"]["options"]["virtualenv"] == ".venv"  # what ./dev.sh creates
    assert "default" not in project["config"]["inventory"]  # each stack file names its own


def test_the_preview_workflow_covers_every_stack_with_the_pinned_cli():
    preview = WORKFLOW["jobs"]["preview"]
    assert sorted(preview["strategy"]["matrix"]["stack"]) == STACKS
    [action] = [step for step in preview["steps"] if step.get("uses", "").startswith("pulumi/actions@")]
    assert action["with"]["command"] == "preview"
    assert action["with"]["pulumi-version"] == version("pulumi")
    assert any(step.get("run") == "./dev.sh test -q" for step in WORKFLOW["jobs"]["test"]["steps"])
