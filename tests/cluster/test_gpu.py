"""GPU sharing: each pool's device-plugin config, the mig-parted layouts, dcgm-exporter.

The central cross-check: a small interpreter of the device plugin's config format (written here from
the plugin's documented behaviour, recorded in chart_values.yml) reads the config a node's label
selects and the MIG layout mig-parted leaves on its cards, and says which resources the node
advertises. That must equal `infra.model.capacity.gpu_resources` for the node, which quotas and the plan
are checked against. Each assertion is a function returning problems, so the same function is shown
to catch a deliberately broken input.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
import yaml
from inventory_builder import ROOT, SHIPPED

from infra.checks import run_checks
from infra.cluster import gpu
from infra.cluster.nodes import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    POOL_LABEL,
    device_plugin_config_name,
    host_labels,
    pool_labels,
    pool_taints,
)
from infra.cluster.objects import Concern, HelmRelease, key
from infra.cluster.placement import gpu_pools, on_pools
from infra.cluster.validation.kinds import SYSTEM_PRIORITY_CLASSES
from infra.hosts.hostvars import environment_host_vars
from infra.knowledge.chart_values import chart_values
from infra.knowledge.gpus import gpu_models
from infra.knowledge.versions import versions
from infra.model.capacity import gpu_resources
from infra.model.mig import placement
from infra.model.resolve import Resolved, resolve
from infra.planning.filters import matches
from infra.spec import load_environment

PLUGIN = chart_values().nvidia_device_plugin


def shipped(name: str) -> Resolved:
    return resolve(load_environment(ROOT / "inventories" / name))


def built(inventory: dict, write) -> Resolved:
    return resolve(load_environment(write(inventory)))


def release(concern: Concern, name: str) -> HelmRelease:
    (found,) = [r for r in concern.releases if r.name == name]
    return found


# --- a pure interpreter of the plugin's config format and of mig-parted's --------------------------


def cards_after_mig_parted(text: str, config: str) -> dict[str, int] | None:
    """The MIG layout mig-parted leaves on each card when applying `config`: None when MIG is off."""
    parsed = yaml.safe_load(text)
    assert parsed["version"] == chart_values().nvidia_mig_manager.config_version
    entries = parsed["mig-configs"][config]
    assert len(entries) == 1 and entries[0]["devices"] == "all", "only one entry for all devices is interpreted"
    entry = entries[0]
    return dict(entry["mig-devices"]) if entry["mig-enabled"] else None


def advertised(config_text: str, gpus: int, layout: dict[str, int] | None) -> dict[str, int]:
    """What the device plugin advertises on a node with `gpus` cards cut to `layout` (None: MIG off).

    Per the plugin (chart_values.yml rules): strategy none advertises every card as nvidia.com/gpu,
    MIG on or off; single advertises each MIG instance as nvidia.com/gpu (all alike); mixed advertises
    nvidia.com/mig-<profile>, "+" as "."; sharing replicates a resource `replicas` times, renamed to
    <name>.shared with renameByDefault; time-slicing and MPS exclude each other; MPS only on whole cards
    and never with mixed; replicas >= 2.
    """
    config = yaml.safe_load(config_text)
    assert config["version"] == PLUGIN.config_version
    strategy = config.get("flags", {}).get("migStrategy", "none")
    assert strategy in PLUGIN.mig_strategies
    devices: Counter[str] = Counter()
    for _ in range(gpus):
        if layout is None or strategy == "none":
            devices[PLUGIN.gpu_resource] += 1
        elif strategy == "single":
            assert len(layout) == 1, "the single strategy refuses mixed MIG instances"
            devices[PLUGIN.gpu_resource] += sum(layout.values())
        else:
            for profile, count in layout.items():
                devices[PLUGIN.mig_resource(profile)] += count
    sharing = config.get("sharing", {})
    assert len(sharing) <= 1, "time-slicing and MPS are mutually exclusive"
    for kind, shared in sharing.items():
        assert kind in ("timeSlicing", "mps")
        if kind == "mps":
            assert strategy != "mixed" and layout is None, "MPS runs on whole cards only"
        for resource in shared["resources"]:
            assert resource["replicas"] >= PLUGIN.min_replicas
            count = devices.pop(resource["name"], 0)
            name = PLUGIN.shared_resource(resource["name"]) if shared.get("renameByDefault") else resource["name"]
            devices[name] += count * resource["replicas"]
    return {name: count for name, count in devices.items() if count}


def node_config(values: dict[str, Any], labels: dict[str, str]) -> str:
    """The config text the plugin's config-manager picks for a node: its label's, else config.default."""
    name = labels.get(PLUGIN.node_config_label) or values["config"]["default"]
    return values["config"]["map"][name]


def advertising_problems(view: Resolved, concern: Concern) -> list[str]:
    """Every GPU host whose device plugin would advertise other than what capacity says."""
    values = release(concern, gpu.DEVICE_PLUGIN).values
    text = concern.files[gpu.MIG_PARTED_FILE]
    problems = []
    for pool in gpu_pools(view.env):
        selection = gpu.host_mig_parted(view.env, pool)
        assert selection is not None
        if selection.text != text:
            problems.append(f"{pool.name}: the hosts' mig-parted file is not the rendered one")
        for host in view.of_pool(pool):
            assert host.machine is not None
            labels = host_labels(host, pool)
            try:
                got = advertised(node_config(values, labels), host.machine.gpu_count,
                                 cards_after_mig_parted(text, selection.config))
            except (KeyError, AssertionError) as error:
                problems.append(f"{host.name}: {error!r}")
                continue
            want = gpu_resources(pool, host.machine.gpu_count)
            if got != want:
                problems.append(f"{host.name}: advertises {got}, capacity says {want}")
    return problems


def label_problems(view: Resolved, concern: Concern) -> list[str]:
    """GPU nodes whose config label names no config, or a config that is not their pool's."""
    configs = release(concern, gpu.DEVICE_PLUGIN).values["config"]["map"]
    problems = []
    for pool in gpu_pools(view.env):
        for host in view.of_pool(pool):
            name = host_labels(host, pool).get(DEVICE_PLUGIN_CONFIG_LABEL)
            if name not in configs:
                problems.append(f"{host.name}: label names {name!r}, not a config")
            elif yaml.safe_load(configs[name]) != gpu.device_plugin_config(pool):
                problems.append(f"{host.name}: config {name!r} is not pool {pool.name}'s")
    return problems


