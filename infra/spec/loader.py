"""Read an Ansible inventory folder into one Environment, the way Ansible itself would read it.

Layout (standard Ansible; nothing here needs a plugin):

    inventories/<env>/hosts.yml             all -> children -> node_pools -> children -> <pool> -> hosts
    inventories/<env>/group_vars/all.yml    ClusterVars (or a folder group_vars/all/ of several files)
    inventories/<env>/group_vars/<pool>.yml PoolVars
    inventories/<env>/host_vars/<host>.yml  HostVars (optional; inline host vars in hosts.yml work too)

Every problem that makes the input unusable (missing files, YAML syntax, unknown keys, wrong types)
is collected and raised together as one SpecError, each line naming the file and the field.
"""

from __future__ import annotations

import difflib
import gc
import re
import string
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from infra.spec.models import ClusterVars, HostVars, PoolVars

POOLS_GROUP = "node_pools"
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_YAML_SUFFIXES = (".yml", ".yaml")
UNREADABLE = object()  # what _read_yaml returns for a file that could not be parsed


class SpecError(Exception):
    """The inventory cannot be used at all; `problems` holds one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Host:
    name: str
    pool: str
    vars: HostVars
    hosts_file: str
    sources: dict[str, str] = field(default_factory=dict)  # variable -> host_vars file that set it
    address: str | None = None

    def source(self, key: str) -> str:
        """The file that sets the host variable `key`: its host_vars file, else hosts.yml."""
        return self.sources.get(key, self.hosts_file)


@dataclass(frozen=True)
class Pool:
    name: str
    vars: PoolVars
    hosts: tuple[Host, ...]
    source: str


@dataclass(frozen=True)
class Environment:
    """A loaded inventory: the cluster's variables, its pools and their hosts, and where each came from."""

    name: str
    path: Path
    cluster: ClusterVars
    pools: dict[str, Pool]
    cluster_sources: dict[str, str] = field(default_factory=dict)

    def cluster_source(self, key: str) -> str:
        """The file that set the cluster variable `key` (group_vars/all.yml unless split into a folder)."""
        return self.cluster_sources.get(key, str(self.path / "group_vars" / "all.yml"))

    @property
    def hosts(self) -> list[Host]:
        return [host for pool in self.pools.values() for host in pool.hosts]


