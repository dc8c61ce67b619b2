"""The README's picture of the layers is the rule: every import inside infra/ goes down the picture.

README.md draws infra/ as lines of folders and top-level modules, highest first. A module may import
from its own folder and from any line below its own; never from a line above it, nor from another
folder on its own line (the edges, hosts/ and live/, never reach into each other). Every import
counts, a lazy one inside a function too. The picture must name every folder and top-level module
of infra/, and nothing else, so it cannot drift from the tree.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from inventory_builder import ROOT

MARKER = "<!-- layers: tests/test_layers.py reads this picture -->"
LAYER_LINE = re.compile(r"^  (?P<units>[a-z_]+(?:/|\.py)(?: +[a-z_]+(?:/|\.py))*)(?: {2,}|$)")


def picture(readme: str) -> list[list[str]]:
    """The layers of the README's picture, highest first: each a list of folders (`cluster/`) and
    top-level modules (`cli.py`)."""
    start = readme.index(MARKER)
    block = readme[readme.index("```text\n", start) + len("```text\n"):]
    block = block[:block.index("```")]
    layers = []
    for line in block.splitlines():
        match = LAYER_LINE.match(line)
        if match:
            layers.append(match["units"].split())
    return layers


def unit_of(module: str, root: Path) -> str:
    """infra.cluster.validation.rules -> cluster/; infra.cli -> cli.py; infra -> __init__.py."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return f"{parts[1]}/" if (root / "infra" / parts[1]).is_dir() else f"{parts[1]}.py"


def module_of(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) of every infra import in the file, relative ones resolved, lazy ones included."""
    module = module_of(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            # `from infra import probes` imports the module infra.probes
            if name == "infra" or (node.level and not node.module):
                found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, name))
    return [(line, name) for line, name in found if name == "infra" or name.startswith("infra.")]


def violations(root: Path, layers: list[list[str]]) -> list[str]:
    """Every import that goes up or sideways in the picture, and every unit the picture and the tree
    disagree on; [] when the tree keeps to the picture."""
    rank = {unit: len(layers) - i for i, line in enumerate(layers) for unit in line}
    problems = []
    present = {f"{p.name}/" if p.is_dir() else p.name for p in (root / "infra").iterdir()
               if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    for unit in sorted(present - rank.keys()):
        problems.append(f"infra/{unit} is not in README.md's layer picture: add it to the line of its layer")
    for unit in sorted(rank.keys() - present):
        problems.append(f"README.md's layer picture names infra/{unit}, which does not exist: remove it")
    for path in sorted((root / "infra").rglob("*.py")):
        source = unit_of(module_of(path, root), root)
        for line, name in imports(path, root):
            target = unit_of(name, root)
            where = f"{path.relative_to(root)}:{line} imports {name}"
            if source == "__init__.py":
                problems.append(f"{where}: infra/__init__.py marks the package and imports nothing of it")
            elif target == source or target not in rank or source not in rank:
                continue  # its own folder; a unit missing from the picture is reported above
            elif rank[target] > rank[source]:
                problems.append(f"{where}: infra/{target} is above infra/{source} in README.md's layer picture")
            elif rank[target] == rank[source]:
                problems.append(f"{where}: infra/{target} is beside infra/{source} in README.md's layer picture "
                                "(siblings never import each other)")
    return problems


def test_the_readme_draws_the_layers():
    layers = picture((ROOT / "README.md").read_text())
    assert layers[0] == ["__main__.py"] and layers[-1] == ["knowledge/"], layers
    assert sum(unit.endswith("/") for line in layers for unit in line) <= 8  # the bound on sub-packages


def test_every_import_in_infra_goes_down_the_picture():
    assert violations(ROOT, picture((ROOT / "README.md").read_text())) == []


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of infra/ to plant imports into."""
    shutil.copytree(ROOT / "infra", tmp_path / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def plant(tree: Path, file: str, line: str) -> None:
    path = tree / "infra" / file
    path.write_text(path.read_text() + f"\n\ndef planted() -> None:\n    {line}\n")


LAYERS = picture((ROOT / "README.md").read_text())


@pytest.mark.parametrize("file, line, expected", [
    ("model/capacity.py", "from infra.cli import main",
     "infra/model/capacity.py:{n} imports infra.cli: infra/cli.py is above infra/model/ in README.md's layer picture"),
    ("knowledge/units.py", "import infra.spec.models",
     "infra/knowledge/units.py:{n} imports infra.spec.models: infra/spec/ is above infra/knowledge/"),
    ("cluster/nodes.py", "from infra.checks import run_checks",
     "infra/cluster/nodes.py:{n} imports infra.checks: infra/checks/ is above infra/cluster/"),
    ("hosts/hostvars.py", "from infra.live import probes",
     "infra/hosts/hostvars.py:{n} imports infra.live: infra/live/ is beside infra/hosts/"),
    ("cluster/validation/syntax.py", "from ...planning.fit import fit",
     "infra/cluster/validation/syntax.py:{n} imports infra.planning.fit: infra/planning/ is above infra/cluster/"),
])
def test_a_planted_upward_or_sideways_import_is_named_with_its_file_and_line(tree, file, line, expected):
    assert violations(tree, LAYERS) == []
    plant(tree, file, line)
    number = len((tree / "infra" / file).read_text().splitlines())
    found = violations(tree, LAYERS)
    assert len(found) == 1 and found[0].startswith(expected.format(n=number)), found


def test_a_folder_the_picture_does_not_name_is_reported(tree):
    (tree / "infra" / "reports").mkdir()
    (tree / "infra" / "reports" / "__init__.py").write_text('"""A concern without a layer."""\n')
    assert violations(tree, LAYERS) == [
        "infra/reports/ is not in README.md's layer picture: add it to the line of its layer"]


def test_a_picture_naming_what_is_gone_is_reported(tree):
    shutil.rmtree(tree / "infra" / "live")
    assert "README.md's layer picture names infra/live/, which does not exist: remove it" in violations(tree, LAYERS)


def test_the_picture_is_read_from_the_readme_lines():
    readme = f"""{MARKER}
```text
  a.py        the top
  b/   c/     two edges,
              described on two lines
  d/
```
"""
    assert picture(readme) == [["a.py"], ["b/", "c/"], ["d/"]]


def untested_folders(root: Path, layers: list[list[str]]) -> list[str]:
    """The folders of the picture with no tests/<folder>/test_*.py (where the README sends a reader
    looking for the tests of a module)."""
    folders = [unit.rstrip("/") for line in layers for unit in line if unit.endswith("/")]
    return [f"tests/{folder}/" for folder in folders if not any((root / "tests" / folder).glob("test_*.py"))]


def test_the_tests_mirror_the_folders(tmp_path):
    assert untested_folders(ROOT, LAYERS) == []
    for folder in ("model", "live"):
        (tmp_path / "tests" / folder).mkdir(parents=True)
    (tmp_path / "tests" / "model" / "test_mig_placement.py").write_text("")
    (tmp_path / "tests" / "live" / "conftest.py").write_text("")
    assert untested_folders(tmp_path, [["live/"], ["model/"], ["spec/"]]) == ["tests/live/", "tests/spec/"]
