"""Spec fields whose values are refused at load: queue capability names, eviction signals, kube-proxy settings."""

import pytest

from infra.spec import SpecError, load_environment


@pytest.mark.parametrize("key, accepted", [
    ("nvidia.com/gpu", True),
    ("nvidia.com/mig-1g.10gb", True),
    ("hugepages-1Gi", True),
    ("cpu", True),
    ("requests.cpu", False),  # a quota key, not a resource name
    ("nvidia.com/", False),
    ("Nvidia.com/gpu", False),
    ("gpu", False),
])
def test_queue_capability_keys_are_resource_names(inventory, write, key, accepted):
    inventory["group_vars"]["all"]["tenants"]["batch"]["queue"]["capability"] = {key: 1}
    path = write(inventory)
    if accepted:
        load_environment(path)
    else:
        with pytest.raises(SpecError, match="capability key"):
            load_environment(path)


@pytest.mark.parametrize("signal, accepted", [("nodefs.inodesFree", True), ("imagefs.inodesFree", True),
                                              ("pid.available", False)])
def test_eviction_signals(inventory, write, signal, accepted):
    inventory["group_vars"]["mem"]["eviction_hard"] = {signal: "5%"}
    path = write(inventory)
    if accepted:
        load_environment(path)
    else:
        with pytest.raises(SpecError, match="eviction_hard"):
            load_environment(path)


@pytest.mark.parametrize("values, accepted", [
    ({"kube_proxy_conntrack_max_per_core": 0}, True),
    ({"kube_proxy_conntrack_max_per_core": -1}, False),
    ({"kube_proxy_conntrack_min": "131072"}, False),  # quoted: Ansible would hand kube-proxy a string
    ({"kube_proxy_remove": "true"}, False),
    ({"kube_proxy_remove": True}, True),
])
def test_kube_proxy_settings(inventory, write, values, accepted):
    inventory["group_vars"]["all"].update(values)
    path = write(inventory)
    if accepted:
        load_environment(path)
    else:
        with pytest.raises(SpecError, match="kube_proxy"):
            load_environment(path)


@pytest.mark.parametrize("rollout, error", [
    ({}, None),
    ({"batch_size": 1, "max_fail_percentage": 0}, None),
    ({"batch_size": "10%", "max_fail_percentage": 20}, None),
    ({"batch_size": "100%"}, None),
    ({"batch_size": 0}, "batch_size 0: at least one host at a time"),
    ({"batch_size": "10"}, "a number of hosts (10) or a share of them from 1% to 100%"),
    ({"batch_size": "0%"}, "a number of hosts"),
    ({"batch_size": "150%"}, "a number of hosts"),
    ({"max_fail_percentage": 101}, "max_fail_percentage"),
    ({"batch": 1}, "batch"),  # a misspelt key is refused, not ignored
])
def test_host_rollout(inventory, write, rollout, error):
    inventory["group_vars"]["all"]["host_rollout"] = rollout
    path = write(inventory)
    if error is None:
        loaded = load_environment(path).cluster.host_rollout
        assert loaded.batch_size == rollout.get("batch_size", "100%")
        assert loaded.max_fail_percentage == rollout.get("max_fail_percentage", 100)
    else:
        with pytest.raises(SpecError, match="host_rollout") as raised:
            load_environment(path)
        assert error in str(raised.value)



@pytest.mark.parametrize("rollout, error", [
    ({}, None),
    ({"max_unavailable": 5, "wave_seconds": 300}, None),
    ({"max_unavailable": "25%"}, None),
    ({"max_unavailable": 0}, "max_unavailable 0: at least one node at a time"),
    ({"max_unavailable": "10"}, "a number of nodes (10) or a share of them from 1% to 100%"),
    ({"wave_seconds": 5}, "wave_seconds"),
    ({"maxUnavailable": 1}, "maxUnavailable"),  # a misspelt key is refused, not ignored
])
def test_agent_rollout(inventory, write, rollout, error):
    inventory["group_vars"]["all"]["agent_rollout"] = rollout
    path = write(inventory)
    if error is None:
        loaded = load_environment(path).cluster.agent_rollout
        assert loaded.max_unavailable == rollout.get("max_unavailable", "10%")
        assert loaded.wave_seconds == rollout.get("wave_seconds", 120)
    else:
        with pytest.raises(SpecError, match="agent_rollout") as raised:
            load_environment(path)
        assert error in str(raised.value)
