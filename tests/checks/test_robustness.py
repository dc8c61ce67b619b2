"""Whatever a user writes, the answer is a list of problems or findings, never a traceback.

Every variable of every file of the base inventory is replaced in turn by values of the wrong
shape; loading must either refuse it (SpecError) or accept it, and then check and plan must run.
"""

import pytest
from inventory_builder import add_control_plane, base_inventory, pools_of, write_text

from infra.checks import has_errors, run_checks
from infra.planning.plan import build_plan
from infra.spec import SpecError, load_environment

WRONG = [None, "", "x", -1, 0, 10**12, 1.5, True, [], ["x"], {}, {"x": "y"}]


def _paths():
    data = base_inventory()
    for file, values in data["group_vars"].items():
        for key, value in values.items():
            yield (file, key)
            if isinstance(value, dict):
                for inner in value:
                    yield (file, key, inner)
    yield ("host", "cpu-1", "zone")
    yield ("host", "gpu-1", "hardware")


PATHS = list(_paths())


def _set(data, path, value):
    if path[0] == "host":
        pools_of(data)["cpu" if path[1] == "cpu-1" else "gpu"]["hosts"][path[1]][path[2]] = value
        return
    target = data["group_vars"][path[0]]
    for part in path[1:-1]:
        target = target[part]
    target[path[-1]] = value


@pytest.mark.parametrize("path", PATHS, ids=[".".join(p) for p in PATHS])
def test_wrong_values_are_refused_or_checked_never_crash(write, path):
    for value in WRONG:
        data = base_inventory()
        _set(data, path, value)
        try:
            env = load_environment(write(data))
        except SpecError as error:
            assert error.problems and all(isinstance(p, str) and p for p in error.problems)
            continue
        findings = run_checks(env)
        if not has_errors(findings):
            build_plan(env)


# Contents Ansible might read from any inventory file: broken, encrypted, tagged, recursive, odd keys.
ODD_CONTENT = [
    b"\x00\xff\xfe binary", "{not json", "[1, 2]", "42", "'just text'", "\ufeffzone: a\n",
    "$ANSIBLE_VAULT;1.1;AES256\n6162\n", "a: !vault [1]\n", "zone: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n",
    "cluster_name: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n", "a: !unsafe {b: [c]}\n", "zone: !unsafe a\n",
    "&a [*a]\n", "a: &a {b: *a}\n", "machines: &m {x: *m}\n", "tenants: &t {x: {pools: *t}}\n",
    "[" * 5000, "{" * 5000, "a:\n" + "".join("  " * i + "- \n" for i in range(1, 400)),
    '{"__ansible_unsafe": 1}', '{"__ansible_vault": "x", "zone": "a"}', '{"zone": {"__ansible_unsafe": "a"}}',
    "1: x\n", "~: x\n", "? [a]\n: b\n", "zone: 2024-01-01\n", "zone: !!binary aGVsbG8=\n", "!!set {a, b}\n",
    "kube_version: 1.30\n", "cuda_version: 12.10\n", "ansible_user: root\n", "ansible_host: [1, 2]\n",
    "all: &a {children: {x: *a}}\n", "all: {children: {kube_control_plane: {hosts: {cp-1: }}}}\n",
]
PLACES = [
    "hosts.yml", "group_vars/all.yml", "group_vars/all/extra", "group_vars/cpu", "group_vars/gpu/more.json",
    "group_vars/node_pools", "group_vars/kube_control_plane.yml", "host_vars/cpu-1.json", "host_vars/cpu-1/x",
    "host_vars/nobody.yml", "extra.ini", "sub/dir/hosts.yml",
]


def _load_check_plan(path):
    try:
        env = load_environment(path)
    except SpecError as error:
        assert error.problems and all(isinstance(p, str) and p for p in error.problems)
        return
    for name in [host.name for host in env.nodes] + list(env.etcd):
        env.host_variables(name)
    if not has_errors(run_checks(env)):
        build_plan(env)


@pytest.mark.parametrize("place", PLACES)
def test_odd_content_in_any_file_ansible_reads_never_crashes(write, place):
    for content in ODD_CONTENT:
        data = add_control_plane(base_inventory(), {"cp-1": {"zone": "a"}, "cpu-1": None},
                                 etcd={"cp-1": None, "etcd-1": None})
        path = write(data)
        write_text(path, place, content)
        _load_check_plan(path)


ODD_HOSTS = [
    {"all": {"children": {"a": {"children": {"b": {"children": {"a": None}}}}}}},
    {"all": {"children": {"kube_control_plane": {"children": {"kube_control_plane": None}}}}},
    {"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": {"cpu-1": None}}}},
                          "kube_control_plane": {"children": {"node_pools": None}}}}},
    {"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": {"cpu-1": None}}}},
                          "kube_control_plane": "cpu-1", "etcd": {"hosts": "cpu-1"}}}},
    {"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": {"cpu-1:2222": None, 7: None}}}}}}},
    {"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": {"cpu-[1:3:0]": None}}}}}}},
    {"all": {"hosts": {"cpu-1": None}, "children": {"node_pools": {"hosts": {"x": None}, "children": {
        "cpu": {"hosts": {"cpu-1": {1: 2}}}, "etcd": {"hosts": {"etcd-1": None}}}}}}},
    {"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": {"cpu-1": None}}}},
                          3: {"hosts": {"cpu-2": None}}}}},
]


@pytest.mark.parametrize("hosts", ODD_HOSTS, ids=range(len(ODD_HOSTS)))
def test_odd_group_structures_never_crash(write, hosts):
    data = base_inventory()
    data["hosts"] = hosts
    _load_check_plan(write(data))
