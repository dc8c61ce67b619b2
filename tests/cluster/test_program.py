"""The Pulumi program under mocks: what it declares for both shipped environments, and the invariants
that make node pools work. Each invariant is a function returning its violations, tested on the
program's output (none) and on a deliberately broken declaration (some), so none can pass vacuously."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulumi
import pytest
from inventory_builder import ROOT, SHIPPED, pools_of

from infra.cluster import nodes as node_labels
from infra.cluster.components import ClusterSettings, resource_name, type_token
from infra.cluster.node_owner import DYNAMIC_RESOURCE
from infra.model.capacity import pool_capacity
from infra.model.resolve import resolve
from infra.render import render
from infra.spec import Environment, load_environment
from infra.stack import declare

SETTINGS = ClusterSettings(kubeconfig="/nonexistent/kubeconfig-of-the-test-cluster")
RELEASE = "kubernetes:helm.sh/v3:Release"


def declared(mocks, path, settings=SETTINGS) -> list:
    @pulumi.runtime.test
    def program():
        declare(str(path), settings)

    program()
    return list(mocks.registered)


def shipped(env_name: str) -> Environment:
    return load_environment(ROOT / "inventories" / env_name)


def of_type(registered, kind: str) -> list:
    return [r for r in registered if r.typ.rsplit(":", 1)[-1] == kind]


def tolerations_in(value: Any) -> Iterator[list]:
    """Every `tolerations` list anywhere inside a resource's inputs (objects and Helm values alike)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "tolerations" and isinstance(inner, list):
                yield inner
            else:
                yield from tolerations_in(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from tolerations_in(inner)


def tolerates(tolerations: list, taint: dict) -> bool:
    return any((t.get("operator") == "Exists" and not t.get("key")) or
               (t.get("key") == taint["key"] and t.get("effect") in (None, "", taint["effect"]) and
                (t.get("operator") == "Exists" or t.get("value") == taint.get("value")))
               for t in tolerations)


def affinity_pools(value: Any) -> set[str] | None:
    """The pools a resource's required node affinity on the pool label allows (None: no such affinity)."""
    found: set[str] | None = None
    if isinstance(value, dict):
        if value.get("key") == node_labels.POOL_LABEL and value.get("operator") == "In":
            return set(value.get("values", []))
        items = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return None
    for inner in items:
        pools = affinity_pools(inner)
        if pools is not None:
            found = pools if found is None else found | pools
    return found


def tolerated_pools(env: Environment, inputs: dict) -> set[str]:
    """Pools a resource's pods can reach: every repelling taint tolerated, and its pool-label affinity allows it."""
    lists = list(tolerations_in(inputs))
    allowed = affinity_pools(inputs)
    found = set()
    for pool in env.pools.values():
        if allowed is not None and pool.name not in allowed:
            continue
        taints = [t for t in node_labels.pool_taints(pool) if t["effect"] in ("NoSchedule", "NoExecute")]
        if taints and any(all(tolerates(ts, taint) for taint in taints) for ts in lists):
            found.add(pool.name)
    return found


# ------------------------------------------------------------------ invariants


def node_owners(registered) -> list:
    """The program's node owners, one per pool (infra/cluster/node_owner.py)."""
    return [r for r in registered if r.typ == DYNAMIC_RESOURCE]


def owned_nodes(registered) -> Iterator[tuple[str, dict, list]]:
    """(name, labels, taints) of every node the program's node owners keep."""
    for owner in node_owners(registered):
        for name, labels in owner.inputs["nodes"].items():
            yield name, labels, owner.inputs["taints"]


def untainted_gpu_nodes(registered) -> list[str]:
    bad = []
    for name, labels, taints in owned_nodes(registered):
        gpu = labels.get(node_labels.POOL_KIND_LABEL) in ("gpu", "gpu_bigmem")
        if gpu and not {t["effect"] for t in taints} & {"NoSchedule", "NoExecute"}:
            bad.append(name)
    return bad


GPU_AGENTS = {"nvidia-device-plugin", "dcgm-exporter"}


def gpu_pools_tolerated_by_others(env: Environment, registered) -> list[str]:
    """Workloads that tolerate a GPU pool without needing to: only GPU agents, agents of every node (CNI,
    Multus, CSI node plugin: they tolerate every pool) and agents of a per-pool feature (RDMA, local
    volumes: exactly those pools) may."""
    gpu = {p.name for p in env.pools.values() if p.vars.is_gpu}
    rdma = {p.name for p in env.pools.values() if p.vars.rdma_network}
    local = {name for c in env.cluster.storage_classes.values() if c.type == "local" for name in c.pools}
    bad = []
    for r in registered:
        if not r.typ.startswith("kubernetes:"):
            continue
        pools = tolerated_pools(env, r.inputs)
        name = r.inputs.get("name") if r.typ == RELEASE else r.name
        tainted = {p.name for p in env.pools.values() if p.vars.node_taints}
        needed = (pools == tainted  # an agent of every node
                  or (name in GPU_AGENTS and pools <= gpu)
                  or ("/rdma-shared-dp-" in str(name) and pools <= rdma)
                  or (r.typ == RELEASE and str(name).startswith("local-") and pools <= local))
        if pools & gpu and not needed:
            bad.append(f"{r.typ} {name} tolerates {sorted(pools & gpu)}")
    return bad


def gpu_pools_missing_their_agents(env: Environment, registered) -> list[str]:
    gpu = {p.name for p in env.pools.values() if p.vars.is_gpu}
    bad = []
    for agent in GPU_AGENTS:
        [release] = [r for r in of_type(registered, "Release") if r.inputs["name"] == agent] or [None]
        missing = gpu - (tolerated_pools(env, release.inputs) if release else set())
        if missing:
            bad.append(f"{agent} does not tolerate {sorted(missing)}")
    return bad


def tenants_without_quota_or_limits(env: Environment, registered) -> list[str]:
    bad = []
    for tenant in env.cluster.tenants:
        for kind in ("ResourceQuota", "LimitRange"):
            found = [r for r in of_type(registered, kind) if r.inputs["metadata"].get("namespace") == tenant]
            if len(found) != 1:
                bad.append(f"namespace {tenant}: {len(found)} {kind}")
    return bad


def shared_gpus_for_guaranteed_tenants(env: Environment, registered) -> list[str]:
    bad = []
    for quota in of_type(registered, "ResourceQuota"):
        tenant = env.cluster.tenants.get(quota.inputs["metadata"]["namespace"])
        if tenant and tenant.tier in ("production", "inference"):
            bad += [f"{quota.name}: {k}" for k in quota.inputs["spec"]["hard"] if k.endswith("gpu.shared")]
    return bad


def unadvertised_resources(env: Environment, registered) -> list[str]:
    view = resolve(env)
    bad = []
    named = [(q.inputs["metadata"]["namespace"], k.removeprefix("requests."))
             for q in of_type(registered, "ResourceQuota") for k in q.inputs["spec"]["hard"] if "/" in k]
    named += [(q.inputs["metadata"]["name"], k) for q in of_type(registered, "Queue")
              for k in q.inputs["spec"].get("capability", {}) if "/" in k]
    for tenant_name, resource in named:
        if ".storageclass.storage.k8s.io" in resource:
            continue
        advertised = set()
        for pool in env.cluster.tenants[tenant_name].pools:
            advertised |= set(pool_capacity(view, env.pools[pool]).gpu_resources)
        if resource not in advertised:
            bad.append(f"{tenant_name}: {resource}")
    return bad


def nodes_with_a_wrong_device_plugin_config(env: Environment, registered) -> list[str]:
    [release] = [r for r in of_type(registered, "Release") if r.inputs["name"] == "nvidia-device-plugin"]
    configs = release.inputs["values"]["config"]["map"]
    import yaml

    bad = []
    for name, labels, _ in owned_nodes(registered):
        pool = env.pools[labels[node_labels.POOL_LABEL]]
        if not pool.vars.is_gpu:
            continue
        config = yaml.safe_load(configs.get(labels.get(node_labels.DEVICE_PLUGIN_CONFIG_LABEL, ""), "null"))
        sharing = pool.vars.sharing
        want_strategy = "mixed" if sharing.mode == "mig" else "none"
        if not config or config["flags"]["migStrategy"] != want_strategy:
            bad.append(f"{name}: strategy")
            continue
        shared = (config.get("sharing") or {})
        kind = {"time-slicing": "timeSlicing", "mps": "mps"}.get(sharing.mode)
        if kind and shared.get(kind, {}).get("resources", [{}])[0].get("replicas") != sharing.replicas:
            bad.append(f"{name}: replicas")
        if not kind and shared:
            bad.append(f"{name}: shares a card of a {sharing.mode} pool")
    return bad


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("env_name", SHIPPED)
def test_the_shipped_environments_hold_every_invariant(mocks, env_name):
    env = shipped(env_name)
    registered = declared(mocks, env.path)
    assert untainted_gpu_nodes(registered) == []
    assert gpu_pools_tolerated_by_others(env, registered) == []
    assert gpu_pools_missing_their_agents(env, registered) == []
    assert tenants_without_quota_or_limits(env, registered) == []
    assert shared_gpus_for_guaranteed_tenants(env, registered) == []
    assert unadvertised_resources(env, registered) == []
    assert nodes_with_a_wrong_device_plugin_config(env, registered) == []


def test_render_and_the_program_declare_the_same_set(mocks):
    env = shipped("example")
    registered = declared(mocks, env.path)
    program = {(r.typ, r.name) for r in registered
               if not r.typ.startswith(("k8s-node-pools:", "pulumi:providers:"))}
    rendered = render(env)
    files = {(DYNAMIC_RESOURCE, o["metadata"]["labels"][node_labels.POOL_LABEL]) if o["kind"] == "Node"
             else (type_token(o["apiVersion"], o["kind"]), resource_name(o))
             for c in rendered.concerns for o in c.objects}
    files |= {(RELEASE, r.name) for c in rendered.concerns for r in c.releases}
    assert program == files


def test_every_resource_goes_through_the_stacks_own_provider(mocks):
    registered = declared(mocks, shipped("sandbox").path)
    [provider] = [r for r in registered if r.typ == "pulumi:providers:kubernetes"]
    assert provider.inputs["kubeconfig"] == SETTINGS.kubeconfig
    resources = [r for r in registered if r.typ.startswith("kubernetes:")]
    assert resources and all(r.provider and "::cluster::" in r.provider for r in resources)


def test_helm_releases_can_be_left_out(mocks):
    registered = declared(mocks, shipped("example").path, ClusterSettings(kubeconfig="x", helm_releases=False))
    assert of_type(registered, "Release") == [] and node_owners(registered)


def test_one_node_owner_per_pool_keeps_the_rendered_labels_and_taints_and_reads_nothing(mocks):
    env = shipped("example")
    registered = declared(mocks, env.path)
    owners = {r.inputs["pool"]: r.inputs for r in node_owners(registered)}
    assert sorted(owners) == sorted(env.pools)
    (nodes,) = [c for c in render(env).concerns if c.name == "nodes"]
    for o in nodes.objects:
        pool = owners[o["metadata"]["labels"][node_labels.POOL_LABEL]]
        assert pool["nodes"][o["metadata"]["name"]] == o["metadata"]["labels"]
        assert pool["taints"] == o["spec"]["taints"]
    assert {(r["kubeconfig"], r["context"]) for r in owners.values()} == {(SETTINGS.kubeconfig, "")}
    assert mocks.reads == []  # no live read: a preview's cost does not grow with the nodes


def test_the_resource_count_does_not_grow_with_the_nodes(mocks, inventory, write):
    few = len(declared(mocks, write(inventory)))
    mocks.registered.clear()
    for i in range(200):
        pools_of(inventory)["cpu"]["hosts"][f"cpu-extra-{i}"] = {"zone": "a"}
    inventory["group_vars"]["all"]["kube_pods_subnet"] = "10.32.0.0/12"  # a Pod CIDR block for each
    assert len(declared(mocks, write(inventory))) == few


def test_a_spec_with_errors_declares_nothing(mocks, inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    with pytest.raises(pulumi.RunError):
        declared(mocks, write(inventory))
    assert mocks.registered == []


# Each invariant catches its breakage: the same functions on a sabotaged declaration.


def _sabotaged(mocks, monkeypatch, target: str, replacement) -> tuple[Environment, list]:
    monkeypatch.setattr(target, replacement)
    env = shipped("example")
    return env, declared(mocks, env.path)


def test_an_untainted_gpu_node_is_caught(mocks, monkeypatch):
    _, registered = _sabotaged(mocks, monkeypatch, "infra.cluster.nodes.pool_taints", lambda pool: [])
    assert "gpu-a100-01" in untainted_gpu_nodes(registered)


def test_a_workload_that_tolerates_gpu_pools_is_caught(mocks):
    env = shipped("example")
    registered = declared(mocks, env.path)
    [volcano] = [r for r in of_type(registered, "Release") if r.inputs["name"] == "volcano"]
    volcano.inputs["values"] = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert gpu_pools_tolerated_by_others(env, registered) == [f"{RELEASE} volcano tolerates ['gpu_a100']"]


def test_a_missing_quota_is_caught(mocks):
    env = shipped("example")
    registered = [r for r in declared(mocks, env.path)
                  if not (r.typ.endswith(":ResourceQuota") and r.inputs["metadata"]["namespace"] == "batch")]
    assert tenants_without_quota_or_limits(env, registered) == ["namespace batch: 0 ResourceQuota"]


def test_a_wrong_device_plugin_config_is_caught(mocks, monkeypatch):
    from infra.cluster import gpu

    real = gpu.device_plugin_config
    env, registered = _sabotaged(mocks, monkeypatch, "infra.cluster.gpu.device_plugin_config",
                                 lambda pool: {**real(pool), "flags": {"migStrategy": "single"}})
    assert nodes_with_a_wrong_device_plugin_config(env, registered)


def test_concerns_wait_for_what_they_need_and_nothing_waits_for_the_node_patches():
    from infra.cluster.concerns import AFTER, BUILDERS

    order = ["crds"] + [build.__module__.rsplit(".", 1)[-1] for build in BUILDERS]
    for concern, before in AFTER.items():
        assert all(order.index(name) < order.index(concern) for name in before), concern
    assert all("nodes" not in before for before in AFTER.values())
    assert "networking" not in AFTER  # the CNI's release waits for nothing


def waits_for(mocks, kind: str, name: str) -> set[str]:
    """What the resource of KIND and NAME was registered to wait for, as "Kind/name"."""
    [deps] = [deps for (typ, n), deps in mocks.dependencies.items() if typ.rsplit(":", 1)[-1] == kind and n == name]
    return {f"{typ.rsplit(':', 1)[-1]}/{n}" for typ, n in deps}


def test_objects_wait_for_the_objects_they_name_and_nothing_else(mocks):
    """A StorageClass or a NetworkAttachmentDefinition must not wait for Multus to run on every node: at
    1,000 nodes that rollout takes the DaemonSet controller 50 s (README, benchmarks)."""
    declared(mocks, shipped("example").path)
    nad = "network-attachment-definitions.k8s.cni.cncf.io"
    assert waits_for(mocks, "NetworkAttachmentDefinition", "inference/rdma-gpu-a100") == {
        "Namespace/inference", f"CustomResourceDefinition/{nad}"}
    assert waits_for(mocks, "DaemonSet", "k8s-node-pools-system/kube-multus-ds") == {
        "Namespace/k8s-node-pools-system", "ServiceAccount/k8s-node-pools-system/multus",
        "ConfigMap/k8s-node-pools-system/multus-daemon-config"}
    assert waits_for(mocks, "ResourceQuota", "batch/batch") == {"Namespace/batch"}
    assert waits_for(mocks, "StorageClass", "local-nvme") == set()
    assert waits_for(mocks, "PriorityClass", "inference-high") == set()
    # Custom resources whose definition a chart installs wait for the concern's releases.
    assert "Release/volcano" in waits_for(mocks, "Queue", "batch")


def test_releases_wait_for_pod_networking_and_their_namespace(mocks):
    declared(mocks, shipped("example").path)
    assert waits_for(mocks, "Release", "cilium") == set()  # the CNI waits for nothing
    for release in ("volcano", "nvidia-device-plugin", "csi-driver-nfs"):
        assert "DaemonSet/k8s-node-pools-system/kube-multus-ds" in waits_for(mocks, "Release", release), release
    assert "Namespace/volcano-system" in waits_for(mocks, "Release", "volcano")
    assert "Namespace/nvidia-gpu" in waits_for(mocks, "Release", "nvidia-device-plugin")


def test_without_releases_custom_resources_wait_for_the_definitions_the_stack_declares(mocks):
    declared(mocks, shipped("example").path, ClusterSettings(kubeconfig="x", helm_releases=False))
    assert waits_for(mocks, "Queue", "batch") == {"CustomResourceDefinition/queues.scheduling.volcano.sh"}
