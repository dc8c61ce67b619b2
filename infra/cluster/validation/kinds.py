"""Checks of whole objects of one kind: Pod Security labels of a Namespace, PriorityClass names and values,
admission policy bindings, workload templates' restart policies, CRD names, and the custom resources the
project declares (Multus' NetworkAttachmentDefinition, Volcano's Queue).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from infra.cluster.validation.enums import RESTART_POLICIES
from infra.cluster.validation.fields import check_quantity, parsed_quantities
from infra.cluster.validation.syntax import Check, Path, Report, not_one_of

# --- built-in kinds----------------------------------------------------------------------------------------

PSA_LEVELS = ("privileged", "baseline", "restricted")
PSA_MODES = ("enforce", "audit", "warn")
PSA_PREFIX = "pod-security.kubernetes.io/"
_PSA_VERSION = re.compile(r"latest|v1\.(0|[1-9][0-9]*)")


def check_namespace(value: Any, path: Path, report: Report) -> None:
    """Pod Security Admission labels: a known mode, a level, and a version that is "latest" or v1.N."""
    meta = value.get("metadata") if isinstance(value, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return
    for key, label in labels.items():
        if not isinstance(key, str) or not key.startswith(PSA_PREFIX) or not isinstance(label, str):
            continue
        where = (*path, "metadata", "labels", key)
        mode = key.removeprefix(PSA_PREFIX)
        if mode in PSA_MODES:
            if label not in PSA_LEVELS:
                report(where, f"Pod Security level: {not_one_of(label, PSA_LEVELS)}")
        elif mode.removesuffix("-version") in PSA_MODES:
            if not _PSA_VERSION.fullmatch(label):
                report(where, f"Pod Security version {label!r} must be 'latest' or 'v1.N' (e.g. v1.34)")
        else:
            keys = [PSA_PREFIX + m for m in PSA_MODES] + [PSA_PREFIX + m + "-version" for m in PSA_MODES]
            report(where, f"unknown Pod Security label: {not_one_of(key, keys)}")


SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
HIGHEST_USER_PRIORITY = 1_000_000_000


def check_priority_class(value: Any, path: Path, report: Report) -> None:
    """`system-` names are reserved for the two built-in classes; user classes stay <= 1,000,000,000."""
    if not isinstance(value, Mapping):
        return
    meta = value.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    priority = value.get("value")
    if isinstance(name, str) and name.startswith("system-"):
        if SYSTEM_PRIORITY_CLASSES.get(name) != priority or value.get("globalDefault"):
            report((*path, "metadata", "name"), f"{name!r}: priority class names with 'system-' prefix are reserved "
                                                "for system use only")
    elif isinstance(priority, int) and not isinstance(priority, bool) and priority > HIGHEST_USER_PRIORITY:
        report((*path, "value"), f"{priority} is above the maximum allowed value of a user defined priority "
                                  f"({HIGHEST_USER_PRIORITY})")


VALIDATION_ACTIONS = ("Deny", "Warn", "Audit")


def check_policy_binding_spec(value: Any, path: Path, report: Report) -> None:
    """validationActions: required, each known, no repeats, and not both Deny and Warn."""
    if not isinstance(value, Mapping):
        return
    actions = value.get("validationActions")
    where = (*path, "validationActions")
    if actions is None or actions == []:
        report(where, f"at least one of {list(VALIDATION_ACTIONS)!r} is required")
        return
    if not isinstance(actions, list):
        return
    for index, action in enumerate(actions):
        if isinstance(action, str) and action not in VALIDATION_ACTIONS:
            report((*where, index), not_one_of(action, VALIDATION_ACTIONS))
        elif action in actions[:index]:
            report((*where, index), f"{action!r} is repeated")
    if "Deny" in actions and "Warn" in actions:
        report(where, "must not contain both 'Deny' and 'Warn' (Deny already warns)")


def template_restart_policy(allowed: tuple[str, ...], required: bool) -> Check:
    def check(value: Any, path: Path, report: Report) -> None:
        template = value.get("template") if isinstance(value, Mapping) else None
        spec = template.get("spec") if isinstance(template, Mapping) else None
        if not isinstance(spec, Mapping):
            return
        policy = spec.get("restartPolicy")
        where = (*path, "template", "spec", "restartPolicy")
        if policy in (None, "") and required:
            report(where, f"required: {' or '.join(allowed)}")
        elif policy in RESTART_POLICIES and policy not in allowed:  # others: PodSpec's enumeration says so
            report(where, f"{not_one_of(policy, allowed)} for this workload")

    return check


def check_custom_resource_definition(value: Any, path: Path, report: Report) -> None:
    """A CRD is named <plural>.<group>."""
    if not isinstance(value, Mapping):
        return
    meta, spec = value.get("metadata"), value.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping) or not isinstance(spec.get("names"), Mapping):
        return
    expected = f"{spec['names'].get('plural')}.{spec.get('group')}"
    if meta.get("name") != expected:
        report((*path, "metadata", "name"), f"{meta.get('name')!r} must be spec.names.plural + '.' + spec.group "
                                            f"({expected!r})")




# --- custom resources --------------------------------------------------------------------------------


def check_network_attachment_definition(obj: Any, path: Path, report: Report) -> None:
    """spec.config is a CNI configuration as a JSON string: cniVersion, and a plugin type or a plugin list.

    Without spec.config Multus reads the configuration named like the object from each node's
    /etc/cni/multus/net.d (per-node IPAM ranges need that); an empty string is neither."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    config = spec.get("config") if isinstance(spec, Mapping) else None
    where = (*path, "spec", "config")
    if config is None:
        return
    if config == "":
        report(where, "is empty: give a CNI configuration (JSON), or leave spec.config out so that Multus reads "
                      "the node's configuration file of this name")
        return
    if not isinstance(config, str):
        return
    try:
        parsed = json.loads(config)
    except json.JSONDecodeError as error:
        report(where, f"is not JSON: {error}")
        return
    if not isinstance(parsed, Mapping):
        report(where, "must be a JSON object")
        return
    if not isinstance(parsed.get("cniVersion"), str) or not parsed["cniVersion"]:
        report(where, "must name its cniVersion (e.g. \"1.0.0\")")
    plugins = parsed.get("plugins")
    if "plugins" in parsed:
        if not isinstance(plugins, list) or not plugins:
            report(where, "plugins must be a non-empty list")
        else:
            for index, plugin in enumerate(plugins):
                if not isinstance(plugin, Mapping) or not isinstance(plugin.get("type"), str) or not plugin["type"]:
                    report(where, f"plugins[{index}] must be an object with a type")
    elif not isinstance(parsed.get("type"), str) or not parsed["type"]:
        report(where, "must have a plugin type (e.g. \"macvlan\") or a plugins list")


