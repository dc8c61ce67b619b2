"""The Pulumi project files and the pull-request preview workflow agree with the inventories, and the
project files pass the checks the Pulumi CLI makes before it runs the program.

The checker below restates Pulumi's rules (the pinned 3.272; Pulumi's messages, Python's type names) from:
  sdk/go/common/workspace/project.json   JSON schema of Pulumi.yaml: config declarations and types
  sdk/go/common/workspace/project.go     ValidateProject, RewriteShorthandConfigValues, Project.Validate,
                                         ValidateConfigValue: namespacing, defaults, values
  sdk/go/common/workspace/loaders.go     LoadProjectStack: bare stack keys go to the project's namespace
  sdk/go/common/tokens/project.go        ValidateProjectName;  tokens/stack_name.go: ParseStackName
  sdk/go/common/resource/config/key.go   ParseKey: `<namespace>:<name>` (or `<namespace>:config:<name>`)
  pkg/workspace/config.go                ValidateStackConfigAndApplyProjectConfig: missing keys, types, secrets
Only the rules this project's files can meet are restated; each has a failing and a passing case below.
One known gap: PyYAML reads YAML 1.1 (`yes` is a boolean), the CLI YAML 1.2 (`yes` is a string).
"""

from __future__ import annotations

import json
import math
import re
from importlib.metadata import version
from typing import Any

import pytest
import yaml
from inventory_builder import ROOT, SHIPPED

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
STACKS = sorted(p.name.split(".")[1] for p in ROOT.glob("Pulumi.*.yaml"))
PROJECT = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())

# --- Pulumi's rules -------------------------------------------------------------------------------------

TYPES = ("string", "integer", "boolean", "array", "object")
ATTRIBUTES = ("type", "items", "description", "secret", "default", "value")
NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _json_type(value: Any) -> str:
    """The schema validator's name for a value's type (any number is a `number`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _items_errors(path: str, items: Any) -> list[str]:
    """Schema `configItemsType`: a type, and for an array the type of its items, at every depth."""
    if not isinstance(items, dict):
        return [f"{path}: expected object, but got {_json_type(items)}"]
    if "type" not in items:
        return [f"{path}: missing properties: 'type'"]
    errors = []
    if items["type"] not in TYPES:
        errors.append(f"{path}/type: value must be one of " + ", ".join(f'"{t}"' for t in TYPES))
    if items["type"] == "array" and "items" not in items:
        errors.append(f"{path}: missing properties: 'items'")
    if "items" in items:
        errors += _items_errors(f"{path}/items", items["items"])
    return errors


def _declaration_schema_errors(key: str, declaration: Any) -> list[str]:
    """Schema: a config entry is a short-hand value (string, integer, boolean, array) or a declaration."""
    path = f"#/config/{key}"
    if isinstance(declaration, str | int | list):  # bool is an int
        return []
    if not isinstance(declaration, dict):
        return [f"{path}: oneOf failed"]
    errors = []
    unknown = sorted(set(declaration) - set(ATTRIBUTES))
    if unknown:
        errors.append(f"{path}: additionalProperties " + ", ".join(f"'{a}'" for a in unknown) + " not allowed")
    if "type" in declaration and declaration["type"] not in TYPES:
        errors.append(f"{path}/type: value must be one of " + ", ".join(f'"{t}"' for t in TYPES))
    if "description" in declaration and not isinstance(declaration["description"], str):
        errors.append(f"{path}/description: expected string, but got {_json_type(declaration['description'])}")
    if "secret" in declaration and not isinstance(declaration["secret"], bool):
        errors.append(f"{path}/secret: expected boolean, but got {_json_type(declaration['secret'])}")
    if "items" in declaration:
        errors += _items_errors(f"{path}/items", declaration["items"])
    return errors


def in_project_namespace(project: str, key: str) -> bool:
    """configKeyIsNamespacedByProject: a bare key, or one prefixed `<project>:`."""
    return ":" not in key or key.startswith(project + ":")


def declarations(project: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """RewriteShorthandConfigValues: `key: v` is a default in the project's namespace, a value outside it."""
    config = project.get("config")
    if not isinstance(config, dict):  # absent, or the deprecated `config: <stack config folder>`
        return {}
    return {key: decl if isinstance(decl, dict)
            else {"default" if in_project_namespace(project["name"], key) else "value": decl}
            for key, decl in config.items()}


