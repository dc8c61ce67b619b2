"""Plan and provision Kubernetes node pools by workload profile; the layers are drawn in README.md."""
