"""Write each role's variable table into its README from meta/argument_specs.yml (the one source).

    python tools/role_docs.py          rewrite the tables (between the README's role-variables markers)
    python tools/role_docs.py --check  exit 1 naming each README whose table is out of date

Hand-copied variable tables drift from the role; tests/hosts/test_roles.py runs --check's logic.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROLES = Path(__file__).resolve().parent.parent / "ansible" / "roles"
START, END = "<!-- role-variables:start -->", "<!-- role-variables:end -->"


def argument_specs(role: Path) -> dict[str, Any]:
    data = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    options: dict[str, Any] = data["argument_specs"]["main"].get("options", {})
    return options


def table(role: Path) -> str:
    rows = ["| variable | type | default | description |", "|---|---|---|---|"]
    for name, spec in argument_specs(role).items():
        kind = spec.get("type", "str")
        if kind == "list" and "elements" in spec:
            kind = f"list of {spec['elements']}"
        if spec.get("choices"):
            kind += " (" + ", ".join(f"`{choice}`" for choice in spec["choices"]) + ")"
        default = "required" if spec.get("required") else f"`{_inline(spec.get('default'))}`"
        description = spec.get("description", "")
        if isinstance(description, list):
            description = " ".join(description)
        description = description.replace("|", "\\|")
        rows.append(f"| `{name}` | {kind} | {default} | {description} |")
    return "\n".join(rows)


def _inline(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").removesuffix("...").strip().replace("|", "\\|")


def updated(readme: str, role: Path) -> str:
    head, found, rest = readme.partition(START)
    if not found or END not in rest:
        raise SystemExit(f"{role.name}/README.md: add the markers {START} and {END} where the table goes")
    return f"{head}{START}\n{table(role)}\n{END}{rest.partition(END)[2]}"


def problems(role: Path) -> list[str]:
    """How a role breaks the house shape: argument specs and defaults that disagree, an option without a
    type or description, a variable not prefixed with the role's name, a README without the current table."""
    name, out = role.name, []
    for part in ("tasks/main.yml", "defaults/main.yml", "meta/argument_specs.yml", "meta/main.yml", "README.md"):
        if not (role / part).is_file():
            out.append(f"{name}: {part} is missing")
    if out:
        return out
    options = argument_specs(role)
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    for var in sorted(set(options) | set(defaults)):
        spec = options.get(var)
        if not var.startswith(f"{name}_"):
            out.append(f"{name}: variable {var} is not prefixed with {name}_")
        if spec is None:
            out.append(f"{name}: {var} is in defaults/main.yml but not in meta/argument_specs.yml")
            continue
        if not spec.get("description") or not spec.get("type"):
            out.append(f"{name}: {var} needs a type and a description in meta/argument_specs.yml")
        if spec.get("required"):
            if var in defaults:
                out.append(f"{name}: {var} is required, so it must have no default")
        elif var not in defaults:
            out.append(f"{name}: {var} is optional but has no value in defaults/main.yml")
        elif spec.get("default", defaults[var]) != defaults[var]:
            out.append(f"{name}: {var}'s default differs between defaults/main.yml and meta/argument_specs.yml")
    readme = (role / "README.md").read_text()
    if START not in readme or END not in readme:
        out.append(f"{name}: README.md needs the markers {START} and {END}")
    elif readme != updated(readme, role):
        out.append(f"{name}: README.md's variable table is out of date; run python tools/role_docs.py")
    return out


def stale(roles: Path = ROLES) -> list[str]:
    """READMEs whose variable table differs from their role's argument specs."""
    out = []
    for role in sorted(path for path in roles.iterdir() if (path / "meta" / "argument_specs.yml").is_file()):
        readme = role / "README.md"
        if not readme.is_file() or readme.read_text() != updated(readme.read_text(), role):
            out.append(str(readme.relative_to(roles.parent.parent)))
    return out


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        out = stale()
        for path in out:
            print(f"{path}: variable table out of date; run python tools/role_docs.py", file=sys.stderr)
        return 1 if out else 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    for role in sorted(path for path in ROLES.iterdir() if (path / "meta" / "argument_specs.yml").is_file()):
        readme = role / "README.md"
        readme.write_text(updated(readme.read_text(), role))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
