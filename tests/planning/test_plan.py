"""Capacity and cost figures, checked by hand against the base inventory's numbers."""

import json

import pytest
from inventory_builder import pools_of

from infra.planning.plan import build_plan, render_table
from infra.spec import load_environment


@pytest.fixture
def plan(inventory, write):
    def _plan(data=None):
        return build_plan(load_environment(write(data or inventory)))

    return _plan


def by_name(plan):
    return {pool["name"]: pool for pool in plan["pools"]}


def test_allocatable_follows_the_kubelet_formula(inventory, plan):
    inventory["group_vars"]["mem"].update({
        "hugepages": {"1Gi": 8, "2Mi": 1024},
        "kube_memory_reserved": "1Gi", "system_memory_reserved": "2Gi",
        "eviction_hard": {"memory.available": "5%"},
        "kube_cpu_reserved": "500m", "system_cpu_reserved": "1",
    })
    mem = by_name(plan())["mem"]
    # 64 GiB - 10 GiB hugepages - 1 - 2 - 5% of 64 (3.2) = 47.8 GiB; 16 CPUs - 1.5 = 14.5
    assert mem["memory_gib"] == 64
    assert mem["hugepages_gib"] == 10
    assert mem["allocatable_memory_gib"] == 47.8
    assert mem["cpus"] == 16 and mem["cores"] == 8
    assert mem["allocatable_cpu"] == 14.5


def test_gpu_resources_follow_the_sharing_mode(plan):
    pools = by_name(plan())
    assert pools["gpu"]["gpu_resources"] == {"nvidia.com/mig-1g.10gb": 56}
    assert pools["gpu"]["gpu_memory_allocated_percent"] == 87.5  # 7 of 8 memory slices
    assert pools["gpu"]["gpu_memory_gib"] == 640
    assert pools["t4"]["gpu_resources"] == {"nvidia.com/gpu.shared": 4}
    assert pools["cpu"]["gpu_resources"] == {}


def test_whole_gpus_when_exclusive(inventory, plan):
    inventory["group_vars"]["gpu"]["gpu_sharing"] = {"mode": "exclusive"}
    assert by_name(plan())["gpu"]["gpu_resources"] == {"nvidia.com/gpu": 8}


def test_costs_use_each_hosts_machine_and_the_yearly_discount(inventory, plan):
    pools_of(inventory)["cpu"]["hosts"]["cpu-2"]["machine"] = "t4box"
    cpu = by_name(plan())["cpu"]
    assert cpu["monthly_cost"] == 100 + 800
    assert cpu["yearly_cost"] == 100 * 12 * 0.9 + 800 * 12
    assert cpu["machines"] == ["small", "t4box"]


def test_host_hardware_overrides_change_the_figures(inventory, plan):
    pools_of(inventory)["gpu"]["hosts"]["gpu-1"]["hardware"] = {"gpu_count": 7, "memory_gib": 512}
    gpu = by_name(plan())["gpu"]
    assert gpu["gpus"] == 7
    assert gpu["memory_gib"] == 512
    assert gpu["gpu_resources"] == {"nvidia.com/mig-1g.10gb": 49}


def test_totals_and_network(plan):
    result = plan()
    assert result["totals"]["hosts"] == 5
    assert result["totals"]["gpus"] == 10
    assert result["totals"]["monthly_cost"] == 100 * 3 + 5000 + 800
    assert result["network"]["node_blocks"] == 8
    assert result["network"]["nodes"] == 5
    assert result["network"]["pod_addresses_per_node"] == 254
    assert result["network"]["service_addresses"] == 4093


def test_plan_is_json_and_the_table_shows_every_pool(plan):
    result = plan()
    assert json.loads(json.dumps(result)) == result
    table = render_table(result)
    for name in ("cpu", "mem", "gpu", "t4", "total"):
        assert any(line.startswith(name) for line in table.splitlines())
    assert "nvidia.com/mig-1g.10gb 56" in table
    assert "87.5%" in table


def test_reserved_system_cpus_replace_the_cpu_reservations(inventory, plan):
    """The kubelet reserves exactly the listed CPUs and ignores kube/system-reserved cpu."""
    inventory["group_vars"]["cpu"].update({"kubelet_reserved_system_cpus": "0-1,8-9",
                                           "kube_cpu_reserved": "3", "system_cpu_reserved": "3"})
    cpu = by_name(plan())["cpu"]
    assert cpu["allocatable_cpu"] == 2 * (16 - 4)  # not 2 x (16 - 6)
    assert cpu["kubelet"]["reserved_cpus"] == 4


