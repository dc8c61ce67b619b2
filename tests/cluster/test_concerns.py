"""What an object names and cannot work without (concerns.named_by): the stack makes each object wait for
those of them it declares, and for nothing else (tests/cluster/test_program.py checks the program)."""

from infra.cluster.concerns import definition_of, named_by, ref
from infra.cluster.objects import obj

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "queues.scheduling.volcano.sh"},
       "spec": {"group": "scheduling.volcano.sh", "names": {"kind": "Queue", "plural": "queues"}}}


def pod_spec(**fields):
    return {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], **fields}


def test_a_pod_template_names_its_priority_class_service_account_and_config_maps():
    daemon_set = obj("apps/v1", "DaemonSet", "agent", "system", spec={"template": {"spec": pod_spec(
        priorityClassName="system-node-critical", serviceAccountName="agent",
        volumes=[{"name": "config", "configMap": {"name": "agent-config"}}, {"name": "scratch", "emptyDir": {}}])}})
    assert named_by(daemon_set) == [("Namespace", "", "system"), ("PriorityClass", "", "system-node-critical"),
                                    ("ServiceAccount", "system", "agent"), ("ConfigMap", "system", "agent-config")]


def test_a_pod_without_a_service_account_names_the_default_one():
    cron = obj("batch/v1", "CronJob", "tidy", "ops", spec={
        "jobTemplate": {"spec": {"template": {"spec": pod_spec(restartPolicy="Never")}}}})
    assert named_by(cron) == [("Namespace", "", "ops"), ("ServiceAccount", "ops", "default")]


def test_a_cluster_scoped_built_in_object_names_nothing():
    assert named_by(obj("storage.k8s.io/v1", "StorageClass", "local-nvme", provisioner="kubernetes.io/no-provisioner")) == []
    # An API group with dots is not a custom one unless a definition serves it.
    assert named_by(obj("scheduling.k8s.io/v1", "PriorityClass", "inference-high", value=1000)) == []


def test_a_custom_resource_names_the_definition_of_its_kind():
    queue = obj("scheduling.volcano.sh/v1beta1", "Queue", "batch", spec={"weight": 1})
    assert named_by(queue) == [definition_of(queue)] == [ref(CRD)]
    assert ref(CRD) == ("CustomResourceDefinition", "", "Queue.scheduling.volcano.sh")