def load_environment(path: str | Path) -> Environment:
    """Load and validate the inventory folder at `path`; raise SpecError listing every problem.

    The cyclic garbage collector is paused meanwhile: loading builds one small dict per host and
    keeps all of them, so collections find nothing to free and only add time (3x at 20,000 hosts).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load(Path(path))
    finally:
        if collecting:
            gc.enable()


def _load(root: Path) -> Environment:
    if not root.is_dir():
        raise SpecError([f"{root}: no such inventory folder; pass a folder such as inventories/example"])
    problems: list[str] = []

    hosts_file = _first_existing(root, "hosts")
    if hosts_file is None:
        raise SpecError([f"{root}: no hosts.yml; an inventory folder needs hosts.yml and group_vars/all.yml"])
    inventory = _read_yaml(hosts_file, problems)
    groups = {} if inventory is UNREADABLE else _read_groups(inventory, hosts_file, problems)
    pool_hosts, inline_vars = _pool_members(groups, hosts_file, problems)

    unreadable: set[str] = set()  # groups whose group_vars file failed to parse
    unreadable_hosts: set[str] = set()
    group_vars = _read_vars_dir(root / "group_vars", problems, unreadable)
    host_vars = _read_vars_dir(root / "host_vars", problems, unreadable_hosts)

    cluster: ClusterVars | None = None
    cluster_sources: dict[str, str] = {}
    if "all" not in group_vars:
        problems.append(f"{root / 'group_vars' / 'all.yml'}: missing; it holds the cluster-wide variables")
    else:
        values, cluster_sources = group_vars.pop("all")
        if "all" not in unreadable:
            cluster = _validate(ClusterVars, values, cluster_sources, problems, root / "group_vars" / "all.yml")

    pools: dict[str, Pool] = {}
    for pool_name, members in pool_hosts.items():
        if pool_name not in group_vars:
            problems.append(
                f"{root / 'group_vars' / (pool_name + '.yml')}: missing; pool {pool_name} needs its "
                "variables (at least pool_kind and machine)"
            )
            continue
        values, pool_sources = group_vars.pop(pool_name)
        pool_file = next(iter(pool_sources.values()), str(root / "group_vars" / f"{pool_name}.yml"))
        pool_vars = None if pool_name in unreadable else _validate(PoolVars, values, pool_sources, problems, pool_file)
        hosts = []
        for host_name in members:
            host = None if host_name in unreadable_hosts else _host(
                host_name, pool_name, inline_vars, host_vars, hosts_file, problems)
            if host is not None:
                hosts.append(host)
        if pool_vars is not None:
            pools[pool_name] = Pool(pool_name, pool_vars, tuple(hosts), pool_file)

    problems += _unclaimed(root, hosts_file, groups, group_vars, host_vars, pool_hosts)
    if problems or cluster is None:
        raise SpecError(problems)
    return Environment(root.name, root, cluster, pools, cluster_sources)


def _host(name: str, pool: str, inline_vars: dict, host_vars: dict, hosts_file: Path, problems: list[str]) -> Host | None:
    """One host: its inline variables from hosts.yml, overridden by host_vars/<name>.yml as in Ansible."""
    values = dict(inline_vars.get(name, {}))
    sources: dict[str, str] = {}
    if name in host_vars:
        extra, sources = host_vars[name]
        values.update(extra)
    address = values.get("ansible_host")
    values = {key: value for key, value in values.items() if not key.startswith("ansible_")}
    parsed = _validate(HostVars, values, sources, problems, hosts_file, owner=name)
    if parsed is None:
        return None
    return Host(name, pool, parsed, str(hosts_file), dict(sources), None if address is None else str(address))


def _unclaimed(root: Path, hosts_file: Path, groups: dict, group_vars: dict, host_vars: dict,
               pool_hosts: dict[str, list[str]]) -> list[str]:
    """Variables files that no pool or pool host reads: Ansible would apply them, infra.spec would not."""
    problems = []
    for group, (_, sources) in sorted(group_vars.items()):
        where = next(iter(sources.values()), str(root / "group_vars" / group))
        if group in groups:
            problems.append(
                f"{where}: group {group} is not a pool (a child of {POOLS_GROUP}); put cluster-wide "
                "variables in group_vars/all.yml and pool variables in group_vars/<pool>.yml"
            )
        else:
            problems.append(f"{where}: names no group of {hosts_file.name}; rename it after a pool or remove it")
    in_pools = {host for members in pool_hosts.values() for host in members}
    for host in sorted(set(host_vars) - in_pools):
        where = next(iter(host_vars[host][1].values()), str(root / "host_vars" / host))
        problems.append(f"{where}: host {host} is in no pool of {hosts_file.name}")
    return problems


# ---------------------------------------------------------------- YAML files


def _first_existing(folder: Path, stem: str) -> Path | None:
    for suffix in _YAML_SUFFIXES:
        candidate = folder / (stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def _read_yaml(path: Path, problems: list[str]) -> object:
    """The file's data (None for an empty file), or UNREADABLE with the reason added to `problems`."""
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problems.append(f"{where}: YAML syntax error: {getattr(error, 'problem', None) or error}")
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f"{path}: cannot be read: {error}")
    return UNREADABLE


