"""Checks of the fields that recur across kinds: quantities and resource requirements, labels, annotations,
names, selectors, taints and tolerations.

Each check takes (value, path, report), tolerates values of the wrong type (the schema layer reports
those) and reports with the API server's wording.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from infra.cluster.validation.syntax import (
    ANNOTATIONS_TOTAL_MAX,
    Path,
    PathPart,
    Report,
    cronjob_name,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    label_value,
    not_one_of,
    parse_quantity,
    path_segment_name,
    qualified_name,
)

# --- quantities --------------------------------------------------------------------------------------

# Resources counted in whole units: object counts and extended resources (a domain-prefixed name
# outside kubernetes.io, e.g. nvidia.com/gpu). Extended resources cannot be overcommitted either.
_INTEGER_RESOURCES = frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"})


def is_extended_resource(name: str) -> bool:
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _is_integer_resource(name: PathPart) -> bool:
    return isinstance(name, str) and (name in _INTEGER_RESOURCES or is_extended_resource(name))


def _is_overcommittable(name: str) -> bool:
    return not (is_extended_resource(name) or name.startswith("hugepages-"))


def check_quantity(value: Any, path: Path, report: Report, *, grammar: bool = True) -> None:
    """Grammar, >= 0 and, for a resource counted in whole units (named by the map key), an integer.

    grammar=False: leave an unparseable value to the schema (a CRD's quantity pattern reports it).
    """
    if value is None or isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return  # the schema layer reports the type
    try:
        quantity = parse_quantity(value)
    except ValueError as error:
        if grammar:
            report(path, str(error))
        return
    if quantity < 0:
        report(path, f"{value!r} must be greater than or equal to 0")
    resource = path[-1] if path else None
    if resource is not None and _is_integer_resource(resource) and "maxLimitRequestRatio" not in path \
            and quantity != quantity.to_integral_value():
        report(path, f"{value!r} must be an integer: {resource} is counted in whole units")


def parsed_quantities(values: Any) -> dict[str, Decimal]:
    """The parseable entries of a resource list; the unparseable are reported where they occur."""
    parsed: dict[str, Decimal] = {}
    if isinstance(values, Mapping):
        for name, value in values.items():
            try:
                parsed[name] = parse_quantity(value)
            except ValueError:
                continue
    return parsed


def check_resource_requirements(value: Any, path: Path, report: Report) -> None:
    """Requests <= limits; extended resources and huge pages: requested only with a limit, and equal to it."""
    if not isinstance(value, Mapping):
        return
    requests, limits = parsed_quantities(value.get("requests")), parsed_quantities(value.get("limits"))
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is None:
            if not _is_overcommittable(name):
                report((*path, "limits", name), f"a limit is required: {name} cannot be overcommitted, "
                                                f"so set limits.{name} equal to the request")
        elif not _is_overcommittable(name) and request != limit:
            report((*path, "requests", name),
                   f"must be equal to the limit ({value['limits'][name]!r}): {name} cannot be overcommitted")
        elif request > limit:
            report((*path, "requests", name),
                   f"{value['requests'][name]!r} must be less than or equal to the limit {value['limits'][name]!r}")


# --- labels, annotations, selectors ------------------------------------------------------------------


def check_labels(labels: Any, path: Path, report: Report) -> None:
    if not isinstance(labels, Mapping):
        return
    for key, value in labels.items():
        if not isinstance(key, str):
            continue
        for message in qualified_name(key):
            report((*path, key), f"label key {key!r}: {message}")
        if isinstance(value, str):
            for message in label_value(value):
                report((*path, key), f"label value {value!r}: {message}")


def check_annotations(annotations: Any, path: Path, report: Report) -> None:
    if not isinstance(annotations, Mapping):
        return
    total = 0
    for key, value in annotations.items():
        if not isinstance(key, str):
            continue
        for message in qualified_name(key.lower()):  # the API server lower-cases annotation keys first
            report((*path, key), f"annotation key {key!r}: {message}")
        total += len(key.encode()) + (len(value.encode()) if isinstance(value, str) else 0)
    if total > ANNOTATIONS_TOTAL_MAX:
        report(path, f"annotations take {total} bytes: they must have at most {ANNOTATIONS_TOTAL_MAX} bytes "
                     "(256 KiB), keys and values together")


def check_object_meta(meta: Any, path: Path, report: Report) -> None:
    """Labels, annotations and namespace of every ObjectMeta; names are checked per kind (`check_name`)."""
    if not isinstance(meta, Mapping):
        return
    check_labels(meta.get("labels"), (*path, "labels"), report)
    check_annotations(meta.get("annotations"), (*path, "annotations"), report)
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace:
        for message in dns1123_label(namespace):
            report((*path, "namespace"), f"{namespace!r}: {message}")


NAME_RULES: dict[str, Callable[[str], list[str]]] = {
    "Namespace": dns1123_label,
    "Service": dns1035_label,
    "Role": path_segment_name,
    "ClusterRole": path_segment_name,
    "RoleBinding": path_segment_name,
    "ClusterRoleBinding": path_segment_name,
    "CronJob": cronjob_name,
}


def check_name(kind: str, obj: Mapping[str, Any], report: Report) -> None:
    """metadata.name: present, and of the syntax the kind's API requires (a DNS subdomain unless listed)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if name is None or name == "":
        if not meta.get("generateName"):  # the API server then makes the name
            report(("metadata", "name"), "a name is required (or metadata.generateName)")
    elif isinstance(name, str):
        for message in NAME_RULES.get(kind, dns1123_subdomain)(name):
            report(("metadata", "name"), f"{name!r}: {message}")


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_SELECTOR_OPERATORS = (*_SELECTOR_OPERATORS, "Gt", "Lt")


def _check_requirement(value: Any, path: Path, report: Report, operators: tuple[str, ...]) -> None:
    if not isinstance(value, Mapping):
        return
    key, operator, values = value.get("key"), value.get("operator"), value.get("values") or []
    if not isinstance(values, list):
        return  # the schema layer reports the type
    if isinstance(key, str):
        for message in qualified_name(key):
            report((*path, "key"), f"{key!r}: {message}")
    if isinstance(operator, str) and operator not in operators:
        report((*path, "operator"), not_one_of(operator, operators))
    elif operator in ("In", "NotIn") and not values:
        report((*path, "values"), f"must be specified when `operator` is {operator!r}")
    elif operator in ("Exists", "DoesNotExist") and values:
        report((*path, "values"), f"may not be specified when `operator` is {operator!r}")
    elif operator in ("Gt", "Lt") and (len(values) != 1 or not str(values[0]).lstrip("-").isdigit()):
        report((*path, "values"), f"must be a single integer when `operator` is {operator!r}")


def check_label_selector(value: Any, path: Path, report: Report) -> None:
    if not isinstance(value, Mapping):
        return
    check_labels(value.get("matchLabels"), (*path, "matchLabels"), report)
    expressions = value.get("matchExpressions")
    if isinstance(expressions, list):
        for index, expression in enumerate(expressions):
            _check_requirement(expression, (*path, "matchExpressions", index), report, _SELECTOR_OPERATORS)


def check_node_selector_requirement(value: Any, path: Path, report: Report) -> None:
    _check_requirement(value, path, report, _NODE_SELECTOR_OPERATORS)


# --- taints and tolerations --------------------------------------------------------------------------

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Exists", "Equal")


def check_taint(value: Any, path: Path, report: Report) -> None:
    if not isinstance(value, Mapping):
        return
    key, taint_value, effect = value.get("key"), value.get("value"), value.get("effect")
    if isinstance(key, str):
        for message in qualified_name(key):
            report((*path, "key"), f"{key!r}: {message}")
    if isinstance(taint_value, str):
        for message in label_value(taint_value):
            report((*path, "value"), f"{taint_value!r}: {message}")
    if isinstance(effect, str) and effect not in TAINT_EFFECTS:
        report((*path, "effect"), not_one_of(effect, TAINT_EFFECTS))


def check_node_spec(value: Any, path: Path, report: Report) -> None:
    """Taints are unique by key and effect."""
    taints = value.get("taints") if isinstance(value, Mapping) else None
    if not isinstance(taints, list):
        return
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(taints):
        if not isinstance(taint, Mapping):
            continue
        key, effect = taint.get("key"), taint.get("effect")
        if not isinstance(key, str) or not isinstance(effect, str):
            continue  # the schema layer reports the type
        pair = (key, effect)
        if pair in seen:
            report((*path, "taints", index),
                   f"taints must be unique by key and effect: {pair[0]!r} {pair[1]!r} repeats")
        seen.add(pair)


def check_toleration(value: Any, path: Path, report: Report) -> None:
    if not isinstance(value, Mapping):
        return
    key, operator, effect = value.get("key") or "", value.get("operator") or "Equal", value.get("effect") or ""
    toleration_value = value.get("value") or ""
    if not all(isinstance(given, str) for given in (key, operator, effect, toleration_value)):
        return  # the schema layer reports the type
    if key:
        for message in qualified_name(key):
            report((*path, "key"), f"{key!r}: {message}")
    if not key and operator != "Exists":
        report((*path, "operator"),
               "must be 'Exists' when `key` is empty, which means \"match all values and all keys\"")
    if value.get("tolerationSeconds") is not None and effect != "NoExecute":
        report((*path, "effect"), "must be 'NoExecute' when `tolerationSeconds` is set")
    if operator not in TOLERATION_OPERATORS:
        report((*path, "operator"), not_one_of(operator, TOLERATION_OPERATORS))
    elif operator == "Exists" and toleration_value:
        report((*path, "value"), "must be empty when `operator` is 'Exists'")
    elif operator == "Equal":
        for message in label_value(toleration_value):
            report((*path, "value"), f"{toleration_value!r}: {message}")
    if effect and effect not in TAINT_EFFECTS:
        report((*path, "effect"), not_one_of(effect, TAINT_EFFECTS))


