"""Whether the workloads fit, and what the pools should be: the capacity and cost plan, quota admission and
kube-scheduler's placement over plain objects, `fit` (placement and N-1), `propose` (the cheapest pools by
a MILP, verified by `fit`). Pure: nothing here touches a host or a cluster.
"""
