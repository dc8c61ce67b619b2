"""Loading an inventory folder: what Ansible would read, validated, with every problem named at once."""

from __future__ import annotations

import pytest
from inventory_builder import pools_of

from infra.spec import SpecError, load_environment


def problems_of(path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_environment(path)
    return caught.value.problems


def test_loads_pools_hosts_and_host_vars(inventory, write):
    inventory["host_vars"]["cpu-2"] = {"zone": "a", "ansible_user": "admin"}
    env = load_environment(write(inventory))
    assert list(env.pools) == ["cpu", "mem", "gpu", "t4"]
    assert [h.name for h in env.pools["cpu"].hosts] == ["cpu-1", "cpu-2"]
    cpu2 = env.pools["cpu"].hosts[1]
    assert cpu2.vars.zone == "a"  # host_vars/ wins over inline vars, as in Ansible
    assert cpu2.source("zone").endswith("host_vars/cpu-2.yml")
    assert cpu2.source("machine").endswith("hosts.yml")
    assert env.pools["gpu"].hosts[0].address == "192.0.2.10"


def test_missing_folder_is_one_line(tmp_path):
    assert problems_of(tmp_path / "nope") == [
        f"{tmp_path / 'nope'}: no such inventory folder; pass a folder such as inventories/example"
    ]


def test_missing_hosts_file(tmp_path):
    (tmp_path / "env").mkdir()
    [problem] = problems_of(tmp_path / "env")
    assert "no hosts.yml" in problem


def test_yaml_syntax_error_names_file_line_and_column(inventory, write):
    path = write(inventory)
    (path / "group_vars" / "cpu.yml").write_text("pool_kind: cpu\nmachine: [small\n")
    [problem] = problems_of(path)
    assert problem.startswith(f"{path / 'group_vars' / 'cpu.yml'}:3:1: YAML syntax error")


def test_unknown_key_suggests_the_right_name(inventory, write):
    inventory["group_vars"]["all"]["kubelet_max_pod"] = 110
    [problem] = problems_of(write(inventory))
    assert problem.endswith("all.yml: kubelet_max_pod: unknown key; did you mean 'kubelet_max_pods'?")


def test_unknown_nested_key_suggests_from_the_nested_model(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["svc"]["limit_range"]["default_requests"] = {}
    [problem] = problems_of(write(inventory))
    assert problem.endswith("tenants.svc.limit_range.default_requests: unknown key; did you mean 'default_request'?")


def test_pool_variable_in_all_yml_says_where_it_belongs(inventory, write):
    inventory["group_vars"]["all"]["node_taints"] = []
    [problem] = problems_of(write(inventory))
    assert "node_taints is a pool variable; set it in group_vars/<pool>.yml" in problem


def test_every_problem_is_listed_together(inventory, write):
    inventory["group_vars"]["all"]["kube_pods_subnet"] = "10.244.0.1/20"
    inventory["group_vars"]["cpu"]["pool_kind"] = "gpus"
    inventory["group_vars"]["gpu"]["gpu_sharing"]["replicas"] = 4
    problems = problems_of(write(inventory))
    assert len(problems) == 3
    assert any("kube_pods_subnet" in p and "host bits" in p for p in problems)
    assert any("pool_kind: 'gpus'" in p for p in problems)
    assert any("replicas applies only to time-slicing and mps" in p for p in problems)


@pytest.mark.parametrize("field, value, message", [
    ("node_taints", ["nvidia.com/gpu=present:NoScheduel"], "effect 'NoScheduel' must be one of"),
    ("node_taints", ["nvidia.com/gpu"], "must be written key=value:Effect"),
    ("node_labels", {"Bad_Prefix.io/x": "y"}, "must be a lowercase DNS subdomain"),
    ("node_labels", {"tier": "-bad"}, "values are at most 63 characters"),
    ("kube_cpu_reserved", "1.5 cores", "is not a Kubernetes quantity"),
    ("kubelet_reserved_system_cpus", "3-1", "runs backwards"),
    ("hugepages", {"2Mi": -1}, "write 0 or more"),
    ("hugepages", {"4Mi": 1}, "'4Mi'"),
    ("sysctls", {"net.netfilter.nf_conntrack_max": "lots"}, "is a count"),
    ("sysctls", {"NotASysctl": 1}, "not a dotted kernel parameter name"),
    ("eviction_hard", {"memory.available": "120%"}, "percentage threshold"),
    ("cuda_version", "twelve", "String should match pattern"),
    ("local_disks", [{"device": "/dev/nvme0n1", "size_gib": 1, "mount": "/mnt/a"},
                     {"device": "/dev/nvme0n1", "size_gib": 1, "mount": "/mnt/b"}],
     "device /dev/nvme0n1 listed more than once"),
    ("irq_affinity", {"interfaces": ["a-name-too-long-for-linux"], "cpus": "0"}, "String should match pattern"),
    ("local_disks", [{"device": "/dev/disk/by-id/nvme disk", "size_gib": 1, "mount": "/mnt/a"}],
     "String should match pattern"),
])
def test_pool_values_are_validated(inventory, write, field, value, message):
    inventory["group_vars"]["gpu"][field] = value
    [problem] = problems_of(write(inventory))
    assert "group_vars/gpu.yml" in problem and field in problem and message in problem


@pytest.mark.parametrize("sharing, message", [
    ({"mode": "mig", "mig_devices": {"1g.10gb": 7}}, "mode mig needs mig_config"),
    ({"mode": "time-slicing"}, "needs replicas"),
    ({"mode": "mps", "replicas": 1}, "greater than or equal to 2"),
    ({"mode": "exclusive", "mig_config": "x"}, "apply only to mode mig"),
])
def test_gpu_sharing_fields_match_the_mode(inventory, write, sharing, message):
    inventory["group_vars"]["gpu"]["gpu_sharing"] = sharing
    [problem] = problems_of(write(inventory))
    assert message in problem


def test_gpu_fields_are_refused_on_cpu_pools(inventory, write):
    inventory["group_vars"]["cpu"]["gpu_sharing"] = {"mode": "exclusive"}
    [problem] = problems_of(write(inventory))
    assert "gpu_sharing apply only to pool_kind gpu or gpu_bigmem" in problem


def test_quota_keys_are_resource_quota_names(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["svc"]["quota"]["limits.nvidia.com/gpu"] = 1
    inventory["group_vars"]["all"]["tenants"]["batch"]["quota"]["gpus"] = 1
    problems = problems_of(write(inventory))
    assert any("write 'requests.nvidia.com/gpu'" in p for p in problems)
    assert any("'gpus' is not a ResourceQuota resource name" in p for p in problems)


def test_storage_class_fields_match_the_type(inventory, write):
    inventory["group_vars"]["all"]["storage_classes"]["nfs"].pop("capacity")
    inventory["group_vars"]["all"]["storage_classes"]["local"]["provisioner"] = "x"
    problems = problems_of(write(inventory))
    assert any("csi storage class needs capacity" in p for p in problems)
    assert any("local storage class has no provisioner" in p for p in problems)


def test_booleans_are_not_quantities(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["svc"]["quota"]["requests.cpu"] = True
    assert any("boolean, not a quantity" in p for p in problems_of(write(inventory)))


def test_kube_version_accepts_a_leading_v(inventory, write):
    inventory["group_vars"]["all"]["kube_version"] = "v1.30.2"
    assert load_environment(write(inventory)).cluster.kube_version == "1.30.2"


def test_host_in_two_pools_is_refused(inventory, write):
    pools_of(inventory)["mem"]["hosts"]["cpu-1"] = None
    assert any("host cpu-1 is in pools cpu and mem" in p for p in problems_of(write(inventory)))


def test_pool_without_group_vars_is_refused(inventory, write):
    del inventory["group_vars"]["t4"]
    assert any("group_vars/t4.yml: missing" in p for p in problems_of(write(inventory)))


def test_group_vars_for_unknown_or_non_pool_groups_are_refused(inventory, write):
    inventory["group_vars"]["gpus"] = {"pool_kind": "gpu"}
    inventory["group_vars"]["node_pools"] = {"pool_kind": "gpu"}
    problems = problems_of(write(inventory))
    assert any("gpus.yml: names no group of hosts.yml" in p for p in problems)
    assert any("group node_pools is not a pool" in p for p in problems)


def test_host_vars_for_a_host_in_no_pool_are_refused(inventory, write):
    inventory["host_vars"]["cpu-9"] = {"zone": "a"}
    assert any("host cpu-9 is in no pool" in p for p in problems_of(write(inventory)))


def test_group_vars_in_hosts_yml_are_refused(inventory, write):
    pools_of(inventory)["cpu"]["vars"] = {"machine": "small"}
    assert any("move them to group_vars/cpu.yml" in p for p in problems_of(write(inventory)))


def test_pool_variables_on_a_host_are_refused(inventory, write):
    pools_of(inventory)["cpu"]["hosts"]["cpu-1"]["node_taints"] = []
    assert any("node_taints is a pool variable; hosts may set only" in p for p in problems_of(write(inventory)))


def test_node_names_must_be_dns_names(inventory, write):
    pools_of(inventory)["cpu"]["hosts"]["CPU_1"] = None
    assert any("'CPU_1': Kubernetes node names are lowercase DNS names" in p for p in problems_of(write(inventory)))


@pytest.mark.parametrize("pattern, expected", [
    ("cpu-[01:03]", ["cpu-01", "cpu-02", "cpu-03"]),
    ("cpu-[8:10]", ["cpu-8", "cpu-9", "cpu-10"]),
    ("cpu-[1:5:2]", ["cpu-1", "cpu-3", "cpu-5"]),
    ("cpu-[a:c]", ["cpu-a", "cpu-b", "cpu-c"]),
    ("r[1:2]-n[1:2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
])
def test_host_ranges_expand_as_in_ansible(inventory, write, pattern, expected):
    pools_of(inventory)["cpu"]["hosts"] = {pattern: {"zone": "a"}}
    env = load_environment(write(inventory))
    assert [h.name for h in env.pools["cpu"].hosts] == expected


def test_group_vars_may_be_a_folder_of_files(inventory, write):
    del inventory["group_vars"]["all"]["planned_services"]
    path = write(inventory)
    cluster = (path / "group_vars" / "all.yml").read_text()
    (path / "group_vars" / "all.yml").unlink()
    (path / "group_vars" / "all").mkdir()
    (path / "group_vars" / "all" / "cluster.yml").write_text(cluster)
    (path / "group_vars" / "all" / "more.yml").write_text("planned_services: 7\n")
    env = load_environment(path)
    assert env.cluster.planned_services == 7
    assert env.cluster_source("planned_services").endswith("group_vars/all/more.yml")


def test_a_variable_set_in_two_files_of_a_folder_is_refused(inventory, write):
    path = write(inventory)
    (path / "group_vars" / "all.yml").rename(path / "group_vars" / "base.yml")
    (path / "group_vars" / "all").mkdir()
    (path / "group_vars" / "base.yml").rename(path / "group_vars" / "all" / "a.yml")
    (path / "group_vars" / "all" / "b.yml").write_text("planned_services: 7\n")
    assert any("planned_services: also set in" in p for p in problems_of(path))


@pytest.mark.parametrize("hosts, message", [
    ({"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": ["cpu-1"]}}}}}}, "hosts: must map host names"),
    ({"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": {"cpu-1": "10.0.0.1"}}}}}}},
     "variables must be a mapping"),
    ({"all": {"children": ["node_pools"]}}, "children: must map group names"),
    ({"cpu": {"hosts": {"cpu-1": None}}}, "must hold one top-level key, 'all:'"),
    ({"all": {"children": {"cpus": {"hosts": {"cpu-1": None}}}}}, "no group node_pools with pool groups"),
    ({"all": {"children": {"node_pools": {"children": {"cpu": {"hosts": {"cpu-[1:x]": None}}}}}}},
     "write numeric [01:16] or letter [a:f] ranges"),
    ({"all": {"children": {"node_pools": {"children": {"cpu": {"hostz": {"cpu-1": None}}}}}}},
     "unknown keys ['hostz']"),
])
def test_malformed_hosts_files_are_reported_not_crashed_on(inventory, write, hosts, message):
    inventory["hosts"] = hosts
    problems = problems_of(write(inventory))
    assert any(message in p for p in problems), problems


