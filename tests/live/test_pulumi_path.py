"""Issue 8, items 4 and 5, on both shipped stacks: `pulumi preview` and `up` with the real CLI and provider,
every declared object read back as rendered, no changes on a second preview, a hand-edited quota found by
`preview --refresh` and repaired by the next `up`, the scheduling and admission probes, and `pulumi
destroy` leaving what users' data lives in (issue 15, item 9) and nothing else. Each proof is also run
against a sabotaged cluster, where it must fail (the `*_fails_*` tests), so that none of them can pass
vacuously.

Tests run in file order per stack (module-scoped fixture parametrized by stack; destroy is last).
"""

from __future__ import annotations

from collections.abc import Callable
from subprocess import CompletedProcess

import pytest

from infra.cluster import tenancy
from infra.cluster.retention import retained
from infra.live import probes
from infra.live.compare import (
    described,
    destroy_differences,
    managed_count,
    not_as_rendered,
    project_objects_left,
    pulumi_resource_count,
)
from infra.live.controlplane import LocalCluster
from infra.live.kubeapi import Kube, wait_for
from infra.model.resolve import Resolved, resolve
from infra.spec import load_environment


@pytest.fixture
def kube(cluster: LocalCluster) -> Kube:
    return cluster.api()


@pytest.fixture
def view(deployment) -> Resolved:
    return resolve(load_environment(deployment.stack.root / deployment.stack.inventory))


def _output(done: CompletedProcess[str] | None) -> str:
    if done is None:
        return "not run (the preview failed)"
    return (done.stdout + done.stderr)[-4000:]


# ---------------------------------------------------------------------------------------- item 4


def test_preview_then_up_apply_the_stack(deployment):
    assert deployment.preview.returncode == 0, _output(deployment.preview)
    assert "to create" in deployment.preview.stdout
    assert deployment.up is not None and deployment.up.returncode == 0, _output(deployment.up)
    declared = deployment.stack.declared()
    assert pulumi_resource_count(deployment.stack.resources()) == managed_count(declared)


def test_every_declared_object_exists_as_rendered(deployment, kube: Kube):
    declared = deployment.stack.declared()
    assert {o["kind"] for o in declared} >= {"Namespace", "ResourceQuota", "LimitRange", "PriorityClass",
                                             "ValidatingAdmissionPolicy", "Node", "Queue"}
    assert not_as_rendered(kube, declared) == []


def test_a_second_preview_shows_no_changes(deployment):
    done = deployment.stack.preview("--expect-no-changes")
    assert done.returncode == 0, _output(done)


def test_a_hand_edited_quota_shows_in_refresh_and_the_next_up_repairs_it(deployment, kube: Kube):
    quota = next(o for o in deployment.stack.declared() if o["kind"] == "ResourceQuota")
    path = kube.path(quota)
    name = f"{quota['metadata']['namespace']}/{quota['metadata']['name']}"
    # As `kubectl edit` would: another field manager changes one limit.
    kube.merge_patch(path + "?fieldManager=kubectl-edit", {"spec": {"hard": {"requests.cpu": "777"}}})
    # The read-back proof sees it (it is what fails when an object is not as rendered) ...
    found = "\n".join(not_as_rendered(kube, [quota]))
    assert f"ResourceQuota {name}: .spec.hard.requests.cpu: want " in found
    print(found)
    # ... and so does a refreshing preview, which then fails --expect-no-changes.
    drift = deployment.stack.preview("--refresh", "--expect-no-changes")
    assert drift.returncode != 0, _output(drift)
    assert "ResourceQuota" in drift.stdout and "777" in drift.stdout, _output(drift)
    print("\n".join(line for line in (drift.stdout + drift.stderr).splitlines()
                    if "777" in line or "error" in line or "ResourceQuota" in line))
    repaired = deployment.stack.up("--refresh")
    assert repaired.returncode == 0, _output(repaired)
    assert not_as_rendered(kube, [quota]) == []
    assert kube.get(path)["spec"]["hard"]["requests.cpu"] == quota["spec"]["hard"]["requests.cpu"]
    again = deployment.stack.preview("--refresh", "--expect-no-changes")
    assert again.returncode == 0, _output(again)


# ---------------------------------------------------------------------------------------- item 5


def test_tenant_namespaces_are_ready_for_pods(deployment, kube: Kube, view: Resolved):
    probes.ready_for_pods(kube, view)


@pytest.mark.parametrize("probe", probes.POD_PROBES, ids=lambda p: p.__name__)
def test_probe(deployment, kube: Kube, view: Resolved, probe: Callable[[Kube, Resolved], probes.ProbeResult]):
    result = probe(kube, view)
    assert result.ok, result.detail


def test_custom_resources_are_checked_against_the_installed_crd_schemas(deployment, kube: Kube):
    result = probes.custom_resources(kube, deployment.stack.declared())
    assert result.ok, result.detail
    assert result.detail.startswith("Queue: valid accepted")


# ------------------------------------------------------------------- the proofs fail when broken


def test_the_taint_probe_fails_when_a_gpu_node_loses_its_taint(deployment, kube: Kube, view: Resolved):
    choice = probes.gpu_probe_choice(view)
    assert choice is not None
    gpu_pool = choice[2][0]
    saved = {host.name: kube.get(f"/api/v1/nodes/{host.name}")["spec"]["taints"] for host in gpu_pool.hosts}
    try:
        for name in saved:  # every node of the GPU pool the probe aims at loses its taints
            kube.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        result = probes.no_gpu_without_toleration(kube, view)
        assert not result.ok
        assert f"a pod aimed at {gpu_pool.name} without tolerations was bound" in result.detail
        print(result.detail)
    finally:
        for name, taints in saved.items():
            kube.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints}})
    assert probes.no_gpu_without_toleration(kube, view).ok


