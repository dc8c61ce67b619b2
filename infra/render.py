"""`python -m infra render`: every object and Helm release the cluster layer declares, as files, validated.

The files are what the Pulumi components declare (the same `Concern`s), written deterministically:
one multi-document YAML file per concern (objects sorted by apiVersion, kind, namespace, name; keys
sorted), `helm-releases.yaml` (chart, repository, version and values of each release), and each
concern's extra files (the device plugin's configs, the mig-parted config). Every object is validated
offline first (infra/cluster/validation/validate.py: the OpenAPI schemas of the spec's Kubernetes version in
strict mode, the project's own checks, the project's CRD schemas); on any problem nothing is written.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.cluster.concerns import build_concerns
from infra.cluster.objects import Concern, key
from infra.cluster.validation.validate import Problem, validate
from infra.model.resolve import resolve
from infra.spec import Environment

MARKER = ".k8s-node-pools-render"  # a folder holding it was written by render and may be replaced whole


class RenderError(Exception):
    """The output folder cannot be written (it holds something render did not write)."""


@dataclass
class Rendered:
    concerns: list[Concern]
    problems: list[Problem] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> text

    @property
    def objects(self) -> int:
        return sum(len(c.objects) for c in self.concerns)

    @property
    def releases(self) -> int:
        return sum(len(c.releases) for c in self.concerns)


def dump(documents: list[Any]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=True, default_flow_style=False, width=120)


def render(env: Environment) -> Rendered:
    """Build, validate and lay out every concern of `env` (a checked environment); writes nothing."""
    concerns = build_concerns(resolve(env))
    result = Rendered(concerns)
    result.problems = validate([o for c in concerns for o in c.objects], env.cluster.kube_version)
    for concern in concerns:
        result.files[f"{concern.name}.yaml"] = dump(sorted(concern.objects, key=key))
        for name, text in sorted(concern.files.items()):
            result.files[f"files/{name}"] = text
    releases = sorted((r.as_dict() for c in concerns for r in c.releases), key=lambda r: (r["namespace"], r["name"]))
    result.files["helm-releases.yaml"] = yaml.safe_dump(releases, sort_keys=True, width=120)
    return result


def write(result: Rendered, out: Path) -> None:
    """Replace `out` with the rendered files at once (a folder render wrote before, or a new or empty one)."""
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise RenderError(f"{out}: exists and was not written by render; choose another --out or empty it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for relative, text in result.files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (staging / MARKER).write_text("written by `python -m infra render`; replaced whole on the next render\n")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
