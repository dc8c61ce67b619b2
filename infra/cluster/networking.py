"""Pod networking: the CNI the spec names, Multus for secondary networks, and each GPU pool's RDMA network.

- The CNI is a pinned Helm release, Cilium or Calico as `kube_network_plugin` says, carving the spec's
  Pod CIDR (`kube_pods_subnet`) into per-node blocks of `kube_network_node_prefix`. Cilium runs with
  cni.exclusive false: by default it renames every other CNI config in /etc/cni/net.d, Multus's
  00-multus.conf included, and pods lose their secondary networks.
- Multus (thick plugin) has no chart, so its objects are rendered here after the upstream manifest,
  with the pinned image and a memory limit far above upstream's 50Mi: delegate plugins run in the
  daemon's cgroup and its memory grows with parallel CNI requests, so under pod churn the upstream
  limit gets it OOM-killed and pods on the node stop starting.
- A GPU pool with `rdma_network` gets a NetworkAttachmentDefinition `rdma-<pool>` in the namespace of
  every tenant using the pool: macvlan on the pool's RoCE interface (the RDMA shared device plugin
  hands the HCA to many pods at once; host-device would move the interface into one pod). Addresses
  come from host-local, which allocates per node without coordination, so each node gets its own
  slice of the fabric's CIDR and its own CNI config file (Multus resolves a NAD without spec from the
  node's /etc/cni/multus/net.d): no address is handed out twice, across nodes, namespaces or pools
  sharing a fabric, and nothing unpinned (such as whereabouts) is needed. A host's slice is the slot
  its pool's `rdma_slots` gives it, a /host_prefix of the fabric: written once, never recomputed, so
  a host joining or leaving moves no other host's addresses and restarts no other node's Multus.
- The RDMA shared device plugin advertises the HCA as rdma/<pool> on the pool's nodes, at most as many
  pods per node as the fabric's smallest slice holds.
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.cluster import rollout
from infra.cluster.objects import SYSTEM_NAMESPACE, Concern, HelmRelease, Obj, obj
from infra.cluster.placement import node_critical, on_pools
from infra.knowledge.chart_values import ValueKey, chart_values
from infra.knowledge.platform import platform
from infra.knowledge.versions import versions
from infra.model.network import slot_range, smallest_slice
from infra.model.resolve import Resolved
from infra.spec import Environment, Pool

# The CNI releases, in the namespaces upstream installs them to: the cilium CLI and Hubble look in
# kube-system; the tigera-operator chart's README installs into tigera-operator (the chart does not
# create it, so this concern does).
CILIUM_NAMESPACE = "kube-system"
CALICO_NAMESPACE = "tigera-operator"

# Cilium IPAM: the operator carves per-node CIDRs from the spec's Pod CIDR, so kube_network_node_prefix
# is what every node gets (the kubelet's podCIDR is not used by cluster-pool).
CILIUM_IPAM_MODE = "cluster-pool"
# Calico's pod network: VXLAN (UDP) crosses routers and firewalls that drop IP-in-IP, and CrossSubnet
# leaves traffic between nodes of one subnet unencapsulated. Cilium's default routing is VXLAN too.
CALICO_POOL_NAME = "default-ipv4-ippool"
CALICO_ENCAPSULATION = "VXLANCrossSubnet"
CALICO_NAT_OUTGOING = "Enabled"

# Multus thick daemon resources. Requests above its observed idle use (~53Mi) so the scheduler
# reserves what it really takes; a memory limit ten times upstream's 50Mi for bursts of parallel CNI
# requests with their delegate plugins; no CPU limit, which throttles CNI ADDs under churn until the
# kubelet times out sandbox creation.
MULTUS_RESOURCES: Obj = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
MULTUS_NAME = "multus"
MULTUS_DAEMONSET = "kube-multus-ds"
MULTUS_DAEMON_CONFIG = "multus-daemon-config"
RDMA_CONFIG_PREFIX = "multus-rdma-"  # + the pool's k8s name: one ConfigMap per RDMA pool
RANGE_START, RANGE_END = "@RANGE_START@", "@RANGE_END@"  # the template's placeholders for a host's slice
CONFIG_MAP_MAX_BYTES = 1024 * 1024  # the API server's limit on one object
RDMA_FILE_PREFIX = "k8s-node-pools-"  # the files this concern owns in the node's Multus conf dir
CONFIG_HASH_ANNOTATION = "k8s-node-pools.io/config-sha256"  # rolls a DaemonSet when its config changes
NODE_CRITICAL = "system-node-critical"

# The RDMA network: macvlan in bridge mode, so pods on one node reach each other through the NIC's
# embedded switch; host-local over the node's slice.
RDMA_CNI_TYPE = "macvlan"
RDMA_MACVLAN_MODE = "bridge"
RDMA_IPAM_TYPE = "host-local"
RDMA_DAEMONSET_PREFIX = "rdma-shared-dp-"


# --------------------------------------------------------------------------- helpers


def values_tree(recorded: Mapping[str, ValueKey], settings: Mapping[str, Any]) -> Obj:
    """Helm values from dotted keys, each of which chart_values.yml must record for the chart.

    Setting only recorded keys keeps every value this project sets documented with its source and
    default; a key missing from chart_values.yml is a KeyError here, not a silently ignored value.
    """
    tree: Obj = {}
    for dotted in sorted(settings):
        if dotted not in recorded:
            raise KeyError(f"values key {dotted!r} is not recorded in chart_values.yml")
        *parents, leaf = dotted.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = settings[dotted]
    return tree


def config_hash(*parts: Mapping[str, str]) -> str:
    """A stable digest of ConfigMap data, put on a pod template so a config change rolls the pods."""
    text = json.dumps(list(parts), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _image(component: str, key: str) -> str:
    return versions()[component].images[key].reference


# --------------------------------------------------------------------------- CNI


def cilium_values(env: Environment) -> Obj:
    """Cilium's values: the spec's Pod CIDR and per-node prefix, Multus-friendly, kube-proxy as the spec says."""
    cluster = env.cluster
    settings: dict[str, Any] = {
        "ipam.mode": CILIUM_IPAM_MODE,
        "ipam.operator.clusterPoolIPv4PodCIDRList": [str(cluster.kube_pods_subnet)],
        "ipam.operator.clusterPoolIPv4MaskSize": cluster.kube_network_node_prefix,
        "cni.exclusive": False,  # keep Multus's 00-multus.conf in /etc/cni/net.d
        "kubeProxyReplacement": "true" if cluster.kube_proxy_remove else "false",
        "tolerations": node_critical()["tolerations"],
        "updateStrategy": rollout.strategy(env),
    }
    if cluster.kube_proxy_remove:
        # Without kube-proxy the agent cannot reach the API server through the kubernetes Service;
        # "auto" reads the server from kube-public/cluster-info, which kubeadm (Kubespray) writes.
        settings["k8sServiceHost"] = "auto"
    return values_tree(chart_values().cilium.keys, settings)


def calico_values(env: Environment) -> Obj:
    """The tigera-operator's values: one IPv4 pool over the spec's Pod CIDR, blocks of the per-node prefix."""
    cluster = env.cluster
    if cluster.kube_proxy_remove:
        raise ValueError(
            "kube_proxy_remove with Calico means the eBPF dataplane, which needs the API server endpoint "
            "(kubernetesServiceEndpoint); the spec does not declare one"
        )
    known = chart_values().calico.ip_pool
    ip_pool = {"name": CALICO_POOL_NAME, "cidr": str(cluster.kube_pods_subnet),
               "blockSize": cluster.kube_network_node_prefix, "encapsulation": CALICO_ENCAPSULATION,
               "natOutgoing": CALICO_NAT_OUTGOING, "nodeSelector": "all()"}
    unknown = set(ip_pool) - set(known.fields)
    if unknown or CALICO_ENCAPSULATION not in known.encapsulations or CALICO_NAT_OUTGOING not in known.nat_outgoing:
        raise ValueError(f"Calico ipPool {ip_pool} does not follow the recorded schema")
    return values_tree(chart_values().calico.keys, {"installation.calicoNetwork.ipPools": [ip_pool],
                                                    "installation.nodeUpdateStrategy": rollout.strategy(env)})


def cni_releases(env: Environment) -> list[HelmRelease]:
    """The CNI's Helm releases: Cilium, or Calico's CRDs (a separate chart since 3.32) and its operator."""
    plugin = env.cluster.kube_network_plugin
    if plugin == "cilium":
        return [HelmRelease("cilium", CILIUM_NAMESPACE, "cilium", cilium_values(env), rollout.timeout_seconds(env))]
    if plugin == "calico":
        return [HelmRelease("calico-crds", CALICO_NAMESPACE, "calico-crds", {}),
                HelmRelease("calico", CALICO_NAMESPACE, "calico", calico_values(env), rollout.timeout_seconds(env))]
    raise ValueError(f"unknown kube_network_plugin {plugin!r}")


def cni_namespaces(env: Environment) -> list[Obj]:
    """Namespaces a CNI release needs that nothing else creates (kube-system always exists)."""
    if env.cluster.kube_network_plugin == "calico":
        return [obj("v1", "Namespace", CALICO_NAMESPACE)]
    return []


# --------------------------------------------------------------------------- RDMA address slices


@dataclass(frozen=True)
class NodeRange:
    """The addresses of an RDMA fabric one node's host-local hands out: first to last, inclusive."""

    host: str
    pool: str
    fabric: ipaddress.IPv4Network
    first: ipaddress.IPv4Address
    last: ipaddress.IPv4Address

    @property
    def addresses(self) -> list[ipaddress.IPv4Address]:
        return [ipaddress.IPv4Address(n) for n in range(int(self.first), int(self.last) + 1)]

    @property
    def size(self) -> int:
        return int(self.last) - int(self.first) + 1


