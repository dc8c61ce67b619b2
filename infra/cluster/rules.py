"""The project's own checks: what the API server enforces but its OpenAPI schemas do not say.

Kubernetes' published schemas type every field and nothing more: a taint's effect is "a string", a
quantity is "a string or a number", a label is any string. The API server's Go validation enforces
the rest. These checks restate the parts of it the cluster layer can get wrong, with the server's
wording, so a typo is caught before anything is applied.

Checks are keyed by the OpenAPI definition they apply to (`DEFINITION_CHECKS`): validate.py walks
each object along its schema and runs a definition's checks wherever that definition occurs, so the
quantity grammar applies to container resources, quotas, limit ranges, claims and node capacity
alike, and label syntax to every ObjectMeta, selector and node selector, in every kind. Custom
resources have no such definitions; their checks are keyed by apiVersion and kind (`CUSTOM_CHECKS`).
Every check tolerates values of the wrong type: the schema layer reports those.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, DecimalException
from typing import Any, NamedTuple, Protocol

PathPart = str | int
Path = tuple[PathPart, ...]


class Report(Protocol):
    def __call__(self, path: Path, message: str) -> None: ...


Check = Callable[[Any, Path, Report], None]

# --- syntax, worded as apimachinery's validation words it ------------------------------------------

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
ANNOTATIONS_TOTAL_MAX = 256 * 1024  # bytes, keys and values together
CRONJOB_NAME_MAX = 52  # the Job controller appends an 11-character suffix to the CronJob's name

_SUBDOMAIN_WORDS = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character")
_LABEL_WORDS = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character")
_DNS1035_WORDS = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                  "start with an alphabetic character, and end with an alphanumeric character")
_NAME_PART_WORDS = ("must consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")


def _name_problems(value: str, limit: int, pattern: re.Pattern[str], words: str) -> list[str]:
    problems = []
    if len(value) > limit:
        problems.append(f"must be no more than {limit} characters")
    if not pattern.fullmatch(value):
        problems.append(words)
    return problems


def dns1123_subdomain(value: str) -> list[str]:
    return _name_problems(value, DNS1123_SUBDOMAIN_MAX, _DNS1123_SUBDOMAIN, _SUBDOMAIN_WORDS)


def dns1123_label(value: str) -> list[str]:
    return _name_problems(value, DNS1123_LABEL_MAX, _DNS1123_LABEL, _LABEL_WORDS)


def dns1035_label(value: str) -> list[str]:
    return _name_problems(value, DNS1123_LABEL_MAX, _DNS1035_LABEL, _DNS1035_WORDS)


def path_segment_name(value: str) -> list[str]:
    """RBAC objects' names (e.g. system:controller:foo): anything that is safe in a URL path segment."""
    if value in (".", ".."):
        return [f"may not be {value!r}"]
    return [f"may not contain {bad!r}" for bad in ("/", "%") if bad in value]


def cronjob_name(value: str) -> list[str]:
    problems = dns1123_subdomain(value)
    if len(value) > CRONJOB_NAME_MAX:
        problems.append(f"must be no more than {CRONJOB_NAME_MAX} characters")
    return problems


def qualified_name(value: str) -> list[str]:
    """A label, annotation or taint key: an optional DNS-subdomain prefix and '/', then a name of <= 63."""
    parts = value.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
    else:
        return ["a qualified name must consist of an optional DNS subdomain prefix and '/', then a name part "
                "(e.g. 'example.com/MyName')"]
    problems = [f"prefix part {message}" for message in dns1123_subdomain(prefix)] if prefix else []
    if not name:
        problems.append("name part must be non-empty")
    else:
        if len(name) > QUALIFIED_NAME_MAX:
            problems.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
        if not _QUALIFIED_NAME_PART.fullmatch(name):
            problems.append(f"name part {_NAME_PART_WORDS}")
    return problems


def label_value(value: str) -> list[str]:
    problems = []
    if len(value) > LABEL_VALUE_MAX:
        problems.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.fullmatch(value):
        problems.append(f"a valid label must be an empty string or {_NAME_PART_WORDS}")
    return problems


def not_one_of(value: object, allowed: Iterable[str]) -> str:
    """The schema layer's enum wording, so both layers read alike."""
    return f"{value!r} is not one of {list(allowed)!r}"


# --- quantities --------------------------------------------------------------------------------------

# <quantity> ::= <sign>? <number> <suffix>; number: 1, 1., 1.5, .5; suffix: binary SI (Ki..Ei), decimal
# SI (n u m "" k M G T P E) or a decimal exponent (e3, E-2). Kubernetes parses the exponent as an int32.
_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_MULTIPLIERS = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal("1e3"),
    "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    **{f"{prefix}i": Decimal(2) ** (10 * power) for power, prefix in enumerate("KMGTPE", start=1)},
}
_INT32_MAX = 2**31 - 1
_QUANTITY_WORDS = ("quantities must match the regular expression "
                   r"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (e.g. 500m, 2, 1.5Gi, 1e3)")


