"""containerd's recommendations per Kubernetes minor (infra/knowledge/containerd.yml), read as the file says."""

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from infra.knowledge.containerd import ContainerdSupport, containerd_support
from infra.knowledge.platform import platform
from infra.spec import load_environment
from infra.spec.models import ClusterVars

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("release", "why"), [
    ("1.6.20", "below 1.6.39, the lowest 1.6 release"),  # Debian 12's containerd
    ("1.7.27", "below 1.7.28, the lowest 1.7 release"),
    ("2.1.2", "below 2.1.3, the lowest 2.1 release"),
    ("1.5.18", "line 1.5 is not among those containerd recommends for Kubernetes 1.34 (2.1.3+, 2.0.6+, 1.7.28+, "
               "1.6.39+)"),
    ("1.6.39", None), ("1.7.28", None), ("2.0.6", None), ("2.1.3", None),
    ("2.2.0", None), ("2.3.7", None),  # lines newer than every listed one
])
def test_a_release_is_held_to_its_lines_minimum_for_the_minor(release, why):
    refusal = containerd_support().refusal("1.34", release)
    assert (refusal is None) if why is None else (why in refusal)


def test_a_minor_without_a_row_is_a_gap_not_a_guess():
    assert containerd_support().recommended("1.37") is None
    assert containerd_support().refusal("1.37", "1.0.0") is None  # the check warns instead (CONTAINERD-UNLISTED)


def test_the_table_covers_the_supported_minors_containerd_lists():
    facts = platform().kubernetes
    listed = {int(minor.split(".")[1]) for minor in containerd_support().kubernetes}
    assert listed == set(range(facts.oldest_minor, 37))  # 1.37: containerd's table had no row yet (Aug 2026)


def test_a_row_naming_one_line_twice_or_a_bare_minor_is_refused():
    with pytest.raises(ValidationError, match=r"one major\.minor\.patch release per containerd line"):
        ContainerdSupport.model_validate({"source": "x", "kubernetes": {"1.34": ["2.1.3", "2.1.5"]}})
    with pytest.raises(ValidationError, match=r"one major\.minor\.patch release per containerd line"):
        ContainerdSupport.model_validate({"source": "x", "kubernetes": {"1.34": ["2.1"]}})


def test_the_sandbox_pins_the_containerd_that_tools_build_and_the_spec_defaults_to_it():
    go_mod = (ROOT / "tools" / "containerd" / "go.mod").read_text()
    built = re.search(r"^\tgithub\.com/containerd/containerd/v2 v(\S+)", go_mod, re.MULTILINE)
    assert built, "tools/containerd/go.mod requires no containerd"
    assert ClusterVars.model_fields["containerd_version"].default == built.group(1)
    for inventory in ("sandbox", "example"):
        assert load_environment(ROOT / "inventories" / inventory).cluster.containerd_version == built.group(1)
