"""Networking: the CNI release from the spec, Multus thick, RDMA networks per pool and tenant, the RDMA plugin."""

import dataclasses
import ipaddress
import json
import subprocess
from collections import Counter

import kubernetes_validate
import pytest
from inventory_builder import ROOT, SHIPPED, pools_of

from infra.cluster import networking
from infra.cluster.nodes import pool_taints
from infra.cluster.objects import key
from infra.cluster.placement import everywhere, on_pools
from infra.knowledge.chart_values import chart_values
from infra.knowledge.platform import platform
from infra.knowledge.units import parse_quantity
from infra.knowledge.versions import versions
from infra.model.resolve import resolve
from infra.planning.filters import tolerates
from infra.spec import load_environment


def shipped(name):
    return resolve(load_environment(ROOT / "inventories" / name))


def view_of(write, data):
    return resolve(load_environment(write(data)))


def with_rdma(data, cidr="192.168.50.0/24", pools=("gpu",), interface="ens8f0", mtu=9000):
    for pool in pools:
        data["group_vars"][pool]["rdma_network"] = {"interface": interface, "cidr": cidr, "mtu": mtu}
    return data


def add_hosts(data, pool, count, zone="a"):
    hosts = pools_of(data)[pool]["hosts"]
    for index in range(count):
        hosts[f"{pool}-extra-{index}"] = {"zone": zone}
    return data


def by_kind(concern, kind):
    return [o for o in concern.objects if o["kind"] == kind]


def the(concern, kind, name):
    (found,) = [o for o in concern.objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def release(concern, name):
    (found,) = [r for r in concern.releases if r.name == name]
    return found


def rdma_configs(concern):
    data = the(concern, "ConfigMap", networking.RDMA_NETWORKS_CONFIG)["data"]
    return {name: json.loads(text) for name, text in data.items()}


def addresses(config):
    (rng,) = config["ipam"]["ranges"][0]
    first, last = ipaddress.IPv4Address(rng["rangeStart"]), ipaddress.IPv4Address(rng["rangeEnd"])
    return [ipaddress.IPv4Address(n) for n in range(int(first), int(last) + 1)]


# --------------------------------------------------------------------------- releases and CNI


@pytest.mark.parametrize("name", SHIPPED)
def test_releases_pin_the_versions_file_charts(name):
    concern = networking.build(shipped(name))
    assert concern.name == "networking"
    assert concern.releases
    for rel in concern.releases:
        chart = versions()[rel.component].chart
        written = rel.as_dict()
        assert (written["chart"], written["repository"], written["version"]) == (chart.name, chart.repository, chart.version)


def test_the_example_runs_cilium_with_the_spec_cidr_mask_size_and_non_exclusive_cni():
    view = shipped("example")
    cluster = view.env.cluster
    (cilium,) = networking.build(view).releases
    assert (cilium.component, cilium.namespace) == ("cilium", "kube-system")
    values = cilium.values
    assert values["ipam"]["mode"] == "cluster-pool"
    assert values["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"] == [str(cluster.kube_pods_subnet)] == ["10.233.64.0/18"]
    assert values["ipam"]["operator"]["clusterPoolIPv4MaskSize"] == cluster.kube_network_node_prefix == 24
    assert values["cni"]["exclusive"] is False  # else Cilium renames Multus's 00-multus.conf
    assert chart_values().cilium.keys["cni.exclusive"].default is True  # ... which it does by default
    assert values["kubeProxyReplacement"] == "false"


# The taints a node carries before its CNI runs, or while it is repaired, besides the pools' and the control
# plane's. A DaemonSet pod is given only the NoExecute ones (and network-unavailable for host-network pods).
LIFECYCLE_TAINTS = [{"key": f"node.kubernetes.io/{name}", "effect": effect}
                    for name in ("not-ready", "unreachable", "network-unavailable", "unschedulable")
                    for effect in ("NoSchedule", "NoExecute")]


def untolerated(view, tolerations: list[dict]) -> list[str]:
    """The taints a node of this environment can carry that these tolerations leave out."""
    taints = [t for pool in view.env.pools.values() for t in pool_taints(pool)]
    taints += [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}, *LIFECYCLE_TAINTS]
    return [f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in taints if not tolerates(tolerations, t)]


