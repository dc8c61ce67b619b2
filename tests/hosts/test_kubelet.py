"""The kubelet role on the sandbox hosts: each host's KubeletConfiguration drop-in is exactly its pool's (as
infra.hosts.hostvars derives it), valid for the kubelet's own code, started with the pool's labels; the kubelet
package (the real kubelet, built from its Go module) installed through the role's own repository, key and pin,
from the sandbox's local pkgs.k8s.io-shaped channel; a manager policy change goes through the handler chain,
proven against a stand-in kubelet unit (the real kubelet cannot run in these containers yet: issue 17)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from typing import Any

import pytest
import yaml
from conftest import ROOT, kubelet_stand_in, run_playbook
from kubelet_config_check import check  # tests/ is on sys.path (tests/conftest.py)

from infra.cluster.nodes import POOL_LABEL

DROPIN = "/etc/kubernetes/kubelet.conf.d/50-k8s-node-pools.conf"
UNIT_DROPIN = "/etc/systemd/system/kubelet.service.d/20-k8s-node-pools.conf"
SOURCES = "/etc/apt/sources.list.d/kubernetes.sources"
PIN = "/etc/apt/preferences.d/k8s-node-pools-kubelet.pref"
HOSTS = ["sb-cpu-1", "sb-gpu-1", "sb-mem-1", "sb-mig-1"]


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    """Every sandbox host's derived settings, as the playbooks get them."""
    out = subprocess.run([sys.executable, "-m", "infra", "hostvars", "inventories/sandbox"], cwd=ROOT, check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    hosts: dict[str, Any] = json.loads(out)["hosts"]
    return hosts


def dropin(host: Any) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(host.file(DROPIN).content_string)
    return config


def unit_environment(host: Any) -> dict[str, str]:
    env = {}
    for line in host.file(UNIT_DROPIN).content_string.splitlines():
        if line.startswith("Environment="):
            key, _, value = line.removeprefix("Environment=").strip('"').partition("=")
            env[key] = value
    return env


@pytest.mark.parametrize("name", HOSTS)
def test_the_dropin_is_the_pool_s_whole_configuration(converged, host, expected, name):
    assert dropin(host(name)) == expected[name]["kubelet"]["config"]
    assert host(name).file(DROPIN).mode == 0o644


@pytest.mark.parametrize(("name", "policy", "reserved"), [
    ("sb-mem-1", "static", "0"), ("sb-cpu-1", "none", None), ("sb-gpu-1", "none", None), ("sb-mig-1", "none", None),
])
def test_only_the_memory_pool_pins_cpus(converged, host, name, policy, reserved):
    config = dropin(host(name))
    assert config["cpuManagerPolicy"] == policy
    assert config.get("reservedSystemCPUs") == reserved
    assert config["topologyManagerPolicy"] == ("single-numa-node" if policy == "static" else "none")


@pytest.mark.parametrize(("name", "taints"), [
    ("sb-cpu-1", []),
    ("sb-gpu-1", [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
    ("sb-mig-1", [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
    ("sb-mem-1", [{"key": "workload-profile", "value": "memory", "effect": "NoSchedule"}]),
])
def test_each_pool_registers_with_its_taints(converged, host, name, taints):
    assert dropin(host(name))["registerWithTaints"] == taints


@pytest.mark.parametrize("name", HOSTS)
def test_the_dropin_passes_the_kubelet_s_own_validation(converged, host, tmp_path, name):
    local = tmp_path / "50-k8s-node-pools.conf"
    local.write_text(host(name).file(DROPIN).content_string)
    done = check(local)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", HOSTS)
def test_the_kubelet_drives_cgroups_as_containerd_does(converged, host, name):
    """Read from both programs' own views: the drop-in the kubelet's validation accepts, containerd's merged dump."""
    dump = tomllib.loads(host(name).check_output("containerd config dump"))["plugins"]["io.containerd.cri.v1.runtime"]
    default = dump["containerd"]["default_runtime_name"]
    assert dump["containerd"]["runtimes"][default]["options"]["SystemdCgroup"] is True
    assert dropin(host(name))["cgroupDriver"] == "systemd"


def test_a_runtime_on_another_cgroup_driver_stops_the_role_before_it_writes(converged, host):
    """A containerd whose default runtime drives cgroups with cgroupfs (here through another tool's later import):
    the role refuses before it writes the kubelet's configuration, naming both drivers."""
    h = host("sb-cpu-1")
    foreign = "/etc/containerd/conf.d/90-other.toml"
    h.check_output(f"printf '%s\\n' 'version = 3' '[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]'"
                   f" 'SystemdCgroup = false' > {foreign}")
    before = h.file(DROPIN).content_string
    try:
        run = run_playbook("site.yml", "--limit", "sb-cpu-1", "--tags", "kubelet")
        assert run.rc != 0
        assert ("On sb-cpu-1 containerd's default runtime uses the cgroupfs cgroup driver and "
                "kubelet_config.cgroupDriver is systemd") in run.output
        assert h.file(DROPIN).content_string == before
    finally:
        h.check_output(f"rm -f {foreign}")
    again = run_playbook("site.yml", "--limit", "sb-cpu-1", "--tags", "kubelet")
    assert again.rc == 0 and again.changed() == {}, again.tail()


@pytest.mark.parametrize(("version", "refused"), [("1.29.15", True), ("1.30.0", False)])
def test_a_kubelet_without_config_dir_is_refused_before_anything_is_written(converged, version, refused):
    """--config-dir is read by default from 1.30: an older kubelet would not see the pool's drop-in."""
    # no package install: the sandbox's channel serves only the spec's minor
    run = run_playbook("site.yml", "--limit", "sb-cpu-1", "--tags", "kubelet", "--check",
                       "-e", json.dumps({"kubelet_version": version, "kubelet_package_install": False}))
    assert (run.rc != 0) is refused, run.tail()
    assert (f"kubelet_version is {version}; the role writes the node's configuration as a --config-dir drop-in"
            in run.output) is refused


@pytest.mark.parametrize(("name", "labels"), [
    ("sb-cpu-1", {"workload-profile": "general", "k8s-node-pools.io/pool-kind": "cpu"}),
    ("sb-gpu-1", {"workload-profile": "gpu-offline", "nvidia.com/device-plugin.config": "sb-gpu"}),
    ("sb-mig-1", {"workload-profile": "gpu-inference", "nvidia.com/device-plugin.config": "sb-mig"}),
    ("sb-mem-1", {"workload-profile": "memory", "k8s-node-pools.io/pool-kind": "memory"}),
])
def test_the_unit_starts_the_kubelet_with_the_dropins_and_the_pool_s_labels(converged, host, expected, name, labels):
    env = unit_environment(host(name))
    assert env["KUBELET_CONFIG_DIR_ARGS"] == "--config-dir=/etc/kubernetes/kubelet.conf.d"
    flag = env["KUBELET_NODE_LABELS_ARGS"]
    assert flag.startswith("--node-labels=")
    given = dict(pair.split("=", 1) for pair in flag.removeprefix("--node-labels=").split(","))
    assert given == expected[name]["kubelet"]["node_labels"]
    assert labels.items() <= given.items()
    assert POOL_LABEL not in given  # NodeRestriction refuses it from a kubelet: the cluster layer sets it
    text = host(name).file(UNIT_DROPIN).content_string
    assert "ExecStart=\n" in text and "$KUBELET_CONFIG_DIR_ARGS $KUBELET_NODE_LABELS_ARGS" in text


@pytest.mark.parametrize("name", HOSTS)
def test_the_real_kubelet_comes_through_the_role_s_own_apt_path(converged, host, name):
    """The channel the role writes is the sandbox's pkgs.k8s.io-shaped one (tests/hosts/aptrepo.py, the kubelet
    built from k8s.io/kubernetes): apt verified it with the fingerprint-pinned key the role wrote, the pin chose
    the version, and the installed binary is a kubelet of the spec's version."""
    h = host(name)
    sources = h.file(SOURCES).content_string
    assert "URIs: file:///srv/k8s-node-pools-apt/core:/stable:/v1.34/deb/\n" in sources
    assert "Suites: /\n" in sources and "Signed-By: /etc/apt/keyrings/kubernetes-apt-keyring.asc" in sources
    assert "Enabled: no" not in sources
    pin = h.file(PIN).content_string
    assert "Package: kubelet\nPin: version 1.34.2-*\nPin-Priority: 1001\n" in pin
    policy = h.check_output("apt-cache policy kubelet")
    assert "Installed: 1.34.2-1.1" in policy and "file:/srv/k8s-node-pools-apt/core:/stable:/v1.34/deb" in policy
    assert h.check_output("kubelet --version") == "Kubernetes v1.34.2"  # the binary's own answer
    assert h.check_output("systemctl is-enabled kubelet.service") == "enabled"
    # started with the role's drop-ins: the package's unit, overridden
    assert h.check_output("realpath $(systemctl show -p FragmentPath --value kubelet.service)") == \
        "/usr/lib/systemd/system/kubelet.service"
    assert UNIT_DROPIN in h.check_output("systemctl show -p DropInPaths --value kubelet.service")


FAKE_UNIT = """[Unit]
Description=stand-in kubelet for the policy-change test
[Service]
ExecStart=/usr/bin/kubelet
[Install]
WantedBy=multi-user.target
"""
# Records its command line, then idles like a kubelet that cannot join.
FAKE_KUBELET = "#!/bin/sh\necho \"$@\" > /run/fake-kubelet-args\nexec sleep infinity\n"
STATES = ["/var/lib/kubelet/cpu_manager_state", "/var/lib/kubelet/memory_manager_state"]


def started_at(h: Any) -> str:
    return str(h.check_output("systemctl show -p ActiveEnterTimestampMonotonic --value kubelet.service"))


def converge_kubelet(config: dict[str, Any] | None = None, **extra_vars: Any) -> Any:
    extra = {**({"kubelet_config": config} if config else {}), **extra_vars}
    run = run_playbook("site.yml", "--limit", "sb-mem-1", "--tags", "kubelet_configure,kubelet_run",
                       *(["-e", json.dumps(extra)] if extra else []))
    return run


@pytest.fixture
def stand_in_kubelet(converged, host):
    """sb-mem-1 with a kubelet unit (a stand-in binary that records its command line and idles) and manager
    state files, as a node whose kubelet already ran; removed afterwards, back to the converged host."""
    h = host("sb-mem-1")
    h.run("mkdir -p /var/lib/kubelet")
    with kubelet_stand_in(h, FAKE_KUBELET, FAKE_UNIT):
        try:
            assert h.run("systemctl start kubelet.service").rc == 0
            for state in STATES:
                h.run(f"echo '{{}}' > {state}")
            yield h
        finally:
            h.run("systemctl stop kubelet.service; rm -rf /run/fake-kubelet-args /var/lib/kubelet")


def test_a_manager_policy_change_resets_the_state_and_restarts(stand_in_kubelet, expected):
    h = stand_in_kubelet
    config = expected["sb-mem-1"]["kubelet"]["config"]
    # The unit drop-in's ExecStart reached the kubelet: the config folder and the labels on its command line.
    args = h.file("/run/fake-kubelet-args").content_string
    assert "--config-dir=/etc/kubernetes/kubelet.conf.d" in args and "workload-profile=memory" in args

    # A change that is not a manager's: restarted, the state kept.
    before = started_at(h)
    run = converge_kubelet({**config, "maxPods": 100})
    assert run.rc == 0, run.tail()
    assert run.changed() == {"sb-mem-1": 2}  # the drop-in, the restart
    assert started_at(h) != before and h.service("kubelet").is_running
    assert all(h.file(state).exists for state in STATES)
    assert dropin(h)["maxPods"] == 100

    # The CPU Manager's policy: not drained (no delegate, said so), stopped, state removed, written, started.
    before = started_at(h)
    run = converge_kubelet({**config, "cpuManagerPolicy": "none", "topologyManagerPolicy": "none"})
    assert run.rc == 0, run.tail()
    assert "NOT cordoned or drained" in run.output
    assert not any(h.file(state).exists for state in STATES)
    assert dropin(h)["cpuManagerPolicy"] == "none"
    assert started_at(h) != before and h.service("kubelet").is_running
    assert h.service("kubelet").is_enabled  # the role enables an installed unit

    # Back to the pool's own: the chain again, then nothing to do.
    for state in STATES:
        h.run(f"echo '{{}}' > {state}")
    assert converge_kubelet().rc == 0
    assert dropin(h) == config and not any(h.file(state).exists for state in STATES)
    again = converge_kubelet()
    assert again.rc == 0 and again.changed() == {}


HUGEPAGES_RECORD = "/var/lib/k8s-node-pools/kubelet-hugepages"


def test_huge_pages_changed_since_the_kubelet_started_go_through_the_chain(stand_in_kubelet):
    """The kubelet reads hugepage capacity only at start (and the Static Memory Manager's state records it): pages
    that changed since it last started - here the record says 12345 2Mi pages, not what the kernel holds - drain,
    stop, reset the state and start it again, as a manager change does."""
    h = stand_in_kubelet
    live = h.file(HUGEPAGES_RECORD).content_string
    assert "2048kB: " in live
    h.check_output(f"echo -n '2048kB: 12345' > {HUGEPAGES_RECORD}")
    before = started_at(h)
    run = converge_kubelet()
    assert run.rc == 0, run.tail()
    assert "huge pages change on sb-mem-1: the node is drained" in " ".join(run.output.split()), run.tail()
    assert not any(h.file(state).exists for state in STATES)
    assert started_at(h) != before and h.service("kubelet").is_running
    assert h.file(HUGEPAGES_RECORD).content_string == live
    again = converge_kubelet()
    assert again.rc == 0 and again.changed() == {}, again.tail()


# A kubectl on the delegate that records its arguments and exits with what /run/fake-kubectl-rc says.
FAKE_KUBECTL = "#!/bin/sh\necho \"$*\" >> /run/fake-kubectl.log\nexit $(cat /run/fake-kubectl-rc 2>/dev/null || echo 0)\n"


def test_the_node_is_drained_from_the_delegate_and_a_failed_drain_changes_nothing(stand_in_kubelet, host, expected):
    h, delegate = stand_in_kubelet, host("sb-cpu-1")
    config = expected["sb-mem-1"]["kubelet"]["config"]
    change = {**config, "cpuManagerPolicy": "none", "topologyManagerPolicy": "none"}
    delegate.run(f"printf '%s' '{FAKE_KUBECTL}' > /usr/local/bin/kubectl && chmod 755 /usr/local/bin/kubectl")
    try:
        # The drain fails: the chain stops before the node is touched, and the next run sees the change again.
        delegate.run("echo 1 > /run/fake-kubectl-rc")
        before = started_at(h)
        run = converge_kubelet(change, kubelet_drain_delegate="sb-cpu-1")
        assert run.rc != 0 and run.failed() == {"sb-mem-1": 1}
        assert dropin(h) == config and all(h.file(state).exists for state in STATES)
        assert started_at(h) == before and h.service("kubelet").is_running

        # The drain works: cordon and drain, the reset, then uncordon, all from the delegate.
        delegate.run("rm -f /run/fake-kubectl-rc /run/fake-kubectl.log")
        run = converge_kubelet(change, kubelet_drain_delegate="sb-cpu-1")
        assert run.rc == 0, run.tail()
        calls = delegate.file("/run/fake-kubectl.log").content_string.splitlines()
        assert calls == [
            "--kubeconfig=/etc/kubernetes/admin.conf drain sb-mem-1 --ignore-daemonsets --delete-emptydir-data"
            " --timeout=300s",
            "--kubeconfig=/etc/kubernetes/admin.conf uncordon sb-mem-1",
        ]
        assert dropin(h)["cpuManagerPolicy"] == "none" and not any(h.file(state).exists for state in STATES)
        assert h.service("kubelet").is_running
        assert converge_kubelet().rc == 0 and dropin(h) == config  # back to the pool's own (not drained)
    finally:
        delegate.run("rm -f /usr/local/bin/kubectl /run/fake-kubectl.log /run/fake-kubectl-rc")
