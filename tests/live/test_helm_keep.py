"""Issue 15, item 9, the Helm half on the real path: a chart that renders its CRD as a template (as
Volcano's does) is installed by the real Pulumi CLI and provider, whose embedded Helm runs the stack's
post-renderer (`tools/helm-post-render`, found from the project folder as a user's `pulumi up` finds
it); `pulumi destroy` uninstalls the release and the CRD stays, with a custom object stored in it. The
twin installs the same chart without the post-renderer: the uninstall deletes the CRD.

Chart repositories cannot be reached here, so the chart is the test's own (tests/live/helm_keep/chart).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.cluster.retention import HELM_RESOURCE_POLICY
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube, wait_for
from infra.live.pulumi_cli import REAL, Stack

PROGRAM = Path(__file__).parent / "helm_keep"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.k8s-node-pools.io"
WIDGETS = "/apis/test.k8s-node-pools.io/v1/namespaces/default/widgets"
WIDGET = {"apiVersion": "test.k8s-node-pools.io/v1", "kind": "Widget", "metadata": {"name": "users-widget"},
          "spec": {"size": 3}}
SETTINGS = "/api/v1/namespaces/default/configmaps/kept-crd-settings"


@pytest.fixture(scope="module")
def stack(cluster: LocalCluster) -> Iterator[Stack]:
    stack = Stack("helm-keep", cluster, program=PROGRAM, work=REAL / "helm-keep")
    stack.prepare()
    done = stack.run("config", "set", "chart", str(PROGRAM / "chart"))
    assert done.returncode == 0, done.stderr
    yield stack
    stack.destroy()
    cluster.api().delete(CRD)


def _output(done) -> str:
    return (done.stdout + done.stderr)[-4000:]


def _install(stack: Stack, post_render: bool) -> None:
    done = stack.run("config", "set", "postRender", str(post_render).lower())
    assert done.returncode == 0, done.stderr
    up = stack.up()
    assert up.returncode == 0, _output(up)


def _gone(kube: Kube, path: str) -> bool | None:
    return True if not kube.exists(path) else None


def test_helm_uninstall_keeps_a_crd_the_post_renderer_marked(stack: Stack, cluster: LocalCluster) -> None:
    kube = cluster.api()
    _install(stack, post_render=True)
    annotations = kube.get(CRD)["metadata"]["annotations"]
    assert annotations[HELM_RESOURCE_POLICY] == "keep"
    assert annotations["controller-gen.kubebuilder.io/version"] == "v0.20.0"  # the chart's own, kept
    assert kube.exists(SETTINGS)
    kube.create(WIDGETS, WIDGET)
    try:
        done = stack.destroy()
        assert done.returncode == 0, _output(done)
        wait_for("the release's ConfigMap to be deleted", lambda: _gone(kube, SETTINGS))  # the uninstall ran
        assert kube.exists(CRD)
        assert kube.get(f"{WIDGETS}/users-widget")["spec"] == {"size": 3}
    finally:
        kube.delete(f"{WIDGETS}/users-widget")
        kube.delete(CRD)
    wait_for("the CRD to be deleted", lambda: _gone(kube, CRD))


def test_without_the_post_renderer_helm_uninstall_deletes_the_crd(stack: Stack, cluster: LocalCluster) -> None:
    kube = cluster.api()
    _install(stack, post_render=False)
    assert HELM_RESOURCE_POLICY not in kube.get(CRD)["metadata"]["annotations"]
    done = stack.destroy()
    assert done.returncode == 0, _output(done)
    wait_for("the CRD to be deleted with the release", lambda: _gone(kube, CRD))