def placement_problems(view: Resolved, values: dict[str, Any], gpu_client: bool = False) -> list[str]:
    """Pod placement values that do not put the DaemonSet on exactly the GPU pools (less the nodes whose GPU
    clients are paused, for a `gpu_client`)."""
    pools = gpu_pools(view.env)
    want_taints = {(t["key"], t.get("value", ""), t["effect"]) for pool in pools for t in pool_taints(pool)}
    got_taints = {(t["key"], t.get("value", ""), t["effect"]) for t in values["tolerations"]}
    problems = []
    if got_taints != want_taints:
        problems.append(f"tolerates {sorted(got_taints)}, GPU pools taint {sorted(want_taints)}")
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    selected = {(e["key"], e["operator"], tuple(e["values"])) for term in terms for e in term["matchExpressions"]}
    want = {(POOL_LABEL, "In", tuple(sorted(pool.name for pool in pools)))}
    if gpu_client:
        want.add((gpu.GPU_CLIENTS_LABEL, "NotIn", (gpu.GPU_CLIENTS_PAUSED,)))
    if selected != want:
        problems.append(f"affinity {sorted(selected)}, want {sorted(want)}")
    return problems


def with_t4_sharing(inventory: dict, sharing: dict) -> dict:
    inventory["group_vars"]["t4"]["gpu_sharing"] = sharing
    return inventory


# --- each sharing mode gets exactly the config it needs ---------------------------------------------


