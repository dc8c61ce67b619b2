"""The conntrack table a node really runs with, as kube-proxy and the host layer leave it.

kube-proxy (unless the CNI replaces it, or its maxPerCore is 0) SETS nf_conntrack_max at start to
max(min, maxPerCore x logical CPUs), lowering a higher value too, and only ever raises the hash size to
a quarter of that. Where kube-proxy does not manage the table, the host layer writes the same formula
(or the pool's own sysctl). So the value follows from the machine; nobody computes it by hand per pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.knowledge.platform import platform
from infra.spec.models import ClusterVars, PoolVars

MAX_SYSCTL = "net.netfilter.nf_conntrack_max"
BUCKETS_SYSCTL = "net.netfilter.nf_conntrack_buckets"


@dataclass(frozen=True)
class Conntrack:
    max: int  # entries the node runs with
    buckets: int  # hash buckets the node runs with (at least this many)
    kube_proxy_sets_max: bool  # kube-proxy overwrites nf_conntrack_max at start
    derived_max: int  # max(min, max_per_core x CPUs): kube-proxy's value, and the host layer's default
    declared_max: int | None  # the pool's sysctls, if set
    declared_buckets: int | None

    @property
    def set_by(self) -> str:
        return "kube-proxy" if self.kube_proxy_sets_max else "host"


def kube_proxy_settings(cluster: ClusterVars) -> tuple[int, int]:
    """(maxPerCore, min) kube-proxy runs with: the cluster's Kubespray variables, else kube-proxy's defaults."""
    defaults = platform().kube_proxy_conntrack
    per_core = cluster.kube_proxy_conntrack_max_per_core
    minimum = cluster.kube_proxy_conntrack_min
    return (defaults.max_per_core if per_core is None else per_core, defaults.min if minimum is None else minimum)


def conntrack(cluster: ClusterVars, pool: PoolVars, cpus: int) -> Conntrack:
    per_core, minimum = kube_proxy_settings(cluster)
    divisor = platform().kube_proxy_conntrack.buckets_divisor
    derived = max(minimum, per_core * cpus)
    declared_max = _count(pool.sysctls.get(MAX_SYSCTL))
    declared_buckets = _count(pool.sysctls.get(BUCKETS_SYSCTL))
    kube_proxy = not cluster.kube_proxy_remove and per_core > 0
    if kube_proxy:
        entries = derived
        buckets = max(declared_buckets or 0, entries // divisor)  # kube-proxy raises the hash size, never lowers it
    else:
        entries = declared_max if declared_max is not None else derived
        buckets = declared_buckets if declared_buckets is not None else entries // divisor
    return Conntrack(entries, buckets, kube_proxy, derived, declared_max, declared_buckets)


def _count(value: int | str | None) -> int | None:
    return None if value is None else int(value)
