"""How the node agents roll out: every DaemonSet the cluster layer declares, or a chart it installs runs,
replaces `agent_rollout.max_unavailable` of its pods at a time, and whatever waits for the rollout (Helm's
wait for a release, pulumi-kubernetes' await of a DaemonSet) waits long enough for every wave.

Kubernetes' default, maxUnavailable 1, is one wave per node; a chart may pick another (Cilium's is 2). Helm's
wait for a DaemonSet holds until every pod runs the new template (helm pkg/kube/ready.go, daemonSetReady:
updatedNumberScheduled == desiredNumberScheduled, then numberReady >= desired - maxUnavailable), and its
default timeout is 300 s: on a thousand nodes a CNI upgrade would be reported failed half-way through while
the controller carries on. A share ("10%") bounds the waves whatever the pool's size: the DaemonSet
controller rounds a share up, so 10% of 1,001 nodes is 101 per wave and the rollout 10 waves.

The wait is sized for the most waves the pace can take: with a share, ceil(100 / share) whatever the node
count (N / ceil(N x share) never exceeds it), so adding a host changes no release and no DaemonSet; with a
count, the whole cluster's node count over it (an upper bound for agents on some pools only), which a new
host may raise.
"""

from __future__ import annotations

import math

from infra.cluster.objects import HELM_TIMEOUT_SECONDS, Obj
from infra.spec import Environment

PULUMI_TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
"""pulumi-kubernetes' annotation for how long it awaits an object it applies (a DaemonSet's rollout)."""


def max_unavailable(env: Environment) -> int | str:
    """The spec's count or share of nodes whose agent may restart at once, as a DaemonSet writes it."""
    return env.cluster.agent_rollout.max_unavailable


def strategy(env: Environment) -> Obj:
    """A DaemonSet's updateStrategy at the spec's pace."""
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable(env)}}


def _percent(share: str) -> int:
    return int(share.rstrip("%"))


def per_wave(nodes: int, pace: int | str) -> int:
    """Pods the DaemonSet controller replaces at once on NODES nodes: a count, or a share rounded up."""
    if isinstance(pace, int):
        return pace
    return max(1, math.ceil(nodes * _percent(pace) / 100))


def waves(nodes: int, pace: int | str) -> int:
    """How many rounds a rollout over NODES nodes takes at PACE."""
    return math.ceil(nodes / per_wave(nodes, pace)) if nodes else 0


def most_waves(nodes: int, pace: int | str) -> int:
    """The waves a rollout may take at PACE: for a share, its bound at any node count."""
    return math.ceil(100 / _percent(pace)) if isinstance(pace, str) else waves(nodes, pace)


def timeout_seconds(env: Environment) -> int:
    """How long a rollout of node agents may take on this cluster: Helm's default plus wave_seconds per wave."""
    rollout = env.cluster.agent_rollout
    return HELM_TIMEOUT_SECONDS + most_waves(len(env.hosts), rollout.max_unavailable) * rollout.wave_seconds


def awaited(env: Environment) -> dict[str, str]:
    """The annotation that lets pulumi-kubernetes await a DaemonSet's rollout as long as it may take."""
    return {PULUMI_TIMEOUT_ANNOTATION: str(timeout_seconds(env))}