@pytest.mark.parametrize("name", SHIPPED)
def test_the_cni_agent_and_multus_start_on_any_node_even_a_not_ready_one(name):
    view = shipped(name)
    cilium = networking.cilium_values(view.env)
    multus = multus_daemonset(networking.build(view))["spec"]["template"]["spec"]
    for tolerations in (cilium["tolerations"], multus["tolerations"]):
        assert untolerated(view, tolerations) == []
    # what they tolerated before: every pool's taint, but a NotReady node stays without its CNI for good
    assert untolerated(view, everywhere(view.env)["tolerations"]) == [
        f"node.kubernetes.io/{name}=:{effect}" for name in ("not-ready", "unreachable", "network-unavailable",
                                                            "unschedulable") for effect in ("NoSchedule", "NoExecute")]


@pytest.mark.parametrize(("remove", "kpr"), [(True, "true"), (False, "false")])
def test_cilium_kube_proxy_replacement_follows_the_spec_as_a_string(inventory, write, remove, kpr):
    inventory["group_vars"]["all"]["kube_network_plugin"] = "cilium"
    inventory["group_vars"]["all"]["kube_proxy_remove"] = remove
    values = networking.cilium_values(view_of(write, inventory).env)
    assert values["kubeProxyReplacement"] == kpr
    assert ("k8sServiceHost" in values) is remove  # without kube-proxy the agent needs the API server address


def test_the_calico_variant_carries_the_cidr_and_block_size(inventory, write):
    inventory["group_vars"]["all"]["kube_network_node_prefix"] = 25
    view = view_of(write, inventory)
    concern = networking.build(view)
    crds, operator = concern.releases
    assert (crds.component, operator.component) == ("calico-crds", "calico")  # CRDs first: a separate chart since 3.32
    assert crds.namespace == operator.namespace == "tigera-operator"
    assert the(concern, "Namespace", "tigera-operator")
    (pool,) = operator.values["installation"]["calicoNetwork"]["ipPools"]
    assert pool["cidr"] == "10.244.0.0/21"
    assert pool["blockSize"] == 25
    facts = chart_values().calico.ip_pool
    assert set(pool) <= set(facts.fields)
    assert pool["encapsulation"] in facts.encapsulations
    assert pool["natOutgoing"] in facts.nat_outgoing


def test_switching_the_plugin_switches_the_release(inventory, write):
    assert [r.component for r in networking.build(view_of(write, inventory)).releases] == ["calico-crds", "calico"]
    inventory["group_vars"]["all"]["kube_network_plugin"] = "cilium"
    concern = networking.build(view_of(write, inventory))
    assert [r.component for r in concern.releases] == ["cilium"]
    assert [n["metadata"]["name"] for n in by_kind(concern, "Namespace")] == ["k8s-node-pools-system"]


def test_calico_without_kube_proxy_needs_an_endpoint_the_spec_lacks(inventory, write):
    inventory["group_vars"]["all"]["kube_proxy_remove"] = True
    with pytest.raises(ValueError, match="kubernetesServiceEndpoint"):
        networking.build(view_of(write, inventory))


def test_values_are_set_only_through_recorded_keys():
    recorded = chart_values().cilium.keys
    assert networking.values_tree(recorded, {"cni.exclusive": False, "ipam.mode": "x"}) == {
        "cni": {"exclusive": False}, "ipam": {"mode": "x"}}
    with pytest.raises(KeyError, match="not recorded"):
        networking.values_tree(recorded, {"cni.exclusiv": False})


# --------------------------------------------------------------------------- Multus


def multus_daemonset(concern):
    return the(concern, "DaemonSet", networking.MULTUS_DAEMONSET)


