"""Enumerations the OpenAPI schemas type as plain strings: the allowed values per definition and field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from infra.cluster.validation.syntax import Check, Path, Report, not_one_of


class Enum(NamedTuple):
    values: tuple[str, ...]
    empty_is_unset: bool = False  # a plain string the API server defaults when empty (not a pointer)


RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL = Enum(("Always", "IfNotPresent", "Never"), empty_is_unset=True)
_TERMINATION_MESSAGE = Enum(("File", "FallbackToLogsOnError"), empty_is_unset=True)
_PROTOCOL = Enum(("TCP", "UDP", "SCTP"), empty_is_unset=True)
_PREEMPTION = Enum(("PreemptLowerPriority", "Never"))
_FAILURE = Enum(("Fail", "Ignore"))
_MATCH = Enum(("Exact", "Equivalent"))
_TRAFFIC = Enum(("Cluster", "Local"))

# OpenAPI definition -> field -> allowed values. The definitions are stable across 1.25-1.37.
ENUMS: dict[str, dict[str, Enum]] = {
    "io.k8s.api.core.v1.Container": {"imagePullPolicy": _PULL, "terminationMessagePolicy": _TERMINATION_MESSAGE},
    "io.k8s.api.core.v1.EphemeralContainer": {"imagePullPolicy": _PULL,
                                               "terminationMessagePolicy": _TERMINATION_MESSAGE},
    "io.k8s.api.core.v1.PodSpec": {
        "restartPolicy": Enum(RESTART_POLICIES, empty_is_unset=True),
        "dnsPolicy": Enum(("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"), empty_is_unset=True),
        "preemptionPolicy": _PREEMPTION,
    },
    "io.k8s.api.core.v1.ContainerPort": {"protocol": _PROTOCOL},
    "io.k8s.api.core.v1.ServicePort": {"protocol": _PROTOCOL},
    "io.k8s.api.core.v1.ServiceSpec": {
        "type": Enum(("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"), empty_is_unset=True),
        "sessionAffinity": Enum(("ClientIP", "None"), empty_is_unset=True),
        "externalTrafficPolicy": Enum(_TRAFFIC.values, empty_is_unset=True),
        "internalTrafficPolicy": _TRAFFIC,
        "ipFamilyPolicy": Enum(("SingleStack", "PreferDualStack", "RequireDualStack")),
    },
    "io.k8s.api.core.v1.LimitRangeItem": {"type": Enum(("Pod", "Container", "PersistentVolumeClaim"))},
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec": {"volumeMode": Enum(("Filesystem", "Block"))},
    "io.k8s.api.storage.v1.StorageClass": {
        "volumeBindingMode": Enum(("Immediate", "WaitForFirstConsumer")),
        "reclaimPolicy": Enum(("Delete", "Retain")),  # Recycle is for PersistentVolumes only
    },
    "io.k8s.api.scheduling.v1.PriorityClass": {"preemptionPolicy": _PREEMPTION},
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec": {"failurePolicy": _FAILURE},
    "io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicySpec": {"failurePolicy": _FAILURE},
    "io.k8s.api.admissionregistration.v1.MatchResources": {"matchPolicy": _MATCH},
    "io.k8s.api.admissionregistration.v1beta1.MatchResources": {"matchPolicy": _MATCH},
    "io.k8s.api.admissionregistration.v1.ValidatingWebhook": {
        "failurePolicy": _FAILURE, "matchPolicy": _MATCH, "sideEffects": Enum(("None", "NoneOnDryRun"))},
    "io.k8s.api.apps.v1.DeploymentStrategy": {"type": Enum(("Recreate", "RollingUpdate"), empty_is_unset=True)},
    "io.k8s.api.apps.v1.DaemonSetUpdateStrategy": {"type": Enum(("RollingUpdate", "OnDelete"), empty_is_unset=True)},
    "io.k8s.api.apps.v1.StatefulSetSpec": {
        "podManagementPolicy": Enum(("OrderedReady", "Parallel"), empty_is_unset=True)},
    "io.k8s.api.batch.v1.CronJobSpec": {"concurrencyPolicy": Enum(("Allow", "Forbid", "Replace"), empty_is_unset=True)},
}

# Lists whose every item is one of the values.
_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
ENUM_LISTS: dict[str, dict[str, tuple[str, ...]]] = {
    "io.k8s.api.core.v1.PersistentVolumeClaimSpec": {"accessModes": _ACCESS_MODES},
    "io.k8s.api.core.v1.PersistentVolumeSpec": {"accessModes": _ACCESS_MODES},
}


def enum_check(fields: Mapping[str, Enum]) -> Check:
    def check(value: Any, path: Path, report: Report) -> None:
        if not isinstance(value, Mapping):
            return
        for field, enum in fields.items():
            given = value.get(field)
            if not isinstance(given, str) or (given == "" and enum.empty_is_unset):
                continue
            if given not in enum.values:
                report((*path, field), not_one_of(given, enum.values))

    return check


def enum_list_check(fields: Mapping[str, tuple[str, ...]]) -> Check:
    def check(value: Any, path: Path, report: Report) -> None:
        if not isinstance(value, Mapping):
            return
        for field, allowed in fields.items():
            items = value.get(field)
            if isinstance(items, list):
                for index, item in enumerate(items):
                    if isinstance(item, str) and item not in allowed:
                        report((*path, field, index), not_one_of(item, allowed))

    return check


