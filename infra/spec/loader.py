"""Read an Ansible inventory folder into one Environment, the way Ansible itself reads it.

Layout (standard Ansible; nothing here needs a plugin):

    inventories/<env>/hosts.yml              all -> children -> node_pools -> children -> <pool> -> hosts
                                             (optional, Kubespray's) all -> children -> kube_control_plane, etcd
    inventories/<env>/group_vars/all.yml     ClusterVars
    inventories/<env>/group_vars/<pool>.yml  PoolVars
    inventories/<env>/host_vars/<host>.yml   HostVars (optional; inline host vars in hosts.yml work too)

Every vars file is found as Ansible's host_group_vars plugin finds it (parsing/dataloader.py
find_vars_files): for a group or host NAME the first of NAME, NAME.yml, NAME.yaml, NAME.json that
exists, a folder NAME/ read recursively (hidden and backup files skipped). Every other file of the
folder that Ansible would parse as a second inventory source is refused, as is anything Ansible
would read that infra.spec cannot interpret: the inventory is one source of truth only if both read
all of it. `ansible_*` variables pass through at every level, unvalidated, and
`Environment.host_variables()` gives each host's variables flattened exactly as Ansible does.

Every problem that makes the input unusable (missing files, YAML syntax, unknown keys, wrong types)
is collected and raised together as one SpecError, each line naming the file and the field. A
problem that makes a part unreadable suppresses the problems that would only follow from it.
"""

from __future__ import annotations

import copy
import difflib
import gc
import json
import os
import re
import string
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from infra.spec.models import WORKLOADS_KEY, ClusterVars, HostVars, PoolVars, Workload, WorkloadVars

POOLS_GROUP = "node_pools"
CONTROL_PLANE_GROUP = "kube_control_plane"  # Kubespray's group names
ETCD_GROUP = "etcd"
POOL_NAME = re.compile(r"^[a-z]([a-z0-9_]{0,61}[a-z0-9])?$")  # a DNS label once '_' becomes '-'
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
HOSTS_FILES = ("hosts.yml", "hosts.yaml")
ANSIBLE_PREFIX = "ansible_"  # connection and behaviour variables: Ansible's, passed through unvalidated

# What Ansible reads, from its source (ansible-core 2.19):
# parsing/dataloader.py find_vars_files: extensions = [''] + C.YAML_FILENAME_EXTENSIONS, first that exists wins
VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")
# inventory/manager.py IGNORED_ALWAYS, and config/base.yml INVENTORY_IGNORE_EXTS (REJECT_EXTS + .orig .cfg .retry)
INVENTORY_IGNORE_EXTS = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg", ".retry")
_NOT_A_SOURCE = re.compile(
    "|".join([r"^\.", "^host_vars$", "^group_vars$", "^vars_plugins$"]
             + [re.escape(ext) + "$" for ext in INVENTORY_IGNORE_EXTS])
)

UNREADABLE = object()  # what _read_file returns for a file that could not be parsed


