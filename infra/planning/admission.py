"""The API server's ResourceQuota admission over plain Kubernetes objects: which pods and claims it creates.

Objects are admitted in the order given, as the API server admits them one request at a time: each
Pod or PersistentVolumeClaim is charged to every ResourceQuota of its namespace, and one that would
take a quota past its `hard` is refused with the API server's own message ("pods "x" is forbidden:
exceeded quota: NAME, requested: ..., used: ..., limited: ..."). A quota on cpu or memory also
refuses a pod whose containers do not all set them ("failed quota: NAME: must specify ...").
Refused objects are never created, so they use nothing and are never scheduled; admitted pods count
against the quota whether or not they are then scheduled.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from infra.knowledge.units import parse_quantity
from infra.planning.filters import Obj
from infra.planning.scheduler import key_of

_VALIDATED = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")


def _pod_usage(pod: Obj) -> tuple[dict[str, Decimal], list[set[str]]]:
    """Quota usage of a pod (PodUsageFunc) and, per container, the quota names its resources cover."""
    usage: dict[str, Decimal] = {}
    covered = []
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        names = {"pods"}
        for kind in ("requests", "limits"):
            for resource, value in (resources.get(kind) or {}).items():
                amount = parse_quantity(value)
                if kind == "requests":
                    keys = [f"requests.{resource}"]
                    if resource in ("cpu", "memory", "ephemeral-storage") or resource.startswith("hugepages-"):
                        keys.append(resource)
                elif resource in ("cpu", "memory", "ephemeral-storage"):
                    keys = [f"limits.{resource}"]
                else:
                    keys = []
                for key in keys:
                    usage[key] = usage.get(key, Decimal(0)) + amount
                names.update(keys)
        covered.append(names)
    usage["pods"] = usage["count/pods"] = Decimal(1)
    return usage, covered


def _claim_usage(claim: Obj) -> dict[str, Decimal]:
    spec = claim.get("spec") or {}
    size = parse_quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage", 0))
    storage_class = spec.get("storageClassName", "")
    usage = {"persistentvolumeclaims": Decimal(1), "count/persistentvolumeclaims": Decimal(1), "requests.storage": size}
    if storage_class:
        prefix = f"{storage_class}.storageclass.storage.k8s.io/"
        usage[prefix + "requests.storage"] = size
        usage[prefix + "persistentvolumeclaims"] = Decimal(1)
    return usage


def _pretty(values: dict[str, Decimal], keys: list[str]) -> str:
    """The API server's prettyPrint of a resource list: key=value, sorted, comma-separated."""
    return ",".join(f"{key}={printed_quantity(values.get(key, Decimal(0)), key)}" for key in keys)


def printed_quantity(value: Decimal, key: str) -> str:
    """A quantity as Kubernetes prints one written the way users write them: whole numbers plain, sizes in the
    largest exact binary unit (what a LimitRange's "256Mi" or a quota's "1Gi" print as)."""
    if key.endswith(("memory", "storage")) or "hugepages-" in key:
        for suffix, unit in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= unit and value % unit == 0:
                return f"{value // unit}{suffix}"
    if value == value.to_integral_value():
        return f"{int(value)}"
    milli = value * 1000
    return f"{int(milli)}m" if milli == milli.to_integral_value() else str(value)


class Quotas:
    """The namespaces' ResourceQuotas and what admitted objects use of them."""

    def __init__(self, quotas: Sequence[Obj]):
        self._hard: dict[str, list[tuple[str, dict[str, Decimal]]]] = {}
        self.used: dict[str, dict[str, Decimal]] = {}
        for quota in quotas:
            metadata = quota.get("metadata") or {}
            hard = {key: parse_quantity(value) for key, value in ((quota.get("spec") or {}).get("hard") or {}).items()}
            self._hard.setdefault(str(metadata.get("namespace", "")), []).append((str(metadata.get("name")), hard))
            self.used[key_of(quota)] = {}

    def admit(self, item: Obj) -> str | None:
        """Charge a Pod or PersistentVolumeClaim to its namespace's quotas; the API server's refusal, or None."""
        namespace = str((item.get("metadata") or {}).get("namespace", ""))
        is_pod = item.get("kind") == "Pod"
        usage, covered = _pod_usage(item) if is_pod else (_claim_usage(item), [])
        plural = "pods" if is_pod else "persistentvolumeclaims"
        quotas = self._hard.get(namespace, [])
        for name, hard in quotas:
            required = [key for key in hard if key in _VALIDATED]
            missing = sorted({key for names in covered for key in required if key not in names})
            if is_pod and missing:
                return (f'{plural} "{item["metadata"]["name"]}" is forbidden: failed quota: {name}: '
                        f"must specify {','.join(missing)}")
            used = self.used[f"{namespace}/{name}"]
            exceeded = sorted(key for key in hard if usage.get(key) and used.get(key, 0) + usage[key] > hard[key])
            if exceeded:
                requested, held, limited = (_pretty(values, exceeded) for values in (usage, used, hard))
                return (f'{plural} "{item["metadata"]["name"]}" is forbidden: exceeded quota: {name}, '
                        f"requested: {requested}, used: {held}, limited: {limited}")
        for name, hard in quotas:
            used = self.used[f"{namespace}/{name}"]
            for key in hard:
                if usage.get(key):
                    used[key] = used.get(key, Decimal(0)) + usage[key]
        return None