@pytest.mark.parametrize("name", SHIPPED)
def test_multus_memory_limit_is_well_above_upstream(name):
    container, = multus_daemonset(networking.build(shipped(name)))["spec"]["template"]["spec"]["containers"]
    ours = parse_quantity(container["resources"]["limits"]["memory"])
    upstream = parse_quantity(chart_values().multus.daemon_resources["limits"]["memory"])
    assert ours >= 4 * upstream
    assert parse_quantity(container["resources"]["requests"]["memory"]) > upstream  # idle use is above 50Mi
    assert "cpu" not in container["resources"]["limits"]  # a CPU limit throttles CNI ADDs under churn


@pytest.mark.parametrize("name", SHIPPED)
def test_multus_runs_the_pinned_image_on_every_node(name):
    view = shipped(name)
    spec = multus_daemonset(networking.build(view))["spec"]["template"]["spec"]
    pinned = versions()["multus"].images["multus"].reference
    assert {c["image"] for c in spec["containers"] + spec["initContainers"]} == {pinned}
    assert "snapshot" not in pinned
    assert "affinity" not in spec and "nodeSelector" not in spec
    assert spec["priorityClassName"] == "system-node-critical"


def test_multus_daemon_config_is_upstreams_and_the_conf_dir_is_the_hosts():
    concern = networking.build(shipped("example"))
    config = the(concern, "ConfigMap", networking.MULTUS_DAEMON_CONFIG)["data"]["daemon-config.json"]
    assert json.loads(config) == chart_values().multus.daemon_config
    spec = multus_daemonset(concern)["spec"]["template"]["spec"]
    conf_dir = chart_values().multus.conf_dir
    volume = next(v for v in spec["volumes"] if v.get("hostPath", {}).get("path") == conf_dir)
    (daemon,) = spec["containers"]
    assert {"name": volume["name"], "mountPath": conf_dir} in daemon["volumeMounts"]


def test_multus_installs_its_plugin_where_the_hosts_containerd_looks_for_it():
    """The hosts' containerd reads CNI plugins from the platform's cni_bin_dir (the container_runtime role sets it):
    Multus' installer copies into that host folder, and the daemon sees it at the same path."""
    bin_dir = platform().node_runtime.cni_bin_dir
    assert bin_dir == "/opt/cni/bin"
    spec = multus_daemonset(networking.build(shipped("example")))["spec"]["template"]["spec"]
    volume = next(v for v in spec["volumes"] if v["name"] == "cnibin")
    assert volume["hostPath"]["path"] == bin_dir
    install = next(c for c in spec["initContainers"] if c["name"] == "install-multus-binary")
    target = install["command"][install["command"].index("-d") + 1]
    assert {"name": "cnibin", "mountPath": target, "mountPropagation": "Bidirectional"} in install["volumeMounts"]
    assert target == f"/host{bin_dir}"
    (daemon,) = spec["containers"]
    assert {"name": "cnibin", "mountPath": bin_dir} in daemon["volumeMounts"]


