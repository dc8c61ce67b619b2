"""Node agents roll out at the spec's pace (issue 15, minor: Helm's 300 s wait is short for CNI rollouts over
thousands of nodes): every DaemonSet the cluster layer declares or a chart runs replaces agent_rollout's
max_unavailable at a time, and every wait on them (Helm's per release, pulumi-kubernetes' per DaemonSet) lasts
as many waves as the cluster's node count takes."""

from __future__ import annotations

from typing import Any

import pytest
from inventory_builder import pools_of

from infra.cluster import rollout
from infra.cluster.concerns import build_concerns
from infra.cluster.objects import HELM_TIMEOUT_SECONDS
from infra.knowledge.chart_values import chart_values
from infra.model.resolve import resolve
from infra.spec import load_environment

# Each release that runs a DaemonSet, and where its values carry the DaemonSet's maxUnavailable.
AGENT_PACE = {
    "cilium": ("updateStrategy", "rollingUpdate", "maxUnavailable"),
    "calico": ("installation", "nodeUpdateStrategy", "rollingUpdate", "maxUnavailable"),
    "nvidia-device-plugin": ("updateStrategy", "rollingUpdate", "maxUnavailable"),
    "dcgm-exporter": ("rollingUpdate", "maxUnavailable"),
    "local-static-provisioner": ("updateStrategy", "rollingUpdate", "maxUnavailable"),
    "csi-driver-nfs": ("node", "maxUnavailable"),
}


def at(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        values = values[key]
    return values


@pytest.mark.parametrize("nodes, pace, per_wave, waves", [
    (1000, "10%", 100, 10),
    (1001, "10%", 101, 10),  # the controller rounds a share up
    (5000, "10%", 500, 10),
    (4, "10%", 1, 4),
    (5000, 1, 1, 5000),  # Kubernetes' default
    (5000, 2, 2, 2500),  # Cilium's chart default
    (0, "10%", 1, 0),
])
def test_a_share_bounds_the_waves_whatever_the_cluster_size(nodes, pace, per_wave, waves):
    assert rollout.per_wave(nodes, pace) == per_wave
    assert rollout.waves(nodes, pace) == waves
    assert rollout.waves(nodes, pace) <= rollout.most_waves(nodes, pace)


@pytest.mark.parametrize("pace", ["10%", "15%", "30%", "100%"])
def test_a_shares_bound_holds_at_every_node_count(pace):
    bound = rollout.most_waves(0, pace)
    assert all(rollout.most_waves(nodes, pace) == bound for nodes in (1, 7, 1000))
    assert max(rollout.waves(nodes, pace) for nodes in range(1, 3000)) == bound  # reached, never passed


def built(inventory, write, **agent_rollout):
    if agent_rollout:
        inventory["group_vars"]["all"]["agent_rollout"] = agent_rollout
    env = load_environment(write(inventory))
    return env, build_concerns(resolve(env))


@pytest.mark.parametrize("pace", ["10%", 7])
def test_every_agent_rolls_at_the_specs_pace_and_is_awaited_as_long_as_its_waves(inventory, write, pace):
    env, concerns = built(inventory, write, max_unavailable=pace, wave_seconds=90)
    expected_timeout = HELM_TIMEOUT_SECONDS + rollout.most_waves(len(env.hosts), pace) * 90
    releases = {r.component: r for c in concerns for r in c.releases}
    assert set(AGENT_PACE) - {"cilium"} <= set(releases)  # the base inventory runs Calico
    for component, release in releases.items():
        if component in AGENT_PACE:
            assert at(release.values, AGENT_PACE[component]) == pace, component
            assert release.timeout == expected_timeout, component
        else:  # no DaemonSet: Helm's default wait
            assert release.timeout == HELM_TIMEOUT_SECONDS, component
    daemonsets = [o for c in concerns for o in c.objects if o["kind"] == "DaemonSet"]
    assert daemonsets  # Multus and the RDMA plugin, declared by the stack itself
    for ds in daemonsets:
        assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": pace}}
        assert ds["metadata"]["annotations"][rollout.PULUMI_TIMEOUT_ANNOTATION] == str(expected_timeout)


def test_cilium_rolls_at_the_specs_pace_not_its_charts(inventory, write):
    inventory["group_vars"]["all"]["kube_network_plugin"] = "cilium"
    _, concerns = built(inventory, write)
    [cilium] = [r for c in concerns for r in c.releases if r.component == "cilium"]
    assert at(cilium.values, AGENT_PACE["cilium"]) == "10%"
    assert chart_values().cilium.keys["updateStrategy"].default["rollingUpdate"]["maxUnavailable"] == 2


def test_with_a_share_the_wait_stays_put_as_hosts_join_and_with_a_count_it_grows(inventory, write):
    cpu = pools_of(inventory)["cpu"]["hosts"]
    small = load_environment(write(inventory))
    for i in range(3, 41):
        cpu[f"cpu-{i}"] = {"zone": "a"}
    large = load_environment(write(inventory))
    assert (len(small.hosts), len(large.hosts)) == (5, 43)
    # 10%: at most 10 waves at any size, so a new host changes no release's wait (no helm upgrade)
    assert rollout.timeout_seconds(small) == rollout.timeout_seconds(large) == HELM_TIMEOUT_SECONDS + 10 * 120
    inventory["group_vars"]["all"]["agent_rollout"] = {"max_unavailable": 5}
    assert rollout.timeout_seconds(load_environment(write(inventory))) == HELM_TIMEOUT_SECONDS + 9 * 120
    # the failing case: at Kubernetes' default pace, Helm's default wait covers under 3 waves of 120 s
    assert rollout.waves(len(large.hosts), 1) * 120 > HELM_TIMEOUT_SECONDS
