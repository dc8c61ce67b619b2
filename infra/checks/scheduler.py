"""The scheduler configuration: the one fit simulates is the one the cluster runs.

Kubespray writes kube-scheduler's configuration from kube_scheduler_profiles and
kube_scheduler_config_extra_opts; declared in group_vars/all.yml they are what fit simulates, so they must
be a configuration fit can simulate. Left out, fit simulates the project's bin-packing profile, and Kubespray
would run kube-scheduler's default (spreading, six more scores) unless it is given that profile.
"""

from __future__ import annotations

from infra.checks.base import Report, rule
from infra.model.resolve import Resolved
from infra.model.scheduler import scheduler_configuration_of, scoring_of

SCHEDULER_PROFILE = rule(
    "SCHEDULER-PROFILE", "error",
    "kube_scheduler_profiles (or kube_scheduler_config_extra_opts) describing a kube-scheduler configuration fit "
    "cannot simulate (another score plugin, a third scoring strategy, a share of nodes scored): fit's answer "
    "would not be the cluster's.",
    "Keep one default-scheduler profile whose only score plugin is NodeResourcesFit with MostAllocated or "
    "LeastAllocated and percentageOfNodesToScore 100 (`python -m infra scheduler INVENTORY --kubespray` prints the "
    "project's profile).",
)
SCHEDULER_UNDECLARED = rule(
    "SCHEDULER-UNDECLARED", "warning",
    "kube_scheduler_profiles not set: fit simulates the project's bin-packing profile, but Kubespray would set "
    "up kube-scheduler with its default profile (LeastAllocated spreading and six more scores), so the cluster "
    "places pods elsewhere than fit says and can leave large pods and gangs unplaced where fit placed them.",
    "Add the variables `python -m infra scheduler INVENTORY --kubespray` prints to group_vars/all.yml.",
)


def check(view: Resolved, report: Report) -> None:
    if any(finding.severity == "error" for finding in report.findings):
        return  # the pools' resources, which the project's profile lists, assume a spec without errors
    env = view.env
    declared = env.cluster.kube_scheduler_profiles is not None
    field = "kube_scheduler_profiles" if declared else "kube_scheduler_config_extra_opts"
    try:
        scoring_of(scheduler_configuration_of(view))
    except ValueError as error:
        report.add(SCHEDULER_PROFILE, env.cluster_source(field), field, str(error))
        return
    if not declared:
        report.add(SCHEDULER_UNDECLARED, env.cluster_source("kube_scheduler_profiles"), "kube_scheduler_profiles",
                   "not set: Kubespray would run kube-scheduler's default profile, fit simulated the project's "
                   "(MostAllocated)",
                   f"Add the variables `python -m infra scheduler {env.path} --kubespray` prints to "
                   "group_vars/all.yml.")