def conforms(type_name: str, items: dict[str, Any] | None, value: Any) -> bool:
    """ValidateConfigValue."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        if isinstance(value, float):
            return math.isfinite(value) and value == math.trunc(value)
        if isinstance(value, str):
            return re.fullmatch(r"[+-]?[0-9]+", value) is not None and -(2**63) <= int(value) < 2**63
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if type_name == "object":
        return isinstance(value, dict)
    return isinstance(value, list) and items is not None and all(
        conforms(items["type"], items.get("items"), item) for item in value)


def full_type_name(type_name: str, items: dict[str, Any] | None) -> str:
    """InferFullTypeName: `array<string>`."""
    return f"array<{full_type_name(items['type'], items.get('items'))}>" if items is not None else type_name


def project_errors(project: Any) -> list[str]:
    """What `LoadProject` refuses in Pulumi.yaml, and what the backends refuse as a project name."""
    if not isinstance(project, dict):
        return [f"expected project to be an object, was '{type(project).__name__}'"]
    if "name" not in project:
        return ["project is missing a 'name' attribute"]
    name = project["name"]
    if not isinstance(name, str) or not name:
        return ["project is missing a non-empty string 'name' attribute"]
    errors = []
    if len(name) > 100:
        errors.append("project names are limited to 100 characters")
    elif not NAME.fullmatch(name):
        errors.append("project names may only contain alphanumerics, hyphens, underscores, and periods")
    config = project.get("config")
    if not (config is None or isinstance(config, dict | str)):
        return [*errors, f"#/config: expected object or string or null, but got {_json_type(config)}"]
    for key, declaration in (config if isinstance(config, dict) else {}).items():
        errors += _declaration_schema_errors(key, declaration)
    if errors:
        return errors
    for key, decl in declarations(project).items():  # Project.Validate
        if "default" in decl and "value" in decl:
            errors.append(f"project config '{key}' cannot have both a 'default' and 'value' attribute")
        elif in_project_namespace(name, key):
            if decl.get("type") == "array" and "items" not in decl:
                errors.append(f"The configuration key '{key}' declares an array "
                              "but does not specify the underlying type via the 'items' attribute")
            elif "type" in decl and "default" in decl and not conforms(decl["type"], decl.get("items"),
                                                                      decl["default"]):
                errors.append(f"The default value specified for configuration key '{key}' is not of the expected "
                              f"type '{full_type_name(decl['type'], decl.get('items'))}'")
        elif "type" in decl:
            errors.append(f"Configuration key '{key}' is not namespaced by the project and should not define a type")
        elif "default" in decl:
            errors.append(f"Configuration key '{key}' is not namespaced by the project and "
                          "should not define a default value. "
                          "Did you mean to use the 'value' attribute instead of 'default'?")
        elif "value" not in decl:
            errors.append(f"Configuration key '{key}' is namespaced and must provide an attribute 'value'")
    return errors


def stack_key(project: str, key: str) -> str | None:
    """The full key a stack file's key names: bare keys join the project's namespace; None if unparsable."""
    if ":" not in key:
        return f"{project}:{key}"
    parts = key.split(":")
    if len(parts) == 2:
        return key
    if len(parts) == 3 and parts[1] == "config":  # the old `<namespace>:config:<name>` form
        return f"{parts[0]}:{parts[2]}"
    return None


def _stack_name_errors(stack: str) -> list[str]:
    if not stack:
        return ["a stack name may not be empty"]
    if len(stack) > 100:
        return ["a stack name cannot exceed 100 characters"]
    bad = next((i for i, c in enumerate(stack) if not NAME.fullmatch(c)), None)
    if bad is not None:
        return ["a stack name may only contain alphanumeric, hyphens, underscores, or periods: "
                f"invalid character '{stack[bad]}' at position {bad}"]
    return []


def _missing(stack: str, keys: list[str]) -> str:
    """missingStackConfigurationKeysError."""
    keys = sorted(keys)
    listed = f"'{keys[0]}'" if len(keys) == 1 else ", ".join(f"'{k}'" for k in keys[:-1]) + f" and '{keys[-1]}'"
    return f"Stack '{stack}' is missing configuration value{'s' if len(keys) > 1 else ''} {listed}"


def _as_run_value(value: Any) -> tuple[Any, bool]:
    """A stack value as the CLI checks it (config.Value): primitives as text, maps and lists as data; secure?"""
    if isinstance(value, dict) and list(value) == ["secure"] and isinstance(value["secure"], str):
        return "<decrypted>", True
    if value is None:
        return "", False
    if isinstance(value, bool):
        return json.dumps(value), False
    if isinstance(value, float):  # Go writes a whole float64 without its fraction
        return json.dumps(int(value) if value.is_integer() else value), False
    if isinstance(value, int | str):
        return str(value), False
    return value, False


def stack_errors(project: dict[str, Any], stack: str, stack_file: Any) -> list[str]:
    """What the CLI refuses in Pulumi.<stack>.yaml, given the (valid) project: names, keys, required
    project settings, their types and secrecy (checked after Pulumi.yaml's defaults are filled in, so a
    secret with a default is always refused). A key with no value is only a warning, reported as one."""
    name = project["name"]
    errors = _stack_name_errors(stack)
    if stack_file is None:  # an empty stack file
        stack_file = {}
    if not isinstance(stack_file, dict):
        return [*errors, f"expected project to be an object, was '{type(stack_file).__name__}'"]
    config: dict[str, Any] = {}
    for key, value in (stack_file.get("config") or {}).items():
        full = stack_key(name, key)
        if full is None:
            errors.append(f"could not parse {key} as a configuration key "
                          "(configuration keys should be of the form `<namespace>:<name>`)")
            continue
        if value is None:
            errors.append(f'warning: No value for configuration key "{full}". '
                          'This is currently treated as an empty string `""`, '
                          "but will be treated as `null` in a future version of pulumi.\n"
                          'Set the value to `""` to avoid this warning.')
        config[full] = value
    declared = declarations(project)
    missing = [key for key, decl in declared.items()
               if stack_key(name, key) not in config and "default" not in decl and "value" not in decl
               and in_project_namespace(name, key)]
    if missing:
        return [*errors, _missing(stack, missing)]
    for key, decl in declared.items():  # Pulumi.yaml's default or value fills in what the stack leaves out
        config.setdefault(stack_key(name, key), decl.get("value", decl.get("default")))
    for key in sorted(declared):
        decl = declared[key]
        if "type" not in decl:
            continue
        value, secure = _as_run_value(config[stack_key(name, key)])
        if decl.get("secret") and not secure:
            errors.append(f"Stack '{stack}' with configuration key '{key}' must be encrypted as it's secret")
        elif not secure and not conforms(decl["type"], decl.get("items"), value):
            errors.append(f"Stack '{stack}' with configuration key '{key}' must be of type "
                          f"'{full_type_name(decl['type'], decl.get('items'))}'")
    return errors


# --- The shipped files ----------------------------------------------------------------------------------

OLD_PROJECT = """\
name: k8s-node-pools
runtime: python
config:
  infra:inventory:
    type: string
    description: The stack's inventory folder (its environment spec), e.g. inventories/example.
