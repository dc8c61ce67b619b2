"""`__main__.py` run the way `pulumi preview` / `pulumi up` run it, under the mocks: the stack file's
config handed over as the CLI hands it, the program started as pulumi-language-python-exec starts it."""

import json
import runpy

import pulumi
import pytest
import yaml
from inventory_builder import ROOT

from infra.planning.plan import build_plan
from infra.spec import load_environment

PROJECT = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
STACKS = sorted(p.name.split(".")[1] for p in ROOT.glob("Pulumi.*.yaml"))
KEY = f"{PROJECT['name']}:inventory"
KUBECONFIG = f"{PROJECT['name']}:kubeconfig"
CLUSTER = {"kubeconfig": "/nonexistent/kubeconfig"}  # the provider reads it only against a real cluster


def _as_text(value):
    """A config value as the program receives it: text as is, true/false and numbers as written, maps
    and lists as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def cli_config(stack_config: dict) -> dict[str, str]:
    """The config the CLI passes the program (PULUMI_CONFIG) for a stack file's `config:`: every key in its
    full `<namespace>:<name>` form, a bare key in the project's namespace; Pulumi.yaml's defaults and values
    for whatever the stack file leaves out. (The CLI's own checks of both files are in tests/test_pulumi_project.py.)"""
    project = PROJECT["name"]

    def full(key: str) -> str:
        if ":" not in key:
            return f"{project}:{key}"
        namespace, *config, name = key.split(":")
        return f"{namespace}:{name}" if config == ["config"] else key

    config = {full(key): _as_text(value) for key, value in stack_config.items()}
    for key, declaration in (PROJECT.get("config") or {}).items():
        if not isinstance(declaration, dict):  # short-hand: a default in the project's namespace, else a value
            declaration = {"default": declaration}
        for given in ("value", "default"):
            if given in declaration:
                config.setdefault(full(key), _as_text(declaration[given]))
    return config


@pulumi.runtime.test
def _run_main():
    runpy.run_path(".", run_name="__main__")  # the entry point "." runs the project folder's __main__.py


def run_program(monkeypatch, config: dict[str, str]) -> dict:
    """Run __main__.py with `config` as the stack's config; return the stack's exports."""
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(config))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", "[]")
    # What pulumi-language-python-exec does first: load PULUMI_CONFIG into the runtime ...
    pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
    monkeypatch.chdir(ROOT)  # ... then --pwd, the project's folder: stack files name inventories relative to it
    _run_main()
    return dict(pulumi.runtime.get_root_resource().outputs)


def _deprecation_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "infra:inventory" in r.getMessage()]


@pytest.mark.parametrize("stack", STACKS)
def test_each_shipped_stack_runs_and_exports_its_inventorys_plan(stack, monkeypatch, caplog):
    stack_file = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    config = cli_config(stack_file["config"])
    assert config[KEY] == f"inventories/{stack}" and config[KUBECONFIG]
    assert config[f"{PROJECT['name']}:helmReleases"] == "true"  # Pulumi.yaml's default
    exports = run_program(monkeypatch, config)
    plan = exports["plan"]
    assert plan["environment"] == stack
    assert plan["pools"] and plan == build_plan(load_environment(ROOT / "inventories" / stack))
    assert {"nodes", "tenancy", "networking", "storage", "gpu", "scheduling"} <= set(exports["cluster"])
    assert _deprecation_warnings(caplog) == []


def test_a_stack_without_a_kubeconfig_fails_instead_of_using_the_ambient_one(monkeypatch):
    with pytest.raises(pulumi.ConfigMissingError) as missing:
        run_program(monkeypatch, cli_config({KEY: "inventories/sandbox"}))
    assert missing.value.key == KUBECONFIG


def test_the_example_stack_plans_its_five_pools(monkeypatch):
    plan = run_program(monkeypatch, cli_config({KEY: "inventories/example", **CLUSTER}))["plan"]
    assert {p["name"] for p in plan["pools"]} == {
        "cpu_general", "mem_cache", "gpu_a100", "gpu_t4_offline", "gpu_h100_bigmem"}


def test_a_bare_inventory_key_in_a_stack_file_is_the_projects(monkeypatch):
    config = cli_config({"inventory": "inventories/sandbox", **CLUSTER})
    assert config[KEY] == "inventories/sandbox"
    assert run_program(monkeypatch, config)["plan"]["environment"] == "sandbox"


def test_a_stack_without_the_inventory_setting_fails_with_pulumis_missing_config_error(monkeypatch):
    """What the program says if it runs at all (`--skip-config-validation`); the CLI otherwise stops first:
    "Stack '<stack>' is missing configuration value 'inventory'" (tests/test_pulumi_project.py)."""
    with pytest.raises(pulumi.ConfigMissingError) as missing:
        run_program(monkeypatch, cli_config({"aws:region": "eu-west-1"}))
    assert missing.value.key == KEY
    assert str(missing.value).startswith(f"Missing required configuration variable '{KEY}'\n")
    assert pulumi.runtime.get_root_resource().outputs == {}  # nothing exported


def test_the_deprecated_infra_inventory_is_still_read_with_a_warning_naming_the_new_key(monkeypatch, caplog):
    plan = run_program(monkeypatch, cli_config({"infra:inventory": "inventories/sandbox", **CLUSTER}))["plan"]
    assert plan["environment"] == "sandbox"
    [warning] = _deprecation_warnings(caplog)
    assert warning.startswith(f"infra:inventory is deprecated: name the inventory as {KEY} in Pulumi.test.yaml")
    assert "`pulumi config set inventory inventories/sandbox`" in warning


def test_the_new_key_wins_over_the_deprecated_one_which_is_reported_as_ignored(monkeypatch, caplog):
    config = cli_config({"infra:inventory": "inventories/sandbox", KEY: "inventories/example", **CLUSTER})
    assert run_program(monkeypatch, config)["plan"]["environment"] == "example"
    [warning] = _deprecation_warnings(caplog)
    assert warning.startswith(f"infra:inventory is deprecated and ignored: {KEY} is set")


def test_a_spec_with_errors_named_by_the_stack_declares_nothing(monkeypatch, inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    with pytest.raises(pulumi.RunError, match="preflight found errors"):
        run_program(monkeypatch, cli_config({KEY: str(write(inventory)), **CLUSTER}))
    assert pulumi.runtime.get_root_resource().outputs == {}


def test_no_stack_config_or_export_is_left_from_an_earlier_test():
    """Runs after the tests above (file order): the conftest's fixture cleared what they set."""
    assert pulumi.Config().get("inventory") is None
    assert pulumi.Config("infra").get("inventory") is None
    assert pulumi.runtime.get_root_resource().outputs == {}
