"""The Pulumi program (the repository's __main__.py runs it): read the stack's config, load its environment,
refuse it on errors, export the plan, then declare the cluster (infra.cluster.components).

It composes the checks, the plan and the cluster layer's Pulumi edge, so it sits on top beside the CLI,
as the CLI composes them for `python -m infra`.
"""

from __future__ import annotations

from typing import Any

import pulumi

from infra.checks import has_errors, run_checks
from infra.cluster.components import ClusterSettings, declare_cluster
from infra.planning.plan import build_plan
from infra.spec import SpecError, load_environment

INVENTORY_KEY = "inventory"
"""The stack's setting, in the project's namespace: `k8s-node-pools:inventory` in Pulumi.<stack>.yaml."""
DEPRECATED_INVENTORY_KEY = "infra:inventory"
"""Its old name: Pulumi refuses to type a key outside the project's namespace, so it was moved; still read."""


def stack_inventory() -> str:
    """The inventory folder the stack's config names, read as `<project>:inventory`.

    A stack file that still sets only the deprecated `infra:inventory` is read with a warning naming the new
    key. Neither set: Pulumi's own missing-config error, naming `<project>:inventory`. As Pulumi.yaml
    declares `inventory` without a default, the CLI itself stops a stack that lacks it before the program
    runs ("Stack '<stack>' is missing configuration value 'inventory'"), unless run with
    --skip-config-validation: the fallback serves that and any config handed over without the CLI's checks.
    """
    config = pulumi.Config()  # the project's namespace
    key = config.full_key(INVENTORY_KEY)
    namespace, name = DEPRECATED_INVENTORY_KEY.split(":")
    legacy = pulumi.Config(namespace).get(name)
    inventory = config.get(INVENTORY_KEY)
    stack_file = f"Pulumi.{pulumi.get_stack()}.yaml"
    if inventory is not None:
        if legacy is not None:
            pulumi.log.warn(f"{DEPRECATED_INVENTORY_KEY} is deprecated and ignored: {key} is set; "
                            f"remove {DEPRECATED_INVENTORY_KEY} from {stack_file}")
        return inventory
    if legacy is not None:
        pulumi.log.warn(f"{DEPRECATED_INVENTORY_KEY} is deprecated: name the inventory as {key} in {stack_file} "
                        f"(`pulumi config set {INVENTORY_KEY} {legacy}`, then "
                        f"`pulumi config rm {DEPRECATED_INVENTORY_KEY}`)")
        return legacy
    return config.require(INVENTORY_KEY)


def stack_settings() -> ClusterSettings:
    config = pulumi.Config()
    helm = config.get_bool("helmReleases")
    return ClusterSettings(kubeconfig=config.require("kubeconfig"), context=config.get("context") or "",
                           helm_releases=True if helm is None else helm)


def declare(inventory: str, settings: ClusterSettings | None = None) -> dict[str, Any]:
    """Check `inventory`, export its plan and (with settings) declare its cluster; raise pulumi.RunError,
    declaring nothing, on any error."""
    try:
        env = load_environment(inventory)
    except SpecError as error:
        raise pulumi.RunError(f"{inventory}: unusable input:\n" + "\n".join(error.problems)) from None
    findings = run_checks(env)
    for finding in findings:
        line = f"{finding.code} {finding.file}: {finding.field}: {finding.message} (fix: {finding.fix})"
        (pulumi.log.error if finding.severity == "error" else pulumi.log.warn)(line)
    if has_errors(findings):
        raise pulumi.RunError(f"{inventory}: preflight found errors; run `python -m infra check {inventory}`")
    plan = build_plan(env)
    pulumi.export("plan", plan)
    if settings is not None:
        declare_cluster(env, settings)
    return plan