def rdma_pools(env: Environment) -> list[Pool]:
    return [pool for _, pool in sorted(env.pools.items()) if pool.vars.rdma_network is not None]


def rdma_ranges(env: Environment) -> dict[str, NodeRange]:
    """Each RDMA host's address range: the slice of its fabric its pool's rdma_slots gives it.

    A slot is given once and never recomputed, so a host joining or leaving a fabric moves no other
    host's addresses (pods keep theirs, no address is handed out twice). The checks refuse a missing,
    repeated or out-of-range slot first (NET-RDMA-SLOT); this raises ValueError for one they missed.
    """
    ranges: dict[str, NodeRange] = {}
    for pool in rdma_pools(env):
        rdma = pool.vars.rdma_network
        assert rdma is not None
        for host in pool.hosts:
            slot = pool.vars.rdma_slots.get(host.name)
            if slot is None:
                raise ValueError(f"pool {pool.name}: host {host.name} has no rdma_slots entry")
            first, last = slot_range(rdma.cidr, rdma.host_prefix, slot)
            ranges[host.name] = NodeRange(host.name, pool.name, rdma.cidr, ipaddress.IPv4Address(first),
                                          ipaddress.IPv4Address(last))
    ordered = sorted(ranges.values(), key=lambda r: (r.fabric, r.first))
    for before, after in itertools.pairwise(ordered):
        if before.fabric == after.fabric and after.first <= before.last:
            raise ValueError(f"RDMA fabric {before.fabric}: hosts {before.host} and {after.host} share addresses "
                             f"{after.first}-{min(before.last, after.last)}")
    return ranges


