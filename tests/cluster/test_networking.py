"""Networking: the CNI release from the spec, Multus thick, RDMA networks per pool and tenant, the RDMA plugin."""

import dataclasses
import ipaddress
import json
import re
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


def with_rdma(data, cidr="192.168.50.0/24", pools=("gpu",), interface="ens8f0", mtu=9000, host_prefix=None):
    """Give `pools` one RDMA fabric, each host the next slot in pool then host order."""
    slot = 0
    for pool in pools:
        rdma = {"interface": interface, "cidr": cidr, "mtu": mtu}
        data["group_vars"][pool]["rdma_network"] = rdma if host_prefix is None else {**rdma, "host_prefix": host_prefix}
        data["group_vars"][pool]["rdma_slots"] = {}
        for host in sorted(pools_of(data)[pool]["hosts"]):
            data["group_vars"][pool]["rdma_slots"][host] = slot
            slot += 1
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


def rdma_config_maps(concern):
    return {c["metadata"]["name"]: c["data"] for c in by_kind(concern, "ConfigMap")
            if c["metadata"]["name"].startswith(networking.RDMA_CONFIG_PREFIX)}


def run_init_script(source, host_dir, node):
    """The Multus DaemonSet's install-rdma-networks script, run by sh on `node`, with its two folders moved."""
    script = networking.install_rdma_configs_script()
    script = script.replace("/host/", f"{host_dir}/").replace("/rdma-networks/", f"{source}/")
    subprocess.run(["sh", "-c", script], check=True, env={"NODE_NAME": node, "PATH": "/usr/bin:/bin"})
    return host_dir / chart_values().multus.conf_dir.lstrip("/")


def rdma_configs(concern, tmp_path):
    """{<host>_<network>.conf: config} as the init script writes them on every host the ConfigMaps name."""
    source = tmp_path / "rdma-networks"
    source.mkdir(parents=True, exist_ok=True)
    hosts = set()
    for data in rdma_config_maps(concern).values():  # the DaemonSet's projected volume: every key in one folder
        for name, text in data.items():
            (source / name).write_text(text)
            if name.endswith(".hosts"):
                hosts.update(line.split()[0] for line in text.splitlines())
    configs = {}
    for host in sorted(hosts):
        conf_dir = run_init_script(source, tmp_path / "nodes" / host, host)
        for path in conf_dir.iterdir():
            network = path.name.removeprefix(networking.RDMA_FILE_PREFIX)
            configs[f"{host}_{network}"] = json.loads(path.read_text())
    return configs


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
    view = shipped("example")
    concern = networking.build(view)
    source = tmp_path / "rdma-networks"
    source.mkdir()
    for data in rdma_config_maps(concern).values():
        for name, text in data.items():
            (source / name).write_text(text)
    with (source / "rdma-gpu-a100.hosts").open("a") as lines:
        lines.write("gpu-a100-010 192.168.100.250 192.168.100.253\n")  # a node whose name starts like another's
    host_dir = tmp_path / "host"
    conf_dir = host_dir / chart_values().multus.conf_dir.lstrip("/")
    conf_dir.mkdir(parents=True)
    (conf_dir / f"{networking.RDMA_FILE_PREFIX}rdma-old.conf").write_text("stale")
    (conf_dir / "someone-elses.conf").write_text("kept")

    run_init_script(source, host_dir, "gpu-a100-01")
    mine = f"{networking.RDMA_FILE_PREFIX}rdma-gpu-a100.conf"
    assert sorted(p.name for p in conf_dir.iterdir()) == [mine, "someone-elses.conf"]
    pool = view.env.pools["gpu_a100"]
    expected = networking.rdma_cni_config(pool, networking.rdma_ranges(view.env)["gpu-a100-01"])
    assert json.loads((conf_dir / mine).read_text()) == expected

    run_init_script(source, host_dir, "cpu-01")  # a host on no fabric: nothing of ours is left
    assert sorted(p.name for p in conf_dir.iterdir()) == ["someone-elses.conf"]