def _read_vars_dir(folder: Path, problems: list[str], unreadable: set[str]) -> dict[str, tuple[dict, dict[str, str]]]:
    """Read group_vars/ or host_vars/: NAME.yml files and NAME/ folders of files, as Ansible does.

    Returns NAME -> (variables, variable -> file that set it); adds NAME to `unreadable` when one of
    its files could not be parsed, so its half-read variables are not validated into a cascade.
    """
    found: dict[str, tuple[dict, dict[str, str]]] = {}
    if not folder.is_dir():
        return found
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            files = sorted(p for p in entry.iterdir() if p.suffix in _YAML_SUFFIXES)
            name = entry.name
        elif entry.suffix in _YAML_SUFFIXES:
            files, name = [entry], entry.stem
        else:
            continue
        values, sources = found.setdefault(name, ({}, {}))
        for path in files:
            data = _read_yaml(path, problems)
            if data is UNREADABLE:
                unreadable.add(name)
                continue
            if data is None:  # an empty file, as Ansible allows
                continue
            if not isinstance(data, dict):
                unreadable.add(name)
                problems.append(f"{path}: must be a mapping of variable names to values")
                continue
            for key, value in data.items():
                if key in sources and sources[key] != str(path):
                    problems.append(f"{path}: {key}: also set in {sources[key]}; set each variable in one file")
                values[key] = value
                sources[key] = str(path)
    return found


# ---------------------------------------------------------------- hosts.yml


@dataclass
class _Group:
    hosts: dict[str, dict] = field(default_factory=dict)  # expanded host name -> inline variables
    children: list[str] = field(default_factory=list)


def _read_groups(inventory: object, hosts_file: Path, problems: list[str]) -> dict[str, _Group]:
    """Every group of an Ansible YAML inventory, host patterns expanded; problems for malformed parts."""
    groups: dict[str, _Group] = {}
    if not isinstance(inventory, dict) or set(inventory) != {"all"}:
        problems.append(f"{hosts_file}: must hold one top-level key, 'all:' (Ansible YAML inventory format)")
        return groups
    _collect_group("all", inventory["all"], groups, hosts_file, problems)
    return groups


def _collect_group(name: str, body: object, groups: dict[str, _Group], hosts_file: Path, problems: list[str]) -> None:
    group = groups.setdefault(name, _Group())
    if body is None:
        return
    if not isinstance(body, dict):
        problems.append(f"{hosts_file}: group {name} must be a mapping with hosts: and/or children:")
        return
    unknown = set(body) - {"hosts", "children", "vars"}
    if unknown:
        problems.append(f"{hosts_file}: group {name}: unknown keys {sorted(unknown)}; a group has hosts: and children:")
    if body.get("vars"):
        problems.append(
            f"{hosts_file}: group {name}: vars: in hosts.yml hide variables from review; move them to "
            f"group_vars/{name}.yml"
        )
    hosts, children = body.get("hosts") or {}, body.get("children") or {}
    if not isinstance(hosts, dict):
        problems.append(f"{hosts_file}: group {name}: hosts: must map host names to their variables (or nothing)")
        hosts = {}
    if not isinstance(children, dict):
        problems.append(f"{hosts_file}: group {name}: children: must map group names to groups")
        children = {}
    for pattern, host_vars in hosts.items():
        if host_vars is not None and not isinstance(host_vars, dict):
            problems.append(f"{hosts_file}: host {pattern}: variables must be a mapping, e.g. {{ansible_host: 10.0.0.1}}")
            host_vars = None
        for host in _expand_host_pattern(str(pattern), hosts_file, problems):
            group.hosts.setdefault(host, {}).update(host_vars or {})
    for child, child_body in children.items():
        group.children.append(str(child))
        _collect_group(str(child), child_body, groups, hosts_file, problems)


def _pool_members(groups: dict[str, _Group], hosts_file: Path, problems: list[str]) -> tuple[dict[str, list[str]], dict]:
    """Return (pool -> host names, host -> inline variables merged over every group that lists it)."""
    pools_group = groups.get(POOLS_GROUP)
    if pools_group is None or not pools_group.children:
        if groups:
            problems.append(f"{hosts_file}: no group {POOLS_GROUP} with pool groups as children; see README 'The spec'")
        return {}, {}
    inline: dict[str, dict] = {}
    for group in groups.values():
        for host, host_vars in group.hosts.items():
            inline.setdefault(host, {}).update(host_vars)

    members: dict[str, list[str]] = {}
    pool_of: dict[str, str] = {}
    for pool in pools_group.children:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", pool):
            problems.append(f"{hosts_file}: pool group {pool!r}: use lowercase letters, digits and '_' (e.g. gpu_inference)")
        body = groups[pool]
        if body.children:
            problems.append(f"{hosts_file}: pool {pool} has child groups; a pool lists its hosts directly")
        if not body.hosts:
            problems.append(f"{hosts_file}: pool {pool} has no hosts")
        for name in body.hosts:
            if not _NODE_NAME.match(name) or len(name) > 253:
                problems.append(f"{hosts_file}: host {name!r}: Kubernetes node names are lowercase DNS names")
            if name in pool_of and pool_of[name] != pool:
                problems.append(f"{hosts_file}: host {name} is in pools {pool_of[name]} and {pool}; a host belongs to one pool")
            pool_of[name] = pool
        members[pool] = list(body.hosts)
    return members, inline


