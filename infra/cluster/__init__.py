"""The cluster layer: the Kubernetes objects the Pulumi program declares, and their offline validation."""
