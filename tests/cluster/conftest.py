"""Pulumi mocks for every test of the cluster layer, installed once: set_mocks is process-global and
the last call wins, so no test module may install its own."""

import pulumi


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return [f"{args.name}-id", args.inputs]

    def call(self, args):
        return {}


pulumi.runtime.set_mocks(Mocks(), project="k8s-node-pools", stack="test", preview=False)
