"""The Pulumi edge: load the stack's environment, refuse it on errors, declare what follows from it.

One component per concern of the cluster layer (node pools, tenancy, GPU sharing, scheduling,
networking, storage), each over the same pure objects `python -m infra render` writes. The
Kubernetes provider is explicit, from the stack's config (kubeconfig, context): never the ambient one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.checks import has_errors, run_checks
from infra.cluster.components import ConcernArgs, ConcernComponent
from infra.cluster.concerns import AFTER, build_concerns
from infra.model.resolve import resolve
from infra.planning.plan import build_plan
from infra.spec import Environment, SpecError, load_environment

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


@dataclass(frozen=True)
class ClusterSettings:
    """How the stack reaches its cluster (Pulumi.<stack>.yaml, project namespace).

    kubeconfig     path of the cluster's kubeconfig file (`~` expanded; relative to the project folder)
    context        the kubeconfig context; "" for its current context
    helm_releases  false leaves the Helm releases out (no chart repository reachable, e.g. a test cluster)
    """

    kubeconfig: str
    context: str = ""
    helm_releases: bool = True


def stack_settings() -> ClusterSettings:
    config = pulumi.Config()
    helm = config.get_bool("helmReleases")
    return ClusterSettings(kubeconfig=config.require("kubeconfig"), context=config.get("context") or "",
                           helm_releases=True if helm is None else helm)


def declare_cluster(env: Environment, settings: ClusterSettings) -> dict[str, ConcernComponent]:
    """One component per concern, all through one explicit provider."""
    provider = k8s.Provider("cluster", kubeconfig=os.path.expanduser(settings.kubeconfig),
                            context=settings.context or None, enable_server_side_apply=True)
    components: dict[str, ConcernComponent] = {}
    for concern in build_concerns(resolve(env), settings.helm_releases):
        components[concern.name] = ConcernComponent(concern.name, ConcernArgs(
            concern=concern, provider=provider, helm_releases=settings.helm_releases,
            depends_on=tuple(components[name] for name in AFTER.get(concern.name, ()) if name in components)))
    pulumi.export("cluster", {name: {"objects": len(c.objects), "releases": sorted(c.releases)}
                              for name, c in components.items()})
    return components


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