def test_eviction_thresholds_merge_over_the_kubelet_defaults(inventory, plan):
    inventory["group_vars"]["mem"]["eviction_hard"] = {"nodefs.available": "5%"}
    mem = by_name(plan())["mem"]
    assert mem["kubelet"]["eviction_hard"] == {
        "memory.available": "100Mi", "nodefs.available": "5%", "nodefs.inodesFree": "5%",
        "imagefs.available": "15%", "imagefs.inodesFree": "5%",
    }
    # 64 GiB - 256Mi - 512Mi - the default 100Mi, still in force
    assert mem["allocatable_memory_gib"] == round(64 - (256 + 512 + 100) / 1024, 1)


def test_memory_manager_reserved_memory_adds_up_to_the_reservations(inventory, plan):
    """The Memory Manager refuses to start unless reservedMemory = kube + system reserved + eviction."""
    inventory["group_vars"]["mem"].update({
        "kubelet_memory_manager_policy": "Static", "kube_memory_reserved": "1Gi",
        "system_memory_reserved": "2Gi", "eviction_hard": {"memory.available": "1%"},
    })
    kubelet = by_name(plan())["mem"]["kubelet"]
    assert kubelet["reserved_memory"] == [{"numa_node": 0, "memory_bytes": int(3 * 2**30 + 0.01 * 64 * 2**30)}]
    assert by_name(plan())["cpu"]["kubelet"]["reserved_memory"] == []  # policy None: no reservedMemory


def test_conntrack_follows_the_machine_and_who_manages_it(inventory, plan):
    cpu = by_name(plan())["cpu"]["kubelet"]
    assert (cpu["conntrack_max"], cpu["conntrack_buckets"], cpu["conntrack_set_by"]) == (524288, 131072, "kube-proxy")
    inventory["group_vars"]["all"].update({"kube_proxy_remove": True})
    inventory["group_vars"]["mem"]["sysctls"] = {"net.netfilter.nf_conntrack_max": 1000000}
    pools = by_name(plan(inventory))
    assert (pools["cpu"]["kubelet"]["conntrack_max"], pools["cpu"]["kubelet"]["conntrack_set_by"]) == (524288, "host")
    assert (pools["mem"]["kubelet"]["conntrack_max"], pools["mem"]["kubelet"]["conntrack_buckets"]) == (1000000, 250000)


def test_kube_proxy_raises_a_low_hash_size_and_honours_its_own_settings(inventory, plan):
    inventory["group_vars"]["all"].update({"kube_proxy_conntrack_max_per_core": 8192, "kube_proxy_conntrack_min": 200000})
    inventory["group_vars"]["cpu"]["sysctls"] = {"net.netfilter.nf_conntrack_buckets": 1000}
    cpu = by_name(plan())["cpu"]["kubelet"]
    assert (cpu["conntrack_max"], cpu["conntrack_buckets"]) == (200000, 50000)  # max(200000, 8192 x 16)


def test_control_plane_kubelets_take_pod_cidr_blocks(inventory, plan):
    from inventory_builder import add_control_plane

    add_control_plane(inventory, {"cp-1": {"zone": "a"}, "cp-2": {"zone": "b"}, "gpu-1": {}}, etcd={"etcd-1": {}})
    network = plan(inventory)["network"]
    assert network["nodes"] == 5 + 2  # gpu-1 is already a pool node; the etcd-only host runs no kubelet


def test_the_sandbox_exercises_a_mig_pool():
    from inventory_builder import ROOT

    sandbox = build_plan(load_environment(ROOT / "inventories" / "sandbox"))
    mig = [p for p in sandbox["pools"] if (p["gpu_sharing"] or "").startswith("mig")]
    assert mig and any(name.startswith("nvidia.com/mig-") for p in mig for name in p["gpu_resources"])


def test_the_plan_does_not_import_the_checks():
    """The plan reads the resolved model and the pure arithmetic modules, not the rules."""
    import subprocess
    import sys

    code = "import sys, infra.planning.plan; print(sorted(m for m in sys.modules if m.startswith('infra.checks')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