def test_the_init_script_fails_on_a_template_without_its_hosts_file(tmp_path):
    source = tmp_path / "rdma-networks"
    source.mkdir()
    (source / "rdma-gpu.conf").write_text("{}")
    with pytest.raises(subprocess.CalledProcessError):
        run_init_script(source, tmp_path / "host", "gpu-1")


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
    assert rdma_config_maps(concern) == {}
    volume = next(v for v in multus_daemonset(concern)["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == "rdma-networks")
    assert volume == {"name": "rdma-networks", "emptyDir": {}}  # the init script then installs nothing
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
def test_every_rdma_host_gets_a_cni_config_on_its_interface_within_the_fabric(name, tmp_path):
    view = shipped(name)
    configs = rdma_configs(networking.build(view), tmp_path)
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


def test_pools_sharing_a_fabric_never_hand_out_one_address_twice(tmp_path):
    view = shipped("example")
    a100, h100 = view.env.pools["gpu_a100"], view.env.pools["gpu_h100_bigmem"]
    assert a100.vars.rdma_network.cidr == h100.vars.rdma_network.cidr  # one fabric, two pools, four hosts
    configs = rdma_configs(networking.build(view), tmp_path)
    assert len(configs) == 4
    assert_no_address_twice(configs)


def test_many_hosts_on_a_shared_fabric_get_disjoint_slices(inventory, write, tmp_path):
    add_hosts(inventory, "gpu", 4)
    add_hosts(inventory, "t4", 2)
    view = view_of(write, with_rdma(inventory, cidr="10.99.0.0/26", pools=("gpu", "t4"), host_prefix=29))
    configs = rdma_configs(networking.build(view), tmp_path)
    assert len(configs) == 8
    assert_no_address_twice(configs)
    assert min(len(addresses(c)) for c in configs.values()) == 6  # slot 0: a /29 less network and gateway


def test_host_local_without_slices_would_hand_out_one_address_on_every_node(inventory, write, tmp_path):
    """The failing case the slices prevent: one range for every node, as a single NAD config would give."""
    configs = rdma_configs(networking.build(view_of(write, with_rdma(inventory, pools=("gpu", "t4")))), tmp_path)
    whole_fabric = [[{"subnet": "192.168.50.0/24", "rangeStart": "192.168.50.2", "rangeEnd": "192.168.50.254"}]]
    unsliced = {name: {**config, "ipam": {**config["ipam"], "ranges": whole_fabric}} for name, config in configs.items()}
    with pytest.raises(AssertionError):
        assert_no_address_twice(unsliced)


def test_a_slot_outside_the_fabric_or_overlapping_another_is_refused(inventory, write):
    outside = with_rdma(inventory, cidr="192.168.50.0/25", pools=("gpu", "t4"))  # /26 slices: slots 0 and 1
    outside["group_vars"]["t4"]["rdma_slots"]["t4-1"] = 2
    with pytest.raises(ValueError, match=re.escape("slot 2 is outside RDMA fabric 192.168.50.0/25")):
        networking.build(view_of(write, outside))
    mixed = with_rdma(inventory, pools=("gpu", "t4"))  # gpu-1 slot 0 of /26, t4-1 slot 1 of /27: both .32-.63
    mixed["group_vars"]["t4"]["rdma_network"]["host_prefix"] = 27
    with pytest.raises(ValueError, match=re.escape("hosts gpu-1 and t4-1 share addresses 192.168.50.32-192.168.50.63")):
        networking.build(view_of(write, mixed))


def grown(data, pool, host, slot):
    """`data` with `host` joining `pool` on slot `slot`, as a user adds it after `check` names the slot."""
    pools_of(data)[pool]["hosts"][host] = {"zone": "a"}
    data["group_vars"][pool]["rdma_slots"][host] = slot
    return data


def test_a_host_joining_or_leaving_a_fabric_moves_no_other_hosts_addresses(inventory, write, tmp_path):
    add_hosts(inventory, "gpu", 2)  # gpu-1, gpu-extra-0, gpu-extra-1 and t4-1 on one fabric
    base = with_rdma(inventory, pools=("gpu", "t4"), host_prefix=27)  # slots 0-3 taken of 0-7
    before = networking.build(view_of(write, base))
    # "gpu-0" sorts first: a split recomputed in name order would hand it slot 0 and move everyone.
    after = networking.build(view_of(write, grown(base, "gpu", "gpu-0", 4)))
    old, new = rdma_configs(before, tmp_path / "before"), rdma_configs(after, tmp_path / "after")
    assert {name: new[name] for name in old} == old
    assert set(new) - set(old) == {"gpu-0_rdma-gpu.conf"}
    assert_no_address_twice(new)
    # What changes is one line of the pool's ConfigMap: the Multus pods and the RDMA plugin stay as they are.
    assert multus_daemonset(after) == multus_daemonset(before)
    facts = chart_values().rdma_shared_device_plugin
    assert the(after, "ConfigMap", facts.config_map) == the(before, "ConfigMap", facts.config_map)
    hosts_before = rdma_config_maps(before)["multus-rdma-gpu"]["rdma-gpu.hosts"].splitlines()
    hosts_after = rdma_config_maps(after)["multus-rdma-gpu"]["rdma-gpu.hosts"].splitlines()
    joined = new["gpu-0_rdma-gpu.conf"]["ipam"]["ranges"][0][0]
    assert set(hosts_after) - set(hosts_before) == {f"gpu-0 {joined['rangeStart']} {joined['rangeEnd']}"}
    assert set(hosts_before) <= set(hosts_after)
    assert rdma_config_maps(after)["multus-rdma-t4"] == rdma_config_maps(before)["multus-rdma-t4"]

    del pools_of(base)["gpu"]["hosts"]["gpu-1"]  # out for repair: its slot 0 stays reserved in rdma_slots
    left = rdma_configs(networking.build(view_of(write, base)), tmp_path / "left")
    assert left == {name: config for name, config in new.items() if not name.startswith("gpu-1_")}


def test_a_changed_slice_size_rolls_the_multus_pods(inventory, write):
    before = networking.build(view_of(write, with_rdma(inventory)))
    after = networking.build(view_of(write, with_rdma(inventory, host_prefix=27)))
    annotation = networking.CONFIG_HASH_ANNOTATION
    assert (multus_daemonset(before)["spec"]["template"]["metadata"]["annotations"][annotation]
            != multus_daemonset(after)["spec"]["template"]["metadata"]["annotations"][annotation])


def test_a_pool_of_five_thousand_rdma_hosts_fits_one_config_map_and_forty_thousand_are_refused():
    view = shipped("example")
    template = view.env.pools["gpu_a100"]

    def pool_of(count):
        hosts = tuple(dataclasses.replace(template.hosts[0], name=f"gpu-a100-{i:05d}") for i in range(count))
        rdma = template.vars.rdma_network.model_copy(update={"cidr": ipaddress.ip_network("10.0.0.0/10")})
        variables = template.vars.model_copy(update={
            "rdma_network": rdma, "rdma_slots": {host.name: i for i, host in enumerate(hosts)}})
        pool = dataclasses.replace(template, vars=variables, hosts=hosts)
        return pool, dataclasses.replace(view.env, pools={"gpu_a100": pool})

    pool, env = pool_of(5000)
    data = networking.rdma_config_data(env, pool)
    size = sum(len(key) + len(text.encode()) for key, text in data.items())
    assert len(data["rdma-gpu-a100.hosts"].splitlines()) == 5000
    assert size < networking.CONFIG_MAP_MAX_BYTES / 3  # one full CNI config per host would have passed 1 MiB
    pool, env = pool_of(40000)
    with pytest.raises(ValueError, match="over the API server's 1048576; split the pool"):
        networking.rdma_config_data(env, pool)


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


def test_the_rdma_plugin_config_advertises_the_pools_interface_within_its_address_budget(tmp_path):
    view = shipped("example")
    concern = networking.build(view)
    facts = chart_values().rdma_shared_device_plugin
    config_map = the(concern, "ConfigMap", facts.config_map)
    configs = rdma_configs(concern, tmp_path)
    for pool in (view.env.pools["gpu_a100"], view.env.pools["gpu_h100_bigmem"]):
        config = json.loads(config_map["data"][f"{pool.k8s_name}.json"])
        (entry,) = config["configList"]
        assert set(config) <= set(facts.config_fields) and set(entry) <= set(facts.resource_fields)
        assert entry["selectors"] == {"ifNames": [pool.vars.rdma_network.interface]}
        assert facts.resource(entry["resourceName"]) == networking.rdma_resource(pool)
        slices = [len(addresses(configs[f"{h.name}_{networking.nad_name(pool)}.conf"])) for h in pool.hosts]
        # Every pod granted the HCA gets an address, whichever slot the host holds: slot 0 of the /24's /27
        # slices, which loses the network address and host-local's gateway, holds the fewest.
        assert 0 < entry["rdmaHcaMax"] == 30 <= min(slices)
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
