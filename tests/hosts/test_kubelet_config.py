"""Every shipped environment's KubeletConfigurations pass the kubelet's own validation (tools/kubelet-config-check,
k8s.io/kubernetes at the cluster's version), and the checker refuses what the kubelet would choke on or silently
ignore: a misspelt field, a wrong policy name, a wrong type, another kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from inventory_builder import ROOT
from kubelet_config_check import check

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ENVIRONMENTS = sorted(path.name for path in (ROOT / "inventories").iterdir() if (path / "hosts.yml").is_file())


def configs(name: str) -> dict[str, dict[str, Any]]:
    hosts = environment_host_vars(load_environment(ROOT / "inventories" / name))["hosts"]
    return {host: values["kubelet"]["config"] for host, values in hosts.items()}


def write(tmp_path: Path, config: dict[str, Any], name: str = "50-k8s-node-pools.conf") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


def test_both_shipped_environments_are_checked():
    assert {"example", "sandbox"} <= set(ENVIRONMENTS)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_host_s_configuration_passes_the_kubelet_s_validation(tmp_path, env):
    hosts = configs(env)
    assert hosts
    for host, config in hosts.items():
        done = check(write(tmp_path, config, f"{host}.conf"))
        assert done.returncode == 0, f"{env}/{host}: {done.stderr}"


@pytest.fixture(scope="module")
def memory_host() -> dict[str, Any]:
    return configs("sandbox")["sb-mem-1"]


@pytest.mark.parametrize(("change", "error"), [
    ({"cpuManagerPolicyy": "static"}, 'unknown field "cpuManagerPolicyy"'),
    ({"cpuManagerPolicy": "Static"}, 'cpuManagerPolicy "Static" must be one of'),
    ({"memoryManagerPolicy": "static"}, 'memoryManagerPolicy "static" must be one of'),
    ({"topologyManagerPolicy": "single-numa"}, 'topologyManagerPolicy (--topology-manager-policy) "single-numa"'),
    ({"maxPods": "110"}, "maxPods of type int32"),
    ({"maxPods": -1}, "maxPods (--max-pods) -1 must not be a negative number"),
    ({"evictionHard": {"memory.available": "lots"}}, 'evictionHard[memory.available]: "lots"'),
    ({"evictionHard": {"memory.availble": "100Mi"}}, 'unsupported eviction signal "memory.availble"'),
    ({"kubeReserved": {"cpu": "lots", "memory": "256Mi"}}, 'kubeReserved[cpu]: "lots"'),
    ({"systemReserved": {"gpu": "1"}}, 'cannot reserve "gpu" resource'),
    ({"reservedSystemCPUs": "0-x"}, "unable to parse reservedSystemCPUs"),
    ({"registerWithTaints": [{"key": "a", "effect": "Sometimes"}]}, "Sometimes"),
    ({"kind": "KubeProxyConfiguration"}, "KubeProxyConfiguration"),
])
def test_a_wrong_field_value_or_kind_is_refused(tmp_path, memory_host, change, error):
    done = check(write(tmp_path, {**memory_host, **change}))
    assert done.returncode == 1
    assert error in done.stderr, done.stderr


def test_drop_ins_merge_in_the_order_given_as_the_kubelet_s_config_dir(tmp_path, memory_host):
    # A later drop-in overrides: a valid pool config followed by a bad policy fails, the other way round passes.
    bad = write(tmp_path, {"apiVersion": memory_host["apiVersion"], "kind": memory_host["kind"],
                           "cpuManagerPolicy": "pinned"}, "10-bad.conf")
    good = write(tmp_path, memory_host, "50-k8s-node-pools.conf")
    assert check(good, bad).returncode == 1
    assert check(bad, good).returncode == 0
