"""The inventory is the one source of truth only if Ansible reads it the way infra.spec does.

Each test compares, for every host, the whole variable set `ansible-inventory --list` prints with
`Environment.host_variables()`. ansible-inventory adds no variables of its own there: it drops
Ansible's magic variables (cli/inventory.py _remove_internal, C.INTERNAL_STATIC_VARS) and leaves
out a host that has no variables at all. It prints what JSON cannot hold its own way: dates as ISO
text, sets as lists, `!vault` values as {"__ansible_vault": ciphertext} and `!unsafe` strings as
{"__ansible_unsafe": text}; `as_ansible_prints` writes host_variables() the same way.
"""

import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from inventory_builder import ROOT, SHIPPED, add_control_plane, pools_of, write_text

from infra.spec import Environment, load_environment
from infra.spec.loader import Encrypted, Unsafe
from infra.spec.models import ClusterVars, HostVars, PoolVars

ANSIBLE_INVENTORY = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which(
    "ansible-inventory"
)
VAULTED = "$ANSIBLE_VAULT;1.1;AES256\n61626364\n"


def ansible_view(path: Path) -> dict:
    assert ANSIBLE_INVENTORY, "ansible-inventory not installed (pip install -e .[test] brings ansible-core)"
    settings = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}  # the project's, as site.yml
    result = subprocess.run([ANSIBLE_INVENTORY, "-i", str(path), "--list"], capture_output=True, text=True, check=True,
                            env=settings)
    return json.loads(result.stdout)