# --------------------------------------------------------------------------- RDMA networks


def nad_name(pool: Pool) -> str:
    """The NetworkAttachmentDefinition (and CNI network) name of a pool's RDMA network."""
    return f"rdma-{pool.k8s_name}"


def rdma_resource_name(pool: Pool) -> str:
    """The device plugin's resourceName for a pool: the pool name, which the plugin's pattern accepts."""
    pattern = chart_values().rdma_shared_device_plugin.resource_name_pattern
    if not re.match(pattern, pool.name):
        raise ValueError(f"pool name {pool.name!r} is not a valid RDMA resourceName ({pattern})")
    return pool.name


def rdma_resource(pool: Pool) -> str:
    """The extended resource pods of the pool request for the HCA, e.g. rdma/gpu_a100."""
    return chart_values().rdma_shared_device_plugin.resource(rdma_resource_name(pool))


def rdma_cni_config(pool: Pool, node: NodeRange) -> Obj:
    """The CNI config of a pool's RDMA network on one node: macvlan on the RoCE interface, the node's slice."""
    if pool.vars.rdma_network is None:
        raise ValueError(f"pool {pool.name} has no rdma_network")
    if node.pool != pool.name or node.fabric != pool.vars.rdma_network.cidr:
        raise ValueError(f"host {node.host}'s range belongs to pool {node.pool} on {node.fabric}, not {pool.name}")
    return _rdma_cni(pool, str(node.first), str(node.last))


