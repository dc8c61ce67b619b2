"""The cluster layer: pure functions from a checked environment to Kubernetes objects and Helm releases.

One module per concern (nodes, tenancy, gpu, scheduling, networking, storage), each with
`build(view) -> Concern`, gathered in order by concerns.py. `render` writes them as YAML and the Pulumi
components (components.py, the layer's Pulumi edge) declare them: the same objects, so the two cannot
disagree. validation/ checks every object offline before either does.
"""
