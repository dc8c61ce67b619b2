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
