"""Scheduling: Volcano queues that name what the pools advertise, a scheduler configuration that keeps
gangs whole, and a descheduler that never touches a GPU pool.

User pain this guards against:
- "Volcano queue capability with nvidia.com/gpu leaves jobs Pending; gangs stuck below minAvailable"
- "Descheduler thresholds evict from the wrong (GPU) nodes"
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from inventory_builder import ROOT, SHIPPED, pools_of
from pydantic import ValidationError

from infra.cluster import scheduling, tenancy
from infra.cluster.nodes import POOL_KIND_LABEL, POOL_LABEL, pool_labels, pool_taints
from infra.cluster.objects import HelmRelease, key
from infra.knowledge.chart_values import chart_values
from infra.knowledge.platform import Platform, platform
from infra.knowledge.versions import versions
from infra.model.capacity import combined, pool_capacity
from infra.model.resolve import Resolved, resolve
from infra.spec import load_environment


def shipped(name: str) -> Resolved:
    return resolve(load_environment(ROOT / "inventories" / name))


@pytest.fixture
def view_of(write):
    def _view(data: dict) -> Resolved:
        return resolve(load_environment(write(data)))

    return _view


def with_extra_gpu_pool(data: dict) -> dict:
    """The builder's inventory plus a whole-GPU gpu_bigmem pool "big" the shipped ones do not have."""
    pools_of(data)["big"] = {"hosts": {"big-1": {"zone": "a"}}}
    big = copy.deepcopy(data["group_vars"]["gpu"])
    big.update(pool_kind="gpu_bigmem", gpu_sharing={"mode": "exclusive"},
               node_taints=["nvidia.com/gpu=present:NoSchedule", "workload-profile=training:NoSchedule"])
    data["group_vars"]["big"] = big
    return data


def all_views(inventory: dict, view_of) -> dict[str, Resolved]:
    views = {name: shipped(name) for name in SHIPPED}
    views["builder"] = view_of(inventory)
    views["builder+big"] = view_of(with_extra_gpu_pool(copy.deepcopy(inventory)))
    return views


def release(concern_releases: list[HelmRelease], name: str) -> HelmRelease:
    return next(r for r in concern_releases if r.name == name)


# --- an independent reading of Kubernetes label selectors and tolerations -----------------------


