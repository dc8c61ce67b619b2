"""The README is part of the interface: its tables and its annotated example must match the code."""

import re

import yaml
from inventory_builder import ROOT
from pydantic import BaseModel

from infra.checks import RULES
from infra.cli import rules_markdown
from infra.planning.plan import build_plan, render_table
from infra.spec import load_environment, models
from infra.spec.models import ClusterVars, HostVars, PoolVars

README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n{title}\n")
    end = README.find("\n## ", start + len(title) + 2)
    return README[start:end]


def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.S)


def models_under(model: type[BaseModel]) -> set[type[BaseModel]]:
    found = {model}
    for info in model.model_fields.values():
        for candidate in re.findall(r"\w+", str(info.annotation)):
            nested = getattr(models, candidate, None)
            if isinstance(nested, type) and issubclass(nested, BaseModel) and nested not in found:
                found |= models_under(nested)
    return found


def test_the_checks_table_is_generated_from_the_rules():
    table = README.split("<!-- rules:start -->\n")[1].split("<!-- rules:end -->")[0]
    assert table.strip() == rules_markdown().strip()
    assert f"done, {len(RULES)} rules" in README


def test_the_annotated_example_is_valid_spec():
    hosts, cluster, pool = (yaml.safe_load(block) for block in yaml_blocks(section("### A complete annotated example")))
    ClusterVars.model_validate(cluster)
    PoolVars.model_validate(pool)
    host = hosts["all"]["children"]["node_pools"]["children"]["gpu_a100"]["hosts"]["gpu-a100-01"]
    HostVars.model_validate({k: v for k, v in host.items() if not k.startswith("ansible_")})


def test_the_annotated_example_shows_every_variable():
    example = section("### A complete annotated example")
    missing = {
        f"{model.__name__}.{name}"
        for root in (ClusterVars, PoolVars, HostVars)
        for model in models_under(root)
        for name in model.model_fields
        if not re.search(rf"[\s{{,]{re.escape(name)}:", example)
    }
    assert missing == set()


def test_exactly_two_set_up_commands():
    block = re.search(r"## Set up and run\n.*?```sh\n(.*?)```", README, flags=re.S)[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["./dev.sh run", "./dev.sh test"]
    assert "./dev.sh test" in (ROOT / ".ci" / "run").read_text()


def test_the_plan_sample_is_what_plan_prints_today():
    sample = re.search(r"For `inventories/example`:\n\n```\n(.*?)```", README, flags=re.S)[1]
    plan = render_table(build_plan(load_environment(ROOT / "inventories" / "example")))
    assert sample.strip() == plan.strip()
