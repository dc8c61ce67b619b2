"""Pulumi mocks for every test of the cluster layer, installed once: set_mocks is process-global and
the last call wins, so no test module may install its own.

The runtime's stack config and the root stack's exports are process-global too: each test starts
without either and leaves neither behind."""

import os

import pulumi
import pytest


class Mocks(pulumi.runtime.Mocks):
    """Records every resource registered (type, name, inputs) and every read of a live object.

    `reads` holds "<type token>/<id>" of each read (a `<Resource>.get`): the program should make none.
    `retained` holds (type token, name) of each resource registered with retain_on_delete, as the SDK
    sends it to the engine (the mocks' own arguments leave resource options out), and `dependencies` what
    each waits for, as (type token, name) pairs: the SDK's own expansion of depends_on."""

    def __init__(self):
        super().__init__()
        self.registered: list[pulumi.runtime.MockResourceArgs] = []
        self.reads: list[str] = []
        self.retained: set[tuple[str, str]] = set()
        self.dependencies: dict[tuple[str, str], set[tuple[str, str]]] = {}

    def new_resource(self, args):
        if args.resource_id:  # a read of an existing object
            self.reads.append(f"{args.typ}/{args.resource_id}")
            return [args.resource_id, {}]
        self.registered.append(args)
        return [f"{args.name}-id", args.inputs]

    def call(self, args):
        return {}


MOCKS = Mocks()
_register_resource = pulumi.runtime.mocks.MockMonitor.RegisterResource


def _type_and_name(urn: str) -> tuple[str, str]:
    """(type token, name) of a URN: urn:pulumi:<stack>::<project>::<parent types>$<type>::<name>."""
    _, _, types, name = urn.split("::", 3)
    return types.rsplit("$", 1)[-1], name


def _register_recording_retention(monitor, request):
    if request.retainOnDelete:
        MOCKS.retained.add((request.type, request.name))
    MOCKS.dependencies[(request.type, request.name)] = {_type_and_name(urn) for urn in request.dependencies}
    return _register_resource(monitor, request)


pulumi.runtime.mocks.MockMonitor.RegisterResource = _register_recording_retention
pulumi.runtime.set_mocks(MOCKS, project="k8s-node-pools", stack="test", preview=False)


def _clean_slate():
    pulumi.runtime.set_all_config({}, [])
    pulumi.runtime.get_root_resource().outputs.clear()
    MOCKS.registered.clear()
    MOCKS.reads.clear()
    MOCKS.retained.clear()
    MOCKS.dependencies.clear()


@pytest.fixture
def mocks():
    """The process's mocks: what the program registered and read."""
    return MOCKS


@pytest.fixture(autouse=True)
def no_stack_config(monkeypatch):
    for name in [name for name in os.environ if name.startswith("PULUMI_CONFIG")]:
        monkeypatch.delenv(name)  # the SDK falls back to these when a key is not set
    _clean_slate()
    yield
    _clean_slate()