"""


def test_the_project_file_passes_pulumis_checks():
    assert project_errors(PROJECT) == []


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_file_passes_pulumis_checks(stack):
    assert stack_errors(PROJECT, stack, yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())) == []


def test_the_old_typed_infra_inventory_declaration_is_what_pulumi_refused():
    assert project_errors(yaml.safe_load(OLD_PROJECT)) == [
        "Configuration key 'infra:inventory' is not namespaced by the project and should not define a type"]


def test_every_stack_names_a_shipped_inventory_in_the_projects_namespace():
    assert STACKS == SHIPPED
    for stack in STACKS:
        config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        assert config[f"{PROJECT['name']}:inventory"] == f"inventories/{stack}"
        assert config[f"{PROJECT['name']}:kubeconfig"]  # explicit, never the ambient ~/.kube/config


def test_the_project_declares_the_inventory_setting_without_a_default():
    assert PROJECT["name"] == "k8s-node-pools"  # the tests' Pulumi mocks run as this project
    assert PROJECT["runtime"]["options"]["virtualenv"] == ".venv"  # what ./dev.sh creates
    declared = PROJECT["config"]
    # no default for the inventory and the kubeconfig: each stack file names its own, and the CLI stops a
    # stack that does not (see the missing-value case below)
    for key in ("inventory", "kubeconfig"):
        assert declared[key] == {"type": "string", "description": declared[key]["description"]}
    assert declared["context"]["default"] == "" and declared["helmReleases"]["default"] is True
    assert set(declared) == {"inventory", "kubeconfig", "context", "helmReleases"}


# The pull request's test job runs what CI runs, as root (the sandbox hosts are rootful podman).
CI_STEP = "sudo --preserve-env=HOME,PATH bash .ci/run"


def test_the_preview_workflow_covers_every_stack_with_the_pinned_cli():
    preview = WORKFLOW["jobs"]["preview"]
    assert sorted(preview["strategy"]["matrix"]["stack"]) == STACKS
    [action] = [step for step in preview["steps"] if step.get("uses", "").startswith("pulumi/actions@")]
    assert action["with"]["command"] == "preview"
    assert action["with"]["pulumi-version"] == version("pulumi")
    assert any(step.get("run") == CI_STEP for step in WORKFLOW["jobs"]["test"]["steps"])


# --- Each rule, broken and kept -------------------------------------------------------------------------


def _project(config: Any = None, **fields: Any) -> dict[str, Any]:
    project = {"name": "p", "runtime": "python", **fields}
    if config is not None:
        project["config"] = config
    return project


ARRAY_ERROR = ("The configuration key 'k' declares an array but does not specify the underlying type via the "
               "'items' attribute")

PROJECT_RULES = [
    pytest.param(["p"], _project(), "expected project to be an object, was 'list'", id="project-is-a-map"),
    pytest.param({"nam": "p"}, {"name": "p"}, "project is missing a 'name' attribute", id="name-present"),
    pytest.param({"name": ""}, {"name": "p"}, "project is missing a non-empty string 'name' attribute",
                 id="name-non-empty"),
    pytest.param({"name": 5}, {"name": "5"}, "project is missing a non-empty string 'name' attribute",
                 id="name-string"),
    pytest.param({"name": "k8s node pools"}, {"name": "k8s-node_pools.v2"},
                 "project names may only contain alphanumerics, hyphens, underscores, and periods", id="name-chars"),
    pytest.param({"name": "p" * 101}, {"name": "p" * 100}, "project names are limited to 100 characters",
                 id="name-length"),
    pytest.param(_project(5), _project({}), "#/config: expected object or string or null, but got number",
                 id="config-is-a-map"),
    pytest.param(_project({"k": None}), _project({"k": "short-hand default"}), "#/config/k: oneOf failed",
                 id="entry-is-value-or-declaration"),
    pytest.param(_project({"k": {"typ": "string"}}), _project({"k": {"type": "string"}}),
                 "#/config/k: additionalProperties 'typ' not allowed", id="declaration-attributes"),
    pytest.param(_project({"k": {"type": "str"}}), _project({"k": {"type": "string"}}),
                 '#/config/k/type: value must be one of "string", "integer", "boolean", "array", "object"',
                 id="type-known"),
    pytest.param(_project({"k": {"description": 5}}), _project({"k": {"description": "five"}}),
                 "#/config/k/description: expected string, but got number", id="description-text"),
    pytest.param(_project({"k": {"secret": "yes"}}), _project({"k": {"secret": True}}),
                 "#/config/k/secret: expected boolean, but got string", id="secret-boolean"),
    pytest.param(_project({"k": {"type": "array", "items": {"items": {"type": "string"}}}}),
                 _project({"k": {"type": "array", "items": {"type": "string"}}}),
                 "#/config/k/items: missing properties: 'type'", id="items-typed"),
    pytest.param(_project({"k": {"type": "array", "items": {"type": "array"}}}),
                 _project({"k": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}}),
                 "#/config/k/items: missing properties: 'items'", id="nested-array-items"),
    pytest.param(_project({"k": {"type": "array"}}), _project({"k": {"type": "array", "items": {"type": "string"}}}),
                 ARRAY_ERROR, id="array-items"),
    pytest.param(_project({"k": {"default": 1, "value": 2}}), _project({"k": {"default": 1}}),
                 "project config 'k' cannot have both a 'default' and 'value' attribute", id="default-or-value"),
    pytest.param(_project({"k": {"type": "integer", "default": "five"}}),
                 _project({"k": {"type": "integer", "default": "5"}}),
                 "The default value specified for configuration key 'k' is not of the expected type 'integer'",
                 id="default-typed"),
    pytest.param(_project({"k": {"type": "array", "items": {"type": "string"}, "default": [1]}}),
                 _project({"k": {"type": "array", "items": {"type": "string"}, "default": ["a"]}}),
                 "The default value specified for configuration key 'k' is not of the expected type 'array<string>'",
                 id="array-default-typed"),
    pytest.param(_project({"infra:inventory": {"type": "string"}}, name="k8s-node-pools"),
                 _project({"inventory": {"type": "string"}}, name="k8s-node-pools"),
                 "Configuration key 'infra:inventory' is not namespaced by the project and should not define a type",
                 id="type-only-in-project-namespace"),
    pytest.param(_project({"infra:inventory": {"type": "string"}}, name="k8s-node-pools"),
                 _project({"k8s-node-pools:inventory": {"type": "string"}}, name="k8s-node-pools"),
                 "Configuration key 'infra:inventory' is not namespaced by the project and should not define a type",
                 id="project-prefixed-key-is-in-namespace"),
    pytest.param(_project({"aws:region": {"default": "eu-west-1"}}),
                 _project({"aws:region": {"value": "eu-west-1"}}),
                 "Configuration key 'aws:region' is not namespaced by the project and should not define a default "
                 "value. Did you mean to use the 'value' attribute instead of 'default'?", id="no-foreign-default"),
    pytest.param(_project({"aws:region": {"description": "where"}}), _project({"aws:region": "eu-west-1"}),
                 "Configuration key 'aws:region' is namespaced and must provide an attribute 'value'",
                 id="foreign-key-has-value"),
]


@pytest.mark.parametrize(("broken", "kept", "error"), PROJECT_RULES)
def test_each_project_rule_is_caught_and_its_fix_accepted(broken, kept, error):
    assert error in project_errors(broken)
    assert project_errors(kept) == []


@pytest.mark.parametrize("type_name", TYPES)
def test_every_pulumi_config_type_is_accepted(type_name):
    declaration = {"type": type_name, **({"items": {"type": "string"}} if type_name == "array" else {})}
    assert project_errors(_project({"k": declaration})) == []


def test_short_hand_entries_are_defaults_in_the_project_namespace_and_values_outside_it():
    project = _project({"size": "small", "p:count": 3, "aws:region": "eu-west-1"})
    assert declarations(project) == {
        "size": {"default": "small"}, "p:count": {"default": 3}, "aws:region": {"value": "eu-west-1"}}


TYPED = _project({"inventory": {"type": "string"}, "replicas": {"type": "integer", "default": 1}},
                 name="k8s-node-pools")

STACK_RULES = [
    pytest.param("my stack", {"config": {"inventory": "x"}}, "my-stack_1.0", {"config": {"inventory": "x"}},
                 "a stack name may only contain alphanumeric, hyphens, underscores, or periods: "
                 "invalid character ' ' at position 2", id="stack-name-chars"),
    pytest.param("s" * 101, {"config": {"inventory": "x"}}, "s" * 100, {"config": {"inventory": "x"}},
                 "a stack name cannot exceed 100 characters", id="stack-name-length"),
    pytest.param("dev", ["inventory"], "dev", {"config": {"inventory": "x"}},
                 "expected project to be an object, was 'list'", id="stack-file-is-a-map"),
    pytest.param("dev", {"config": {"inventory": "x", "a:b:c": 1}},
                 "dev", {"config": {"inventory": "x", "a:config:c": 1, "aws:region": "eu-west-1"}},
                 "could not parse a:b:c as a configuration key "
                 "(configuration keys should be of the form `<namespace>:<name>`)", id="stack-keys-parse"),
    pytest.param("dev", {"config": {"inventory": None}}, "dev", {"config": {"inventory": ""}},
                 'warning: No value for configuration key "k8s-node-pools:inventory". This is currently treated as '
                 'an empty string `""`, but will be treated as `null` in a future version of pulumi.\nSet the value '
                 'to `""` to avoid this warning.', id="stack-value-present"),
    pytest.param("dev", {"config": {"infra:inventory": "x"}}, "dev", {"config": {"k8s-node-pools:inventory": "x"}},
                 "Stack 'dev' is missing configuration value 'inventory'", id="required-key-set"),
    pytest.param("dev", None, "dev", {"config": {"inventory": "x"}},
                 "Stack 'dev' is missing configuration value 'inventory'", id="bare-stack-key-is-project-namespaced"),
    pytest.param("dev", {"config": {"inventory": {"path": "x"}}}, "dev", {"config": {"inventory": "x"}},
                 "Stack 'dev' with configuration key 'inventory' must be of type 'string'", id="stack-value-typed"),
    pytest.param("dev", {"config": {"inventory": "x", "replicas": "two"}},
                 "dev", {"config": {"inventory": "x", "replicas": 2}},
                 "Stack 'dev' with configuration key 'replicas' must be of type 'integer'", id="stack-integer-typed"),
]


@pytest.mark.parametrize(("stack", "broken", "kept_stack", "kept", "error"), STACK_RULES)
def test_each_stack_rule_is_caught_and_its_fix_accepted(stack, broken, kept_stack, kept, error):
    assert error in stack_errors(TYPED, stack, broken)
    assert stack_errors(TYPED, kept_stack, kept) == []


def test_a_secret_setting_must_be_encrypted_even_when_defaulted():
    project = _project({"token": {"type": "string", "secret": True}})
    error = "Stack 'dev' with configuration key 'token' must be encrypted as it's secret"
    assert stack_errors(project, "dev", {"config": {"token": "plain"}}) == [error]
    assert stack_errors(project, "dev", {"config": {"token": {"secure": "AAABAGhlbGxv"}}}) == []
    project["config"]["token"]["default"] = "plain"
    assert stack_errors(project, "dev", {}) == [error]


def test_missing_settings_are_listed_together():
    project = _project({"a": {"type": "string"}, "c": {}, "b": {"description": "no type, still required"}})
    assert stack_errors(project, "dev", {}) == ["Stack 'dev' is missing configuration values 'a', 'b' and 'c'"]
    assert stack_errors(project, "dev", {"config": {"a": "1", "b": "2", "c": "3"}}) == []


def test_an_old_stack_file_naming_only_infra_inventory_is_stopped_by_the_cli_itself():
    """Pulumi.yaml requires `inventory`, so `pulumi up` stops such a stack before the program (and its
    deprecated-name fallback) runs; only `--skip-config-validation` lets the program read the old key."""
    config = {"infra:inventory": "inventories/sandbox", "k8s-node-pools:kubeconfig": "x"}
    assert stack_errors(PROJECT, "sandbox", {"config": config}) == [
        "Stack 'sandbox' is missing configuration value 'inventory'"]


def test_the_offline_preview_runs_every_stack_on_the_local_control_plane_after_building_the_tools():
    offline = WORKFLOW["jobs"]["offline-preview"]
    assert sorted(offline["strategy"]["matrix"]["stack"]) == STACKS
    runs = [step.get("run") for step in offline["steps"]]
    assert runs.index("./dev.sh tools") < runs.index("./dev.sh run ${{ matrix.stack }} --real-cluster")
    assert CI_STEP in [step.get("run") for step in WORKFLOW["jobs"]["test"]["steps"]]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci.index("./dev.sh tools") < ci.index("./dev.sh test -q")
