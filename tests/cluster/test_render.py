"""`python -m infra render`: golden files of both shipped environments (reviewable diffs), strict
validation, nothing written on a problem, and the CLI's contract.

Regenerate the golden files after an intended change with `UPDATE_GOLDEN=1 ./dev.sh test tests/cluster/test_render.py`
and review the diff."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inventory_builder import ROOT, SHIPPED

from infra.render import MARKER, RenderError, render
from infra.render import write as write_render
from infra.spec import load_environment

GOLDEN = Path(__file__).parent / "golden"


def golden_files(env_name: str) -> dict[str, str]:
    folder = GOLDEN / env_name
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("env_name", SHIPPED)
def test_the_render_matches_the_golden_files(env_name):
    result = render(load_environment(ROOT / "inventories" / env_name))
    assert result.problems == []
    if os.environ.get("UPDATE_GOLDEN"):
        shutil.rmtree(GOLDEN / env_name, ignore_errors=True)
        write_render(result, GOLDEN / env_name)
        (GOLDEN / env_name / MARKER).unlink()
    assert golden_files(env_name) == result.files


@pytest.mark.parametrize("env_name", SHIPPED)
def test_the_render_is_deterministic(env_name):
    env = load_environment(ROOT / "inventories" / env_name)
    assert render(env).files == render(env).files


def run(*args):
    return subprocess.run([sys.executable, "-m", "infra", *args], capture_output=True, text=True, cwd=ROOT)


def test_render_writes_every_concern_and_says_what(tmp_path):
    out = tmp_path / "out"
    result = run("render", "inventories/example", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid for Kubernetes 1.34.2" in result.stdout
    names = {p.name for p in out.iterdir()}
    assert {"nodes.yaml", "tenancy.yaml", "gpu.yaml", "scheduling.yaml", "networking.yaml", "storage.yaml",
            "helm-releases.yaml", "files", MARKER} <= names
    assert (out / "files" / "mig-parted.yaml").is_file()


def test_a_second_render_replaces_the_first_whole(tmp_path):
    out = tmp_path / "out"
    assert run("render", "inventories/example", "--out", str(out)).returncode == 0
    (out / "stale.yaml").write_text("left from an older render\n")
    assert run("render", "inventories/sandbox", "--out", str(out)).returncode == 0
    assert not (out / "stale.yaml").exists()


def test_render_never_overwrites_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "precious.txt").write_text("mine")
    result = run("render", "inventories/example", "--out", str(tmp_path))
    assert result.returncode == 1 and "was not written by render" in result.stdout
    assert (tmp_path / "precious.txt").read_text() == "mine"
    with pytest.raises(RenderError):
        write_render(render(load_environment(ROOT / "inventories" / "sandbox")), tmp_path)


def test_an_invalid_object_fails_the_render_and_writes_nothing(tmp_path, monkeypatch):
    """A deliberately broken object (bad taint effect) stops the render: exit 1, the problem named."""
    from infra import render as render_module
    from infra.cluster import concerns

    real = concerns.build_concerns

    def broken(view):
        built = real(view)
        [nodes] = [c for c in built if c.name == "nodes"]
        nodes.objects[0]["spec"]["taints"] = [{"key": "nvidia.com/gpu", "effect": "NoScheduel"}]
        return built

    monkeypatch.setattr(render_module, "build_concerns", broken)
    result = render_module.render(load_environment(ROOT / "inventories" / "example"))
    assert [str(p) for p in result.problems if "NoScheduel" in str(p)]
    from infra.cli import _render_stage

    out = tmp_path / "out"
    assert _render_stage(load_environment(ROOT / "inventories" / "example"), out) is False
    assert not out.exists()


def test_render_refuses_a_spec_with_errors(inventory, write, tmp_path):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = run("render", str(write(inventory)), "--out", str(tmp_path / "out"))
    assert result.returncode == 1 and "POOL-GPU-TAINT" in result.stderr and "before rendering" in result.stderr
    assert not (tmp_path / "out").exists()
