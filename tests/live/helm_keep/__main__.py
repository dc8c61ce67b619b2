"""One Helm release of a local chart whose CustomResourceDefinition is a template, as Volcano's are, run
through the post-renderer every release of the stack names (infra/cluster/retention.py)."""

import pulumi
import pulumi_kubernetes as k8s

from infra.cluster.retention import POST_RENDERER

config = pulumi.Config()
provider = k8s.Provider("cluster", kubeconfig=config.require("kubeconfig"), enable_server_side_apply=True)
k8s.helm.v3.Release("kept-crd", name="kept-crd", chart=config.require("chart"), namespace="default",
                    postrender=POST_RENDERER if config.require_bool("postRender") else None,
                    opts=pulumi.ResourceOptions(provider=provider))
