"""Pulumi mocks for every test of the cluster layer, installed once: set_mocks is process-global and
the last call wins, so no test module may install its own.

The runtime's stack config and the root stack's exports are process-global too: each test starts
without either and leaves neither behind."""

import os

import pulumi
import pytest


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return [f"{args.name}-id", args.inputs]

    def call(self, args):
        return {}


pulumi.runtime.set_mocks(Mocks(), project="k8s-node-pools", stack="test", preview=False)


def _clean_slate():
    pulumi.runtime.set_all_config({}, [])
    pulumi.runtime.get_root_resource().outputs.clear()


@pytest.fixture(autouse=True)
def no_stack_config(monkeypatch):
    for name in [name for name in os.environ if name.startswith("PULUMI_CONFIG")]:
        monkeypatch.delenv(name)  # the SDK falls back to these when a key is not set
    _clean_slate()
    yield
    _clean_slate()