class SpecError(Exception):
    """The inventory cannot be used at all; `problems` holds one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


class Encrypted:
    """A value encrypted with ansible-vault (`!vault`): Ansible decrypts it, infra.spec cannot."""

    __slots__ = ("ciphertext",)

    def __init__(self, ciphertext: str):
        self.ciphertext = ciphertext

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Encrypted) and other.ciphertext == self.ciphertext

    def __hash__(self) -> int:
        return hash(self.ciphertext)

    def __repr__(self) -> str:
        return "<encrypted with ansible-vault>"


class Unsafe(str):
    """A string Ansible never templates (`!unsafe`); for infra.spec an ordinary string."""

    __slots__ = ()


@dataclass(frozen=True)
class Host:
    name: str
    pool: str  # "" for a control-plane host that is in no node pool
    vars: HostVars
    hosts_file: str
    sources: dict[str, str] = field(default_factory=dict)  # variable -> host_vars file that set it
    address: str | None = None

    def source(self, key: str) -> str:
        """The file that sets the host variable `key`: its host_vars file, else hosts.yml."""
        return self.sources.get(key, self.hosts_file)

    def file_of(self, field_path: str) -> str:
        """The file that sets the top-level variable of a dotted field ("hardware.cores" -> hardware's)."""
        return self.source(field_path.split(".", 1)[0])


@dataclass(frozen=True)
class Pool:
    name: str
    vars: PoolVars
    hosts: tuple[Host, ...]
    source: str  # the pool's main group_vars file
    sources: dict[str, str] = field(default_factory=dict)  # variable -> group_vars file that set it

    def file_of(self, field_path: str) -> str:
        """The file that sets the top-level variable of a dotted field, e.g. "sysctls.net.core.somaxconn"
        -> the file holding `sysctls`; the pool's main file for a variable left at its default."""
        return self.sources.get(field_path.split(".", 1)[0], self.source)

    @property
    def k8s_name(self) -> str:
        """The pool's name in Kubernetes objects (labels, Volcano queues, ...): '_' becomes '-'.

        Pool names are lowercase letters, digits and '_' (no '-'), so this is a DNS-1123 label and
        distinct pools keep distinct names: gpu_a100 -> gpu-a100.
        """
        return self.name.replace("_", "-")


@dataclass(frozen=True)
class Environment:
    """A loaded inventory: the cluster's variables, its pools and their hosts, and where each came from."""

    name: str
    path: Path
    cluster: ClusterVars
    pools: dict[str, Pool]
    cluster_sources: dict[str, str] = field(default_factory=dict)
    control_plane: tuple[Host, ...] = ()  # hosts of kube_control_plane; pool "" when in no pool
    etcd: tuple[str, ...] = ()  # names of the hosts of the etcd group
    workloads: dict[str, dict[str, Workload]] = field(default_factory=dict)  # tenant -> name -> workload
    _ansible: _AnsibleView | None = field(default=None, repr=False, compare=False)

    def cluster_source(self, key: str) -> str:
        """The file that set the cluster variable `key` (group_vars/all.yml unless split into a folder)."""
        default = self._ansible.cluster_file if self._ansible else str(self.path / "group_vars" / "all.yml")
        return self.cluster_sources.get(key, default)

    def cluster_file_of(self, field_path: str) -> str:
        """The file that sets the top-level variable of a dotted cluster field ("tenants.ml.quota")."""
        return self.cluster_source(field_path.split(".", 1)[0])

    @property
    def hosts(self) -> list[Host]:
        """The hosts of the node pools, pool by pool."""
        return [host for pool in self.pools.values() for host in pool.hosts]

    @property
    def nodes(self) -> list[Host]:
        """Every host that runs a kubelet and needs a Pod CIDR block: pool hosts, then control-plane
        hosts that are in no pool."""
        return self.hosts + [host for host in self.control_plane if not host.pool]

    def host_variables(self, name: str) -> dict[str, object]:
        """Every variable Ansible gives host `name` from this inventory, ansible_* included, flattened
        with Ansible's precedence: group_vars/all < other groups (by depth, then name) < inline host
        variables in hosts.yml < host_vars. Raises KeyError for a host the inventory does not list.

        A new dict on each call, computed on request; nested values are shared with the loaded
        inventory, so copy one before changing it."""
        if self._ansible is None:
            raise KeyError(name)
        return self._ansible.host_variables(name)


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

    hosts_file = next((root / name for name in HOSTS_FILES if (root / name).is_file()), None)
    shown = hosts_file.name if hosts_file else HOSTS_FILES[0]
    second_sources = _other_sources(root, hosts_file, problems)
    if hosts_file is None:
        raise SpecError([f"{root}: no hosts.yml; an inventory folder needs hosts.yml and group_vars/all.yml",
                         *problems])
    inventory = _read_file(hosts_file, problems)
    parsed = _Parsed(complete=inventory is not UNREADABLE and not second_sources)
    if inventory is not UNREADABLE:
        _read_groups(inventory, hosts_file, parsed, problems)
    roles = _roles(parsed, hosts_file, problems)

    groups = [*parsed.groups, "all", "ungrouped"]
    group_vars = _read_vars_dir(root / "group_vars", groups, problems)
    host_vars = _read_vars_dir(root / "host_vars", parsed.inline, problems)
    if parsed.complete:  # otherwise a file for a group or host of the unread part is no mistake
        problems += _unclaimed(root, shown, group_vars if roles.pools else _VarsDir(), host_vars)

    cluster: ClusterVars | None = None
    workloads: WorkloadVars | None = None
    all_vars = group_vars.found.get("all")
    if all_vars is None:
        problems.append(f"{root / 'group_vars' / 'all.yml'}: missing; it holds the cluster-wide variables")
    elif all_vars.readable:
        cluster_values = _spec_part(all_vars.values)
        # Workloads are optional and validated on their own, so an inventory without them reads as before.
        declared = cluster_values.pop(WORKLOADS_KEY, None)
        cluster = _validate(ClusterVars, cluster_values, all_vars.sources, problems, all_vars.main)
        workloads = _validate(WorkloadVars, {WORKLOADS_KEY: {} if declared is None else declared},
                              all_vars.sources, problems, all_vars.main)

    for group, group_found in group_vars.found.items():
        if group != "all" and group not in roles.pools and group_found.readable:
            problems += _not_a_pool(group, group_found)

    hosts: dict[str, Host] = {}
    for name in roles.nodes:
        values, sources = _host_values(name, parsed.inline, host_vars)
        if values is not None:
            host = _host(name, roles.pool_of.get(name, ""), values, sources, hosts_file, problems)
            if host is not None:
                hosts[name] = host
    for name in roles.etcd:
        if name not in roles.nodes:
            values, sources = _host_values(name, parsed.inline, host_vars)
            for key in _spec_part(values or {}):
                problems.append(f"{sources.get(key, str(hosts_file))}: {name}.{key}: host {name} is only in "
                                f"{ETCD_GROUP} (it runs no kubelet); it may set only ansible_* connection variables")

    pools: dict[str, Pool] = {}
    for pool_name, members in roles.pools.items():
        found = group_vars.found.get(pool_name)
        if found is None:
            problems.append(
                f"{root / 'group_vars' / (pool_name + '.yml')}: missing; pool {pool_name} needs its "
                "variables (at least pool_kind and machine)"
            )
            continue
        pool_vars = None
        if found.readable:
            pool_vars = _validate(PoolVars, _spec_part(found.values), found.sources, problems, found.main)
        if pool_vars is not None:
            pool_hosts = tuple(hosts[name] for name in members if name in hosts)
            pools[pool_name] = Pool(pool_name, pool_vars, pool_hosts, found.main, dict(found.sources))

    if problems or cluster is None:
        raise SpecError(problems)
    view = _AnsibleView(
        parsed.groups, parsed.inline, {name: found.values for name, found in group_vars.found.items()},
        {name: found.values for name, found in host_vars.found.items()},
        all_vars.main if all_vars else str(root / "group_vars" / "all.yml"),
    )
    return Environment(root.name, root, cluster, pools, cluster_sources=dict(all_vars.sources) if all_vars else {},
                       control_plane=tuple(hosts[name] for name in roles.control_plane), etcd=tuple(roles.etcd),
                       workloads=workloads.workloads if workloads else {}, _ansible=view)


def _spec_part(values: dict[str, object]) -> dict[str, object]:
    """The variables the spec models validate: all but Ansible's own ansible_* variables."""
    return {key: value for key, value in values.items() if not key.startswith(ANSIBLE_PREFIX)}


def _host_values(name: str, inline: dict[str, dict[str, object]],
                 host_vars: _VarsDir) -> tuple[dict[str, object] | None, dict[str, str]]:
    """A host's variables as Ansible merges them (host_vars over inline ones), or None when unreadable."""
    found = host_vars.found.get(name)
    if found is None:
        return inline[name], {}
    if not found.readable:
        return None, {}
    return {**inline[name], **found.values}, found.sources


def _host(name: str, pool: str, values: dict[str, object], sources: dict[str, str], hosts_file: Path,
          problems: list[str]) -> Host | None:
    address = values.get("ansible_host")
    parsed = _validate(HostVars, _spec_part(values), sources, problems, hosts_file, owner=name)
    if parsed is None:
        return None
    return Host(name, pool, parsed, str(hosts_file), dict(sources), None if address is None else str(address))


def _not_a_pool(group: str, found: _Vars) -> Iterator[str]:
    """Group vars of a group that is not a pool: Ansible applies them, so only ansible_* may be there."""
    for key in _spec_part(found.values):
        where = found.sources.get(key, found.main)
        if group in (CONTROL_PLANE_GROUP, ETCD_GROUP):
            yield (f"{where}: {key}: {group} is Kubespray's group, not a pool; it may set only ansible_* "
                   "connection variables (cluster-wide variables go in group_vars/all.yml)")
        else:
            yield (f"{where}: {key}: group {group} is not a pool (a child of {POOLS_GROUP}); it may set only "
                   "ansible_* connection variables: put cluster-wide variables in group_vars/all.yml and pool "
                   "variables in group_vars/<pool>.yml")


def _unclaimed(root: Path, hosts_name: str, group_vars: _VarsDir, host_vars: _VarsDir) -> list[str]:
    """Vars files Ansible reads for no group or host of hosts.yml: a misnamed file is silently dead."""
    problems = []
    for path, _ in group_vars.unclaimed:
        problems.append(f"{path}: names no group of {hosts_name}; rename it after a pool or remove it")
    for path, name in host_vars.unclaimed:
        problems.append(f"{path}: host {name} is in no pool of {hosts_name}; rename it after a host or remove it")
    return problems


# ---------------------------------------------------------------- which files Ansible reads


def _other_sources(root: Path, hosts_file: Path | None, problems: list[str]) -> bool:
    """Refuse every file Ansible would parse as an inventory source besides hosts.yml; True if any.

    Ansible's inventory/manager.py parse_source reads every entry of the folder, recursing into
    folders, except those matching IGNORED (hidden, group_vars, host_vars, vars_plugins, ignored
    extensions such as .md or .cfg).
    """
    kept = hosts_file.name if hosts_file else HOSTS_FILES[0]
    found = False
    for path in _source_files(root, root, set()):
        if path != hosts_file:
            found = True
            problems.append(f"{path}: Ansible reads it as a second inventory source; infra.spec reads only "
                            f"{kept}: merge it into {kept} or move it out of {root}")
    return found


def _source_files(root: Path, folder: Path, seen: set[str]) -> Iterator[Path]:
    real = os.path.realpath(folder)
    if real in seen:  # a symbolic link loop
        return
    seen.add(real)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        if _NOT_A_SOURCE.search(name):
            continue
        path = folder / name
        if path.is_dir():
            yield from _source_files(root, path, seen)
        else:
            yield path


@dataclass
class _Vars:
    """The variables Ansible reads for one group or host, merged in its order."""

    main: str  # the file (or the first file of the folder) Ansible reads for this name
    values: dict[str, object] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # variable -> file that set it
    readable: bool = True  # False when a file could not be parsed: its half-read variables are not validated


@dataclass
class _VarsDir:
    found: dict[str, _Vars] = field(default_factory=dict)  # name -> what Ansible reads for it
    unclaimed: list[tuple[Path, str]] = field(default_factory=list)  # files read for no name, with that name


def _read_vars_dir(folder: Path, names: typing.Collection[str], problems: list[str]) -> _VarsDir:
    """Read group_vars/ or host_vars/ for the given group or host names, as Ansible's host_group_vars does.

    For NAME, Ansible reads the first of NAME, NAME.yml, NAME.yaml, NAME.json that exists (a folder
    NAME/ read whole) and nothing else: a second of them is refused, since Ansible ignores it.
    """
    result = _VarsDir()
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return result
    except NotADirectoryError:
        problems.append(f"{folder}: not a folder; Ansible skips it: make it a folder of vars files")
        return result
    except OSError as error:
        problems.append(f"{folder}: cannot be read: {error}")
        return result
    candidates: dict[str, list[tuple[int, str]]] = {}  # NAME -> (rank in VARS_EXTENSIONS, entry)
    for entry in entries:
        for rank, ext in enumerate(VARS_EXTENSIONS):
            if entry.endswith(ext) and len(entry) > len(ext):
                candidates.setdefault(entry[: len(entry) - len(ext)] if ext else entry, []).append((rank, entry))
    claimed: set[str] = set()
    for name in sorted(candidates):
        if name not in names:
            continue
        (_, first), *shadowed = sorted(candidates[name])
        claimed.update(entry for _, entry in candidates[name])
        for _, other in shadowed:
            problems.append(f"{folder / other}: Ansible ignores it because {folder / first} exists (it reads only "
                            f"the first of {name}, {name}.yml, {name}.yaml, {name}.json): merge the two")
        path = folder / first
        files = _vars_files(path) if path.is_dir() else [path]
        result.found[name] = found = _Vars(str(files[0]) if files else str(path))
        for file in files:
            _read_vars_file(file, found, problems)
        if shadowed:  # half of what the user wrote: validating it would list what the other file holds
            found.readable = False
    for entry in sorted(set(entries) - claimed):
        path = folder / entry
        stem, ext = os.path.splitext(entry)
        if not entry.startswith(".") and not entry.endswith("~") and (ext in VARS_EXTENSIONS or path.is_dir()):
            result.unclaimed.append((path, stem if ext in VARS_EXTENSIONS else entry))
    return result


def _vars_files(folder: Path) -> list[Path]:
    """The files of a vars folder Ansible reads, in its order (parsing/dataloader.py _get_dir_vars_files)."""
    found: list[Path] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return [folder]  # reading it reports the reason
    for name in names:
        if name.startswith(".") or name.endswith("~"):  # hidden and backup files
            continue
        ext = os.path.splitext(name)[1]
        path = folder / name
        if path.is_dir():
            if not ext:
                found.extend(_vars_files(path))
        elif ext in VARS_EXTENSIONS:
            found.append(path)
    return found


def _read_vars_file(path: Path, found: _Vars, problems: list[str]) -> None:
    data = _read_file(path, problems)
    if data is UNREADABLE:
        found.readable = False
        return
    if data is None:  # an empty file, as Ansible allows
        return
    if not isinstance(data, dict):
        found.readable = False
        problems.append(f"{path}: must be a mapping of variable names to values")
        return
    for key, value in data.items():
        if not isinstance(key, str):
            found.readable = False
            problems.append(f"{path}: {key!r}: variable names are strings of letters, digits and '_'")
            continue
        if key in found.sources and found.sources[key] != str(path):
            problems.append(f"{path}: {key}: also set in {found.sources[key]}; set each variable in one file")
        found.values[key] = value
        found.sources[key] = str(path)


# ---------------------------------------------------------------- reading one file as Ansible does


class _Loader(yaml.CSafeLoader):
    """YAML as Ansible reads it: the safe schema plus Ansible's tags !vault and !unsafe."""


def _construct_vault(loader: _Loader, node: yaml.Node) -> Encrypted:
    if not isinstance(node, yaml.ScalarNode):
        raise yaml.constructor.ConstructorError(None, None, f"the {node.tag} tag requires a string value",
                                                node.start_mark)
    return Encrypted(str(loader.construct_scalar(node)))


def _construct_unsafe(loader: _Loader, node: yaml.Node) -> object:
    plain = copy.copy(node)
    plain.tag = loader.resolve(type(node), node.value, (True, False))  # type: ignore[no-untyped-call]
    return _unsafe(loader.construct_object(plain, deep=True))


def _unsafe(value: object) -> object:
    if isinstance(value, str):
        return Unsafe(value)
    if isinstance(value, list):
        return [_unsafe(item) for item in value]
    if isinstance(value, dict):
        return {key: _unsafe(item) for key, item in value.items()}
    return value


for _tag, _constructor in (("!vault", _construct_vault), ("!vault-encrypted", _construct_vault),
                           ("!unsafe", _construct_unsafe)):
    _Loader.add_constructor(_tag, _constructor)


def _json_object(pairs: dict[str, object]) -> object:
    """Ansible's JSON decoder (_json/_profiles/_legacy.py) reads these two keys as tagged values."""
    for key, kind in (("__ansible_unsafe", Unsafe), ("__ansible_vault", Encrypted)):
        if key in pairs:
            value = pairs[key]
            if type(value) is not str:
                raise ValueError(f"{key} is not a string")  # Ansible then reads the file as YAML
            return kind(value)
    return pairs


def _read_file(path: Path, problems: list[str]) -> object:
    """The file's data (None for an empty file), or UNREADABLE with the reason added to `problems`.

    As Ansible's from_yaml (parsing/utils/yaml.py): JSON first, then YAML; 1e3 is a number in JSON
    and a string in YAML, so the order matters.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f"{path}: cannot be read: {error}")
        return UNREADABLE
    if text.startswith("$ANSIBLE_VAULT;"):
        problems.append(f"{path}: encrypted with ansible-vault, which infra.spec cannot read; decrypt it and "
                        "encrypt only secret ansible_* values (ansible-vault encrypt_string)")
        return UNREADABLE
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text, object_hook=_json_object)
        except (ValueError, RecursionError):
            pass
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problems.append(f"{where}: YAML syntax error: {getattr(error, 'problem', None) or error}")
    except RecursionError:
        problems.append(f"{path}: nested too deeply to read")
    return UNREADABLE


# ---------------------------------------------------------------- hosts.yml


@dataclass
class _Group:
    hosts: dict[str, None] = field(default_factory=dict)  # expanded host names, in order (an ordered set)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)


@dataclass
class _Parsed:
    """hosts.yml as Ansible's yaml inventory plugin builds it."""

    groups: dict[str, _Group] = field(default_factory=dict)
    inline: dict[str, dict[str, object]] = field(default_factory=dict)  # every host -> its inline variables
    complete: bool = True  # False when part of the inventory was not read: absent names then prove nothing


def _read_groups(inventory: object, hosts_file: Path, parsed: _Parsed, problems: list[str]) -> None:
    """Every group of an Ansible YAML inventory, host patterns expanded; problems for malformed parts."""
    if not isinstance(inventory, dict) or set(inventory) != {"all"}:
        problems.append(f"{hosts_file}: must hold one top-level key, 'all:' (Ansible YAML inventory format)")
        parsed.complete = False
        return
    try:
        _collect_group("all", inventory["all"], parsed, hosts_file, problems, [])
        _check_no_loops(parsed, hosts_file, problems)
    except RecursionError:
        problems.append(f"{hosts_file}: groups nested too deeply to read")
        parsed.complete = False


def _collect_group(name: str, body: object, parsed: _Parsed, hosts_file: Path, problems: list[str],
                   path: list[int]) -> None:
    """Read one group in the order Ansible's yaml plugin does (plugins/inventory/yaml.py _parse_group):
    its keys in the order written, so a host listed twice keeps the variables written last."""
    group = parsed.groups.setdefault(name, _Group())
    if body is None:
        return
    if not isinstance(body, dict):
        problems.append(f"{hosts_file}: group {name} must be a mapping with hosts: and/or children:")
        parsed.complete = False
        return
    if id(body) in path:  # a YAML alias that contains itself
        problems.append(f"{hosts_file}: group {name} contains itself (a YAML alias loop)")
        parsed.complete = False
        return
    unknown = set(body) - {"hosts", "children", "vars"}
    if unknown:
        problems.append(f"{hosts_file}: group {name}: unknown keys {sorted(map(str, unknown))}; a group has hosts: "
                        "and children:")
        parsed.complete = False
    for key, value in body.items():
        if key == "vars" and value:
            problems.append(
                f"{hosts_file}: group {name}: vars: in hosts.yml hide variables from review; move them to "
                f"group_vars/{name}.yml"
            )
        elif key == "hosts" and value is not None:
            _collect_hosts(name, group, value, parsed, hosts_file, problems)
        elif key == "children" and value is not None:
            if not isinstance(value, dict):
                problems.append(f"{hosts_file}: group {name}: children: must map group names to groups")
                parsed.complete = False
                continue
            for child, child_body in value.items():
                if not isinstance(child, str):
                    problems.append(f"{hosts_file}: group {name}: child group {child!r}: write group names as text")
                    parsed.complete = False
                    continue
                if child not in group.children:
                    group.children.append(child)
                _collect_group(child, child_body, parsed, hosts_file, problems, [*path, id(body)])
                if name not in parsed.groups[child].parents:
                    parsed.groups[child].parents.append(name)


def _collect_hosts(name: str, group: _Group, hosts: object, parsed: _Parsed, hosts_file: Path,
                   problems: list[str]) -> None:
    if not isinstance(hosts, dict):
        problems.append(f"{hosts_file}: group {name}: hosts: must map host names to their variables (or nothing)")
        parsed.complete = False
        return
    for pattern, host_vars in hosts.items():
        if not isinstance(pattern, str):
            problems.append(f"{hosts_file}: host {pattern!r}: quote host names that YAML reads as numbers")
            parsed.complete = False
            continue
        if host_vars is not None and not isinstance(host_vars, dict):
            problems.append(
                f"{hosts_file}: host {pattern}: variables must be a mapping, e.g. {{ansible_host: 10.0.0.1}}"
            )
            host_vars = None
        bad_keys = [key for key in (host_vars or {}) if not isinstance(key, str)]
        if bad_keys:
            problems.append(f"{hosts_file}: host {pattern}: {bad_keys[0]!r}: variable names are strings")
            host_vars = None
        names = _expand_host_pattern(pattern, hosts_file, problems)
        if not names:
            parsed.complete = False
        for host in names:
            group.hosts[host] = None
            inline = parsed.inline.setdefault(host, {})
            if host_vars:
                inline.update(host_vars)


def _check_no_loops(parsed: _Parsed, hosts_file: Path, problems: list[str]) -> None:
    """Ansible refuses a group that is its own ancestor; so does infra.spec, once."""
    state: dict[str, int] = {}  # 1 while its descendants are visited, 2 done

    def loop_from(group: str) -> str | None:
        state[group] = 1
        for child in parsed.groups[group].children:
            if state.get(child) == 1:
                return f"group {child} is its own ancestor (children: of {group} lists it)"
            found = loop_from(child) if child not in state else None
            if found:
                return found
        state[group] = 2
        return None

    for group in list(parsed.groups):
        found = loop_from(group) if group not in state else None
        if found:
            problems.append(f"{hosts_file}: {found}; children: must not loop")
            parsed.complete = False
            return


@dataclass
class _Roles:
    """Which hosts are what: pool members, control plane, etcd; `nodes` run a kubelet."""

    pools: dict[str, list[str]] = field(default_factory=dict)
    pool_of: dict[str, str] = field(default_factory=dict)
    control_plane: list[str] = field(default_factory=list)
    etcd: list[str] = field(default_factory=list)
    nodes: dict[str, None] = field(default_factory=dict)  # pool hosts, then control-plane hosts in no pool


def _roles(parsed: _Parsed, hosts_file: Path, problems: list[str]) -> _Roles:
    roles = _Roles()
    groups = parsed.groups
    pools_group = groups.get(POOLS_GROUP)
    if pools_group is None or not pools_group.children:
        if groups and parsed.complete:
            problems.append(f"{hosts_file}: no group {POOLS_GROUP} with pool groups as children; see README 'The spec'")
        return roles
    for pool in pools_group.children:
        if pool in (CONTROL_PLANE_GROUP, ETCD_GROUP):
            problems.append(f"{hosts_file}: {pool} is Kubespray's group, not a pool; list it under all: children:, "
                            f"beside {POOLS_GROUP}")
            continue
        if not POOL_NAME.match(pool):
            problems.append(
                f"{hosts_file}: pool group {pool!r}: its Kubernetes name is {pool.replace('_', '-')!r}, so use "
                "lowercase letters, digits and '_', starting with a letter and ending with a letter or digit, "
                "at most 63 characters (e.g. gpu_inference)"
            )
        body = groups[pool]
        if body.children:
            problems.append(f"{hosts_file}: pool {pool} has child groups; a pool lists its hosts directly")
        if not body.hosts and parsed.complete:  # else its hosts may be in the part that was not read
            problems.append(f"{hosts_file}: pool {pool} has no hosts")
        for name in body.hosts:
            if name in roles.pool_of and roles.pool_of[name] != pool:
                problems.append(f"{hosts_file}: host {name} is in pools {roles.pool_of[name]} and {pool}; "
                                "a host belongs to one pool")
                continue
            roles.pool_of[name] = pool
            roles.nodes[name] = None
        roles.pools[pool] = list(body.hosts)
    if CONTROL_PLANE_GROUP in groups:
        roles.control_plane = _hosts_under(groups, CONTROL_PLANE_GROUP)
        roles.nodes.update(dict.fromkeys(roles.control_plane))
    if ETCD_GROUP in groups:
        roles.etcd = _hosts_under(groups, ETCD_GROUP)
    for name in roles.nodes:
        _check_host_name(name, hosts_file, problems, node=True)
    for name in roles.etcd:
        if name not in roles.nodes:
            _check_host_name(name, hosts_file, problems, node=False)
    if parsed.complete:
        for name in parsed.inline:
            if name not in roles.nodes and name not in roles.etcd:
                _check_host_name(name, hosts_file, problems, node=False)
                problems.append(f"{hosts_file}: host {name} is in no pool (a child of {POOLS_GROUP}), nor in "
                                f"{CONTROL_PLANE_GROUP} or {ETCD_GROUP}; Ansible would configure it, infra.spec "
                                "would not plan it: add it to a pool or remove it")
    return roles


def _hosts_under(groups: dict[str, _Group], name: str) -> list[str]:
    """The hosts of a group and of its descendants, as Ansible's get_hosts() lists them."""
    found: dict[str, None] = {}
    stack, seen = [name], set()
    while stack:
        group = stack.pop(0)
        if group in seen:
            continue
        seen.add(group)
        found.update(groups[group].hosts)
        stack.extend(groups[group].children)
    return list(found)


def _check_host_name(name: str, hosts_file: Path, problems: list[str], node: bool) -> None:
    if ":" in name:
        problems.append(f"{hosts_file}: host {name!r}: write the SSH port as ansible_port, not host:port")
    elif node and (not _NODE_NAME.match(name) or len(name) > 253):
        problems.append(f"{hosts_file}: host {name!r}: Kubernetes node names are lowercase DNS names")


def _expand_host_pattern(pattern: str, hosts_file: Path, problems: list[str]) -> list[str]:
    """Expand Ansible host ranges: gpu-[01:16] -> gpu-01 .. gpu-16; [a:c] for letters; [1:9:2] steps."""
    match = re.search(r"\[([^\]:]+):([^\]:]+)(?::(\d+))?\]", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    first, last, step = match[1], match[2], int(match[3] or 1)
    if step < 1:
        problems.append(f"{hosts_file}: host pattern {pattern!r}: a range step is 1 or more")
        return []
    if first.isdigit() and last.isdigit():
        width = len(first) if first.startswith("0") else 0
        items = [str(n).zfill(width) for n in range(int(first), int(last) + 1, step)]
    elif len(first) == len(last) == 1 and first in string.ascii_letters and last in string.ascii_letters:
        items = [chr(c) for c in range(ord(first), ord(last) + 1, step)]
    else:
        problems.append(f"{hosts_file}: host pattern {pattern!r}: write numeric [01:16] or letter [a:f] ranges")
        return []
    return [name for item in items for name in _expand_host_pattern(head + item + tail, hosts_file, problems)]


# ---------------------------------------------------------------- the variables Ansible gives each host


class _AnsibleView:
    """The raw inventory, to flatten one host's variables on request as Ansible's VariableManager does.

    vars/manager.py get_vars: group_vars/all, then the host's other groups sorted by
    inventory/helpers.py sort_groups (depth, priority, name), then the host's inline variables
    (host.get_vars()), then host_vars. Values replace each other whole (hash_behaviour: replace).
    Priority is always 1 here: only `ansible_group_priority` set in hosts.yml changes it, and
    variables in hosts.yml are refused.
    """

    def __init__(self, groups: dict[str, _Group], inline: dict[str, dict[str, object]],
                 group_vars: dict[str, dict[str, object]], host_vars: dict[str, dict[str, object]],
                 cluster_file: str):
        self.groups = groups
        self.inline = inline
        self.group_vars = group_vars
        self.host_vars = host_vars
        self.cluster_file = cluster_file
        self._groups_of: dict[str, list[str]] | None = None

    def host_variables(self, name: str) -> dict[str, object]:
        if name not in self.inline:
            raise KeyError(name)
        merged = dict(self.group_vars.get("all", {}))
        for group in self._sorted_groups().get(name, ()):
            merged.update(self.group_vars.get(group, {}))
        merged.update(self.inline[name])
        merged.update(self.host_vars.get(name, {}))
        return merged

    def _sorted_groups(self) -> dict[str, list[str]]:
        """Host -> its groups but `all` (direct ones and their ancestors), in Ansible's order; built once."""
        if self._groups_of is None:
            depth: dict[str, int] = {}

            def depth_of(group: str) -> int:  # the longest path from `all` (inventory/group.py add_child)
                if group not in depth:
                    depth[group] = 0  # guards a loop (refused when loading)
                    parents = self.groups[group].parents
                    depth[group] = max((depth_of(parent) + 1 for parent in parents), default=0)
                return depth[group]

            ancestors: dict[str, set[str]] = {}

            def ancestors_of(group: str) -> set[str]:
                if group not in ancestors:
                    ancestors[group] = {group}
                    for parent in self.groups[group].parents:
                        ancestors[group] |= ancestors_of(parent)
                return ancestors[group]

            direct: dict[str, set[str]] = {}
            for group, body in self.groups.items():
                for host in body.hosts:
                    direct.setdefault(host, set()).update(ancestors_of(group))
            self._groups_of = {
                host: sorted(found - {"all"}, key=lambda group: (depth_of(group), group))
                for host, found in direct.items()
            }
        return self._groups_of


# ---------------------------------------------------------------- validation messages

_Model = typing.TypeVar("_Model", bound=BaseModel)


def _validate(model: type[_Model], values: dict[str, object], sources: dict[str, str], problems: list[str],
              default_file: Path | str, owner: str = "") -> _Model | None:
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


def _message(model: type[BaseModel], loc: tuple[int | str, ...], item: ErrorDetails) -> str:
    value = item.get("input")
    if isinstance(value, Encrypted):
        return ("encrypted with ansible-vault, which infra.spec cannot read; write it in clear "
                "(only ansible_* variables may be encrypted)")
    if item["type"] == "extra_forbidden":
        name = str(loc[-1])
        if model is ClusterVars and name in PoolVars.model_fields:
            return f"{name} is a pool variable; set it in group_vars/<pool>.yml"
        if model is HostVars and name in PoolVars.model_fields:
            return f"{name} is a pool variable; hosts may set only {', '.join(HostVars.model_fields)}"
        known = _fields_at(model, loc[:-1])
        if model is ClusterVars and len(loc) == 1:
            known.append(WORKLOADS_KEY)  # read beside ClusterVars, by WorkloadVars
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(sorted(known))}"
        return f"unknown key; {hint}"
    if item["type"] == "missing":
        section = "Workloads: fit and propose" if loc and loc[0] == WORKLOADS_KEY else "The spec"
        return f"required; see README '{section}'"
    if item["type"] == "string_pattern_mismatch" and loc and loc[0] == WORKLOADS_KEY and loc[-1] == "[key]":
        return (f"{value!r}: tenant and workload names are DNS labels (they name namespaces and pods): lowercase "
                "letters, digits and '-', starting and ending with a letter or digit, at most 63 characters")
    if item["type"] in ("bool_type", "int_type", "float_type") and isinstance(value, str):
        kind = {"bool_type": "true or false", "int_type": "a whole number", "float_type": "a number"}[item["type"]]
        return f"{value!r} is a string; write {kind} without quotes"
    if (item["type"] == "string_type" and loc and str(loc[-1]).endswith("_version")
            and isinstance(value, int | float) and not isinstance(value, bool)):
        return (f"{value!r} was read as a number, not a version (unquoted, YAML reads 1.30 as 1.3); quote it, "
                f'e.g. {loc[-1]}: "{_VERSION_EXAMPLES.get(str(loc[-1]), "1.30")}"')
    message = item["msg"].removeprefix("Value error, ")
    if item["type"] in ("literal_error", "string_pattern_mismatch"):
        return f"{value!r}: {message}"
    return message


_VERSION_EXAMPLES = {"kube_version": "1.30", "cuda_version": "12.10", "nvidia_driver_version": "550.127.08"}


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names of the model nested at `loc` inside `model` (for "did you mean" hints)."""
    current: object = model
    for part in loc:
        if _is_model(current):
            info = current.model_fields.get(str(part))
            current = _unwrap_optional(info.annotation) if info else None
        else:  # a dict key or list index: step into the element type (a model, or a nested dict or list)
            args = typing.get_args(current)
            current = next((arg for arg in args if _is_model(arg)), args[-1] if args else None)
    return list(current.model_fields) if _is_model(current) else []


def _unwrap_optional(annotation: object) -> object:
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    return next((arg for arg in typing.get_args(annotation) if _is_model(arg)), annotation)


def _is_model(annotation: object) -> typing.TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