@pytest.mark.parametrize("sharing, expected", [
    ({"mode": "exclusive"}, {"version": "v1", "flags": {"migStrategy": "none"}}),
    ({"mode": "time-slicing", "replicas": 3},
     {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
         "renameByDefault": True, "failRequestsGreaterThanOne": True,
         "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}}),
    ({"mode": "mps", "replicas": 4},
     {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"mps": {
         "renameByDefault": True, "failRequestsGreaterThanOne": True,
         "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}),
])
def test_each_non_mig_mode_gets_exactly_its_config(inventory, write, sharing, expected):
    view = built(with_t4_sharing(inventory, sharing), write)
    assert gpu.device_plugin_config(view.env.pools["t4"]) == expected


def test_a_mig_pool_gets_the_mixed_strategy_and_no_sharing(inventory, write):
    config = gpu.device_plugin_config(built(inventory, write).env.pools["gpu"])
    assert config == {"version": "v1", "flags": {"migStrategy": "mixed"}}


def test_configs_follow_the_format_chart_values_records(inventory, write):
    """Each config has the shape of the chart_values.yml example for its mode."""
    examples = {name: yaml.safe_load(text) for name, text in PLUGIN.config_examples.items()}
    view = built(inventory, write)
    for mode, example in (("mig", "mig-mixed"), ("time-slicing", "time-slicing")):
        (pool,) = [p for p in gpu_pools(view.env) if p.vars.sharing.mode == mode]
        config = gpu.device_plugin_config(pool)
        assert config.keys() == examples[example].keys()
        assert config["flags"] == examples[example]["flags"]
        if "sharing" in config:
            assert config["sharing"].keys() == examples[example]["sharing"].keys()


def test_a_non_gpu_pool_has_no_config(inventory, write):
    with pytest.raises(ValueError, match="not a GPU pool"):
        gpu.device_plugin_config(built(inventory, write).env.pools["cpu"])


# --- what the configs make the plugin advertise equals what capacity says ---------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_nodes_advertise_what_capacity_says(name):
    view = shipped(name)
    concern = gpu.build(view)
    assert gpu_pools(view.env)
    assert advertising_problems(view, concern) == []
    assert label_problems(view, concern) == []


@pytest.mark.parametrize("sharing", [
    {"mode": "exclusive"}, {"mode": "time-slicing", "replicas": 2}, {"mode": "mps", "replicas": 8},
])
def test_every_mode_advertises_what_capacity_says(inventory, write, sharing):
    view = built(with_t4_sharing(inventory, sharing), write)
    assert advertising_problems(view, gpu.build(view)) == []


def test_an_exclusive_mig_capable_pool_turns_mig_off_and_advertises_whole_cards(inventory, write):
    inventory["group_vars"]["gpu"]["gpu_sharing"] = {"mode": "exclusive"}
    view = built(inventory, write)
    pool = view.env.pools["gpu"]
    selection = gpu.host_mig_parted(view.env, pool)
    assert selection is not None and selection.config == gpu.MIG_DISABLED
    assert advertising_problems(view, gpu.build(view)) == []


def test_a_config_with_the_wrong_replicas_is_caught(inventory, write):
    view = built(inventory, write)
    concern = gpu.build(view)
    values = release(concern, gpu.DEVICE_PLUGIN).values
    config = yaml.safe_load(values["config"]["map"]["t4"])
    config["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 3
    values["config"]["map"]["t4"] = yaml.safe_dump(config)
    assert advertising_problems(view, concern) == ["t4-1: advertises {'nvidia.com/gpu.shared': 6}, "
                                                   "capacity says {'nvidia.com/gpu.shared': 4}"]


def test_a_mig_pool_under_the_single_strategy_is_caught(inventory, write):
    view = built(inventory, write)
    concern = gpu.build(view)
    values = release(concern, gpu.DEVICE_PLUGIN).values
    values["config"]["map"]["gpu"] = yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "single"}})
    assert advertising_problems(view, concern) == [
        "gpu-1: advertises {'nvidia.com/gpu': 56}, capacity says {'nvidia.com/mig-1g.10gb': 56}"]


def test_a_mig_layout_that_differs_from_the_pool_is_caught(inventory, write):
    view = built(inventory, write)
    concern = gpu.build(view)
    text = concern.files[gpu.MIG_PARTED_FILE].replace("1g.10gb: 7", "1g.10gb: 6")
    broken = Concern(concern.name, concern.objects, concern.releases, {gpu.MIG_PARTED_FILE: text})
    assert advertising_problems(view, broken) == [
        "gpu: the hosts' mig-parted file is not the rendered one",
        "gpu-1: advertises {'nvidia.com/mig-1g.10gb': 48}, capacity says {'nvidia.com/mig-1g.10gb': 56}",
        "t4: the hosts' mig-parted file is not the rendered one"]


def test_the_interpreter_knows_the_plugins_refusals():
    with pytest.raises(AssertionError, match="whole cards"):
        advertised(yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": {
            "mps": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}),
            1, {"1g.10gb": 7})
    with pytest.raises(AssertionError):
        advertised(yaml.safe_dump({"version": "v1", "sharing": {
            "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}), 1, None)
    assert advertised(yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "mixed"}}), 2,
                      {"1g.10gb+me": 1, "3g.40gb": 1}) == {"nvidia.com/mig-1g.10gb.me": 2, "nvidia.com/mig-3g.40gb": 2}


# --- node labels select configs that exist --------------------------------------------------------


def test_every_gpu_node_names_an_existing_config_of_its_own_pool(inventory, write):
    view = built(inventory, write)
    concern = gpu.build(view)
    assert label_problems(view, concern) == []
    configs = release(concern, gpu.DEVICE_PLUGIN).values["config"]["map"]
    assert set(configs) == {device_plugin_config_name(p) for p in gpu_pools(view.env)} | {gpu.FALLBACK_CONFIG}


def test_a_config_map_missing_one_pools_config_is_caught(inventory, write):
    view = built(inventory, write)
    concern = gpu.build(view)
    del release(concern, gpu.DEVICE_PLUGIN).values["config"]["map"]["t4"]
    assert label_problems(view, concern) == ["t4-1: label names 't4', not a config"]
    assert advertising_problems(view, concern) == ["t4-1: KeyError('t4')"]


def test_a_config_map_with_pools_swapped_is_caught(inventory, write):
    view = built(inventory, write)
    concern = gpu.build(view)
    configs = release(concern, gpu.DEVICE_PLUGIN).values["config"]["map"]
    configs["t4"], configs["gpu"] = configs["gpu"], configs["t4"]
    assert label_problems(view, concern) == ["gpu-1: config 'gpu' is not pool gpu's",
                                             "t4-1: config 't4' is not pool t4's"]


def test_the_plugin_reads_the_label_the_nodes_concern_sets():
    assert PLUGIN.node_config_label == DEVICE_PLUGIN_CONFIG_LABEL


@pytest.mark.parametrize("name", SHIPPED)
def test_nothing_only_a_mig_manager_would_read_is_published(name):
    """No MIG manager is deployed (the host layer repartitions): a node label or ConfigMap it reads would
    invite a `kubectl label` that changes nothing."""
    view = shipped(name)
    label = chart_values().nvidia_mig_manager.config_label
    assert all(label not in pool_labels(pool) for pool in view.env.pools.values())
    assert [o["kind"] for o in gpu.build(view).objects] == ["Namespace"]


def test_the_fallback_config_is_the_default_and_shares_nothing(inventory, write):
    """A GPU node that lost its label gets hardware-isolated resources only, whatever its cards."""
    view = built(inventory, write)
    values = release(gpu.build(view), gpu.DEVICE_PLUGIN).values
    assert values["config"]["default"] == gpu.FALLBACK_CONFIG  # the chart refuses several configs without one
    text = values["config"]["map"][gpu.FALLBACK_CONFIG]
    assert "sharing" not in yaml.safe_load(text)
    assert advertised(text, 2, None) == {"nvidia.com/gpu": 2}
    assert advertised(text, 1, {"1g.10gb": 7}) == {"nvidia.com/mig-1g.10gb": 7}
    unlabelled = {k: v for k, v in pool_labels(view.env.pools["t4"]).items() if k != DEVICE_PLUGIN_CONFIG_LABEL}
    assert node_config(values, unlabelled) == text


# --- inference tenants: MIG instances or whole cards only -----------------------------------------


def isolation_problems(view: Resolved, concern: Concern) -> list[str]:
    values = release(concern, gpu.DEVICE_PLUGIN).values
    text = concern.files[gpu.MIG_PARTED_FILE]
    problems = []
    for name, tenant in view.env.cluster.tenants.items():
        if tenant.tier != "inference":
            continue
        for pool in (view.env.pools[p] for p in tenant.pools):
            selection = gpu.host_mig_parted(view.env, pool)
            if selection is None:
                continue
            layout = cards_after_mig_parted(text, selection.config)
            for resource in advertised(node_config(values, pool_labels(pool)), 1, layout):
                if resource != PLUGIN.gpu_resource and not resource.startswith(PLUGIN.mig_resource_prefix):
                    problems.append(f"inference tenant {name} may use {resource} on {pool.name}")
    return problems


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_inference_tenants_get_only_mig_or_whole_gpus(name):
    view = shipped(name)
    assert any(t.tier == "inference" for t in view.env.cluster.tenants.values())
    assert isolation_problems(view, gpu.build(view)) == []


def test_an_inference_tenant_on_a_time_sliced_pool_is_caught_here_and_by_checks(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["infer"]["pools"] = ["gpu", "t4"]
    path = write(inventory)
    view = resolve(load_environment(path))
    assert isolation_problems(view, gpu.build(view)) == ["inference tenant infer may use nvidia.com/gpu.shared on t4"]
    assert "TEN-SHARED-GPU" in {f.code for f in run_checks(load_environment(path))}


# --- mig-parted -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_mig_parted_holds_exactly_the_mig_layouts_each_placeable(name):
    view = shipped(name)
    config = gpu.mig_parted_config(view.env)
    assert config["version"] == chart_values().nvidia_mig_manager.config_version
    mig_pools = [p for p in gpu_pools(view.env) if p.vars.sharing.mode == "mig"]
    assert mig_pools
    layouts = {name: entries for name, entries in config["mig-configs"].items() if name != gpu.MIG_DISABLED}
    assert {n: e[0]["mig-devices"] for n, e in layouts.items()} == {
        p.vars.sharing.mig_config: p.vars.sharing.mig_devices for p in mig_pools}
    assert config["mig-configs"][gpu.MIG_DISABLED] == [{"devices": "all", "mig-enabled": False}]
    fields = set(chart_values().nvidia_mig_manager.entry_fields)
    for pool in mig_pools:
        (model,) = view.gpu_models(pool)
        assert gpu_models()[model].mig is not None
        assert placement(model, config["mig-configs"][pool.vars.sharing.mig_config][0]["mig-devices"]) is not None
    for entries in config["mig-configs"].values():
        assert all(set(entry) <= fields for entry in entries)


def test_an_unplaceable_layout_would_be_seen(inventory, write):
    """The placement assertion above is not vacuous: 2x3g.40gb + 1g.10gb has no placement on an A100."""
    inventory["group_vars"]["gpu"]["gpu_sharing"]["mig_devices"] = {"3g.40gb": 2, "1g.10gb": 1}
    config = gpu.mig_parted_config(built(inventory, write).env)
    assert placement("A100-80GB", config["mig-configs"]["all-1g.10gb"][0]["mig-devices"]) is None


def test_the_mig_parted_text_is_one_source(inventory, write):
    view = built(inventory, write)
    concern = gpu.build(view)
    text = concern.files[gpu.MIG_PARTED_FILE]
    assert yaml.safe_load(text) == gpu.mig_parted_config(view.env)
    assert text == gpu.mig_parted_text(built(inventory, write).env)  # deterministic
    for pool in gpu_pools(view.env):
        selection = gpu.host_mig_parted(view.env, pool)
        assert selection is not None and selection.text == text
        assert selection.config in yaml.safe_load(text)["mig-configs"]


def test_host_mig_parted_selects_per_pool(inventory, write):
    env = built(inventory, write).env
    assert gpu.host_mig_parted(env, env.pools["gpu"]).config == "all-1g.10gb"
    assert gpu.host_mig_parted(env, env.pools["t4"]).config == gpu.MIG_DISABLED
    assert gpu.host_mig_parted(env, env.pools["cpu"]) is None


def test_two_pools_sharing_a_mig_config_name_with_one_layout_share_one_entry(inventory, write):
    inventory["hosts"]["all"]["children"]["node_pools"]["children"]["gpu2"] = {"hosts": {"gpu-2": {"zone": "b"}}}
    inventory["group_vars"]["gpu2"] = copy.deepcopy(inventory["group_vars"]["gpu"])
    config = gpu.mig_parted_config(built(inventory, write).env)
    assert set(config["mig-configs"]) == {"all-1g.10gb", gpu.MIG_DISABLED}


def test_two_layouts_under_one_mig_config_name_are_refused(inventory, write):
    inventory["hosts"]["all"]["children"]["node_pools"]["children"]["gpu2"] = {"hosts": {"gpu-2": {"zone": "b"}}}
    inventory["group_vars"]["gpu2"] = copy.deepcopy(inventory["group_vars"]["gpu"])
    inventory["group_vars"]["gpu2"]["gpu_sharing"]["mig_devices"] = {"2g.20gb": 3}
    with pytest.raises(ValueError, match="different layouts"):
        gpu.mig_parted_config(built(inventory, write).env)


def test_a_mig_layout_named_all_disabled_is_refused(inventory, write):
    inventory["group_vars"]["gpu"]["gpu_sharing"]["mig_config"] = gpu.MIG_DISABLED
    with pytest.raises(ValueError, match="name of MIG off"):
        gpu.mig_parted_config(built(inventory, write).env)


# --- releases: pinned, placed on exactly the GPU pools, values keys known ---------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_releases_pin_the_versions_file(name):
    concern = gpu.build(shipped(name))
    assert {r.name for r in concern.releases} == {gpu.DEVICE_PLUGIN, gpu.DCGM_EXPORTER}
    for r in concern.releases:
        pinned = versions()[r.component]
        assert pinned.chart is not None
        assert r.namespace == gpu.GPU_NAMESPACE
        assert (r.as_dict()["chart"], r.as_dict()["repository"], r.as_dict()["version"]) == (
            pinned.chart.name, pinned.chart.repository, pinned.chart.version)
    plugin = release(concern, gpu.DEVICE_PLUGIN).values
    images = versions()[gpu.DEVICE_PLUGIN].images
    assert "{repository}:{tag}".format(**plugin["image"]) == images["device-plugin"].reference
    assert "{repository}:{tag}".format(**plugin["nfd"]["image"]) == images["node-feature-discovery"].reference
    dcgm = release(concern, gpu.DCGM_EXPORTER).values
    assert "{repository}:{tag}".format(**dcgm["image"]) == versions()[gpu.DCGM_EXPORTER].images["dcgm-exporter"].reference


@pytest.mark.parametrize("name", SHIPPED)
def test_plugin_gfd_nfd_worker_and_dcgm_run_on_exactly_the_gpu_pools(name):
    view = shipped(name)
    concern = gpu.build(view)
    plugin = release(concern, gpu.DEVICE_PLUGIN).values
    assert placement_problems(view, plugin["nfd"]["worker"]) == []
    for values in (plugin, release(concern, gpu.DCGM_EXPORTER).values):
        assert placement_problems(view, values, gpu_client=True) == []
        assert placement_problems(view, values) != []


@pytest.mark.parametrize("name", SHIPPED)
def test_a_node_paused_for_a_mig_change_loses_exactly_its_gpu_clients(name):
    """The host layer's mig role labels a node before it resets its cards; the pods that hold the cards
    (plugin + GFD + MPS daemon, dcgm-exporter) must leave it, the NFD worker (no card) stays. Matched as the
    DaemonSet controller matches required node affinity (infra.planning.filters, fit's model of it)."""
    view = shipped(name)
    concern = gpu.build(view)
    plugin, dcgm = release(concern, gpu.DEVICE_PLUGIN).values, release(concern, gpu.DCGM_EXPORTER).values
    hosts = [(host, pool) for pool in gpu_pools(view.env) for host in view.of_pool(pool)]
    assert hosts
    for host, pool in hosts:
        labels, name_ = host_labels(host, pool), host.host.name
        paused = {**labels, gpu.GPU_CLIENTS_LABEL: gpu.GPU_CLIENTS_PAUSED}
        resumed = {**labels, gpu.GPU_CLIENTS_LABEL: "any-other-value"}
        for values in (plugin, dcgm):
            assert (matches(values, labels, name_), matches(values, paused, name_),
                    matches(values, resumed, name_)) == (True, False, True)
        assert matches(plugin["nfd"]["worker"], paused, name_)
    # the host layer sets the very label the affinity excludes
    pause_labels = [host["mig"]["pause_label"] for host in environment_host_vars(view.env)["hosts"].values()
                    if host["mig"]]
    assert pause_labels and all(label == {"key": gpu.GPU_CLIENTS_LABEL, "value": gpu.GPU_CLIENTS_PAUSED}
                                for label in pause_labels)


def test_placement_missing_a_pool_or_its_taint_is_caught(inventory, write):
    view = built(inventory, write)
    only_mig = on_pools([view.env.pools["gpu"]])
    assert placement_problems(view, only_mig) == ["affinity [('node-restriction.kubernetes.io/k8s-node-pools.pool', 'In', ('gpu',))], "
                                                  "want [('node-restriction.kubernetes.io/k8s-node-pools.pool', 'In', ('gpu', 't4'))]"]
    inventory["group_vars"]["t4"]["node_taints"].append("workload-profile=offline:NoSchedule")
    view = built(inventory, write)
    assert placement_problems(view, on_pools([view.env.pools["gpu"], view.env.pools["t4"]])) == []
    stale = on_pools([view.env.pools["gpu"]])
    stale["affinity"] = on_pools(gpu_pools(view.env))["affinity"]
    assert placement_problems(view, stale) == [
        "tolerates [('nvidia.com/gpu', 'present', 'NoSchedule')], GPU pools taint "
        "[('nvidia.com/gpu', 'present', 'NoSchedule'), ('workload-profile', 'offline', 'NoSchedule')]"]


def defaults(component: str) -> dict[str, Any]:
    """The chart's defaults for the keys chart_values.yml records, as a nested values map."""
    keys = getattr(chart_values(), component.replace("-", "_")).keys
    nested: dict[str, Any] = {}
    for path, fact in keys.items():
        if fact.default is None:
            continue
        *parents, leaf = path.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = copy.deepcopy(fact.default)
    return nested


def helm_merge(base: Any, override: Any) -> Any:
    """Helm's values merge: maps key by key, everything else (lists included) replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {k: helm_merge(base[k], override[k]) if k in base and k in override else
                copy.deepcopy(override.get(k, base.get(k))) for k in base.keys() | override.keys()}
    return copy.deepcopy(override)


def test_the_charts_default_affinity_and_tolerations_do_not_survive_the_merge(inventory, write):
    """Our affinity sets the same path as the chart's (nodeSelectorTerms, a list), so Helm replaces it:
    no NFD-label term is left to put the plugin on a node outside the GPU pools."""
    view = built(inventory, write)
    concern = gpu.build(view)
    for component in (gpu.DEVICE_PLUGIN, gpu.DCGM_EXPORTER):
        merged = helm_merge(defaults(component), release(concern, component).values)
        assert placement_problems(view, merged, gpu_client=True) == []
    broken = copy.deepcopy(release(concern, gpu.DEVICE_PLUGIN).values)
    broken["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    merged = helm_merge(defaults(gpu.DEVICE_PLUGIN), broken)
    assert placement_problems(view, merged, gpu_client=True) != []  # the default's NFD terms survive a different path


def recorded_problems(component: str, values: dict[str, Any]) -> list[str]:
    """Values paths set that chart_values.yml does not record (nor gpu.UNRECORDED_KEYS names)."""
    known = set(getattr(chart_values(), component.replace("-", "_")).keys) | set(gpu.UNRECORDED_KEYS[component])
    problems = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        for k, v in node.items():
            path = f"{prefix}{k}"
            if path in known:
                continue
            if isinstance(v, dict) and v:
                walk(v, path + ".")
            else:
                problems.append(path)

    walk(values, "")
    return problems


@pytest.mark.parametrize("name", SHIPPED)
def test_every_values_key_is_a_recorded_chart_fact(name):
    concern = gpu.build(shipped(name))
    for r in concern.releases:
        assert recorded_problems(r.component, r.values) == []
    assert recorded_problems(gpu.DEVICE_PLUGIN, {"migStrategy": "mixed", "config": {"mapp": {}}}) == ["config.mapp"]


def test_the_global_mig_strategy_stays_unset(inventory, write):
    """As env MIG_STRATEGY it would outrank every pool's flags.migStrategy."""
    values = release(gpu.build(built(inventory, write)), gpu.DEVICE_PLUGIN).values
    assert "migStrategy" not in values
    assert chart_values().nvidia_device_plugin.keys["migStrategy"].default is None
    assert values["gfd"] == {"enabled": True} and values["nfd"]["enabled"] is True


# --- dcgm-exporter ----------------------------------------------------------------------------------


def test_dcgm_exporter_service_is_ready_for_a_service_monitor(inventory, write):
    env = built(inventory, write).env
    values = gpu.dcgm_exporter_values(env)
    facts = chart_values().dcgm_exporter
    assert values["service"] == {"enable": True, "port": facts.service_port}
    assert values["serviceMonitor"] == {"enabled": False}
    assert gpu.dcgm_service_labels() == {"app.kubernetes.io/name": "dcgm-exporter",
                                         "app.kubernetes.io/instance": gpu.DCGM_EXPORTER,
                                         "app.kubernetes.io/component": "dcgm-exporter"}
    on = gpu.dcgm_exporter_values(env, service_monitor=True, service_monitor_labels={"release": "prom"})
    assert on["serviceMonitor"] == {"enabled": True, "additionalLabels": {"release": "prom"}}


# --- the concern ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_the_concern_is_deterministic_and_namespaced(name):
    first, second = gpu.build(shipped(name)), gpu.build(shipped(name))
    assert first == second
    assert first.name == "gpu"
    assert [key(o) for o in first.objects] == [("v1", "Namespace", "", gpu.GPU_NAMESPACE)]
    assert first.objects[0]["metadata"]["labels"][gpu.POD_SECURITY_ENFORCE] == "privileged"
    rendered = yaml.safe_dump([r.as_dict() for r in first.releases], sort_keys=True)
    assert "&id" not in rendered  # no shared dicts rendered as YAML anchors


def test_no_gpu_pools_no_gpu_concern(inventory, write):
    pools = inventory["hosts"]["all"]["children"]["node_pools"]["children"]
    for name in ("gpu", "t4"):
        del pools[name]
        del inventory["group_vars"][name]
    for tenant in ("infer", "batch"):
        del inventory["group_vars"]["all"]["tenants"][tenant]
    assert gpu.build(built(inventory, write)) == Concern("gpu")


@pytest.mark.parametrize("name", SHIPPED)
def test_no_tenant_class_can_preempt_dcgm_exporter(name):
    """The chart's own priorityClassName (left at its default) outranks every class of the spec, so an
    inference-high pod never evicts the GPU metrics of its node."""
    view = shipped(name)
    merged = helm_merge(defaults(gpu.DCGM_EXPORTER), release(gpu.build(view), gpu.DCGM_EXPORTER).values)
    rank = SYSTEM_PRIORITY_CLASSES[merged["priorityClassName"]]
    classes = view.env.cluster.priority_classes
    assert classes and all(spec.value < rank for spec in classes.values())
    assert "inference-high" in classes