def check_queue(obj: Any, path: Path, report: Report) -> None:
    """What Volcano's admission webhook checks: quantities >= 0, and guarantee <= deserved <= capability."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    if not isinstance(spec, Mapping):
        return
    guarantee = spec.get("guarantee")
    lists = {"capability": (("spec", "capability"), spec.get("capability")),
             "deserved": (("spec", "deserved"), spec.get("deserved")),
             "guarantee": (("spec", "guarantee", "resource"),
                           guarantee.get("resource") if isinstance(guarantee, Mapping) else None)}
    for where, values in lists.values():
        if isinstance(values, Mapping):
            for name, quantity in values.items():
                check_quantity(quantity, path + where + (name,), report, grammar=False)
    capability, deserved, guaranteed = (parsed_quantities(values) for _, values in lists.values())
    for name, amount in guaranteed.items():
        if name not in deserved:
            report((*path, "spec", "deserved", name), f"deserved[{name}] must be set, >= guarantee[{name}]")
        elif deserved[name] < amount:
            report((*path, "spec", "deserved", name), f"deserved[{name}] must be >= guarantee[{name}]")
    for name, amount in deserved.items():
        if name in capability and amount > capability[name]:
            report((*path, "spec", "deserved", name), f"deserved[{name}] must be <= capability[{name}]")

