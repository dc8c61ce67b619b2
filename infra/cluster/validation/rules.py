"""The project's own checks: what the API server enforces but its OpenAPI schemas do not say.

Kubernetes' published schemas type every field and nothing more: a taint's effect is "a string", a
quantity is "a string or a number", a label is any string. The API server's Go validation enforces
the rest. These checks restate the parts of it the cluster layer can get wrong, with the server's
wording, so a typo is caught before anything is applied.

Checks are keyed by the OpenAPI definition they apply to (`DEFINITION_CHECKS`): validate.py walks
each object along its schema and runs a definition's checks wherever that definition occurs, so the
quantity grammar applies to container resources, quotas, limit ranges, claims and node capacity
alike, and label syntax to every ObjectMeta, selector and node selector, in every kind. Custom
resources have no such definitions; their checks are keyed by apiVersion and kind (`CUSTOM_CHECKS`).
Every check tolerates values of the wrong type: the schema layer reports those.
"""

from __future__ import annotations

from collections.abc import Mapping

from infra.cluster.validation.enums import ENUM_LISTS, ENUMS, enum_check, enum_list_check
from infra.cluster.validation.fields import (
    check_label_selector,
    check_labels,
    check_node_selector_requirement,
    check_node_spec,
    check_object_meta,
    check_quantity,
    check_resource_requirements,
    check_taint,
    check_toleration,
)
from infra.cluster.validation.kinds import (
    check_custom_resource_definition,
    check_namespace,
    check_network_attachment_definition,
    check_policy_binding_spec,
    check_priority_class,
    check_queue,
    template_restart_policy,
)
from infra.cluster.validation.syntax import Check

_QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_ALWAYS = template_restart_policy(("Always",), required=False)


def _merge(*tables: Mapping[str, Check]) -> dict[str, tuple[Check, ...]]:
    merged: dict[str, tuple[Check, ...]] = {}
    for table in tables:
        for name, check in table.items():
            merged[name] = (*merged.get(name, ()), check)
    return merged


DEFINITION_CHECKS: dict[str, tuple[Check, ...]] = _merge(
    {_QUANTITY_DEF: check_quantity,
     "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": check_object_meta,
     "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector": check_label_selector,
     "io.k8s.api.core.v1.NodeSelectorRequirement": check_node_selector_requirement,
     "io.k8s.api.core.v1.ResourceRequirements": check_resource_requirements,
     "io.k8s.api.core.v1.Taint": check_taint,
     "io.k8s.api.core.v1.NodeSpec": check_node_spec,
     "io.k8s.api.core.v1.Toleration": check_toleration,
     "io.k8s.api.core.v1.Namespace": check_namespace,
     "io.k8s.api.scheduling.v1.PriorityClass": check_priority_class,
     "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": check_policy_binding_spec,
     "io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyBindingSpec": check_policy_binding_spec,
     "io.k8s.api.apps.v1.DeploymentSpec": _ALWAYS,
     "io.k8s.api.apps.v1.DaemonSetSpec": _ALWAYS,
     "io.k8s.api.apps.v1.StatefulSetSpec": _ALWAYS,
     "io.k8s.api.apps.v1.ReplicaSetSpec": _ALWAYS,
     "io.k8s.api.batch.v1.JobSpec": template_restart_policy(("OnFailure", "Never"), required=True),
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition":
         check_custom_resource_definition},
    {"io.k8s.api.core.v1.PodSpec": lambda value, path, report: check_labels(
        value.get("nodeSelector") if isinstance(value, Mapping) else None, (*path, "nodeSelector"), report),
     "io.k8s.api.core.v1.ServiceSpec": lambda value, path, report: check_labels(
         value.get("selector") if isinstance(value, Mapping) else None, (*path, "selector"), report)},
    {name: enum_check(fields) for name, fields in ENUMS.items()},
    {name: enum_list_check(fields) for name, fields in ENUM_LISTS.items()},
)




CUSTOM_CHECKS: dict[tuple[str, str], tuple[Check, ...]] = {
    ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"): (check_network_attachment_definition,),
    ("scheduling.volcano.sh/v1beta1", "Queue"): (check_queue,),
}
