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


HOST_ROLLOUT = {"batch_size": "100%", "max_fail_percentage": 100}
AGENT_ROLLOUT = {"max_unavailable": "10%", "wave_seconds": 120}


@pytest.mark.parametrize("field, defaults, rollout, error", [
    ("host_rollout", HOST_ROLLOUT, {}, None),
    ("host_rollout", HOST_ROLLOUT, {"batch_size": 1, "max_fail_percentage": 0}, None),
    ("host_rollout", HOST_ROLLOUT, {"batch_size": "10%", "max_fail_percentage": 20}, None),
    ("host_rollout", HOST_ROLLOUT, {"batch_size": "100%"}, None),
    ("host_rollout", HOST_ROLLOUT, {"batch_size": 0}, "batch_size: 0: at least one host at a time"),
    ("host_rollout", HOST_ROLLOUT, {"batch_size": "10"}, "a number of hosts (10) or a share of them from 1% to 100%"),
    ("host_rollout", HOST_ROLLOUT, {"batch_size": "0%"}, "a number of hosts"),
    ("host_rollout", HOST_ROLLOUT, {"batch_size": "150%"}, "a number of hosts"),
    ("host_rollout", HOST_ROLLOUT, {"max_fail_percentage": 101}, "max_fail_percentage"),
    ("host_rollout", HOST_ROLLOUT, {"batch": 1}, "batch"),  # a misspelt key is refused, not ignored
    ("agent_rollout", AGENT_ROLLOUT, {}, None),
    ("agent_rollout", AGENT_ROLLOUT, {"max_unavailable": 5, "wave_seconds": 300}, None),
    ("agent_rollout", AGENT_ROLLOUT, {"max_unavailable": "25%"}, None),
    ("agent_rollout", AGENT_ROLLOUT, {"max_unavailable": 0}, "max_unavailable: 0: at least one node at a time"),
    ("agent_rollout", AGENT_ROLLOUT, {"max_unavailable": "10"}, "a number of nodes (10) or a share of them"),
    ("agent_rollout", AGENT_ROLLOUT, {"wave_seconds": 5}, "wave_seconds"),
    ("agent_rollout", AGENT_ROLLOUT, {"maxUnavailable": 1}, "maxUnavailable"),
])
def test_rollouts(inventory, write, field, defaults, rollout, error):
    inventory["group_vars"]["all"][field] = rollout
    path = write(inventory)
    if error is None:
        loaded = getattr(load_environment(path).cluster, field)
        assert loaded.model_dump() == {**defaults, **rollout}
    else:
        with pytest.raises(SpecError, match=field) as raised:
            load_environment(path)
        assert error in str(raised.value)