def _rdma_cni(pool: Pool, first: str, last: str) -> Obj:
    rdma = pool.vars.rdma_network
    if rdma is None:
        raise ValueError(f"pool {pool.name} has no rdma_network")
    return {
        "cniVersion": chart_values().multus.daemon_config["cniVersion"],
        "name": nad_name(pool),
        "type": RDMA_CNI_TYPE,
        "master": rdma.interface,
        "mode": RDMA_MACVLAN_MODE,
        "mtu": rdma.mtu,
        "ipam": {"type": RDMA_IPAM_TYPE, "ranges": [[{
            "subnet": str(rdma.cidr), "rangeStart": first, "rangeEnd": last}]]},
    }


def rdma_config_name(pool: Pool) -> str:
    """The ConfigMap holding a pool's RDMA network for Multus: its CNI template and every host's slice."""
    return f"{RDMA_CONFIG_PREFIX}{pool.k8s_name}"


def rdma_config_data(env: Environment, pool: Pool) -> dict[str, str]:
    """A pool's RDMA ConfigMap data: <network>.conf, the CNI config with the range left as placeholders,
    and <network>.hosts, one "host first last" line per host, which the init container substitutes.

    One line per host (~40 bytes) instead of one config per host (~400): a pool of 25,000 hosts stays
    under the API server's 1 MiB per object. Only the template and the slice size are hashed onto the
    Multus pods, so a host joining the pool adds a line without restarting Multus on any other node; a
    slot changed by hand reaches its node when that node's Multus pod restarts.
    """
    ranges = rdma_ranges(env)
    network = nad_name(pool)
    lines = "".join(f"{host} {ranges[host].first} {ranges[host].last}\n" for host in sorted(h.name for h in pool.hosts))
    data = {f"{network}.conf": _json(_rdma_cni(pool, RANGE_START, RANGE_END)), f"{network}.hosts": lines}
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIG_MAP_MAX_BYTES:
        raise ValueError(f"pool {pool.name}: its RDMA ConfigMap would hold {size} bytes for {len(pool.hosts)} hosts, "
                         f"over the API server's {CONFIG_MAP_MAX_BYTES}; split the pool")
    return data


def network_attachments(env: Environment) -> list[Obj]:
    """One NetworkAttachmentDefinition per (RDMA pool, namespace of a tenant using the pool).

    No spec: Multus then reads the node's config file of the same name, which carries the node's
    address slice. The resourceName annotation ties the network to the pool's RDMA resource.
    """
    multus = chart_values().multus
    attachments = []
    for pool in rdma_pools(env):
        for tenant, spec in sorted(env.cluster.tenants.items()):
            if pool.name in spec.pools:
                attachments.append(obj(multus.nad_api_version, multus.nad_kind, nad_name(pool), namespace=tenant,
                                       annotations={multus.nad_resource_name_annotation: rdma_resource(pool)}))
    return attachments


# --------------------------------------------------------------------------- Multus


_MULTUS_LABELS = {"app.kubernetes.io/name": MULTUS_NAME}