def as_ansible_prints(value: object) -> object:
    """A value written as ansible-inventory --list writes it in JSON."""
    if isinstance(value, Encrypted):
        return {"__ansible_vault": value.ciphertext}
    if isinstance(value, Unsafe):
        return {"__ansible_unsafe": str(value)}
    if isinstance(value, dict):
        return {str(key): as_ansible_prints(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [as_ansible_prints(item) for item in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def all_hosts(view: dict) -> set[str]:
    return {host for name, group in view.items() if name != "_meta" for host in group.get("hosts", ())}


def assert_ansible_agrees(path: Path) -> Environment:
    """Every host Ansible sees is one infra.spec knows, with exactly the same variables."""
    env = load_environment(path)
    view = ansible_view(path)
    names = [host.name for host in env.nodes] + [name for name in env.etcd if name not in {h.name for h in env.nodes}]
    assert all_hosts(view) == set(names)
    for name in names:
        assert as_ansible_prints(env.host_variables(name)) == view["_meta"]["hostvars"].get(name, {}), name
    return env


@pytest.mark.parametrize("env_name", SHIPPED)
def test_ansible_sees_the_same_pools_hosts_and_variables(env_name):
    path = ROOT / "inventories" / env_name
    env = assert_ansible_agrees(path)
    view = ansible_view(path)
    assert sorted(view["node_pools"]["children"]) == sorted(env.pools)
    for pool in env.pools.values():
        assert sorted(view[pool.name]["hosts"]) == sorted(h.name for h in pool.hosts)
        for host in pool.hosts:
            seen = env.host_variables(host.name)
            assert seen["pool_kind"] == pool.vars.pool_kind
            assert seen.get("zone") == host.vars.zone
            assert seen.get("machine", pool.vars.machine) == (host.vars.machine or pool.vars.machine)
            if host.address:
                assert seen["ansible_host"] == host.address


def test_ansible_and_infra_agree_on_host_overrides(inventory, write):
    hosts = inventory["hosts"]["all"]["children"]["node_pools"]["children"]
    hosts["gpu"]["hosts"]["gpu-1"]["nvidia_driver_version"] = "550.90.07"
    inventory["host_vars"]["cpu-2"] = {"machine": "t4box"}
    path = write(inventory)
    env = assert_ansible_agrees(path)
    view = ansible_view(path)["_meta"]["hostvars"]
    assert view["gpu-1"]["nvidia_driver_version"] == env.pools["gpu"].hosts[0].vars.nvidia_driver_version
    assert view["cpu-2"]["machine"] == env.pools["cpu"].hosts[1].vars.machine == "t4box"
    assert view["cpu-1"]["machine"] == "small"


def split_and_spread(inventory, write) -> Path:
    """The base inventory written in every form Ansible reads: folders, nested folders, .json, .yaml and
    extension-less files, files Ansible skips, host_vars overriding inline variables, ansible_* variables
    on every level, control-plane and etcd hosts, a parent group over two pools."""
    cluster = inventory["group_vars"].pop("all")
    tenants = cluster.pop("tenants")
    machines = cluster.pop("machines")
    gpu = inventory["group_vars"].pop("gpu")
    t4 = inventory["group_vars"].pop("t4")
    mem = inventory["group_vars"].pop("mem")
    pools_of(inventory)["cpu"]["hosts"]["cpu-1"]["ansible_host"] = "192.0.2.1"
    add_control_plane(inventory, {"cp-1": {"zone": "a", "ansible_host": "192.0.2.100"},
                                  "cpu-1": {"ansible_host": "192.0.2.101"}},  # listed last: this address wins
                      etcd={"cp-1": None, "etcd-1": {"ansible_host": "192.0.2.200"}})
    inventory["hosts"]["all"]["children"]["gpu_nodes"] = {"children": {"gpu": None, "t4": None}}
    inventory["host_vars"]["cpu-2"] = {"zone": "a", "ansible_port": 2222}  # overrides inline zone b
    path = write(inventory)

    gv = path / "group_vars"
    write_text(gv, "all/cluster.yml", yaml.safe_dump({**cluster, "ansible_user": "ops"}))
    write_text(gv, "all/machines.json", json.dumps({"machines": machines, "ansible_scale": 1e3}))
    write_text(gv, "all/tenants", yaml.safe_dump({"tenants": tenants}))  # extension-less
    write_text(gv, "all/more/secrets.yaml",
               f"ansible_become_password: !vault |\n  {VAULTED.splitlines()[0]}\n  {VAULTED.splitlines()[1]}\n"
               "ansible_ssh_common_args: !unsafe '-o ProxyCommand=\"{{ not_templated }}\"'\n"
               "ansible_provisioned_on: 2024-05-01\n")
    write_text(gv, "all/.hidden.yml", "cluster_name: Not A Dns Label\n")  # Ansible skips hidden files
    write_text(gv, "all/old.yml~", "cluster_name: Not A Dns Label\n")  # and backups
    write_text(gv, "all/notes.txt", "cluster_name: Not A Dns Label\n")  # and other extensions
    write_text(gv, "all/drafts.d/x.yml", "cluster_name: Not A Dns Label\n")  # and folders with an extension
    sharing = gpu.pop("gpu_sharing")
    write_text(gv, "gpu/main.yml", yaml.safe_dump(gpu))
    write_text(gv, "gpu/sharing.yml", yaml.safe_dump({"gpu_sharing": sharing, "ansible_become": True}))
    write_text(gv, "t4", yaml.safe_dump(t4))
    write_text(gv, "mem.json", json.dumps(mem))
    write_text(gv, "node_pools.yml", "ansible_python_interpreter: /usr/bin/python3\nansible_user: pool-ops\n")
    write_text(gv, "kube_control_plane.yaml", "ansible_python_interpreter: /usr/libexec/python\nansible_user: cp\n")
    write_text(gv, "gpu_nodes.yml", "ansible_user: gpu-ops\n")
    write_text(gv, "etcd.json", json.dumps({"ansible_user": "etcd"}))
    hv = path / "host_vars"
    write_text(hv, "gpu-1/connection.yml", "ansible_port: 2200\n")
    write_text(hv, "gpu-1/hardware.json", json.dumps({"hardware": {"gpu_count": 7}}))
    write_text(hv, "t4-1", "ansible_host: 192.0.2.41\n")
    write_text(hv, "etcd-1.yaml", "ansible_user: root\n")
    write_text(path, "README.md", "Ansible does not read this file as an inventory source.\n")
    write_text(path, "ansible.cfg", "[defaults]\n")
    return path


def test_ansible_and_infra_agree_on_every_form_of_vars_files(inventory, write):
    env = assert_ansible_agrees(split_and_spread(inventory, write))
    assert env.pools["gpu"].vars.gpu_sharing.mode == "mig"
    assert env.pools["gpu"].hosts[0].vars.hardware.gpu_count == 7
    assert env.pools["t4"].vars.gpu_sharing.mode == "time-slicing"
    assert env.pools["mem"].vars.local_disks[0].size_gib == 100
    assert env.cluster.tenants["svc"].pools == ["cpu"]


def test_group_order_and_ansible_variables_on_every_level(inventory, write):
    env = load_environment(split_and_spread(inventory, write))
    cpu1, cpu2, gpu1, t41 = (env.host_variables(name) for name in ("cpu-1", "cpu-2", "gpu-1", "t4-1"))
    # kube_control_plane and node_pools are both one level under all: the later name wins
    assert cpu1["ansible_python_interpreter"] == "/usr/bin/python3"
    assert cpu1["ansible_user"] == "pool-ops"
    assert cpu1["ansible_host"] == "192.0.2.101"  # a host listed twice keeps the variables written last
    assert cpu2["zone"] == "a" and cpu2["ansible_port"] == 2222
    # gpu_nodes and node_pools (depth 1) < the pool (depth 2) < host variables
    assert gpu1["ansible_user"] == "pool-ops" and gpu1["ansible_become"] is True and gpu1["ansible_port"] == 2200
    assert t41["ansible_host"] == "192.0.2.41"
    assert env.host_variables("cp-1")["ansible_user"] == "cp"  # etcd < kube_control_plane: same depth, by name
    assert env.host_variables("etcd-1")["ansible_user"] == "root"
    assert isinstance(cpu1["ansible_become_password"], Encrypted)
    assert cpu1["ansible_scale"] == 1000.0  # JSON reads 1e3 as a number (YAML would read a string)


def test_spec_variables_are_not_ansible_reserved_names():
    from ansible.vars.reserved import get_reserved_names

    fields = set(ClusterVars.model_fields) | set(PoolVars.model_fields) | set(HostVars.model_fields)
    assert fields & get_reserved_names() == set()
    assert not any(name.startswith("ansible_") for name in fields)  # that prefix passes through unvalidated


def test_only_intended_variables_are_shared_between_levels():
    """Ansible flattens all.yml < pool group_vars < host vars; these overlaps are deliberate overrides."""
    cluster, pool, host = set(ClusterVars.model_fields), set(PoolVars.model_fields), set(HostVars.model_fields)
    assert cluster & pool == {"kubelet_max_pods"}
    assert pool & host == {"machine", "nvidia_driver_version", "cuda_version"}
    assert cluster & host == set()


def test_infra_spec_ignores_what_ansible_ignores():
    """The file rules infra.spec copies are Ansible's defaults (a user's ansible.cfg could change them)."""
    from ansible import constants as C
    from infra.spec.loader import INVENTORY_IGNORE_EXTS, VARS_EXTENSIONS

    assert tuple(C.INVENTORY_IGNORE_EXTS) == INVENTORY_IGNORE_EXTS
    assert C.INVENTORY_IGNORE_PATTERNS == []
    assert ("", *C.YAML_FILENAME_EXTENSIONS) == VARS_EXTENSIONS
    assert C.VARIABLE_PRECEDENCE == ["all_inventory", "groups_inventory", "all_plugins_inventory",
                                     "all_plugins_play", "groups_plugins_inventory", "groups_plugins_play"]
    assert C.DEFAULT_HASH_BEHAVIOUR == "replace"
