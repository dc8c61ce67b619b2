"""Issue 15, item 9: what a destroy or a removal leaves. Tenants' namespaces, CRDs and storage classes
are declared retain_on_delete (as the SDK sends it to the engine); every Helm release runs the
post-renderer that marks its chart's CRDs `helm.sh/resource-policy: keep` (run here as Helm runs it);
local volumes are retained unless the spec says otherwise. The real destroy is in
tests/live/test_pulumi_path.py."""

from __future__ import annotations

import os
import subprocess

import pulumi
import pytest
import yaml
from inventory_builder import ROOT, SHIPPED

from infra.cluster.components import ClusterSettings, resource_name, type_token
from infra.cluster.concerns import build_concerns
from infra.cluster.retention import HELM_RESOURCE_POLICY, POST_RENDERER, retained
from infra.cluster.tenancy import TENANT_LABEL
from infra.model.resolve import resolve
from infra.spec import load_environment
from infra.stack import declare

SETTINGS = ClusterSettings(kubeconfig="/nonexistent/kubeconfig-of-the-test-cluster")
CRD_WITH_ANNOTATION = """\
# Source: volcano/templates/scheduling_v1beta1_queue.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.20.0
  name: queues.scheduling.volcano.sh
spec:
  group: scheduling.volcano.sh
"""
CRD_BARE = """\
# Source: csi-driver-nfs/templates/crd-csi-snapshot.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: volumesnapshots.snapshot.storage.k8s.io
"""
CONFIG_MAP = """\
# Source: volcano/templates/scheduler.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: volcano-scheduler-configmap
data:
  volcano-scheduler.conf: |
    actions: "enqueue, allocate"
"""


def post_render(manifests: str) -> subprocess.CompletedProcess[str]:
    """The post-renderer as Helm runs it: the executable, from the project folder, manifests on stdin."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([POST_RENDERER], input=manifests, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def documents(stream: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(stream) if d]


# --------------------------------------------------------------------------- what is retained


@pytest.mark.parametrize("name", SHIPPED)
def test_tenants_namespaces_crds_and_storage_classes_and_nothing_else_are_retained(name):
    env = load_environment(ROOT / "inventories" / name)
    objects = [o for c in build_concerns(resolve(env)) for o in c.objects]
    kept = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects if retained(o))
    expected = sorted([*(f"Namespace/{tenant}" for tenant in env.cluster.tenants),
                       *(f"StorageClass/{sc}" for sc in env.cluster.storage_classes),
                       *(f"CustomResourceDefinition/{o['metadata']['name']}" for o in objects
                         if o["kind"] == "CustomResourceDefinition")])
    assert kept == expected
    assert any(o["kind"] == "Namespace" and not retained(o) for o in objects)  # the system namespaces go


def test_a_namespace_is_retained_for_its_tenant_label_only():
    tenant = {"kind": "Namespace", "metadata": {"name": "team-a", "labels": {TENANT_LABEL: "team-a"}}}
    system = {"kind": "Namespace", "metadata": {"name": "volcano-system", "labels": {}}}
    quota = {"kind": "ResourceQuota", "metadata": {"name": "team-a", "labels": {TENANT_LABEL: "team-a"}}}
    assert (retained(tenant), retained(system), retained(quota)) == (True, False, False)


def run_program(name):
    """The stack's program for a shipped inventory, against the mocks."""
    @pulumi.runtime.test
    def program():
        declare(str(ROOT / "inventories" / name), SETTINGS)

    program()


@pytest.mark.parametrize("name", SHIPPED)
def test_the_program_declares_exactly_the_retained_objects_retain_on_delete(mocks, name):
    run_program(name)
    objects = [o for c in build_concerns(resolve(load_environment(ROOT / "inventories" / name))) for o in c.objects]
    expected = {(type_token(o["apiVersion"], o["kind"]), resource_name(o)) for o in objects if retained(o)}
    assert expected and mocks.retained == expected


@pytest.mark.parametrize("name", SHIPPED)
def test_every_helm_release_runs_the_post_renderer(mocks, name):
    run_program(name)
    releases = [r for r in mocks.registered if r.typ == "kubernetes:helm.sh/v3:Release"]
    assert releases and {r.inputs.get("postrender") for r in releases} == {POST_RENDERER}
    assert os.access(ROOT / POST_RENDERER, os.X_OK)


# --------------------------------------------------------------------------- the post-renderer


def test_the_post_renderer_keeps_every_crd_and_changes_nothing_else():
    stream = "---\n" + CRD_WITH_ANNOTATION + "---\n" + CONFIG_MAP + "---\n" + CRD_BARE
    done = post_render(stream)
    assert done.returncode == 0, done.stderr
    before, after = documents(stream), documents(done.stdout)
    assert [d["kind"] for d in after] == ["CustomResourceDefinition", "ConfigMap", "CustomResourceDefinition"]
    for old, new in zip(before, after, strict=True):
        if new["kind"] == "CustomResourceDefinition":
            annotations = new["metadata"].pop("annotations")
            assert annotations == {**(old["metadata"].pop("annotations", None) or {}), HELM_RESOURCE_POLICY: "keep"}
        assert new == old
    assert "# Source: volcano/templates/scheduling_v1beta1_queue.yaml" in done.stdout
    assert CONFIG_MAP in done.stdout  # byte for byte


def test_without_the_post_renderer_nothing_is_kept():
    """The twin: the manifests as the charts render them carry no keep policy, so Helm would delete the CRDs."""
    assert all(HELM_RESOURCE_POLICY not in (d["metadata"].get("annotations") or {})
               for d in documents(CRD_WITH_ANNOTATION + "---\n" + CRD_BARE))


def test_the_post_renderer_refuses_what_is_not_yaml_and_writes_nothing():
    done = post_render("---\nkind: ConfigMap\nmetadata: {name: [unclosed\n")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"{POST_RENDERER}: a rendered manifest is not YAML")


def test_an_empty_render_stays_empty():
    done = post_render("---\n# Source: chart/templates/nothing.yaml\n")
    assert (done.returncode, done.stdout) == (0, "")


# --------------------------------------------------------------------------- local volumes


def test_local_volumes_are_retained_unless_the_spec_says_delete(inventory, write):
    classes = inventory["group_vars"]["all"]["storage_classes"]
    local = next(name for name, spec in classes.items() if spec["type"] == "local")
    env = load_environment(write(inventory))
    assert env.cluster.storage_classes[local].reclaim_policy == "Retain"
    classes[local]["reclaim_policy"] = "Delete"
    assert load_environment(write(inventory)).cluster.storage_classes[local].reclaim_policy == "Delete"


def test_csi_volumes_go_with_their_claim_unless_told(inventory, write):
    classes = inventory["group_vars"]["all"]["storage_classes"]
    classes["shared"] = {"type": "csi", "provisioner": "nfs.csi.k8s.io", "capacity": "1Ti"}
    assert load_environment(write(inventory)).cluster.storage_classes["shared"].reclaim_policy == "Delete"