def test_empty_files_are_reported_by_name(inventory, write):
    path = write(inventory)
    (path / "group_vars" / "cpu.yml").write_text("")
    (path / "host_vars").mkdir()
    (path / "host_vars" / "cpu-9.yml").write_text("")
    problems = problems_of(path)
    assert any(p.endswith("group_vars/cpu.yml: pool_kind: required; see README 'The spec'") for p in problems)
    assert any("host_vars/cpu-9.yml: host cpu-9 is in no pool" in p for p in problems)


@pytest.mark.parametrize("file, key, value, message", [
    ("all", "kubelet_max_pods", "110", "'110' is a string; write a whole number without quotes"),
    ("cpu", "overcommit", {"cpu": "2"}, "'2' is a string; write a number without quotes"),
])
def test_quoted_numbers_and_booleans_are_refused(inventory, write, file, key, value, message):
    inventory["group_vars"][file][key] = value
    [problem] = problems_of(write(inventory))
    assert problem.endswith(message)


def test_a_quoted_boolean_is_refused(inventory, write):
    inventory["group_vars"]["all"]["storage_classes"]["nfs"]["default"] = "false"
    [problem] = problems_of(write(inventory))
    assert problem.endswith("storage_classes.nfs.default: 'false' is a string; write true or false without quotes")


def test_disks_may_be_named_by_id_or_by_path(inventory, write):
    disks = [{"device": "/dev/disk/by-id/nvme-SAMSUNG_MZQL21T9HCJR-00A07_S64GNE0R123456", "size_gib": 1, "mount": "/mnt/a"},
             {"device": "/dev/disk/by-path/pci-0000:5e:00.0-nvme-1", "size_gib": 1, "mount": "/mnt/b"}]
    inventory["group_vars"]["gpu"]["local_disks"] = disks
    env = load_environment(write(inventory))
    assert [disk.device for disk in env.pools["gpu"].vars.local_disks] == [disk["device"] for disk in disks]
