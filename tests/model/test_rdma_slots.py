"""RDMA slot arithmetic: a slot is a fixed /host_prefix of its fabric, whatever other hosts hold."""

import ipaddress

import pytest

from infra.model.network import fabric_slots, slot_range, smallest_slice

FABRIC = ipaddress.IPv4Network("10.9.0.0/24")
BASE = int(FABRIC.network_address)


def test_slots_are_fixed_slices_with_the_fabric_edges_left_out():
    assert fabric_slots(FABRIC, 26) == 4
    assert [(first - BASE, last - BASE) for first, last in (slot_range(FABRIC, 26, s) for s in range(4))] == [
        (2, 63), (64, 127), (128, 191), (192, 254)]  # not .0 or .1 (host-local's gateway), not .255


def test_a_slot_depends_on_its_number_only():
    assert slot_range(FABRIC, 27, 5) == (BASE + 160, BASE + 191)
    assert slot_range(ipaddress.IPv4Network("10.9.0.0/16"), 27, 5) == (BASE + 160, BASE + 191)


def test_a_slot_outside_the_fabric_is_refused():
    with pytest.raises(ValueError, match="holds slots 0-3"):
        slot_range(FABRIC, 26, 4)
    with pytest.raises(ValueError, match="outside"):
        slot_range(FABRIC, 26, -1)
    assert fabric_slots(FABRIC, 23) == 0


def test_the_smallest_slice_is_slot_zero_or_a_lone_slot():
    assert smallest_slice(FABRIC, 26) == 62
    assert smallest_slice(FABRIC, 24) == 253  # one slot: network, gateway and broadcast left out
