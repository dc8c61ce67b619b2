"""The README's section on workloads is part of the interface: its example is valid and complete, and its
samples are what `fit` and `propose` print for the example today."""

import re

import yaml
from inventory_builder import ROOT

from infra.checks import RULES
from infra.planning.fit import fit, render
from infra.planning.propose import propose, report
from infra.planning.propose import render as render_proposal
from infra.spec import load_environment
from infra.spec.models import GpuNeed, StorageNeed, Workload, WorkloadVars

README = (ROOT / "README.md").read_text()
SECTION = README[README.index("\n## Workloads: fit and propose\n"):README.index("\n## Using it on real machines\n")]
EXAMPLE = ROOT / "inventories" / "example"


def blocks(kind):
    """The section's fenced blocks of one kind ("yaml", or "" for plain output), in order."""
    found, current, language = [], None, ""
    for line in SECTION.splitlines():
        if current is None and line.startswith("```"):
            current, language = [], line[3:]
        elif current is not None and line == "```":
            if language == kind:
                found.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return found


def test_the_example_block_is_valid_and_shows_every_field():
    [block] = blocks("yaml")
    WorkloadVars.model_validate(yaml.safe_load(block))
    missing = {f"{model.__name__}.{name}" for model in (Workload, GpuNeed, StorageNeed) for name in model.model_fields
               if not re.search(rf"[\s{{,]{re.escape(name)}:", block)}
    assert missing == set()


def test_the_example_block_matches_the_shipped_example():
    """What a replica asks is the shipped example's; kind, numa_aligned and priority_class may be written
    out in the README to show them."""
    [block] = blocks("yaml")
    shipped = load_environment(EXAMPLE).workloads
    for tenant, workloads in yaml.safe_load(block)["workloads"].items():
        for name, spec in workloads.items():
            shown, real = Workload.model_validate(spec), shipped[tenant][name]
            for key in ("replicas", "requests", "limits", "gpu", "gang", "storage"):
                assert getattr(shown, key) == getattr(real, key), (tenant, name, key)


def test_the_fit_sample_is_what_fit_prints_today():
    sample = blocks("")[0]
    assert sample.strip() == render(fit(load_environment(EXAMPLE))).strip()


def test_the_propose_sample_is_what_propose_prints_today_but_the_time():
    sample = blocks("")[1]
    env = load_environment(EXAMPLE)
    printed = render_proposal(report(env, propose(env)))

    def untimed(text):
        return re.sub(r"; \d+\.\d\d s\.$", "; (time) s.", text.strip())

    assert untimed(sample) == untimed(printed)


def test_the_rules_it_names_exist():
    named = set(re.findall(r"`(WORKLOAD-[A-Z-]+|STORAGE-CAPACITY|NET-POD-CIDR)`", SECTION))
    assert named and named <= set(RULES)
    assert {code for code in RULES if code.startswith("WORKLOAD-")} <= named
