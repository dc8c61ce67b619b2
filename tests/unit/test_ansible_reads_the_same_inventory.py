"""The inventory is the one source of truth only if Ansible reads it the way infra.spec does."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inventory_builder import ROOT, SHIPPED

from infra.spec import load_environment
from infra.spec.models import ClusterVars, HostVars, PoolVars

ANSIBLE_INVENTORY = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which(
    "ansible-inventory"
)


def ansible_view(path: Path) -> dict:
    assert ANSIBLE_INVENTORY, "ansible-inventory not installed (pip install -e .[test] brings ansible-core)"
    result = subprocess.run([ANSIBLE_INVENTORY, "-i", str(path), "--list"], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


@pytest.mark.parametrize("env_name", SHIPPED)
def test_ansible_sees_the_same_pools_hosts_and_variables(env_name):
    path = ROOT / "inventories" / env_name
    env = load_environment(path)
    view = ansible_view(path)
    assert sorted(view["node_pools"]["children"]) == sorted(env.pools)
    for pool in env.pools.values():
        assert sorted(view[pool.name]["hosts"]) == sorted(h.name for h in pool.hosts)
        for host in pool.hosts:
            seen = view["_meta"]["hostvars"][host.name]
            assert seen["pool_kind"] == pool.vars.pool_kind
            assert seen["cluster_name"] == env.cluster.cluster_name
            assert seen.get("zone") == host.vars.zone
            assert seen.get("machine", pool.vars.machine) == (host.vars.machine or pool.vars.machine)
            if host.address:
                assert seen["ansible_host"] == host.address


def test_ansible_and_infra_agree_on_host_overrides(inventory, write):
    hosts = inventory["hosts"]["all"]["children"]["node_pools"]["children"]
    hosts["gpu"]["hosts"]["gpu-1"]["nvidia_driver_version"] = "550.90.07"
    inventory["host_vars"]["cpu-2"] = {"machine": "t4box"}
    path = write(inventory)
    env = load_environment(path)
    view = ansible_view(path)["_meta"]["hostvars"]
    assert view["gpu-1"]["nvidia_driver_version"] == env.pools["gpu"].hosts[0].vars.nvidia_driver_version
    assert view["cpu-2"]["machine"] == env.pools["cpu"].hosts[1].vars.machine == "t4box"
    assert view["cpu-1"]["machine"] == "small"


def test_spec_variables_are_not_ansible_reserved_names():
    from ansible.vars.reserved import get_reserved_names

    fields = set(ClusterVars.model_fields) | set(PoolVars.model_fields) | set(HostVars.model_fields)
    assert fields & get_reserved_names() == set()


def test_only_intended_variables_are_shared_between_levels():
    """Ansible flattens all.yml < pool group_vars < host vars; these overlaps are deliberate overrides."""
    cluster, pool, host = set(ClusterVars.model_fields), set(PoolVars.model_fields), set(HostVars.model_fields)
    assert cluster & pool == {"kubelet_max_pods"}
    assert pool & host == {"machine", "nvidia_driver_version", "cuda_version"}
    assert cluster & host == set()