def _requirements(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def selects(selector: str, labels: dict[str, str]) -> bool:
    """Whether a label selector string (labels.Parse syntax) selects an object with these labels."""
    for requirement in _requirements(selector):
        if match := re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", requirement):
            name, operator, listed = match.groups()
            values = {value.strip() for value in listed.split(",")}
            # "in" needs the label; "notin" also selects objects without it
            ok = labels.get(name) in values if operator == "in" else labels.get(name) not in values
        elif match := re.fullmatch(r"(\S+?)\s*(!=|==|=)\s*(\S+)", requirement):
            name, operator, value = match.groups()
            ok = labels.get(name) != value if operator == "!=" else labels.get(name) == value
        elif requirement.startswith("!"):
            ok = requirement[1:] not in labels
        else:
            ok = requirement in labels
        if not ok:
            return False
    return True


def tolerated(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint["effect"]):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (None, "", taint["key"]):
            return True
        if toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def selected_pools(selector: str, view: Resolved) -> set[str]:
    return {name for name, pool in view.env.pools.items() if selects(selector, pool_labels(pool))}


def gpu_pools_selected(selector: str, view: Resolved) -> set[str]:
    return {name for name in selected_pools(selector, view) if view.env.pools[name].vars.is_gpu}


# --- queues -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_queues_are_exactly_the_spec_queues(name):
    view = shipped(name)
    tenants = view.env.cluster.tenants
    queues = {o["metadata"]["name"]: o for o in scheduling.build(view).objects if o["kind"] == "Queue"}
    assert set(queues) == {t for t, tenant in tenants.items() if tenant.queue is not None}
    assert queues, "the shipped inventories have queues"
    facts = chart_values().volcano.queue
    for tenant_name, rendered in queues.items():
        spec_queue = tenants[tenant_name].queue
        assert rendered["apiVersion"] == facts.api_version == "scheduling.volcano.sh/v1beta1"
        assert "namespace" not in rendered["metadata"]  # Queues are cluster-scoped
        assert rendered["spec"] == {"weight": spec_queue.weight, "reclaimable": spec_queue.reclaimable,
                                    "capability": spec_queue.capability}
        assert all(isinstance(amount, str) for amount in rendered["spec"]["capability"].values())


def test_the_builder_queue_with_quantities_as_strings(inventory, view_of):
    rendered = scheduling.queues(view_of(inventory))
    assert [q["metadata"]["name"] for q in rendered] == ["batch"]
    assert rendered[0]["spec"] == {"weight": 2, "reclaimable": True,
                                   "capability": {"cpu": "8", "nvidia.com/gpu.shared": "4"}}


def test_a_queue_without_capability_renders_none(inventory, view_of):
    inventory["group_vars"]["all"]["tenants"]["svc"]["queue"] = {"weight": 3, "reclaimable": False}
    svc = next(q for q in scheduling.queues(view_of(inventory)) if q["metadata"]["name"] == "svc")
    assert svc["spec"] == {"weight": 3, "reclaimable": False}


@pytest.mark.parametrize("name", SHIPPED)
def test_every_capability_resource_is_advertised_by_the_tenants_pools(name):
    view = shipped(name)
    for queue in scheduling.queues(view):
        tenant = view.env.cluster.tenants[queue["metadata"]["name"]]
        offered = combined(pool_capacity(view, view.env.pools[p]) for p in tenant.pools)
        for resource in queue["spec"].get("capability", {}):
            if "/" in resource:
                assert offered.gpu_resources[resource] > 0, (tenant, resource)
            else:
                assert resource in scheduling.NODE_RESOURCES or offered.hugepages[resource] > 0, (tenant, resource)


@pytest.mark.parametrize("tenant, capability, pools", [
    # the anchor: nvidia.com/gpu on a MIG pool, which advertises nvidia.com/mig-<profile> only
    ("infer", {"nvidia.com/gpu": 1}, "gpu"),
    ("batch", {"nvidia.con/gpu": 1}, "t4"),  # a typo
    ("batch", {"nvidia.com/gpu": 1}, "t4"),  # a time-sliced pool advertises nvidia.com/gpu.shared
    ("svc", {"hugepages-1Gi": "4Gi"}, "cpu"),  # no pool of the tenant reserves 1Gi pages
])
def test_a_capability_the_pools_do_not_advertise_is_refused(inventory, view_of, findings, tenant, capability,
                                                          pools):
    inventory["group_vars"]["all"]["tenants"][tenant]["queue"] = {"capability": capability}
    with pytest.raises(ValueError, match=f"none of {pools} advertises"):
        scheduling.build(view_of(inventory))
    # the checks refuse the same spec, so `pulumi up` never gets that far
    assert {f.code for f in findings(inventory) if f.severity == "error"} & {"QUOTA-GPU-RESOURCE", "QUOTA-HUGEPAGES"}


@pytest.mark.parametrize("reserved", ["root", "default"])
def test_a_tenant_queue_may_not_take_a_name_volcano_creates(inventory, view_of, reserved):
    tenants = inventory["group_vars"]["all"]["tenants"]
    tenants[reserved] = tenants.pop("batch")
    with pytest.raises(ValueError, match="Volcano creates a queue of that name"):
        scheduling.build(view_of(inventory))


# --- the Volcano release and its scheduler configuration ----------------------------------------


def conf_of(view: Resolved) -> str:
    values = release(scheduling.build(view).releases, "volcano").values
    text: str = values["custom"]["scheduler_config_override"]
    return text


def missing_plugins(conf: str) -> set[str]:
    return set(chart_values().volcano.required_plugins) - chart_values().volcano.conf_plugins(conf)


def victim_problems(conf: str) -> list[str]:
    """What lets preempt or reclaim break a gang or ignore queue shares, in a parsed configuration."""
    parsed = yaml.safe_load(conf)
    actions = {a.strip() for a in parsed["actions"].split(",")}
    tiers = [{p["name"]: p for p in tier["plugins"]} for tier in parsed["tiers"]]
    problems = []
    if not {"preempt", "reclaim"} <= actions:
        problems.append(f"actions {sorted(actions)} lack preempt or reclaim: reclaimable queues mean nothing")
    deciding = next((tier for tier in tiers if "gang" in tier), {})
    for flag in ("enablePreemptable", "enableReclaimable"):
        if deciding.get("gang", {}).get(flag) is False:
            problems.append(f"gang has {flag}: false, so evictions may take a gang below minAvailable")
    for name in ("priority", "conformance", "proportion"):
        if name not in deciding:
            problems.append(f"{name} is not in gang's tier: victims are chosen without it")
    for tier in tiers:
        if tier is deciding:
            continue
        for name, plugin in tier.items():
            if name in ("drf", "gang", "conformance", "proportion", "priority") and not (
                    plugin.get("enablePreemptable") is False and plugin.get("enableReclaimable") is False):
                problems.append(f"{name} in a later tier picks victims when the first tier finds none")
    return problems


@pytest.mark.parametrize("name", SHIPPED)
def test_the_scheduler_conf_enables_gang_priority_proportion_predicates(name):
    conf = conf_of(shipped(name))
    assert {"gang", "priority", "proportion", "predicates"} <= chart_values().volcano.conf_plugins(conf)
    assert missing_plugins(conf) == set()


@pytest.mark.parametrize("plugin", ["gang", "priority", "proportion", "predicates"])
def test_a_conf_without_a_required_plugin_is_caught(plugin, monkeypatch):
    parsed = yaml.safe_load(scheduling.scheduler_conf())
    for tier in parsed["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != plugin]
    assert missing_plugins(yaml.safe_dump(parsed)) == {plugin}
    # and the module refuses to produce such a configuration
    original = scheduling._tiers
    monkeypatch.setattr(scheduling, "_tiers", lambda: [[p for p in tier if p["name"] != plugin]
                                                       for tier in original()])
    with pytest.raises(ValueError, match=plugin):
        scheduling.scheduler_conf()


def test_preemption_and_reclaim_keep_gangs_whole_and_honour_queue_shares():
    assert victim_problems(scheduling.scheduler_conf()) == []
    # the chart's default, with preempt and reclaim merely added, would break gangs
    default = yaml.safe_load(chart_values().volcano.default_scheduler_conf)
    default["actions"] = ", ".join(scheduling.ACTIONS)
    problems = victim_problems(yaml.safe_dump(default))
    assert any("gang has enablePreemptable: false" in p for p in problems)
    assert any("proportion is not in gang's tier" in p for p in problems)


def test_the_scheduler_conf_is_deterministic_and_fresh_each_time():
    first = scheduling.scheduler_conf()
    scheduling._tiers()[0].clear()  # a caller mutating one copy changes nothing
    assert scheduling.scheduler_conf() == first
    assert yaml.safe_load(first)["actions"] == "enqueue, allocate, preempt, reclaim, backfill"


@pytest.mark.parametrize("name", SHIPPED)
def test_volcano_runs_pinned_images_without_bundled_monitoring(name):
    volcano = release(scheduling.build(shipped(name)).releases, "volcano")
    assert volcano.namespace == scheduling.VOLCANO_NAMESPACE
    assert volcano.values["custom"]["metrics_enable"] is False
    images = versions()["volcano"].images.values()
    assert {image.registry for image in images} == {volcano.values["basic"]["image_registry"]}
    assert {image.tag for image in images} == {volcano.values["basic"]["image_tag_version"]}


@pytest.mark.parametrize("name", SHIPPED)
def test_volcano_routes_a_tenants_podgroups_to_the_queue_its_namespace_names(name):
    """The chart's webhooks stay, plus the one that reads the namespace's queue annotation; and every
    annotation names a Queue the stack declares (the admission policy then refuses any other)."""
    view = shipped(name)
    enabled = release(scheduling.build(view).releases, "volcano").values["custom"]["enabled_admissions"].split(",")
    chart_default = chart_values().volcano.keys["custom.enabled_admissions"].default.split(",")
    assert enabled == [*chart_default, scheduling.PODGROUP_MUTATION]
    queues = {q["metadata"]["name"] for q in scheduling.queues(view)}
    routed = {ns["metadata"]["annotations"][tenancy.QUEUE_ANNOTATION] for ns in tenancy.build(view).objects
              if ns["kind"] == "Namespace" and tenancy.QUEUE_ANNOTATION in ns["metadata"].get("annotations", {})}
    assert routed == queues
    assert scheduling.PODGROUP_MUTATION not in chart_default  # else the release would not need to name it


def test_the_volcano_namespace_is_declared(inventory, view_of):
    objects = scheduling.build(view_of(inventory)).objects
    assert {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "volcano-system", "labels": {"app.kubernetes.io/managed-by": "k8s-node-pools"}}} in objects
    assert objects == sorted(objects, key=key)


def _paths(values: dict[str, Any], prefix: str = "") -> set[str]:
    paths = set()
    for name, value in values.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and path not in ("custom.default_affinity", "affinity", "deschedulerPolicy"):
            paths |= _paths(value, path + ".")
        else:
            paths.add(path)
    return paths


@pytest.mark.parametrize("name", SHIPPED)
def test_values_set_only_keys_the_charts_have(name):
    releases = scheduling.build(shipped(name)).releases
    documented = {r.component: set(getattr(chart_values(), r.component).keys) for r in releases}
    for r in releases:
        # `affinity` (descheduler) is in the chart's values.yaml at 0.36.0 but not yet in chart_values.yml
        extra = {"affinity"} if r.component == "descheduler" else set()
        assert _paths(r.values) <= documented[r.component] | extra, r.name


# --- releases are pinned ------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_releases_pin_versions_yml(name):
    releases = scheduling.build(shipped(name)).releases
    assert sorted(r.name for r in releases) == ["descheduler", "descheduler-balance", "volcano"]
    for r in releases:
        chart = versions()[r.component].chart
        assert chart is not None
        rendered = r.as_dict()
        assert (rendered["chart"], rendered["repository"], rendered["version"]) == (
            chart.name, chart.repository, chart.version)
    # the descheduler chart runs image.repository:v<appVersion>, which is the pinned image
    pinned = versions()["descheduler"]
    assert pinned.images["descheduler"].tag == "v" + pinned.app_version


# --- the descheduler ----------------------------------------------------------------------------


def policies(view: Resolved) -> dict[str, dict[str, Any]]:
    return {r.name: r.values["deschedulerPolicy"] for r in scheduling.build(view).releases
            if r.component == "descheduler"}


def enabled(policy: dict[str, Any], point: str) -> set[str]:
    return {name for p in policy["profiles"] for name in p["plugins"].get(point, {}).get("enabled", [])}


def test_the_descheduler_never_selects_a_gpu_pool(inventory, view_of):
    for label, view in all_views(inventory, view_of).items():
        for name, policy in policies(view).items():
            assert gpu_pools_selected(policy["nodeSelector"], view) == set(), (label, name)
            assert not selects(policy["nodeSelector"], {}), "an unlabelled node is never processed"
        evict = policies(view)["descheduler"]["nodeSelector"]
        assert selected_pools(evict, view) == {p for p, pool in view.env.pools.items() if not pool.vars.is_gpu}
    assert "big" in all_views(inventory, view_of)["builder+big"].env.pools


def test_a_selector_that_names_gpu_kinds_one_by_one_is_caught(inventory, view_of):
    view = view_of(with_extra_gpu_pool(inventory))
    assert gpu_pools_selected(f"{POOL_KIND_LABEL} notin (gpu)", view) == {"big"}
    assert gpu_pools_selected(f"{POOL_LABEL} notin (gpu,t4)", view) == {"big"}
    # "notin" also selects nodes that lack the label, which the allow-list does not
    assert selects(f"{POOL_KIND_LABEL} notin (gpu,gpu_bigmem)", {})
    assert not selects(scheduling.node_selector(["cpu", "memory"]), {})


def test_low_node_utilization_balances_only_the_cpu_pools(inventory, view_of):
    for label, view in all_views(inventory, view_of).items():
        found = policies(view)
        balancing = {name for name, policy in found.items() if "LowNodeUtilization" in enabled(policy, "balance")}
        assert balancing == {"descheduler-balance"}, label
        cpu = {p for p, pool in view.env.pools.items() if pool.vars.pool_kind == "cpu"}
        assert selected_pools(found["descheduler-balance"]["nodeSelector"], view) == cpu, label
        assert enabled(found["descheduler-balance"], "deschedule") == set()
        # balancing under the eviction policy's selector would move pods on the memory pools too
        assert selected_pools(found["descheduler"]["nodeSelector"], view) != cpu


def test_low_node_utilization_thresholds_come_from_platform_yml():
    policy = policies(shipped("example"))["descheduler-balance"]
    config = next(c for c in policy["profiles"][0]["pluginConfig"] if c["name"] == "LowNodeUtilization")
    limits = platform().scheduling.descheduler.low_node_utilization
    assert config["args"] == {"thresholds": limits.thresholds, "targetThresholds": limits.target_thresholds}
    assert config["args"]["thresholds"] == {"cpu": 20, "memory": 20, "pods": 20}
    assert config["args"]["targetThresholds"] == {"cpu": 50, "memory": 50, "pods": 50}


@pytest.mark.parametrize("name", SHIPPED)
def test_the_eviction_policy_enforces_the_pools_taints_and_required_affinity(name):
    view = shipped(name)
    policy = policies(view)["descheduler"]
    assert enabled(policy, "deschedule") == {"RemovePodsViolatingNodeTaints", "RemovePodsViolatingNodeAffinity"}
    assert enabled(policy, "balance") == set()
    configs = {c["name"]: c.get("args", {}) for c in policy["profiles"][0]["pluginConfig"]}
    assert configs["RemovePodsViolatingNodeAffinity"] == {
        "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}
    owned = {f"{t['key']}={t['value']}" if t.get("value") else t["key"]
             for pool in view.env.pools.values() if not pool.vars.is_gpu for t in pool_taints(pool)}
    assert set(configs["RemovePodsViolatingNodeTaints"]["includedTaints"]) == owned
    # a cordon is not a pool taint: cordoning a node must not empty it
    assert "node.kubernetes.io/unschedulable" not in configs["RemovePodsViolatingNodeTaints"]["includedTaints"]
    evictor = configs["DefaultEvictor"]
    assert (evictor["nodeFit"], evictor["podProtections"]) == (True, {"extraEnabled": ["PodsWithPVC"]})


def label_selector_selects(selector, labels):
    """A metav1.LabelSelector's verdict on labels (matchLabels and the four operators)."""
    ops = {"In": lambda e: labels.get(e["key"]) in e["values"],
           "NotIn": lambda e: labels.get(e["key"]) not in e["values"],
           "Exists": lambda e: e["key"] in labels, "DoesNotExist": lambda e: e["key"] not in labels}
    return (all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
            and all(ops[e["operator"]](e) for e in selector.get("matchExpressions", [])))


@pytest.mark.parametrize("name", SHIPPED)
def test_the_descheduler_never_evicts_a_volcano_jobs_pod(name):
    """Labels as Volcano's job controller writes them on a gang member: evicting one breaks its gang."""
    gang_member = {"volcano.sh/job-name": "train", "volcano.sh/job-namespace": "training",
                   "volcano.sh/queue-name": "training", "volcano.sh/task-spec": "worker"}
    for policy in policies(shipped(name)).values():
        configs = {c["name"]: c.get("args", {}) for c in policy["profiles"][0]["pluginConfig"]}
        selector = configs["DefaultEvictor"]["labelSelector"]
        assert not label_selector_selects(selector, gang_member)
        assert label_selector_selects(selector, {"app": "api"}) and label_selector_selects(selector, {})  # every other pod stays evictable


def test_without_tainted_non_gpu_pools_no_taint_plugin_is_configured(inventory, view_of):
    for gone in ("mem",):
        del pools_of(inventory)[gone]
        del inventory["group_vars"][gone]
    policy = policies(view_of(inventory))["descheduler"]
    assert enabled(policy, "deschedule") == {"RemovePodsViolatingNodeAffinity"}


@pytest.mark.parametrize("name", SHIPPED)
def test_descheduler_releases_are_cronjobs_on_the_pinned_policy_api(name):
    defaults = platform().scheduling.descheduler
    releases = {r.name: r for r in scheduling.build(shipped(name)).releases if r.component == "descheduler"}
    assert releases["descheduler"].values["schedule"] == defaults.schedule == "*/10 * * * *"
    assert releases["descheduler-balance"].values["schedule"] == defaults.balance_schedule
    for r in releases.values():
        assert r.namespace == "kube-system"
        assert r.values["kind"] == "CronJob"
        assert r.values["deschedulerPolicyAPIVersion"] == chart_values().descheduler.policy.api_version
        assert set(r.values["deschedulerPolicy"]) <= set(chart_values().descheduler.policy.top_level)


def test_descheduler_plugin_arguments_are_checked_against_chart_values():
    assert scheduling.plugin_config("RemovePodsViolatingNodeTaints", {"includedTaints": ["a"]})["args"]
    with pytest.raises(ValueError, match="takes no arguments"):
        scheduling.plugin_config("LowNodeUtilization", {"threshold": {"cpu": 20}})
    with pytest.raises(ValueError, match="not described"):
        scheduling.plugin_config("RemoveDuplicatez")
    with pytest.raises(ValueError, match="do not run at balance"):
        scheduling.profile("p", [scheduling.plugin_config("RemovePodsViolatingNodeTaints")], "balance")


def test_a_cluster_without_non_gpu_pools_gets_volcano_and_no_descheduler(inventory, view_of):
    for gone in ("cpu", "mem"):
        del pools_of(inventory)[gone]
        del inventory["group_vars"][gone]
    for tenant in ("svc", "cache"):
        del inventory["group_vars"]["all"]["tenants"][tenant]
    concern = scheduling.build(view_of(inventory))
    assert [r.name for r in concern.releases] == ["volcano"]
    custom = concern.releases[0].values["custom"]
    assert "default_affinity" not in custom and "default_tolerations" not in custom


# --- the scheduling components' own pods --------------------------------------------------------


def component_placements(view: Resolved) -> dict[str, dict[str, Any]]:
    placements = {}
    for r in scheduling.build(view).releases:
        if r.component == "volcano":
            custom = r.values["custom"]
            placements[r.name] = {"affinity": custom.get("default_affinity"),
                                  "tolerations": custom.get("default_tolerations") or []}
        else:
            placements[r.name] = {"affinity": r.values.get("affinity"), "tolerations": r.values.get("tolerations", [])}
    return placements


def affinity_pools(affinity: dict[str, Any]) -> set[str]:
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expression,) = terms[0]["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (POOL_LABEL, "In")
    return set(expression["values"])


def gpu_taints_tolerated(placement: dict[str, Any], view: Resolved) -> list[dict[str, Any]]:
    return [taint for pool in view.env.pools.values() if pool.vars.is_gpu for taint in pool_taints(pool)
            if tolerated(placement["tolerations"], taint)]


def test_no_scheduling_component_tolerates_a_gpu_taint(inventory, view_of):
    for label, view in all_views(inventory, view_of).items():
        cpu = {p for p, pool in view.env.pools.items() if pool.vars.pool_kind == "cpu"}
        for name, placement in component_placements(view).items():
            assert gpu_taints_tolerated(placement, view) == [], (label, name)
            assert affinity_pools(placement["affinity"]) == cpu, (label, name)


def test_a_taint_key_shared_with_a_gpu_pool_is_tolerated_for_its_value_only(inventory, view_of):
    inventory["group_vars"]["cpu"]["node_taints"] = ["workload-profile=general:NoSchedule",
                                                     "nvidia.com/gpu=present:NoSchedule"]
    inventory["group_vars"]["t4"]["node_taints"].append("workload-profile=gpu-offline:NoSchedule")
    view = view_of(inventory)
    for name, placement in component_placements(view).items():
        # the shared-key taint is tolerated by value; the one identical to a GPU taint is not at all
        assert placement["tolerations"] == [{"key": "workload-profile", "operator": "Equal", "value": "general",
                                             "effect": "NoSchedule"}], name
        assert gpu_taints_tolerated(placement, view) == []
    # the failing case: tolerating the key with Exists would let the pods onto the t4 pool
    loose = {"tolerations": [{"key": "workload-profile", "operator": "Exists", "effect": "NoSchedule"}]}
    assert gpu_taints_tolerated(loose, view) == [{"key": "workload-profile", "value": "gpu-offline",
                                                  "effect": "NoSchedule"}]


def test_without_cpu_pools_the_components_go_to_the_other_non_gpu_pools(inventory, view_of):
    del pools_of(inventory)["cpu"]
    del inventory["group_vars"]["cpu"]
    del inventory["group_vars"]["all"]["tenants"]["svc"]
    view = view_of(inventory)
    placements = component_placements(view)
    assert sorted(placements) == ["descheduler", "volcano"]  # nothing to balance without CPU pools
    for placement in placements.values():
        assert affinity_pools(placement["affinity"]) == {"mem"}
        assert placement["tolerations"] == [{"key": "pool", "operator": "Equal", "value": "mem",
                                             "effect": "NoSchedule"}]


def test_the_toleration_rule_matches_kubernetes():
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert scheduling.tolerates({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, taint)
    assert scheduling.tolerates({"key": "k", "operator": "Exists"}, taint)
    assert scheduling.tolerates({"operator": "Exists"}, taint)
    assert not scheduling.tolerates({"key": "k", "operator": "Equal", "value": "w"}, taint)
    assert not scheduling.tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert not scheduling.tolerates({"key": "j", "operator": "Exists"}, taint)


# --- determinism and the knowledge behind it ----------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_build_is_deterministic(name):
    first, second = scheduling.build(shipped(name)), scheduling.build(shipped(name))
    assert first.name == "scheduling"
    assert first.objects == second.objects
    assert [r.as_dict() for r in first.releases] == [r.as_dict() for r in second.releases]


@pytest.mark.parametrize("change, message", [
    (lambda s: s["descheduler"]["low_node_utilization"]["thresholds"].update(cpu=60), "threshold 60"),
    (lambda s: s["descheduler"]["low_node_utilization"]["thresholds"].pop("pods"), "same resources"),
    (lambda s: s["descheduler"].update(schedule="every 10 minutes"), "cron"),
    (lambda s: s["descheduler"].update(balance_schedule="*/10 * * *"), "cron"),
])
def test_platform_scheduling_defaults_are_validated(change, message):
    raw = platform().model_dump()
    Platform.model_validate(raw)
    change(raw["scheduling"])
    with pytest.raises(ValidationError, match=message):
        Platform.model_validate(raw)

