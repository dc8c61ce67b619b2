"""Issue 15, item 4, asked of the real API server (kube-apiserver 1.34 with the Node authorizer and the
NodeRestriction admission plugin, as kubeadm and Kubespray run it): a kubelet's own credentials
(`system:node:<name>` in `system:nodes`, issued here by the local cluster's CA) cannot set the pool label
that isolation relies on, on its own Node; the old `k8s-node-pools.io/pool` key, which a compromised node
could set to move itself into another pool, it can.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from infra.cluster.nodes import POOL_LABEL
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube

NODE = "restricted-1"
OLD_POOL_LABEL = "k8s-node-pools.io/pool"


def node_credentials(cluster: LocalCluster, work: Path) -> Kube:
    """A client of the API server as the kubelet of NODE: a certificate the cluster's CA signs for
    CN=system:node:<NODE>, O=system:nodes (what TLS bootstrapping gives a kubelet)."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    ca = Path(admin["clusters"][0]["cluster"]["certificate-authority"])
    key, csr, cert = work / "node.key", work / "node.csr", work / "node.crt"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    subprocess.run(["openssl", "req", "-new", "-key", str(key), "-subj", f"/O=system:nodes/CN=system:node:{NODE}",
                    "-out", str(csr)], check=True)
    extensions = work / "ext.cnf"
    extensions.write_text("extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca.with_suffix(".key")),
                    "-CAcreateserial", "-CAserial", str(work / "ca.srl"), "-days", "1", "-extfile", str(extensions),
                    "-out", str(cert)], check=True, capture_output=True)
    kubeconfig = work / "node.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": NODE, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "node", "context": {"cluster": "local", "user": NODE}}], "current-context": "node"}))
    return Kube(kubeconfig)


@pytest.fixture
def kubelet(cluster: LocalCluster, tmp_path: Path) -> Iterator[Kube]:
    admin = cluster.api()
    admin.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    try:
        yield node_credentials(cluster, tmp_path)
    finally:
        admin.delete(f"/api/v1/nodes/{NODE}")


def label(kube: Kube, key: str) -> tuple[int, str]:
    code, answer = kube.request("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {key: "gpu_a100"}}},
                                "application/merge-patch+json")
    return code, answer.get("message", "") if isinstance(answer, dict) else ""


def test_a_kubelet_cannot_put_its_node_into_a_pool(kubelet: Kube, cluster: LocalCluster) -> None:
    code, message = label(kubelet, POOL_LABEL)
    assert code == 403, message
    assert f"is not allowed to modify labels: {POOL_LABEL}" in message
    assert POOL_LABEL not in (cluster.api().get(f"/api/v1/nodes/{NODE}")["metadata"].get("labels") or {})


def test_a_kubelet_could_set_the_old_pool_label(kubelet: Kube, cluster: LocalCluster) -> None:
    """The twin: the same credentials and request, the kubelet-writable key, accepted."""
    code, message = label(kubelet, OLD_POOL_LABEL)
    assert code == 200, message
    assert cluster.api().get(f"/api/v1/nodes/{NODE}")["metadata"]["labels"][OLD_POOL_LABEL] == "gpu_a100"