# The script of the init container that installs this node's RDMA network configs: it removes the files
# this project wrote before (a host that left its fabric keeps none), then fills each network's template
# with this node's line of <network>.hosts, if it has one.
_INSTALL_RDMA_CONFIGS = """set -eu
dir=/host{conf_dir}
mkdir -p "$dir"
rm -f "$dir"/{prefix}*.conf
for template in /rdma-networks/*.conf; do
  [ -e "$template" ] || continue
  network=${{template##*/}}
  network=${{network%.conf}}
  while read -r host first last; do
    [ "$host" = "$NODE_NAME" ] || continue
    sed -e "s/{start}/$first/" -e "s/{end}/$last/" "$template" > "$dir/.{prefix}$network.tmp"
    mv "$dir/.{prefix}$network.tmp" "$dir/{prefix}$network.conf"
  done < "/rdma-networks/$network.hosts"
done
"""


def install_rdma_configs_script() -> str:
    return _INSTALL_RDMA_CONFIGS.format(conf_dir=chart_values().multus.conf_dir, prefix=RDMA_FILE_PREFIX,
                                        start=RANGE_START, end=RANGE_END)


def _host_path(name: str, path: str) -> Obj:
    return {"name": name, "hostPath": {"path": path}}


def multus_objects(env: Environment) -> list[Obj]:
    """Multus thick, after the upstream manifest: RBAC, daemon config, per-node RDMA configs, DaemonSet.

    Changes from upstream: the pinned image, our namespace, system-node-critical, every taint tolerated
    (as upstream), MULTUS_RESOURCES, and an init container that installs the node's RDMA configs.
    """
    multus = chart_values().multus
    image = _image("multus", "multus")
    daemon_config = {"daemon-config.json": _json(multus.daemon_config)}
    rdma_configs = {rdma_config_name(pool): rdma_config_data(env, pool) for pool in rdma_pools(env)}
    # What every node's configs are cut from: the templates and each fabric's slice size. Not the hosts'
    # lines, so a host joining a pool restarts no other node's Multus.
    cut_from = {key: text for data in rdma_configs.values() for key, text in data.items() if key.endswith(".conf")}
    cut_from |= {f"{nad_name(pool)}.host_prefix": str(pool.vars.rdma_network.host_prefix)
                 for pool in rdma_pools(env) if pool.vars.rdma_network}
    conf_dir = multus.conf_dir
    bin_dir = platform().node_runtime.cni_bin_dir  # where the hosts' containerd looks for CNI plugins
    pod_spec: Obj = {
        "hostNetwork": True,
        "hostPID": True,
        "priorityClassName": NODE_CRITICAL,
        "serviceAccountName": MULTUS_NAME,
        **node_critical(),
        "initContainers": [
            {"name": "install-multus-binary", "image": image,
             "command": ["/usr/src/multus-cni/bin/install_multus", "-d", f"/host{bin_dir}", "-t", "thick"],
             "resources": {"requests": {"cpu": "10m", "memory": "15Mi"}},
             "securityContext": {"privileged": True}, "terminationMessagePolicy": "FallbackToLogsOnError",
             "volumeMounts": [{"name": "cnibin", "mountPath": f"/host{bin_dir}",
                               "mountPropagation": "Bidirectional"}]},
            {"name": "install-rdma-networks", "image": image,
             "command": ["/bin/sh", "-c", install_rdma_configs_script()],
             "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
             "resources": {"requests": {"cpu": "10m", "memory": "15Mi"}},
             "securityContext": {"privileged": True}, "terminationMessagePolicy": "FallbackToLogsOnError",
             "volumeMounts": [{"name": "multus-conf-dir", "mountPath": f"/host{conf_dir}"},
                              {"name": "rdma-networks", "mountPath": "/rdma-networks", "readOnly": True}]},
        ],
        "containers": [{
            "name": "kube-multus", "image": image, "command": ["/usr/src/multus-cni/bin/multus-daemon"],
            "resources": MULTUS_RESOURCES,
            "securityContext": {"privileged": True}, "terminationMessagePolicy": "FallbackToLogsOnError",
            "env": [{"name": "MULTUS_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
            "volumeMounts": [
                {"name": "cni", "mountPath": "/host/etc/cni/net.d"},
                {"name": "cnibin", "mountPath": bin_dir},  # must be the host's path (upstream note)
                {"name": "host-run", "mountPath": "/host/run"},
                {"name": "host-var-lib-cni-multus", "mountPath": "/var/lib/cni/multus"},
                {"name": "host-var-lib-kubelet", "mountPath": "/var/lib/kubelet",
                 "mountPropagation": "HostToContainer"},
                {"name": "host-run-k8s-cni-cncf-io", "mountPath": "/run/k8s.cni.cncf.io"},
                {"name": "host-run-netns", "mountPath": "/run/netns", "mountPropagation": "HostToContainer"},
                {"name": MULTUS_DAEMON_CONFIG, "mountPath": "/etc/cni/net.d/multus.d", "readOnly": True},
                {"name": "hostroot", "mountPath": "/hostroot", "mountPropagation": "HostToContainer"},
                {"name": "multus-conf-dir", "mountPath": conf_dir},
            ],
        }],
        "terminationGracePeriodSeconds": 10,
        "volumes": [
            _host_path("cni", "/etc/cni/net.d"),
            _host_path("cnibin", bin_dir),
            _host_path("hostroot", "/"),
            {"name": MULTUS_DAEMON_CONFIG, "configMap": {
                "name": MULTUS_DAEMON_CONFIG, "items": [{"key": "daemon-config.json", "path": "daemon-config.json"}]}},
            _host_path("host-run", "/run"),
            _host_path("host-var-lib-cni-multus", "/var/lib/cni/multus"),
            _host_path("host-var-lib-kubelet", "/var/lib/kubelet"),
            _host_path("host-run-k8s-cni-cncf-io", "/run/k8s.cni.cncf.io"),
            _host_path("host-run-netns", "/run/netns/"),
            _host_path("multus-conf-dir", conf_dir),
            # Every RDMA pool's ConfigMap in one folder; an empty one where there is none (the API server
            # drops an empty list of sources, and the stored object would differ from the rendered one).
            {"name": "rdma-networks", **({"projected": {"sources": [{"configMap": {"name": name}}
                                                                    for name in sorted(rdma_configs)]}}
                                         if rdma_configs else {"emptyDir": {}})},
        ],
    }
    rules = [
        {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "list", "update", "watch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    ]
    return [
        obj("v1", "ServiceAccount", MULTUS_NAME, SYSTEM_NAMESPACE, labels=_MULTUS_LABELS),
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", MULTUS_NAME, labels=_MULTUS_LABELS, rules=rules),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", MULTUS_NAME, labels=_MULTUS_LABELS,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": MULTUS_NAME},
            subjects=[{"kind": "ServiceAccount", "name": MULTUS_NAME, "namespace": SYSTEM_NAMESPACE}]),
        obj("v1", "ConfigMap", MULTUS_DAEMON_CONFIG, SYSTEM_NAMESPACE, labels=_MULTUS_LABELS, data=daemon_config),
        *(obj("v1", "ConfigMap", name, SYSTEM_NAMESPACE, labels=_MULTUS_LABELS, data=data)
          for name, data in sorted(rdma_configs.items())),
        obj("apps/v1", "DaemonSet", MULTUS_DAEMONSET, SYSTEM_NAMESPACE, labels=_MULTUS_LABELS,
            annotations=rollout.awaited(env), spec={
            "selector": {"matchLabels": _MULTUS_LABELS},
            "updateStrategy": rollout.strategy(env),
            "template": {"metadata": {"labels": _MULTUS_LABELS,
                                      "annotations": {CONFIG_HASH_ANNOTATION: config_hash(daemon_config, cut_from)}},
                         "spec": pod_spec},
        }),
    ]


# --------------------------------------------------------------------------- RDMA shared device plugin


def rdma_hca_max(pool: Pool) -> int:
    """Pods per node that may share the pool's HCA: the fewest addresses any slot of its fabric holds, so a
    pod granted the RDMA resource always gets an address, and the figure stays put as hosts come and go."""
    rdma = pool.vars.rdma_network
    if rdma is None:
        raise ValueError(f"pool {pool.name} has no rdma_network")
    return smallest_slice(rdma.cidr, rdma.host_prefix)


def rdma_device_config(pool: Pool) -> Obj:
    """The plugin's config.json for a pool: one resource selecting the pool's RDMA interface."""
    rdma = pool.vars.rdma_network
    if rdma is None:
        raise ValueError(f"pool {pool.name} has no rdma_network")
    return {"configList": [{"resourceName": rdma_resource_name(pool), "rdmaHcaMax": rdma_hca_max(pool),
                            "selectors": {"ifNames": [rdma.interface]}}]}


def rdma_device_plugin(env: Environment) -> list[Obj]:
    """The RDMA shared device plugin: one ConfigMap with a config per pool, one DaemonSet per RDMA pool.

    One DaemonSet per pool, not one for all: the plugin's config is the same on every node it runs on,
    so an entry selecting ens8f0 for one pool would also advertise that pool's resource on every other
    pool with an ens8f0, and per-pool rdmaHcaMax would be impossible.
    """
    pools = rdma_pools(env)
    if not pools:
        return []
    facts = chart_values().rdma_shared_device_plugin
    config_dir, config_file = facts.config_path.rsplit("/", 1)
    if config_file != facts.config_key:
        raise ValueError(f"the plugin reads {facts.config_path}, not the ConfigMap key {facts.config_key}")
    data = {f"{pool.k8s_name}.json": _json(rdma_device_config(pool)) for pool in pools}
    objects = [obj("v1", "ConfigMap", facts.config_map, SYSTEM_NAMESPACE, data=data)]
    for pool in pools:
        key = f"{pool.k8s_name}.json"
        labels = {"app.kubernetes.io/name": "rdma-shared-device-plugin", "app.kubernetes.io/instance": pool.k8s_name}
        objects.append(obj("apps/v1", "DaemonSet", f"{RDMA_DAEMONSET_PREFIX}{pool.k8s_name}", SYSTEM_NAMESPACE,
                           labels=labels, annotations=rollout.awaited(env), spec={
            "selector": {"matchLabels": labels},
            "updateStrategy": rollout.strategy(env),
            "template": {
                "metadata": {"labels": labels, "annotations": {CONFIG_HASH_ANNOTATION: config_hash({key: data[key]})}},
                "spec": {
                    "hostNetwork": True,
                    "priorityClassName": NODE_CRITICAL,
                    **on_pools([pool]),
                    "containers": [{
                        "name": "k8s-rdma-shared-dp-ds", "image": _image("rdma-shared-device-plugin",
                                                                          "rdma-shared-dev-plugin"),
                        "imagePullPolicy": "IfNotPresent",
                        "securityContext": {"privileged": True},
                        "volumeMounts": [
                            {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                            {"name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry"},
                            {"name": "config", "mountPath": config_dir},
                            {"name": "devs", "mountPath": "/dev/"},
                        ],
                    }],
                    "volumes": [
                        _host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
                        _host_path("plugins-registry", "/var/lib/kubelet/plugins_registry"),
                        {"name": "config", "configMap": {"name": facts.config_map,
                                                         "items": [{"key": key, "path": facts.config_key}]}},
                        _host_path("devs", "/dev/"),
                    ],
                },
            },
        }))
    return objects


# --------------------------------------------------------------------------- the concern


def system_namespace() -> Obj:
    """The project's namespace for node agents (Multus, the RDMA plugin, storage provisioners): their pods
    mount host paths and run privileged, so Pod Security admits them here and nowhere else."""
    return obj("v1", "Namespace", SYSTEM_NAMESPACE, labels={"pod-security.kubernetes.io/enforce": "privileged"})


def build(view: Resolved) -> Concern:
    env = view.env
    objects = [system_namespace(), *cni_namespaces(env), *multus_objects(env), *network_attachments(env),
               *rdma_device_plugin(env)]
    return Concern("networking", objects, cni_releases(env))
