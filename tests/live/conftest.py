"""The real Pulumi path (issue 8): the pinned Pulumi CLI, Python host and Kubernetes provider against a
local control plane (etcd, kube-apiserver, controller manager, scheduler) with kwok standing in for the
kubelets, all built from Go modules by `./dev.sh tools`.

Nothing here is skipped: without the built tools every test FAILS with the command that builds them. The
control plane is started once for the session on free loopback ports and stopped whatever happens; each
stack's module registers its inventory's Nodes, applies the stack and destroys it again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from subprocess import CompletedProcess

import pytest

from infra.live.controlplane import LocalCluster, ToolsMissing, tool_paths
from infra.live.pulumi_cli import Stack


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    missing = None
    try:
        tool_paths()
    except ToolsMissing as error:
        missing = str(error)
    if missing:
        pytest.fail(missing, pytrace=False)
    local = LocalCluster()
    local.down()  # whatever an interrupted run left
    try:
        started = local.up()
        if not started.ok:
            pytest.fail(started.summary, pytrace=False)
        yield local
    finally:
        local.down()


@dataclass
class Applied:
    """A stack after `pulumi preview` and `pulumi up` on the session's cluster."""

    stack: Stack
    preview: CompletedProcess[str]
    up: CompletedProcess[str] | None
    destroyed: bool = False
    notes: list[str] = field(default_factory=list)


STACKS = ("example", "sandbox")


@pytest.fixture(scope="module", params=STACKS)
def deployment(request: pytest.FixtureRequest, cluster: LocalCluster) -> Iterator[Applied]:
    """Per shipped stack: register its Nodes, preview and apply it; afterwards destroy it (unless a test did)
    and remove the Nodes, so the next stack starts from an empty cluster."""
    stack = Stack(request.param, cluster)
    nodes = cluster.register_nodes(stack.inventory)
    assert nodes.ok, nodes.summary
    stack.prepare()
    preview = stack.preview()
    result = Applied(stack, preview, stack.up() if preview.returncode == 0 else None)
    try:
        yield result
    finally:
        if not result.destroyed:
            stack.destroy()
        cluster.remove_nodes()
