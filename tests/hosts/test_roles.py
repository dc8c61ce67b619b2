"""Every role has the house shape (STYLE.md): argument specs that match its defaults, prefixed variables,
and a README whose variable table is generated from the specs."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("role_docs", ROOT / "tools" / "role_docs.py")
assert _spec and _spec.loader
role_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(role_docs)

ROLES = sorted(path for path in (ROOT / "ansible" / "roles").iterdir() if path.is_dir())


def test_there_are_roles() -> None:
    assert ROLES, "ansible/roles is empty"


@pytest.mark.parametrize("role", ROLES, ids=lambda path: path.name)
def test_role_has_the_house_shape(role: Path) -> None:
    assert role_docs.problems(role) == []


GOOD_SPECS = """\
argument_specs:
  main:
    short_description: A role for tests.
    options:
      demo_pages:
        type: int
        default: 0
        description: Pages to reserve.
      demo_device:
        type: str
        required: true
        description: The device.
"""


def _role(tmp_path: Path, specs: str = GOOD_SPECS, defaults: str = "demo_pages: 0\n") -> Path:
    role = tmp_path / "demo"
    for part, text in {"tasks/main.yml": "---\n", "meta/main.yml": "---\n", "defaults/main.yml": defaults,
                       "meta/argument_specs.yml": specs,
                       "README.md": f"# demo\n\n{role_docs.START}\n{role_docs.END}\n"}.items():
        (role / part).parent.mkdir(parents=True, exist_ok=True)
        (role / part).write_text(text)
    (role / "README.md").write_text(role_docs.updated((role / "README.md").read_text(), role))
    return role


def test_a_role_of_the_house_shape_has_no_problems(tmp_path: Path) -> None:
    role = _role(tmp_path)
    assert role_docs.problems(role) == []
    table = (role / "README.md").read_text()
    assert "| `demo_pages` | int | `0` | Pages to reserve. |" in table
    assert "| `demo_device` | str | required | The device. |" in table


@pytest.mark.parametrize(("specs", "defaults", "problem"), [
    (GOOD_SPECS, "demo_pages: 0\nextra: 1\n", "variable extra is not prefixed with demo_"),
    (GOOD_SPECS, "demo_pages: 0\ndemo_other: 1\n", "demo_other is in defaults/main.yml but not in meta/argument_specs.yml"),
    (GOOD_SPECS, "", "demo_pages is optional but has no value in defaults/main.yml"),
    (GOOD_SPECS, "demo_pages: 0\ndemo_device: /dev/x\n", "demo_device is required, so it must have no default"),
    (GOOD_SPECS, "demo_pages: 4\n", "demo_pages's default differs"),
    (GOOD_SPECS.replace("        description: Pages to reserve.\n", ""), "demo_pages: 0\n",
     "demo_pages needs a type and a description"),
])
def test_each_shape_problem_is_named(tmp_path: Path, specs: str, defaults: str, problem: str) -> None:
    role = _role(tmp_path, specs, defaults)
    assert any(problem in line for line in role_docs.problems(role)), role_docs.problems(role)


def test_a_stale_readme_table_is_caught(tmp_path: Path) -> None:
    role = _role(tmp_path)
    specs = role / "meta" / "argument_specs.yml"
    specs.write_text(specs.read_text().replace("Pages to reserve.", "Pages to reserve at boot."))
    assert any("out of date" in line for line in role_docs.problems(role))


def test_a_missing_part_is_named(tmp_path: Path) -> None:
    role = _role(tmp_path)
    shutil.rmtree(role / "meta")
    assert "demo: meta/argument_specs.yml is missing" in role_docs.problems(role)
