"""Plan Kubernetes node pools by workload profile: spec, preflight checks, capacity plan."""
