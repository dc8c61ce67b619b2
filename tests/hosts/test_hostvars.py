"""What the host layer is given per host follows from the spec by the same functions as the plan and the
cluster layer: the three layers cannot disagree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.cli import main
from infra.cluster import gpu
from infra.cluster.gpu import GPU_CLIENTS_LABEL, GPU_CLIENTS_PAUSED, mig_parted_text
from infra.cluster.nodes import POOL_LABEL, pool_taints
from infra.hosts.hostvars import environment_host_vars, host_vars
from infra.model.kubelet import kubelet_settings
from infra.model.resolve import resolve
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sandbox() -> dict:
    return environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"]


@pytest.fixture(scope="module")
def example() -> dict:
    return environment_host_vars(load_environment(ROOT / "inventories" / "example"))["hosts"]


def test_every_node_host_gets_settings(sandbox: dict) -> None:
    assert sorted(sandbox) == ["sb-cpu-1", "sb-gpu-1", "sb-mem-1", "sb-mig-1"]


def test_kubelet_configuration_carries_the_pool_policies_and_taints(sandbox: dict) -> None:
    config = sandbox["sb-mem-1"]["kubelet"]["config"]
    assert config["kind"] == "KubeletConfiguration"
    assert config["cpuManagerPolicy"] == "static"
    assert config["reservedSystemCPUs"] == "0"
    assert config["topologyManagerPolicy"] == "single-numa-node"
    assert config["registerWithTaints"] == [{"key": "workload-profile", "value": "memory", "effect": "NoSchedule"}]
    assert "reservedSystemCPUs" not in sandbox["sb-cpu-1"]["kubelet"]["config"]
    assert sandbox["sb-cpu-1"]["kubelet"]["config"]["registerWithTaints"] == []


def test_registered_taints_and_labels_are_the_cluster_layers(sandbox: dict) -> None:
    env = load_environment(ROOT / "inventories" / "sandbox")
    for name, settings in sandbox.items():
        pool = env.pools[settings["pool"]]
        assert settings["kubelet"]["config"]["registerWithTaints"] == pool_taints(pool)
        assert settings["kubelet"]["node_labels"]["k8s-node-pools.io/pool-kind"] == pool.vars.pool_kind, name
        assert POOL_LABEL not in settings["kubelet"]["node_labels"], name  # only the cluster layer may set it


def test_memory_manager_static_reserves_exactly_what_it_must() -> None:
    env = load_environment(ROOT / "inventories" / "example")
    view = resolve(env)
    static = [(n, h) for n, h in view.hosts.items() if env.pools[h.host.pool].vars.kubelet_memory_manager_policy == "Static"]
    assert static, "the example has a pool with the Memory Manager's Static policy"
    name, resolved = static[0]
    pool = env.pools[resolved.host.pool]
    assert resolved.machine is not None
    settings = kubelet_settings(env.cluster, pool.vars, resolved.machine)
    reserved = host_vars(view, name)["kubelet"]["config"]["reservedMemory"]
    assert reserved == [{"numaNode": 0, "limits": {"memory": f"{int(settings.reserved_memory[0][1]) // 2**20}Mi"}}]


def test_conntrack_is_written_by_the_host_and_the_hash_size_is_a_module_option(sandbox: dict) -> None:
    settings = sandbox["sb-cpu-1"]
    assert settings["sysctls"]["net.netfilter.nf_conntrack_max"] == settings["conntrack"]["max"] == 131072
    assert "net.netfilter.nf_conntrack_buckets" not in settings["sysctls"]
    assert settings["conntrack"]["hashsize"] == 131072 // 4
    assert settings["sysctls"]["net.core.somaxconn"] == 4096


def test_hugepages_always_name_both_sizes(sandbox: dict) -> None:
    assert sandbox["sb-mem-1"]["hugepages"] == {"2Mi": 64, "1Gi": 0}
    assert sandbox["sb-cpu-1"]["hugepages"] == {"2Mi": 0, "1Gi": 0}


def test_mig_selection_on_mig_capable_cards_only(sandbox: dict, example: dict) -> None:
    env = load_environment(ROOT / "inventories" / "sandbox")
    assert sandbox["sb-mig-1"]["mig"] == {"config": "sb-a30-mixed", "file": mig_parted_text(env),
                                          "pause_label": {"key": GPU_CLIENTS_LABEL, "value": GPU_CLIENTS_PAUSED}}
    assert sandbox["sb-gpu-1"]["mig"] is None  # a T4 has no MIG
    assert sandbox["sb-cpu-1"]["mig"] is None and sandbox["sb-cpu-1"]["nvidia"] is None
    assert example["gpu-h100-01"]["mig"]["config"] == "all-disabled"  # MIG-capable, pool not on MIG


def test_fabric_manager_only_on_nvswitch_boards(example: dict) -> None:
    assert example["gpu-h100-01"]["nvidia"]["fabric_manager"] is True
    assert example["gpu-t4-01"]["nvidia"]["fabric_manager"] is False


@pytest.mark.parametrize(("interconnect", "count", "fabric_manager"), [
    ("nvswitch", 8, True),
    ("nvswitch", 4, True),  # the machine's fact decides, not a card count
    ("nvlink", 8, False),  # eight cards joined by NVLink bridges in pairs: no NVSwitch, no fabric manager
    ("pcie", 8, False),
])
def test_the_fabric_manager_follows_the_machine_s_nvswitch_fact(inventory: dict, write: Any, interconnect: str,
                                                                count: int, fabric_manager: bool) -> None:
    machine = inventory["group_vars"]["all"]["machines"]["a100box"]
    machine.update(gpu_interconnect=interconnect, gpu_count=count)
    hosts = environment_host_vars(load_environment(write(inventory)))["hosts"]
    gpu_hosts = [settings for settings in hosts.values() if settings["nvidia"]
                 and settings["nvidia"]["gpu_model"] == "A100-80GB"]
    assert gpu_hosts
    assert {settings["nvidia"]["fabric_manager"] for settings in gpu_hosts} == {fabric_manager}


def test_cli_prints_json_and_refuses_a_bad_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hostvars", str(ROOT / "inventories" / "sandbox"), "--host", "sb-mig-1"]) == 0
    assert json.loads(capsys.readouterr().out)["pool"] == "sb_mig"
    assert main(["hostvars", str(ROOT / "inventories" / "sandbox"), "--host", "nope"]) == 2
    assert "no node host 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad"
    (bad / "group_vars").mkdir(parents=True)
    (bad / "hosts.yml").write_text((ROOT / "inventories" / "sandbox" / "hosts.yml").read_text())
    for part in (ROOT / "inventories" / "sandbox" / "group_vars").iterdir():
        (bad / "group_vars" / part.name).write_text(part.read_text())
    (bad / "group_vars" / "sb_mem.yml").write_text(
        (bad / "group_vars" / "sb_mem.yml").read_text().replace('kubelet_reserved_system_cpus: "0"',
                                                                'kubelet_reserved_system_cpus: "0-7"'))
    assert main(["hostvars", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "fix them before preparing hosts" in captured.err


@pytest.mark.parametrize("env", ["sandbox", "example"])
def test_containerd_and_the_kubelet_get_one_cgroup_driver(env: str, sandbox: dict, example: dict) -> None:
    hosts = {"sandbox": sandbox, "example": example}[env]
    for name, settings in hosts.items():
        assert settings["kubelet"]["config"]["cgroupDriver"] == settings["container_runtime"]["cgroup_driver"], name
        assert {key: settings["container_runtime"][key] for key in ("cgroup_driver", "cni_bin_dir")} == {
            "cgroup_driver": "systemd", "cni_bin_dir": "/opt/cni/bin"}, name


@pytest.mark.parametrize("env", ["sandbox", "example"])
def test_the_toolkit_takes_gpus_only_as_the_device_plugin_passes_them(env: str, sandbox: dict, example: dict) -> None:
    # the host layer's toolkit settings and the cluster layer's deviceListStrategy come from one fact
    view = resolve(load_environment(ROOT / "inventories" / env))
    plugin = next(r for r in gpu.build(view).releases if r.name == gpu.DEVICE_PLUGIN).values
    assert plugin["deviceListStrategy"] == "volume-mounts"
    for name, settings in {"sandbox": sandbox, "example": example}[env].items():
        assert settings["container_runtime"]["nvidia_toolkit_settings"] == {
            "accept-nvidia-visible-devices-envvar-when-unprivileged": False,
            "accept-nvidia-visible-devices-as-volume-mounts": True}, name


def test_containerd_locks_memory_without_limit_on_rdma_hosts_only(sandbox: dict, example: dict) -> None:
    """RDMA pods register pinned memory without IPC_LOCK, so containerd, whose limits they inherit, is unlimited on
    the hosts of pools with an RDMA network; every other host keeps systemd's default (the role's drop-in removed)."""
    env = load_environment(ROOT / "inventories" / "example")
    rdma_hosts = {host.name for pool in env.pools.values() if pool.vars.rdma_network is not None for host in pool.hosts}
    assert rdma_hosts, "the example has RDMA pools"
    assert {name for name, settings in example.items() if settings["container_runtime"]["memlock"] == "infinity"} \
        == rdma_hosts
    assert {settings["container_runtime"]["memlock"] for name, settings in example.items()
            if name not in rdma_hosts} == {""}
    assert {settings["container_runtime"]["memlock"] for settings in sandbox.values()} == {""}  # no RDMA pool


def test_the_rollout_is_the_spec_s_and_defaults_to_all_hosts_at_once() -> None:
    example = environment_host_vars(load_environment(ROOT / "inventories" / "example"))
    sandbox = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))
    assert example["rollout"] == {"batch_size": "10%", "max_fail_percentage": 0}
    assert sandbox["rollout"] == {"batch_size": "100%", "max_fail_percentage": 100}