def parse_quantity(value: object) -> Decimal:
    """Return a Kubernetes quantity (a string such as "250m", "4Gi", "1e3", or a JSON number) as a number.

    The full grammar of the API server (signs, exponents, n and u), which is wider than what the
    inventory accepts (infra.knowledge.units.parse_quantity). Raises ValueError with the server's wording.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a quantity: {_QUANTITY_WORDS}")
    text = value if isinstance(value, str) else repr(value)
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise ValueError(f"{value!r} is not a quantity: {_QUANTITY_WORDS}")
    sign, number, suffix = match[1], match[2], match[3] or ""
    try:
        if suffix[:1] in ("e", "E") and suffix not in _MULTIPLIERS:
            exponent = int(suffix[1:])
            if abs(exponent) > _INT32_MAX:
                raise ValueError(f"{value!r} is not a quantity: the exponent is out of range")
            magnitude = Decimal(number).scaleb(exponent)
        else:
            magnitude = Decimal(number) * _MULTIPLIERS[suffix]
    except DecimalException as error:  # an exponent beyond what a decimal holds
        raise ValueError(f"{value!r} is not a quantity: it is out of range") from error
    return -magnitude if sign == "-" else magnitude


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


def _quantities(values: Any) -> dict[str, Decimal]:
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
    requests, limits = _quantities(value.get("requests")), _quantities(value.get("limits"))
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


# --- enumerations ------------------------------------------------------------------------------------


class Enum(NamedTuple):
    values: tuple[str, ...]
    empty_is_unset: bool = False  # a plain string the API server defaults when empty (not a pointer)


_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL = Enum(("Always", "IfNotPresent", "Never"), empty_is_unset=True)
_TERMINATION_MESSAGE = Enum(("File", "FallbackToLogsOnError"), empty_is_unset=True)
_PROTOCOL = Enum(("TCP", "UDP", "SCTP"), empty_is_unset=True)
_PREEMPTION = Enum(("PreemptLowerPriority", "Never"))
_FAILURE = Enum(("Fail", "Ignore"))
_MATCH = Enum(("Exact", "Equivalent"))
_TRAFFIC = Enum(("Cluster", "Local"))

# OpenAPI definition -> field -> allowed values. The definitions are stable across 1.25-1.37.
ENUMS: dict[str, dict[str, Enum]] = {
    "io.k8s.api.core.v1.Container": {"imagePullPolicy": _PULL, "terminationMessagePolicy": _TERMINATION_MESSAGE},
    "io.k8s.api.core.v1.EphemeralContainer": {"imagePullPolicy": _PULL,
                                               "terminationMessagePolicy": _TERMINATION_MESSAGE},
    "io.k8s.api.core.v1.PodSpec": {
        "restartPolicy": Enum(_RESTART_POLICIES, empty_is_unset=True),
        "dnsPolicy": Enum(("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"), empty_is_unset=True),
        "preemptionPolicy": _PREEMPTION,
    },
    "io.k8s.api.core.v1.ContainerPort": {"protocol": _PROTOCOL},
    "io.k8s.api.core.v1.ServicePort": {"protocol": _PROTOCOL},
    "io.k8s.api.core.v1.ServiceSpec": {
        "type": Enum(("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"), empty_is_unset=True),
        "sessionAffinity": Enum(("ClientIP", "None"), empty_is_unset=True),
        "externalTrafficPolicy": Enum(_TRAFFIC.values, empty_is_unset=True),
        "internalTrafficPolicy": _TRAFFIC,
        "ipFamilyPolicy": Enum(("SingleStack", "PreferDualStack", "RequireDualStack")),
    },
    "io.k8s.api.core.v1.LimitRangeItem": {"type": Enum(("Pod", "Container", "PersistentVolumeClaim"))},
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec": {"volumeMode": Enum(("Filesystem", "Block"))},
    "io.k8s.api.storage.v1.StorageClass": {
        "volumeBindingMode": Enum(("Immediate", "WaitForFirstConsumer")),
        "reclaimPolicy": Enum(("Delete", "Retain")),  # Recycle is for PersistentVolumes only
    },
    "io.k8s.api.scheduling.v1.PriorityClass": {"preemptionPolicy": _PREEMPTION},
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec": {"failurePolicy": _FAILURE},
    "io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicySpec": {"failurePolicy": _FAILURE},
    "io.k8s.api.admissionregistration.v1.MatchResources": {"matchPolicy": _MATCH},
    "io.k8s.api.admissionregistration.v1beta1.MatchResources": {"matchPolicy": _MATCH},
    "io.k8s.api.admissionregistration.v1.ValidatingWebhook": {
        "failurePolicy": _FAILURE, "matchPolicy": _MATCH, "sideEffects": Enum(("None", "NoneOnDryRun"))},
    "io.k8s.api.apps.v1.DeploymentStrategy": {"type": Enum(("Recreate", "RollingUpdate"), empty_is_unset=True)},
    "io.k8s.api.apps.v1.DaemonSetUpdateStrategy": {"type": Enum(("RollingUpdate", "OnDelete"), empty_is_unset=True)},
    "io.k8s.api.apps.v1.StatefulSetSpec": {
        "podManagementPolicy": Enum(("OrderedReady", "Parallel"), empty_is_unset=True)},
    "io.k8s.api.batch.v1.CronJobSpec": {"concurrencyPolicy": Enum(("Allow", "Forbid", "Replace"), empty_is_unset=True)},
}

# Lists whose every item is one of the values.
_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
ENUM_LISTS: dict[str, dict[str, tuple[str, ...]]] = {
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec": {"accessModes": _ACCESS_MODES},
    "io.k8s.api.core.v1.PersistentVolumeSpec": {"accessModes": _ACCESS_MODES},
}


def _enum_check(fields: Mapping[str, Enum]) -> Check:
    def check(value: Any, path: Path, report: Report) -> None:
        if not isinstance(value, Mapping):
            return
        for field, enum in fields.items():
            given = value.get(field)
            if not isinstance(given, str) or (given == "" and enum.empty_is_unset):
                continue
            if given not in enum.values:
                report((*path, field), not_one_of(given, enum.values))

    return check


def _enum_list_check(fields: Mapping[str, tuple[str, ...]]) -> Check:
    def check(value: Any, path: Path, report: Report) -> None:
        if not isinstance(value, Mapping):
            return
        for field, allowed in fields.items():
            items = value.get(field)
            if isinstance(items, list):
                for index, item in enumerate(items):
                    if isinstance(item, str) and item not in allowed:
                        report((*path, field, index), not_one_of(item, allowed))

    return check


# --- kinds -------------------------------------------------------------------------------------------

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


def _template_restart_policy(allowed: tuple[str, ...], required: bool) -> Check:
    def check(value: Any, path: Path, report: Report) -> None:
        template = value.get("template") if isinstance(value, Mapping) else None
        spec = template.get("spec") if isinstance(template, Mapping) else None
        if not isinstance(spec, Mapping):
            return
        policy = spec.get("restartPolicy")
        where = (*path, "template", "spec", "restartPolicy")
        if policy in (None, "") and required:
            report(where, f"required: {' or '.join(allowed)}")
        elif policy in _RESTART_POLICIES and policy not in allowed:  # others: PodSpec's enumeration says so
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


_QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_ALWAYS = _template_restart_policy(("Always",), required=False)


def _merge(*tables: Mapping[str, Check]) -> dict[str, tuple[Check, ...]]:
    merged: dict[str, tuple[Check, ...]] = {}
    for table in tables:
        for name, check in table.items():
            merged[name] = (*merged.get(name, ()), check)
    return merged


DEFINITION_CHECKS: dict[str, tuple[Check, ...]] = _merge(
    {_QUANTITY_DEF: check_quantity,
     "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": check_object_meta,
     "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector": check_label_selector,
     "io.k8s.api.core.v1.NodeSelectorRequirement": check_node_selector_requirement,
     "io.k8s.api.core.v1.ResourceRequirements": check_resource_requirements,
     "io.k8s.api.core.v1.Taint": check_taint,
     "io.k8s.api.core.v1.NodeSpec": check_node_spec,
     "io.k8s.api.core.v1.Toleration": check_toleration,
     "io.k8s.api.core.v1.Namespace": check_namespace,
     "io.k8s.api.scheduling.v1.PriorityClass": check_priority_class,
     "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": check_policy_binding_spec,
     "io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyBindingSpec": check_policy_binding_spec,
     "io.k8s.api.apps.v1.DeploymentSpec": _ALWAYS,
     "io.k8s.api.apps.v1.DaemonSetSpec": _ALWAYS,
     "io.k8s.api.apps.v1.StatefulSetSpec": _ALWAYS,
     "io.k8s.api.apps.v1.ReplicaSetSpec": _ALWAYS,
     "io.k8s.api.batch.v1.JobSpec": _template_restart_policy(("OnFailure", "Never"), required=True),
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition":
         check_custom_resource_definition},
    {"io.k8s.api.core.v1.PodSpec": lambda value, path, report: check_labels(
        value.get("nodeSelector") if isinstance(value, Mapping) else None, (*path, "nodeSelector"), report),
     "io.k8s.api.core.v1.ServiceSpec": lambda value, path, report: check_labels(
         value.get("selector") if isinstance(value, Mapping) else None, (*path, "selector"), report)},
    {name: _enum_check(fields) for name, fields in ENUMS.items()},
    {name: _enum_list_check(fields) for name, fields in ENUM_LISTS.items()},
)


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
    capability, deserved, guaranteed = (_quantities(values) for _, values in lists.values())
    for name, amount in guaranteed.items():
        if name not in deserved:
            report((*path, "spec", "deserved", name), f"deserved[{name}] must be set, >= guarantee[{name}]")
        elif deserved[name] < amount:
            report((*path, "spec", "deserved", name), f"deserved[{name}] must be >= guarantee[{name}]")
    for name, amount in deserved.items():
        if name in capability and amount > capability[name]:
            report((*path, "spec", "deserved", name), f"deserved[{name}] must be <= capability[{name}]")


CUSTOM_CHECKS: dict[tuple[str, str], tuple[Check, ...]] = {
    ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"): (check_network_attachment_definition,),
    ("scheduling.volcano.sh/v1beta1", "Queue"): (check_queue,),
}
