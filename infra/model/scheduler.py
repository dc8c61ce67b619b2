"""kube-scheduler's configuration: the one the cluster runs is the one fit simulates.

A KubeSchedulerConfiguration as plain data, declared in the inventory with Kubespray's variables
(kube_scheduler_profiles, kube_scheduler_config_extra_opts) or else the project's: MostAllocated over cpu,
memory and the extended resources the pools advertise. Kubespray writes it for a real control plane
(`kubespray_variables`), tools/cluster.sh gives it to the local kube-scheduler (`python -m infra scheduler`),
and fit reads the scoring it simulates from it (`scoring_of`), which refuses a configuration it cannot simulate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.model.capacity import host_capacity
from infra.model.resolve import Resolved

Obj = dict[str, Any]

STRATEGIES = ("MostAllocated", "LeastAllocated")  # the scoring strategies simulated here


@dataclass(frozen=True)
class Scoring:
    """NodeResourcesFit's scoringStrategy: MostAllocated or LeastAllocated, and resource name -> weight."""

    strategy: str = "MostAllocated"
    weights: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))


def configuration(profiles: list[Obj], extra: Obj) -> Obj:
    """A KubeSchedulerConfiguration of PROFILES and the EXTRA top-level fields, as Kubespray writes one from
    kube_scheduler_profiles and kube_scheduler_config_extra_opts."""
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **extra,
            "profiles": profiles}


def scheduler_configuration(scoring: Scoring, extra: Obj | None = None) -> Obj:
    """The KubeSchedulerConfiguration for SCORING: the default filters, NodeResourcesFit the only score, every
    feasible node scored (EXTRA fields over that). kube-scheduler runs it (--config), Kubespray writes it
    (`kubespray_variables`) and `scoring_of` reads it back for the simulation."""
    profile = {
        "schedulerName": "default-scheduler",
        "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 1}]},
                    "preScore": {"disabled": [{"name": "*"}]}},
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
            "type": scoring.strategy,
            "resources": [{"name": name, "weight": weight} for name, weight in scoring.weights]}}}],
    }
    return configuration([profile], {"percentageOfNodesToScore": 100, **(extra or {})})


def scoring_of(config: Obj) -> Scoring:
    """The scoring a KubeSchedulerConfiguration asks for, if it is one this module simulates (one profile,
    NodeResourcesFit the only score plugin, every node scored); ValueError naming what is not."""
    if config.get("percentageOfNodesToScore") != 100:
        raise ValueError("percentageOfNodesToScore must be 100: fit scores every feasible node, and a smaller "
                         "share makes the choice depend on where the scheduler's search starts")
    profiles = config.get("profiles") or []
    if len(profiles) != 1 or profiles[0].get("schedulerName", "default-scheduler") != "default-scheduler":
        raise ValueError("one profile, default-scheduler: the pods fit simulates name no other scheduler")
    profile = profiles[0]
    score = (profile.get("plugins") or {}).get("score") or {}
    if score.get("disabled") != [{"name": "*"}] or [p.get("name") for p in score.get("enabled") or []] != [
            "NodeResourcesFit"]:
        raise ValueError("plugins.score must disable '*' and enable NodeResourcesFit alone: fit simulates no "
                         "other score plugin")
    args = next((c.get("args") or {} for c in profile.get("pluginConfig") or [] if c.get("name") == "NodeResourcesFit"),
                {})
    strategy = args.get("scoringStrategy") or {}
    if strategy.get("type") not in STRATEGIES:
        raise ValueError(f"NodeResourcesFit scoringStrategy.type {strategy.get('type')!r}: fit simulates "
                         f"{' and '.join(STRATEGIES)}")
    weights = tuple((str(r["name"]), int(r.get("weight", 1))) for r in strategy.get("resources") or [])
    if not weights:
        raise ValueError("NodeResourcesFit scoringStrategy.resources is empty: name cpu and memory at least")
    for name, weight in weights:
        if name not in ("cpu", "memory") and "/" not in name:
            raise ValueError(f"scoringStrategy resource {name!r}: fit scores cpu, memory and extended resources "
                             "(vendor/name)")
        if not 1 <= weight <= 100:
            raise ValueError(f"scoringStrategy resource {name!r}: weight {weight} is not from 1 to 100")
    return Scoring(str(strategy["type"]), weights)


def scheduler_configuration_of(view: Resolved) -> Obj:
    """The KubeSchedulerConfiguration the environment's cluster runs and fit simulates: the one group_vars/all.yml
    declares with Kubespray's kube_scheduler_profiles and kube_scheduler_config_extra_opts, else the project's:
    MostAllocated over cpu, memory and every extended resource the pools advertise, weight 1 each, every node
    scored. Packing, not kube-scheduler's default spreading (LeastAllocated), because spreading leaves a GPU or
    two in use on every node and no whole node for a large gang, and packing keeps a node's MIG slices or
    replicas free for the next pod of their size."""
    cluster = view.env.cluster
    extra = cluster.kube_scheduler_config_extra_opts
    if cluster.kube_scheduler_profiles is not None:
        return configuration(cluster.kube_scheduler_profiles, extra)
    extended = sorted({name for pool in view.env.pools.values() for resolved in view.of_pool(pool) if resolved.machine
                       for name in host_capacity(cluster, pool, resolved.machine).gpu_resources if "/" in name})
    return scheduler_configuration(Scoring("MostAllocated", (("cpu", 1), ("memory", 1), *((n, 1) for n in extended))),
                                   extra)


def kubespray_variables(config: Obj) -> Obj:
    """The Kubespray group variables that make its kube-scheduler run CONFIG."""
    return {"kube_scheduler_profiles": config["profiles"],
            "kube_scheduler_config_extra_opts": {key: value for key, value in config.items()
                                                 if key not in ("apiVersion", "kind", "profiles")}}