def test_multus_rbac_binds_its_service_account():
    concern = networking.build(shipped("sandbox"))
    account = the(concern, "ServiceAccount", "multus")
    binding = the(concern, "ClusterRoleBinding", "multus")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "multus",
                                    "namespace": account["metadata"]["namespace"]}]
    assert binding["roleRef"]["name"] == the(concern, "ClusterRole", "multus")["metadata"]["name"]
    spec = multus_daemonset(concern)["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "multus"


def test_a_changed_rdma_network_rolls_the_multus_pods(inventory, write):
    before = multus_daemonset(networking.build(view_of(write, with_rdma(inventory))))
    after = multus_daemonset(networking.build(view_of(write, with_rdma(inventory, mtu=4200))))
    annotation = networking.CONFIG_HASH_ANNOTATION
    assert before["spec"]["template"]["metadata"]["annotations"][annotation] != \
        after["spec"]["template"]["metadata"]["annotations"][annotation]


def test_the_init_script_installs_this_nodes_rdma_configs_and_removes_stale_ones(tmp_path):
    script = networking._INSTALL_RDMA_CONFIGS.format(conf_dir=chart_values().multus.conf_dir,
                                                      prefix=networking.RDMA_FILE_PREFIX)
    host_dir, source = tmp_path / "host", tmp_path / "rdma-networks"
    script = script.replace("/host/", f"{host_dir}/").replace("/rdma-networks/", f"{source}/")
    conf_dir = host_dir / chart_values().multus.conf_dir.lstrip("/")
    conf_dir.mkdir(parents=True)
    (conf_dir / f"{networking.RDMA_FILE_PREFIX}rdma-old.conf").write_text("stale")
    (conf_dir / "someone-elses.conf").write_text("kept")
    source.mkdir()
    (source / "node-1_rdma-gpu.conf").write_text("mine")
    (source / "node-10_rdma-gpu.conf").write_text("a node whose name starts like mine")
    (source / "node-2_rdma-t4.conf").write_text("another node's")
    subprocess.run(["sh", "-c", script], check=True, env={"NODE_NAME": "node-1", "PATH": "/usr/bin:/bin"})
    assert sorted(p.name for p in conf_dir.iterdir()) == [f"{networking.RDMA_FILE_PREFIX}rdma-gpu.conf",
                                                          "someone-elses.conf"]
    assert (conf_dir / f"{networking.RDMA_FILE_PREFIX}rdma-gpu.conf").read_text() == "mine"
    subprocess.run(["sh", "-c", script], check=True, env={"NODE_NAME": "node-3", "PATH": "/usr/bin:/bin"})
    assert sorted(p.name for p in conf_dir.iterdir()) == ["someone-elses.conf"]


# --------------------------------------------------------------------------- RDMA networks


def test_the_example_gets_one_attachment_per_rdma_pool_and_tenant_namespace():
    concern = networking.build(shipped("example"))
    nads = by_kind(concern, "NetworkAttachmentDefinition")
    assert {(n["metadata"]["namespace"], n["metadata"]["name"]) for n in nads} == {
        ("inference", "rdma-gpu-a100"), ("training", "rdma-gpu-h100-bigmem")}
    assert {n["apiVersion"] for n in nads} == {chart_values().multus.nad_api_version}


def test_every_tenant_using_an_rdma_pool_gets_its_attachment(inventory, write):
    tenants = inventory["group_vars"]["all"]["tenants"]
    tenants["svc"]["pools"] = ["cpu", "gpu"]
    concern = networking.build(view_of(write, with_rdma(inventory)))
    nads = by_kind(concern, "NetworkAttachmentDefinition")
    assert sorted((n["metadata"]["namespace"], n["metadata"]["name"]) for n in nads) == [
        ("infer", "rdma-gpu"), ("svc", "rdma-gpu")]  # not cache or batch: they do not use the pool


def test_pools_without_rdma_get_no_attachment_and_no_plugin(inventory, write):
    concern = networking.build(view_of(write, inventory))
    assert not by_kind(concern, "NetworkAttachmentDefinition")
    assert [d["metadata"]["name"] for d in by_kind(concern, "DaemonSet")] == [networking.MULTUS_DAEMONSET]
    assert the(concern, "ConfigMap", networking.RDMA_NETWORKS_CONFIG)["data"] == {}
    assert not [c for c in by_kind(concern, "ConfigMap") if c["metadata"]["name"] == "rdma-devices"]


def test_an_attachment_has_no_spec_and_names_the_pools_rdma_resource():
    view = shipped("example")
    concern = networking.build(view)
    annotation = chart_values().multus.nad_resource_name_annotation
    for nad in by_kind(concern, "NetworkAttachmentDefinition"):
        assert "spec" not in nad  # Multus reads the node's config file of the same name
        pool = next(p for p in view.env.pools.values() if networking.nad_name(p) == nad["metadata"]["name"])
        assert nad["metadata"]["annotations"][annotation] == f"rdma/{pool.name}" == networking.rdma_resource(pool)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_rdma_host_gets_a_cni_config_on_its_interface_within_the_fabric(name):
    view = shipped(name)
    configs = rdma_configs(networking.build(view))
    expected = {f"{h.name}_{networking.nad_name(p)}.conf"
                for p in view.env.pools.values() if p.vars.rdma_network for h in p.hosts}
    assert set(configs) == expected
    for file_name, config in configs.items():
        host = file_name.split("_", 1)[0]
        pool = view.env.pools[view.hosts[host].host.pool]
        rdma = pool.vars.rdma_network
        assert config["name"] == networking.nad_name(pool)
        assert (config["type"], config["master"], config["mode"], config["mtu"]) == ("macvlan", rdma.interface, "bridge", rdma.mtu)
        assert config["ipam"]["type"] == "host-local"
        (rng,) = config["ipam"]["ranges"][0]
        assert rng["subnet"] == str(rdma.cidr)
        owned = addresses(config)
        assert owned and all(address in rdma.cidr for address in owned)
        assert rdma.cidr.network_address not in owned and rdma.cidr.broadcast_address not in owned
        assert rdma.cidr.network_address + 1 not in owned  # host-local's default gateway


def assert_no_address_twice(configs):
    per_fabric = Counter()
    for config in configs.values():
        fabric = config["ipam"]["ranges"][0][0]["subnet"]
        per_fabric.update((fabric, address) for address in addresses(config))
    assert per_fabric and max(per_fabric.values()) == 1


def test_pools_sharing_a_fabric_never_hand_out_one_address_twice():
    view = shipped("example")
    a100, h100 = view.env.pools["gpu_a100"], view.env.pools["gpu_h100_bigmem"]
    assert a100.vars.rdma_network.cidr == h100.vars.rdma_network.cidr  # one fabric, two pools, three hosts
    assert_no_address_twice(rdma_configs(networking.build(view)))


def test_many_hosts_on_a_shared_fabric_get_disjoint_slices(inventory, write):
    add_hosts(inventory, "gpu", 4)
    add_hosts(inventory, "t4", 2)
    view = view_of(write, with_rdma(inventory, cidr="10.99.0.0/26", pools=("gpu", "t4")))
    configs = rdma_configs(networking.build(view))
    assert len(configs) == 8
    assert_no_address_twice(configs)
    assert min(len(addresses(c)) for c in configs.values()) >= 6


def test_host_local_without_slices_would_hand_out_one_address_on_every_node(inventory, write):
    """The failing case the slices prevent: one range for every node, as a single NAD config would give."""
    configs = rdma_configs(networking.build(view_of(write, with_rdma(inventory, pools=("gpu", "t4")))))
    whole_fabric = [[{"subnet": "192.168.50.0/24", "rangeStart": "192.168.50.2", "rangeEnd": "192.168.50.254"}]]
    unsliced = {name: {**config, "ipam": {**config["ipam"], "ranges": whole_fabric}} for name, config in configs.items()}
    with pytest.raises(AssertionError):
        assert_no_address_twice(unsliced)


def test_a_fabric_too_small_for_its_hosts_is_refused(inventory, write):
    view = view_of(write, with_rdma(inventory, cidr="192.168.50.0/30", pools=("gpu", "t4")))
    with pytest.raises(ValueError, match="too small"):
        networking.build(view)


def test_a_range_is_only_used_with_its_own_pool():
    view = shipped("example")
    ranges = networking.rdma_ranges(view.env)
    with pytest.raises(ValueError, match="belongs to pool gpu_h100_bigmem"):
        networking.rdma_cni_config(view.env.pools["gpu_a100"], ranges["gpu-h100-01"])
    with pytest.raises(ValueError, match="no rdma_network"):
        networking.rdma_cni_config(view.env.pools["cpu_general"], ranges["gpu-h100-01"])


# --------------------------------------------------------------------------- RDMA shared device plugin


def test_the_rdma_plugin_runs_on_rdma_pools_only():
    view = shipped("example")
    concern = networking.build(view)
    plugins = {d["metadata"]["name"]: d for d in by_kind(concern, "DaemonSet")
               if d["metadata"]["name"].startswith(networking.RDMA_DAEMONSET_PREFIX)}
    rdma = [p for _, p in sorted(view.env.pools.items()) if p.vars.rdma_network]
    assert [p.name for p in rdma] == ["gpu_a100", "gpu_h100_bigmem"]  # not gpu_t4_offline, cpu or memory pools
    assert sorted(plugins) == [f"rdma-shared-dp-{p.k8s_name}" for p in rdma]
    for pool in rdma:
        spec = plugins[f"rdma-shared-dp-{pool.k8s_name}"]["spec"]["template"]["spec"]
        placement = on_pools([pool])
        assert (spec["affinity"], spec["tolerations"]) == (placement["affinity"], placement["tolerations"])
        (container,) = spec["containers"]
        assert container["image"] == versions()["rdma-shared-device-plugin"].images["rdma-shared-dev-plugin"].reference
        assert container["securityContext"] == {"privileged": True}
        assert spec["hostNetwork"] is True


def test_the_sandbox_has_no_rdma_plugin():
    concern = networking.build(shipped("sandbox"))
    assert not [d for d in by_kind(concern, "DaemonSet") if d["metadata"]["name"].startswith(networking.RDMA_DAEMONSET_PREFIX)]
    assert not by_kind(concern, "NetworkAttachmentDefinition")


def test_the_rdma_plugin_config_advertises_the_pools_interface_within_its_address_budget():
    view = shipped("example")
    concern = networking.build(view)
    facts = chart_values().rdma_shared_device_plugin
    config_map = the(concern, "ConfigMap", facts.config_map)
    configs = rdma_configs(concern)
    for pool in (view.env.pools["gpu_a100"], view.env.pools["gpu_h100_bigmem"]):
        config = json.loads(config_map["data"][f"{pool.k8s_name}.json"])
        (entry,) = config["configList"]
        assert set(config) <= set(facts.config_fields) and set(entry) <= set(facts.resource_fields)
        assert entry["selectors"] == {"ifNames": [pool.vars.rdma_network.interface]}
        assert facts.resource(entry["resourceName"]) == networking.rdma_resource(pool)
        slices = [len(addresses(configs[f"{h.name}_{networking.nad_name(pool)}.conf"])) for h in pool.hosts]
        assert 0 < entry["rdmaHcaMax"] == min(slices)  # every pod granted the HCA gets an address
        daemonset = the(concern, "DaemonSet", f"rdma-shared-dp-{pool.k8s_name}")
        spec = daemonset["spec"]["template"]["spec"]
        volume = next(v for v in spec["volumes"] if v["name"] == "config")
        assert volume["configMap"] == {"name": facts.config_map,
                                       "items": [{"key": f"{pool.k8s_name}.json", "path": facts.config_key}]}
        mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "config")
        assert f"{mount['mountPath']}/{facts.config_key}" == facts.config_path


def test_an_rdma_resource_name_follows_the_plugins_pattern():
    pool = shipped("example").env.pools["gpu_a100"]
    assert networking.rdma_resource_name(pool) == "gpu_a100"
    with pytest.raises(ValueError, match="resourceName"):
        networking.rdma_resource_name(dataclasses.replace(pool, name="gpu-a100"))


# --------------------------------------------------------------------------- the whole concern


@pytest.mark.parametrize("name", SHIPPED)
def test_the_concern_is_deterministic_with_unique_objects(name):
    first, second = networking.build(shipped(name)), networking.build(shipped(name))
    assert first == second
    keys = [key(o) for o in first.objects]
    assert len(keys) == len(set(keys))
    for o in first.objects:
        assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-node-pools"


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("minor", ["1.30", "1.37"])
def test_built_in_objects_validate_strictly(name, minor):
    for o in networking.build(shipped(name)).objects:
        if o["kind"] != "NetworkAttachmentDefinition":  # a CRD: validated against Multus's schema by the integrator
            kubernetes_validate.validate(o, minor, strict=True)