def test_the_admission_probe_fails_without_the_policy_binding(deployment, kube: Kube, view: Resolved):
    binding = next(o for o in deployment.stack.declared() if o["kind"] == "ValidatingAdmissionPolicyBinding"
                   and o["metadata"]["name"] == tenancy.POLICY_NAME)
    path = kube.path(binding)
    kube.delete(path)
    try:
        # The API server's policy cache follows the deletion within a second or so.
        result = wait_for("the admission probe to fail", lambda: r if not (r := probes.foreign_pool_refused(
            kube, view)).ok else None, timeout=30)
        assert "admitted" in result.detail
        print(result.detail)
    finally:
        kube.create(kube.path(binding, name=False), binding)
    wait_for("the admission probe to pass again", lambda: True if probes.foreign_pool_refused(kube, view).ok
             else None, timeout=30)


def test_the_preemption_probe_fails_when_the_pod_has_no_higher_class(deployment, kube: Kube,
                                                                       view: Resolved):
    result = probes.preemption(kube, view, high_priority=False)
    assert not result.ok
    assert "was preempted" in result.detail
    print(result.detail)


def test_the_crd_probe_fails_when_the_schema_accepts_anything(deployment, kube: Kube):
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/queues.scheduling.volcano.sh"
    crd = kube.get(crd_path)
    original = [dict(v) for v in crd["spec"]["versions"]]
    loose = [{**v, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
             for v in original]
    kube.merge_patch(crd_path, {"spec": {"versions": loose}})
    try:
        result = wait_for("the CRD probe to fail", lambda: r if not (r := probes.custom_resources(
            kube, deployment.stack.declared())).ok else None, timeout=30)
        assert "was accepted" in result.detail
        print(result.detail)
    finally:
        kube.merge_patch(crd_path, {"spec": {"versions": original}})
    wait_for("the CRD probe to pass again", lambda: True if probes.custom_resources(
        kube, deployment.stack.declared()).ok else None, timeout=30)


def test_nothing_was_left_changed_by_the_probes(deployment, kube: Kube):
    assert not_as_rendered(kube, deployment.stack.declared()) == []
    done = deployment.stack.preview("--refresh", "--expect-no-changes")
    assert done.returncode == 0, _output(done)


# ---------------------------------------------------------------------------------------- destroy


USERS_QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": "users-queue"}, "spec": {"weight": 1}}


def _users_data(namespace: str) -> dict[str, dict]:
    """What a user stores: a ConfigMap in a tenant's namespace and a custom object of a project CRD."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "users-data", "namespace": namespace},
                  "data": {"state": "precious"}}
    return {f"/api/v1/namespaces/{namespace}/configmaps": config_map, "/apis/scheduling.volcano.sh/v1beta1/queues":
            USERS_QUEUE}


def test_destroy_leaves_what_users_data_lives_in_and_nothing_else(deployment, kube: Kube):
    """Issue 15, item 9: tenants' namespaces, CRDs and storage classes stay, with what users stored in them;
    everything else of the project goes; the next `up` takes the kept objects over again."""
    declared = deployment.stack.declared()
    kept = [o for o in declared if retained(o)]
    tenant = next(o["metadata"]["name"] for o in kept if o["kind"] == "Namespace")
    stored = _users_data(tenant)
    for path, o in stored.items():
        kube.create(path, o)
    done = deployment.stack.destroy()
    deployment.destroyed = True
    assert done.returncode == 0, _output(done)
    assert destroy_differences(kube, declared) == []
    assert [kube.get(f"{path}/{o['metadata']['name']}")["metadata"]["name"] for path, o in stored.items()] == [
        "users-data", "users-queue"]
    # The check sees what it must: an object of the project left behind.
    stray = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "stray", "namespace": "default",
                          "labels": {"app.kubernetes.io/managed-by": "k8s-node-pools"}}}
    kube.create("/api/v1/namespaces/default/configmaps", stray)
    try:
        assert destroy_differences(kube, declared) == ["left: ConfigMap default/stray"]
    finally:
        kube.delete("/api/v1/namespaces/default/configmaps/stray")


def test_up_after_destroy_takes_the_kept_objects_over(deployment, kube: Kube):
    """What was kept is adopted, not refused as existing; a second destroy keeps it again; the test then
    removes it, as an administrator would, so the next stack starts from an empty cluster."""
    declared = deployment.stack.declared()
    kept = [o for o in declared if retained(o)]
    try:
        up = deployment.stack.up()
        assert up.returncode == 0, _output(up)
        assert not_as_rendered(kube, declared) == []
        done = deployment.stack.destroy()
        assert done.returncode == 0, _output(done)
        assert destroy_differences(kube, declared) == []
    finally:
        kube.delete(f"/apis/scheduling.volcano.sh/v1beta1/queues/{USERS_QUEUE['metadata']['name']}")
        for o in kept:
            kube.delete(kube.path(o))
    wait_for("the kept objects to be deleted", lambda: True if project_objects_left(kube, declared) == [] else None,
             timeout=120)
    # The check sees what it must: a kept object that a destroy deleted.
    assert destroy_differences(kube, declared) == [f"lost: {described(o)}" for o in sorted(kept, key=described)]
