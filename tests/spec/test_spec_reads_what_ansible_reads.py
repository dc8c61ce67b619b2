"""infra.spec reads every file Ansible reads from an inventory folder, or refuses it clearly.

Companion of test_spec.py for the parts of the loader that follow Ansible's own rules: vars files in
all their forms, second inventory sources, ansible_* variables, Kubespray's control-plane and etcd
groups, per-key sources, pool names, version numbers YAML reads as floats, and problems that would
only follow from another one.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from inventory_builder import ROOT, SHIPPED, add_control_plane, pools_of, write_text

from infra.spec import SpecError, load_environment
from infra.spec.loader import Encrypted
from infra.spec.models import DNS_LABEL


def problems_of(path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_environment(path)
    return caught.value.problems


def move_to(path, kind: str, name: str, new_name: str) -> None:
    """Rename group_vars/<name>.yml (or host_vars/) to another form Ansible reads."""
    source = path / kind / f"{name}.yml"
    write_text(path / kind, new_name, source.read_text())
    source.unlink()


# ---------------------------------------------------------------- vars files in every form Ansible reads


@pytest.mark.parametrize("form", ["t4", "t4.yaml", "t4.json", "t4/pool.yml", "t4/deeper/pool", "t4/pool.json"])
def test_pool_vars_are_read_in_every_form_ansible_reads(inventory, write, form):
    inventory["group_vars"]["t4"]["gpu_sharing"]["replicas"] = 1  # an error proves the file was read
    path = write(inventory)
    source = path / "group_vars" / "t4.yml"
    content = yaml.safe_load(source.read_text())
    source.unlink()
    write_text(path / "group_vars", form, json.dumps(content) if form.endswith(".json") else yaml.safe_dump(content))
    [problem] = problems_of(path)
    assert problem.startswith(f"{path / 'group_vars' / form}: gpu_sharing.replicas:")


def test_a_time_sliced_pool_in_an_extensionless_file_is_not_missed(inventory, write):
    """Item 6: Ansible read group_vars/t4 (time-slicing), infra.spec read t4.yml (exclusive) and saw nothing."""
    inventory["group_vars"]["t4"]["gpu_sharing"] = {"mode": "exclusive"}
    path = write(inventory)
    shared = {**inventory["group_vars"]["t4"], "gpu_sharing": {"mode": "time-slicing", "replicas": 4}}
    write_text(path / "group_vars", "t4", yaml.safe_dump(shared))
    [problem] = problems_of(path)
    assert problem == (
        f"{path / 'group_vars' / 't4.yml'}: Ansible ignores it because {path / 'group_vars' / 't4'} exists (it reads "
        "only the first of t4, t4.yml, t4.yaml, t4.json): merge the two"
    )


@pytest.mark.parametrize("kind, name, first, second", [
    ("group_vars", "cpu", "cpu/", "cpu.yml"),
    ("group_vars", "cpu", "cpu.yml", "cpu.yaml"),
    ("group_vars", "cpu", "cpu.yaml", "cpu.json"),
    ("group_vars", "all", "all", "all.yml"),
    ("host_vars", "cpu-1", "cpu-1.yml", "cpu-1.json"),
])
def test_a_file_ansible_ignores_beside_the_one_it_reads_is_refused(inventory, write, kind, name, first, second):
    inventory["host_vars"]["cpu-1"] = {"zone": "a"}
    path = write(inventory)
    content = (path / kind / f"{name}.yml").read_text()
    (path / kind / f"{name}.yml").unlink()
    write_text(path / kind, first + ("vars.yml" if first.endswith("/") else ""), content)
    write_text(path / kind, second, content)
    [problem] = problems_of(path)
    assert problem.startswith(f"{path / kind / second}: Ansible ignores it because {path / kind / first.rstrip('/')}")


def test_vars_folders_are_read_recursively_skipping_what_ansible_skips(inventory, write):
    del inventory["group_vars"]["all"]["planned_services"]
    path = write(inventory)
    move_to(path, "group_vars", "all", "all/cluster.yml")
    bad = "kubelet_max_pods: many\n"
    for skipped in (".hidden.yml", "backup.yml~", "notes.txt", "drafts.d/more.yml", ".git/config.yml"):
        write_text(path / "group_vars" / "all", skipped, bad)
    write_text(path / "group_vars" / "all", "net/services", "planned_services: 7\n")
    env = load_environment(path)
    assert env.cluster.planned_services == 7 and env.cluster.kubelet_max_pods == 110
    assert env.cluster_source("planned_services") == str(path / "group_vars" / "all" / "net" / "services")


def test_json_is_read_as_ansible_reads_it(inventory, write):
    path = write(inventory)
    write_text(path / "group_vars", "all.json", '{"planned_services": 1e3}')  # JSON: a number (YAML: a string)
    move_to(path, "group_vars", "all", "all.yaml")
    problems = problems_of(path)  # all.json comes after all.yaml: Ansible ignores it
    assert problems == [f"{path / 'group_vars' / 'all.json'}: Ansible ignores it because "
                        f"{path / 'group_vars' / 'all.yaml'} exists (it reads only the first of all, all.yml, "
                        "all.yaml, all.json): merge the two"]


def test_an_encrypted_file_is_refused_by_name(inventory, write):
    path = write(inventory)
    write_text(path / "host_vars", "cpu-1.yml", "$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    [problem] = problems_of(path)
    assert problem.startswith(f"{path / 'host_vars' / 'cpu-1.yml'}: encrypted with ansible-vault")


def test_encrypted_values_pass_in_ansible_variables_only(inventory, write):
    path = write(inventory)
    vaulted = "!vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n"
    write_text(path / "host_vars", "cpu-1.yml", f"ansible_become_password: {vaulted}")
    env = load_environment(path)
    assert isinstance(env.host_variables("cpu-1")["ansible_become_password"], Encrypted)
    write_text(path / "host_vars", "cpu-1.yml", f"zone: {vaulted}")
    [problem] = problems_of(path)
    assert problem.endswith("cpu-1.zone: encrypted with ansible-vault, which infra.spec cannot read; write it in "
                            "clear (only ansible_* variables may be encrypted)")


def test_unsafe_strings_are_plain_strings_to_the_spec(inventory, write):
    path = write(inventory)
    write_text(path / "host_vars", "cpu-1.yml", "zone: !unsafe a\n")
    assert load_environment(path).pools["cpu"].hosts[0].vars.zone == "a"


# ---------------------------------------------------------------- other inventory sources


@pytest.mark.parametrize("name", ["hosts.yaml", "hosts", "hosts.ini", "extra.json", "more/hosts.yml", "hosts.toml",
                                  "inventory.py"])
def test_a_second_inventory_source_is_refused(inventory, write, name):
    path = write(inventory)
    write_text(path, name, "[cpu]\ncpu-9\n")
    [problem] = problems_of(path)
    assert problem == (f"{path / name}: Ansible reads it as a second inventory source; infra.spec reads only "
                       f"hosts.yml: merge it into hosts.yml or move it out of {path}")


@pytest.mark.parametrize("name", ["README.md", "notes.txt", "ansible.cfg", "hosts.yml.orig", "hosts.yml.bak",
                                  "hosts.yml~", ".hosts.yml", ".git/HEAD", "site.retry", "docs/guide.rst",
                                  "vars_plugins/mine.py", "group_vars/README.md"])
def test_files_ansible_ignores_are_ignored(inventory, write, name):
    path = write(inventory)
    write_text(path, name, "all: {hosts: {cpu-9: }}\n")
    load_environment(path)


def test_two_hosts_files_are_refused(inventory, write):
    path = write(inventory)
    write_text(path, "hosts.yaml", (path / "hosts.yml").read_text())
    [problem] = problems_of(path)
    assert problem.startswith(f"{path / 'hosts.yaml'}: Ansible reads it as a second inventory source")


def test_a_second_source_is_the_only_problem_about_its_groups(inventory, write):
    path = write(inventory)
    write_text(path, "extra.ini", "[monitoring]\nmon-1\n")
    write_text(path / "group_vars", "monitoring.yml", "ansible_user: mon\n")
    write_text(path / "host_vars", "mon-1.yml", "ansible_user: mon\n")
    assert len(problems_of(path)) == 1


# ---------------------------------------------------------------- ansible_* variables


def test_ansible_variables_pass_at_every_level(inventory, write):
    inventory["group_vars"]["all"]["ansible_user"] = "ops"
    inventory["group_vars"]["cpu"]["ansible_become"] = True
    inventory["group_vars"]["node_pools"] = {"ansible_python_interpreter": "/usr/bin/python3"}
    pools_of(inventory)["cpu"]["hosts"]["cpu-1"]["ansible_port"] = 2222
    inventory["host_vars"]["cpu-2"] = {"ansible_ssh_private_key_file": "~/.ssh/cpu", "ansible_whatever": [1]}
    env = load_environment(write(inventory))
    assert env.host_variables("cpu-1") == {
        **inventory["group_vars"]["all"], **inventory["group_vars"]["node_pools"], **inventory["group_vars"]["cpu"],
        "zone": "a", "ansible_port": 2222,
    }
    assert env.host_variables("cpu-2")["ansible_whatever"] == [1]
    assert "ansible_user" not in type(env.cluster).model_fields


# ---------------------------------------------------------------- control plane and etcd


def test_control_plane_and_etcd_hosts_are_modelled(inventory, write):
    add_control_plane(inventory, {"cp-1": {"zone": "a"}, "cpu-1": None}, etcd={"cp-1": None, "etcd-1": None})
    env = load_environment(write(inventory))
    cp1, cpu1 = env.control_plane
    assert (cp1.name, cp1.pool, cp1.vars.zone) == ("cp-1", "", "a")
    assert cpu1 is env.pools["cpu"].hosts[0] and cpu1.pool == "cpu"
    assert env.etcd == ("cp-1", "etcd-1")
    assert [h.name for h in env.hosts] == ["cpu-1", "cpu-2", "mem-1", "gpu-1", "t4-1"]
    assert [h.name for h in env.nodes] == ["cpu-1", "cpu-2", "mem-1", "gpu-1", "t4-1", "cp-1"]


def test_control_plane_under_a_kubespray_parent_group(inventory, write):
    control_plane = {"kube_control_plane": {"hosts": {"cp-1": None}}}
    inventory["hosts"]["all"]["children"]["k8s_cluster"] = {"children": control_plane}
    assert [h.name for h in load_environment(write(inventory)).control_plane] == ["cp-1"]


def test_control_plane_host_variables_are_validated(inventory, write):
    add_control_plane(inventory, {"cp-1": {"zone": "Rack A", "node_taints": []}})
    problems = problems_of(write(inventory))
    assert len(problems) == 2
    assert any("cp-1.zone: 'Rack A'" in p for p in problems)
    assert any("cp-1.node_taints: node_taints is a pool variable" in p for p in problems)


def test_control_plane_node_names_are_dns_names(inventory, write):
    add_control_plane(inventory, {"CP_1": None})
    [problem] = problems_of(write(inventory))
    assert problem.endswith("host 'CP_1': Kubernetes node names are lowercase DNS names")


def test_an_etcd_only_host_may_set_only_ansible_variables(inventory, write):
    add_control_plane(inventory, {}, etcd={"etcd-1": {"ansible_host": "192.0.2.9", "zone": "a"}})
    [problem] = problems_of(write(inventory))
    assert problem.endswith("etcd-1.zone: host etcd-1 is only in etcd (it runs no kubelet); it may set only "
                            "ansible_* connection variables")


@pytest.mark.parametrize("group", ["kube_control_plane", "etcd"])
def test_kubespray_group_vars_may_hold_only_ansible_variables(inventory, write, group):
    add_control_plane(inventory, {"cp-1": None}, etcd={"cp-1": None})
    inventory["group_vars"][group] = {"ansible_user": "cp", "node_taints": []}
    [problem] = problems_of(write(inventory))
    assert problem.endswith(f"{group}.yml: node_taints: {group} is Kubespray's group, not a pool; it may set only "
                            "ansible_* connection variables (cluster-wide variables go in group_vars/all.yml)")


def test_kube_control_plane_is_not_a_pool(inventory, write):
    pools_of(inventory)["kube_control_plane"] = {"hosts": {"cp-1": None}}
    [problem] = problems_of(write(inventory))
    assert "kube_control_plane is Kubespray's group, not a pool; list it under all: children:" in problem


def test_a_host_in_no_pool_nor_control_plane_is_refused(inventory, write):
    inventory["hosts"]["all"]["hosts"] = {"bastion": None}
    [problem] = problems_of(write(inventory))
    assert "host bastion is in no pool (a child of node_pools), nor in kube_control_plane or etcd" in problem


# ---------------------------------------------------------------- host_variables


def test_host_variables_follow_ansible_precedence(inventory, write):
    """group_vars/all < groups by depth, then name < inline host variables < host_vars."""
    inventory["hosts"]["all"]["children"]["a_parent"] = {"children": {"cpu": None}}
    inventory["hosts"]["all"]["children"]["z_parent"] = {"children": {"cpu": None}}
    inventory["group_vars"]["all"]["ansible_a"] = "all"
    for group in ("a_parent", "z_parent"):
        inventory["group_vars"][group] = {"ansible_a": group, "ansible_b": group}
    inventory["group_vars"]["cpu"]["ansible_b"] = "cpu"
    inventory["group_vars"]["cpu"]["ansible_c"] = "cpu"
    pools_of(inventory)["cpu"]["hosts"]["cpu-1"].update(ansible_c="inline", ansible_d="inline")
    inventory["host_vars"]["cpu-1"] = {"ansible_d": "host_vars"}
    seen = load_environment(write(inventory)).host_variables("cpu-1")
    assert [seen[key] for key in ("ansible_a", "ansible_b", "ansible_c", "ansible_d")] == [
        "z_parent", "cpu", "inline", "host_vars"]


def test_host_variables_of_an_unknown_host_is_a_key_error(inventory, write):
    with pytest.raises(KeyError):
        load_environment(write(inventory)).host_variables("nope")


# ---------------------------------------------------------------- which file set a field


def test_pool_fields_name_the_file_of_a_folder_that_sets_them(inventory, write):
    inventory["group_vars"]["gpu"]["sysctls"] = {"net.core.somaxconn": 4096}
    path = write(inventory)
    gpu = yaml.safe_load((path / "group_vars" / "gpu.yml").read_text())
    (path / "group_vars" / "gpu.yml").unlink()
    write_text(path / "group_vars", "gpu/main.yml", yaml.safe_dump({k: gpu[k] for k in ("pool_kind", "machine")}))
    write_text(path / "group_vars", "gpu/tuning.yml", yaml.safe_dump({k: v for k, v in gpu.items()
                                                                      if k not in ("pool_kind", "machine")}))
    pool = load_environment(path).pools["gpu"]
    main, tuning = str(path / "group_vars" / "gpu" / "main.yml"), str(path / "group_vars" / "gpu" / "tuning.yml")
    assert pool.source == main
    assert pool.sources["sysctls"] == tuning and pool.sources["machine"] == main
    assert pool.file_of("sysctls.net.core.somaxconn") == tuning
    assert pool.file_of("gpu_sharing.mig_devices.1g.10gb") == tuning
    assert pool.file_of("overcommit.cpu") == main  # not set: the pool's main file


def test_host_and_cluster_fields_name_the_file_that_sets_them(inventory, write):
    inventory["host_vars"]["gpu-1"] = {"hardware": {"gpu_count": 7}}
    path = write(inventory)
    cluster = yaml.safe_load((path / "group_vars" / "all.yml").read_text())
    (path / "group_vars" / "all.yml").unlink()
    write_text(path / "group_vars", "all/tenants.yml", yaml.safe_dump({"tenants": cluster.pop("tenants")}))
    write_text(path / "group_vars", "all/cluster.yml", yaml.safe_dump(cluster))
    env = load_environment(path)
    gpu1 = env.pools["gpu"].hosts[0]
    assert gpu1.file_of("hardware.gpu_count") == str(path / "host_vars" / "gpu-1.yml")
    assert gpu1.file_of("zone") == str(path / "hosts.yml")
    assert env.cluster_file_of("tenants.svc.quota.requests.cpu") == str(path / "group_vars" / "all" / "tenants.yml")
    assert env.cluster_file_of("zones") == str(path / "group_vars" / "all" / "cluster.yml")
    assert env.cluster_file_of("currency") == str(path / "group_vars" / "all" / "cluster.yml")  # a default


def test_the_cluster_file_is_the_one_ansible_reads(inventory, write):
    path = write(inventory)
    move_to(path, "group_vars", "all", "all.json")
    env = load_environment(path)
    assert env.cluster_file_of("currency") == str(path / "group_vars" / "all.json")


# ---------------------------------------------------------------- one cause, one problem


def test_a_yaml_error_in_hosts_yml_is_the_only_problem(inventory, write):
    for host in ("cpu-1", "cpu-2", "gpu-1"):
        inventory["host_vars"][host] = {"zone": "a"}
    path = write(inventory)
    (path / "hosts.yml").write_text("all:\n  children: [node_pools\n")
    [problem] = problems_of(path)
    assert problem.startswith(f"{path / 'hosts.yml'}:3:1: YAML syntax error")


def test_hosts_yml_in_another_format_is_the_only_problem(inventory, write):
    inventory["host_vars"]["cpu-1"] = {"zone": "a"}
    inventory["hosts"] = {"cpu": {"hosts": {"cpu-1": None}}}
    [problem] = problems_of(write(inventory))
    assert "must hold one top-level key, 'all:'" in problem


def test_a_broken_host_range_does_not_orphan_its_host_vars(inventory, write):
    pools_of(inventory)["cpu"]["hosts"] = {"cpu-[1:x]": None}
    inventory["host_vars"]["cpu-1"] = {"zone": "a"}
    [problem] = problems_of(write(inventory))
    assert "write numeric [01:16] or letter [a:f] ranges" in problem


def test_an_unknown_group_key_does_not_orphan_its_group_vars(inventory, write):
    pools_of(inventory)["cpu"] = {"hostz": {"cpu-1": None}}
    inventory["host_vars"]["cpu-1"] = {"zone": "a"}
    [problem] = problems_of(write(inventory))
    assert "unknown keys ['hostz']" in problem


def test_an_unreadable_host_vars_file_is_one_problem(inventory, write):
    path = write(inventory)
    write_text(path / "host_vars", "cpu-1.json", '{"zone": ')
    [problem] = problems_of(path)
    assert problem.startswith(f"{path / 'host_vars' / 'cpu-1.json'}:") and "YAML syntax error" in problem


def test_a_vars_file_that_is_no_mapping_is_one_problem(inventory, write):
    path = write(inventory)
    (path / "group_vars" / "gpu.yml").write_text("- pool_kind: gpu\n")
    assert problems_of(path) == [f"{path / 'group_vars' / 'gpu.yml'}: must be a mapping of variable names to values"]


# ---------------------------------------------------------------- pool names


@pytest.mark.parametrize("name", ["gpu_", "1gpu", "_gpu", "Gpu", "gpu-a100", "gpu.a100", "g" * 64])
def test_pool_names_must_become_kubernetes_names(inventory, write, name):
    pools_of(inventory)[name] = pools_of(inventory).pop("cpu")
    inventory["group_vars"][name] = inventory["group_vars"].pop("cpu")
    for tenant in inventory["group_vars"]["all"]["tenants"].values():
        tenant["pools"] = [name if pool == "cpu" else pool for pool in tenant["pools"]]
    problems = problems_of(write(inventory))
    assert any(f"pool group {name!r}: its Kubernetes name is" in p for p in problems), problems


@pytest.mark.parametrize("name", ["a", "gpu_a100", "g" * 63, "a__b"])
def test_valid_pool_names(inventory, write, name):
    pools_of(inventory)[name] = pools_of(inventory).pop("cpu")
    inventory["group_vars"][name] = inventory["group_vars"].pop("cpu")
    assert name in load_environment(write(inventory)).pools


@pytest.mark.parametrize("env_name", SHIPPED)
def test_k8s_names_are_dns_labels_and_unique(env_name):
    pools = load_environment(ROOT / "inventories" / env_name).pools.values()
    names = [pool.k8s_name for pool in pools]
    assert all(re.fullmatch(DNS_LABEL, name) for name in names)
    assert len(set(names)) == len(names)


def test_k8s_name_replaces_underscores(inventory, write):
    pools_of(inventory)["gpu_a100"] = pools_of(inventory).pop("gpu")
    inventory["group_vars"]["gpu_a100"] = inventory["group_vars"].pop("gpu")
    inventory["group_vars"]["all"]["tenants"]["infer"]["pools"] = ["gpu_a100"]
    assert load_environment(write(inventory)).pools["gpu_a100"].k8s_name == "gpu-a100"


# ---------------------------------------------------------------- versions YAML reads as numbers


@pytest.mark.parametrize("file, key, value, shown", [
    ("all", "kube_version", 1.30, 'kube_version: "1.30"'),
    ("gpu", "cuda_version", 12.10, 'cuda_version: "12.10"'),
    ("gpu", "nvidia_driver_version", 550, 'nvidia_driver_version: "550.127.08"'),
])
def test_unquoted_versions_say_quote_it(inventory, write, file, key, value, shown):
    inventory["group_vars"][file][key] = value
    [problem] = problems_of(write(inventory))
    assert problem.endswith(f"{key}: {value!r} was read as a number, not a version (unquoted, YAML reads 1.30 as 1.3); "
                            f"quote it, e.g. {shown}")


def test_an_unquoted_host_version_says_quote_it(inventory, write):
    pools_of(inventory)["gpu"]["hosts"]["gpu-1"]["cuda_version"] = 12.4
    [problem] = problems_of(write(inventory))
    assert "gpu-1.cuda_version: 12.4 was read as a number" in problem