def _expand_host_pattern(pattern: str, hosts_file: Path, problems: list[str]) -> list[str]:
    """Expand Ansible host ranges: gpu-[01:16] -> gpu-01 .. gpu-16; [a:c] for letters; [1:9:2] steps."""
    match = re.search(r"\[([^\]:]+):([^\]:]+)(?::(\d+))?\]", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    first, last, step = match[1], match[2], int(match[3] or 1)
    if first.isdigit() and last.isdigit():
        width = len(first) if first.startswith("0") else 0
        items = [str(n).zfill(width) for n in range(int(first), int(last) + 1, step)]
    elif len(first) == len(last) == 1 and first in string.ascii_letters and last in string.ascii_letters:
        items = [chr(c) for c in range(ord(first), ord(last) + 1, step)]
    else:
        problems.append(f"{hosts_file}: host pattern {pattern!r}: write numeric [01:16] or letter [a:f] ranges")
        return []
    return [name for item in items for name in _expand_host_pattern(head + item + tail, hosts_file, problems)]


# ---------------------------------------------------------------- validation messages


def _validate(model: type[BaseModel], values: dict, sources: dict[str, str], problems: list[str],
              default_file: Path | str, owner: str = ""):
    try:
        return model.model_validate(values)
    except ValidationError as error:
        for item in error.errors():
            loc = tuple(item["loc"])
            where = sources.get(str(loc[0]), str(default_file)) if loc else str(default_file)
            field_path = ".".join(str(part) for part in loc)
            if owner:
                field_path = f"{owner}.{field_path}" if field_path else owner
            problems.append(f"{where}: {field_path}: {_message(model, loc, item)}")
        return None


def _message(model: type[BaseModel], loc: tuple, item: dict) -> str:
    if item["type"] == "extra_forbidden":
        name = str(loc[-1])
        if model is ClusterVars and name in PoolVars.model_fields:
            return f"{name} is a pool variable; set it in group_vars/<pool>.yml"
        if model is HostVars and name in PoolVars.model_fields:
            return f"{name} is a pool variable; hosts may set only {', '.join(HostVars.model_fields)}"
        known = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(sorted(known))}"
        return f"unknown key; {hint}"
    if item["type"] == "missing":
        return "required; see README 'The spec'"
    if item["type"] in ("bool_type", "int_type", "float_type") and isinstance(item["input"], str):
        kind = {"bool_type": "true or false", "int_type": "a whole number", "float_type": "a number"}[item["type"]]
        return f"{item['input']!r} is a string; write {kind} without quotes"
    message = item["msg"].removeprefix("Value error, ")
    if item["type"] in ("literal_error", "string_pattern_mismatch"):
        return f"{item['input']!r}: {message}"
    return message


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the model nested at `loc` inside `model` (for "did you mean" hints)."""
    current: object = model
    for part in loc:
        if _is_model(current):
            info = current.model_fields.get(str(part))
            current = _unwrap_optional(info.annotation) if info else None
        else:  # a dict key or list index: step into the element type
            current = next((arg for arg in typing.get_args(current) if _is_model(arg)), None)
    return list(current.model_fields) if _is_model(current) else []


def _unwrap_optional(annotation: object) -> object:
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    return next((arg for arg in typing.get_args(annotation) if _is_model(arg)), annotation)


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
