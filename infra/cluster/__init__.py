"""The cluster layer: pure functions from a checked environment to Kubernetes objects and Helm releases.

One module per concern (nodes, tenancy, gpu, scheduling, networking, storage), each with
`build(view) -> Concern`. `render` writes them as YAML and the Pulumi components declare them: the
same objects, so the two cannot disagree.
"""
