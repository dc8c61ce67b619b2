"""Validate the Kubernetes objects the cluster layer renders, offline, before anything is applied.

Two layers, both pure (no cluster, no network):

* The schema layer: each built-in object against the OpenAPI schema of its kind in the target
  Kubernetes minor, strictly (an unknown field is an error, as `kubectl apply --validate=strict`
  makes it). The schemas are the JSON files kubernetes-validate ships, one folder per minor
  (`kubernetes-json-schema/v1.34.0-local-strict/`): `_definitions.json` holds every definition, and
  `<kind>-<group>-<version>.json` one per kind, whose `$ref`s point into it. kubernetes-validate's
  own `validate()` re-reads both files for every object; here each minor's definitions are read once,
  each kind's schema is read and compiled once (its `$ref`s inlined, so validation never resolves a
  reference), and the validator is reused. A kind file is used only if its
  `x-kubernetes-group-version-kind` names exactly the object's group, version and kind (the file
  names drop the group's domain, so `scheduling.volcano.sh/v1beta1` would otherwise find
  `scheduling.k8s.io`'s files). Custom resources are validated against the openAPIV3Schema of the
  CustomResourceDefinitions this project writes (infra/cluster/crds/), made strict the same way,
  with metadata checked as the built-in ObjectMeta.
* The project's own checks (rules.py beside this module, and the modules it gathers): what the API
  server enforces but the schemas do not say (enumerations, quantity grammar, label and name syntax,
  ...), run wherever the definition they belong to occurs: each object is walked along its schema,
  visiting only the parts that can hold a checked definition.

An object with no schema (an unknown apiVersion or kind) is a Problem, never a silent pass.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any

import jsonschema
import yaml

from infra.cluster.validation import rules
from infra.cluster.validation.fields import check_name
from infra.cluster.validation.syntax import Check, Path, Report

SCHEMA_PACKAGE = "kubernetes_validate"
CRD_FOLDER = FilePath(__file__).parent.parent / "crds"
_MESSAGE_MAX = 400


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with one object. `path` is the field, as Kubernetes writes field paths:
    `spec.taints[0].effect`, `metadata.labels[app.kubernetes.io/name]`; empty for the whole object."""

    kind: str
    namespace: str  # "" when the object names none
    name: str
    path: str
    message: str

    @property
    def object(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"

    def __str__(self) -> str:
        return f"{self.object}: {self.path}: {self.message}" if self.path else f"{self.object}: {self.message}"


def render_path(path: Path) -> str:
    """("spec", "taints", 0, "effect") -> spec.taints[0].effect; keys that are not identifiers go in brackets."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part}]"
    return text


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")


# --- versions ----------------------------------------------------------------------------------------


@functools.cache
def _schema_folders() -> dict[tuple[int, int], FilePath]:
    spec = importlib.util.find_spec(SCHEMA_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{SCHEMA_PACKAGE} is not installed; it ships the Kubernetes schemas (pip install -e .)")
    root = FilePath(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"
    folders = {}
    for folder in root.iterdir():
        match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local-strict", folder.name)
        if match:
            folders[int(match[1]), int(match[2])] = folder
    return dict(sorted(folders.items()))


def supported_versions() -> list[str]:
    """The Kubernetes minors with schemas here, oldest first: ["1.25", ..., "1.37"]."""
    return [f"{major}.{minor}" for major, minor in _schema_folders()]


def _minor(kube_version: str) -> tuple[int, int]:
    """ "1.34.2", "v1.34", "1.34.0-rc.1" -> (1, 34); ValueError naming the supported range otherwise."""
    supported = supported_versions()
    span = f"{supported[0]} to {supported[-1]}" if supported else "none"
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][0-9A-Za-z.+-]*)?", kube_version.strip())
    if not match:
        raise ValueError(f"{kube_version!r} is not a Kubernetes version (write e.g. 1.34.2); schemas exist for {span}")
    minor = int(match[1]), int(match[2])
    if minor not in _schema_folders():
        raise ValueError(f"no schemas for Kubernetes {minor[0]}.{minor[1]} ({kube_version!r}): "
                         f"{SCHEMA_PACKAGE} ships {span}")
    return minor


# --- custom resource definitions ---------------------------------------------------------------------


@functools.cache
def _crd_documents() -> tuple[dict[str, Any], ...]:
    documents: list[dict[str, Any]] = []
    for file in sorted(CRD_FOLDER.glob("*.yaml")):
        documents.extend(document for document in yaml.safe_load_all(file.read_text()) if document)
    return tuple(documents)


def crd_definitions() -> list[dict[str, Any]]:
    """The CustomResourceDefinitions this project writes (Volcano Queue, Multus NetworkAttachmentDefinition,
    VolumeSnapshotClass), as apiextensions.k8s.io/v1 objects: what validates custom resources here, and
    what a test API server installs. Fresh copies: callers may change them."""
    return [copy.deepcopy(document) for document in _crd_documents()]


@functools.cache
def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema, for every served version of every CRD."""
    schemas = {}
    for crd in _crd_documents():
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served", True):
                schemas[f"{spec['group']}/{version['name']}", spec["names"]["kind"]] = \
                    version["schema"]["openAPIV3Schema"]
    return schemas


_INT_FORMATS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_ANNOTATIONS = frozenset({"description", "default", "example", "externalDocs", "title", "nullable", "format"})


def strict_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAPI v3 structural schema (a CRD's) as a JSON Schema that rejects unknown fields.

    The API server prunes fields a structural schema does not name; `--validate=strict` makes them
    errors, as here: an object schema gets additionalProperties: false unless it declares its own
    or x-kubernetes-preserve-unknown-fields. nullable, x-kubernetes-int-or-string and the int32/int64
    formats become what they mean. CEL rules (x-kubernetes-validations) are not evaluated.
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS or key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {name: strict_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            out[key] = strict_json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [strict_json_schema(sub) for sub in value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            bound = schema.get("minimum" if key == "exclusiveMinimum" else "maximum")
            if value and bound is not None:
                out[key] = bound
        else:
            out[key] = value
    if value_type := out.get("type"):
        if schema.get("nullable"):
            out["type"] = [value_type, "null"]
        if value_type == "object" and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if value_type == "integer" and schema.get("format") in _INT_FORMATS:
        low, high = _INT_FORMATS[schema["format"]]
        out["minimum"], out["maximum"] = max(out.get("minimum", low), low), min(out.get("maximum", high), high)
    for bound in ("minimum", "maximum"):  # a bound replaced by its exclusive form above
        if bound in out and f"exclusive{bound.title()}" in out:
            del out[bound]
    return out


# --- one Kubernetes minor's schemas ------------------------------------------------------------------


@dataclass(eq=False)
class _Plan:
    """Where in a definition the project's checks apply: this value's checks, then the children to visit."""

    checks: tuple[Check, ...] = ()
    properties: dict[str, _Plan] = field(default_factory=dict)
    additional: _Plan | None = None
    items: _Plan | None = None


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


class _Schemas:
    """One minor's schemas, read when first needed and kept: definitions, validators, check plans."""

    def __init__(self, folder: FilePath, label: str):
        self.folder, self.label = folder, label
        self._definitions: dict[str, Any] | None = None
        self._by_gvk: dict[tuple[str, str, str], str] = {}
        self._inlined: dict[str, dict[str, Any]] = {}
        self._validators: dict[tuple[str, str], jsonschema.protocols.Validator | None] = {}
        self._plans: dict[str, _Plan] = {}
        self._relevant: frozenset[str] | None = None

    @property
    def definitions(self) -> dict[str, Any]:
        if self._definitions is None:
            self._definitions = json.loads((self.folder / "_definitions.json").read_text())["$defs"]
            for name, definition in self._definitions.items():
                for gvk in definition.get("x-kubernetes-group-version-kind", ()):
                    self._by_gvk[gvk["group"], gvk["version"], gvk["kind"]] = name
        return self._definitions

    def definition_name(self, api_version: str, kind: str) -> str | None:
        """The OpenAPI definition of a built-in kind, or None if this minor has no such kind."""
        group, _, version = api_version.rpartition("/")
        _ = self.definitions
        return self._by_gvk.get((group, version, kind))

    # schema layer

    def _inline(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        """A copy with every $ref replaced by the (shared, possibly cyclic) inlined definition. In these
        schemas a $ref's siblings are only annotations, so nothing is lost; descriptions are dropped."""
        reference = schema.get("$ref")
        if isinstance(reference, str):
            return self._inlined_definition(reference.rpartition("/")[2])
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in ("description", "$schema", "$id") or key.startswith("x-kubernetes-"):
                continue
            if key == "properties":
                out[key] = {name: self._inline(sub) for name, sub in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
                out[key] = self._inline(value)
            elif key == "oneOf" and (types := _disjoint_types(value)) is not None and "type" not in schema:
                out["type"] = types
            elif key in ("allOf", "anyOf", "oneOf"):
                out[key] = [self._inline(sub) for sub in value]
            else:
                out[key] = value
        return out

    def _inlined_definition(self, name: str) -> dict[str, Any]:
        inlined = self._inlined.get(name)
        if inlined is None:
            inlined = self._inlined[name] = {}  # placed first, so a recursive definition refers to itself
            inlined.update(self._inline(self.definitions[name]))
        return inlined

    def validator(self, api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
        """The strict validator of a built-in kind or of one of the project's CRDs; None: no schema."""
        key = (api_version, kind)
        if key not in self._validators:
            validator = self._builtin_validator(api_version, kind)
            self._validators[key] = validator if validator is not None else self._custom_validator(api_version, kind)
        return self._validators[key]

    def _builtin_validator(self, api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
        group, _, version = api_version.rpartition("/")
        if self.definition_name(api_version, kind) is None:
            return None
        # kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1, v1 -> v1
        prefix = f"{group.split('.')[0]}-" if group else ""
        file = self.folder / f"{kind.lower()}-{prefix}{version}.json"
        if not file.exists():
            return None
        schema = json.loads(file.read_text())
        if {"group": group, "version": version, "kind": kind} not in schema.get("x-kubernetes-group-version-kind", []):
            return None
        return jsonschema.Draft202012Validator(self._inline(schema))

    def _custom_validator(self, api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
        source = _crd_schemas().get((api_version, kind))
        if source is None:
            return None
        schema = strict_json_schema(source)
        properties = schema.setdefault("properties", {})
        properties["apiVersion"] = {"const": api_version}
        properties["kind"] = {"const": kind}
        properties["metadata"] = self._inlined_definition(_OBJECT_META)
        schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind"})
        return jsonschema.Draft202012Validator(schema)

    # the project's checks

    @property
    def relevant(self) -> frozenset[str]:
        """Definitions that are checked or can contain a checked one (found backwards over the $ref graph)."""
        if self._relevant is None:
            referenced_by: dict[str, set[str]] = {}
            for name, definition in self.definitions.items():
                for target in _references(definition):
                    referenced_by.setdefault(target, set()).add(name)
            found = {name for name in rules.DEFINITION_CHECKS if name in self.definitions}
            queue = list(found)
            while queue:
                for referrer in referenced_by.get(queue.pop(), ()):
                    if referrer not in found:
                        found.add(referrer)
                        queue.append(referrer)
            self._relevant = frozenset(found)
        return self._relevant

    def plan(self, name: str) -> _Plan | None:
        return self._definition_plan(name) if name in self.relevant else None

    def _definition_plan(self, name: str) -> _Plan:
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = _Plan(rules.DEFINITION_CHECKS.get(name, ()))  # first, for recursion
            body = self._compile(self.definitions[name])
            if body is not None:
                plan.properties, plan.additional, plan.items = body.properties, body.additional, body.items
        return plan

    def _compile(self, schema: Mapping[str, Any]) -> _Plan | None:
        reference = schema.get("$ref")
        if isinstance(reference, str):
            return self.plan(reference.rpartition("/")[2])
        properties = {}
        for key, sub in (schema.get("properties") or {}).items():
            if (compiled := self._compile(sub)) is not None:
                properties[key] = compiled
        additional = schema.get("additionalProperties")
        items = schema.get("items")
        additional_plan = self._compile(additional) if isinstance(additional, Mapping) else None
        items_plan = self._compile(items) if isinstance(items, Mapping) else None
        if not properties and additional_plan is None and items_plan is None:
            return None
        return _Plan((), properties, additional_plan, items_plan)


def _disjoint_types(branches: list[Any]) -> list[str] | None:
    """Quantity and IntOrString are oneOf [{type: [string, null]}, {type: [number, null]}]: exactly one
    branch matches a string or a number, and null matches both (so none). That is {type: [string, number]},
    which validates without building an error for the branch that fails: the same verdict, faster.
    None when the branches are anything else, or their types overlap other than exactly (number, integer)."""
    counts: dict[str, int] = {}
    for branch in branches:
        if not isinstance(branch, Mapping) or set(branch) != {"type"}:
            return None
        for value_type in branch["type"] if isinstance(branch["type"], list) else [branch["type"]]:
            counts[value_type] = counts.get(value_type, 0) + 1
    if {"number", "integer"} <= counts.keys():
        return None  # an integer is also a number: the branches would overlap
    return [value_type for value_type, count in counts.items() if count == 1]


def _references(schema: Any) -> Iterator[str]:
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rpartition("/")[2]
            elif key != "enum":
                yield from _references(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _references(item)


@functools.lru_cache(maxsize=4)  # a minor's definitions take ~15 MiB; a program targets one or two
def _schemas(minor: tuple[int, int]) -> _Schemas:
    return _Schemas(_schema_folders()[minor], f"{minor[0]}.{minor[1]}")


def _walk(value: Any, plan: _Plan, path: Path, report: Report) -> None:
    for check in plan.checks:
        check(value, path, report)
    if isinstance(value, Mapping):
        for key, child_plan in plan.properties.items():
            child = value.get(key)
            if child is not None:
                _walk(child, child_plan, (*path, key), report)
        if plan.additional is not None:
            for key, child in value.items():
                if child is not None:
                    _walk(child, plan.additional, (*path, key), report)
    elif isinstance(value, list) and plan.items is not None:
        for index, child in enumerate(value):
            _walk(child, plan.items, (*path, index), report)


# --- validation --------------------------------------------------------------------------------------


def _schema_messages(validator: jsonschema.protocols.Validator, obj: Mapping[str, Any]) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for error in validator.iter_errors(obj):
        path: Path = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping) \
                and isinstance(error.schema, Mapping):
            known = error.schema.get("properties") or {}
            found.extend(((*path, extra), f"unknown field {extra!r}") for extra in error.instance if extra not in known)
        elif error.validator in ("oneOf", "anyOf") and error.context \
                and all(sub.validator == "type" for sub in error.context):
            types: list[str] = []
            for sub in error.context:
                allowed = sub.validator_value if isinstance(sub.validator_value, list) else [sub.validator_value]
                types.extend(str(t) for t in allowed if t not in types and t != "null")
            found.append((path, f"{error.instance!r} is not of type {' or '.join(map(repr, types))}"))
        elif error.validator == "pattern":
            found.append((path, f"{error.instance!r} does not match the pattern {error.validator_value}"))
        else:
            found.append((path, error.message))
    return sorted(found, key=lambda item: render_path(item[0]))


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    kind, namespace, name = obj.get("kind"), meta.get("namespace"), meta.get("name")
    return (kind if isinstance(kind, str) and kind else "<no kind>",
            namespace if isinstance(namespace, str) else "",
            name if isinstance(name, str) and name else "<no name>")


def _shorten(message: str) -> str:
    return message if len(message) <= _MESSAGE_MAX else message[: _MESSAGE_MAX - 3] + "..."


def _object_problems(obj: Any, schemas: _Schemas, *, schema: bool, own: bool) -> list[Problem]:
    if not isinstance(obj, Mapping):
        return [Problem("<not an object>", "", "<no name>", "", f"expected a mapping, got {type(obj).__name__}")]
    kind, namespace, name = _identity(obj)
    problems: list[Problem] = []

    def report(path: Path, message: str) -> None:
        problems.append(Problem(kind, namespace, name, render_path(path), _shorten(message)))

    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version or not isinstance(obj.get("kind"), str) or not obj["kind"]:
        if schema:
            report((), "apiVersion and kind are required")
        return problems
    if schema:
        validator = schemas.validator(api_version, kind)
        if validator is None:
            custom = ", ".join(sorted(f"{a} {k}" for a, k in _crd_schemas()))
            report((), f"no schema for {api_version} {kind}: not a built-in kind of Kubernetes {schemas.label}, "
                       f"nor a custom resource this project defines ({custom})")
        else:
            for path, message in _schema_messages(validator, obj):
                report(path, message)
    if own:
        check_name(kind, obj, report)
        definition = schemas.definition_name(api_version, kind)
        plan = schemas.plan(definition) if definition else None
        if plan is not None:
            _walk(obj, plan, (), report)
        else:  # a custom resource (or an unknown kind): its metadata is still an ObjectMeta
            meta_plan = schemas.plan(_OBJECT_META)
            if meta_plan is not None and obj.get("metadata") is not None:
                _walk(obj["metadata"], meta_plan, ("metadata",), report)
            for check in rules.CUSTOM_CHECKS.get((api_version, kind), ()):
                check(obj, (), report)
    return problems


def _validate(objects: Iterable[Mapping[str, Any]], kube_version: str, *, schema: bool, own: bool) -> list[Problem]:
    schemas = _schemas(_minor(kube_version))
    problems: list[Problem] = []
    for obj in objects:
        problems.extend(_object_problems(obj, schemas, schema=schema, own=own))
    return problems


def validate(objects: Iterable[Mapping[str, Any]], kube_version: str) -> list[Problem]:
    """Every problem of every object for Kubernetes `kube_version` ("1.34.2": the 1.34 schemas), in the
    objects' order; [] when all are valid. ValueError if no schemas exist for that minor."""
    return _validate(objects, kube_version, schema=True, own=True)


def schema_problems(objects: Iterable[Mapping[str, Any]], kube_version: str) -> list[Problem]:
    """The schema layer alone (strict OpenAPI / CRD schemas, unknown kinds)."""
    return _validate(objects, kube_version, schema=True, own=False)


def project_problems(objects: Iterable[Mapping[str, Any]], kube_version: str) -> list[Problem]:
    """The project's own checks alone (infra/cluster/validation/rules.py and the modules it gathers)."""
    return _validate(objects, kube_version, schema=False, own=True)
