"""The pins of the Go tools (tools/<family>/go.mod), checked without building anything.

The wrapper modules are the only place a tool version is written, so these tests read them and hold
them against what the rest of the project pins: the Kubernetes version of the shipped environments
and the Pulumi Python SDKs in constraints.txt.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
FAMILIES = ("containerd", "etcd", "images", "kubernetes", "kubelet-config-check", "kwok", "nvidia-container-toolkit",
            "pulumi", "pulumi-kubernetes", "volcano")
# The project's own Python language host: a module of its own, built by the pulumi family beside the CLI.
HOST = "pulumi-language-python"
HOST_FILES = ("go.mod", "go.sum", "main.go")
PSEUDO = re.compile(r"^v\d+\.0\.0-(\d{14})-([0-9a-f]{12})$")


def parse_go_mod(text: str) -> tuple[dict[str, str], dict[str, tuple[str, str]], list[str]]:
    """(requires, replaces old -> (new, version), tools) of a go.mod, blocks and single lines."""
    requires: dict[str, str] = {}
    replaces: dict[str, tuple[str, str]] = {}
    tools: list[str] = []
    block = None
    for raw in text.splitlines():
        line = raw.split("//")[0].strip()
        if not line:
            continue
        if line.endswith("("):
            block = line[:-1].strip()
            continue
        if line == ")":
            block = None
            continue
        verb, rest = (block, line) if block else line.split(None, 1)
        if verb == "require":
            module, version = rest.split()
            requires[module] = version
        elif verb == "replace":
            old, new = (side.split() for side in rest.split("=>"))
            replaces[old[0]] = (new[0], new[1] if len(new) > 1 else "")
        elif verb == "tool":
            tools.append(rest)
    return requires, replaces, tools


def go_mod(family: str) -> tuple[dict[str, str], dict[str, tuple[str, str]], list[str]]:
    return parse_go_mod((TOOLS / family / "go.mod").read_text())


def pinned(package: str) -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        if name.strip().lower().replace("_", "-") == package:
            return version.strip()
    raise AssertionError(f"{package} is not pinned in constraints.txt")


def shipped_kube_versions() -> set[str]:
    return {
        str(yaml.safe_load(path.read_text())["kube_version"]).removeprefix("v")
        for path in (ROOT / "inventories").glob("*/group_vars/all.yml")
    }


@pytest.mark.parametrize("family", (*FAMILIES, HOST))
def test_every_family_is_a_module_with_its_checksums(family):
    requires, replaces, tools = go_mod(family)
    sums = (TOOLS / family / "go.sum").read_text()
    assert tools, f"{family}: go.mod names no tool"
    for module, version in requires.items():
        if module in replaces:
            module, version = replaces[module]
        assert f"{module} {version}/go.mod h1:" in sums, f"{family}: go.sum lacks {module} {version}"
    for old, (new, version) in replaces.items():
        assert version and not new.startswith("."), f"{family}: {old} replaced by a local path"


def test_the_control_plane_is_the_shipped_kubernetes_version():
    (kube,) = shipped_kube_versions()
    requires, _, tools = go_mod("kubernetes")
    assert requires["k8s.io/kubernetes"] == f"v{kube}"
    assert sorted(tools) == [
        f"k8s.io/kubernetes/cmd/{name}"
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
    ]


def test_every_kubernetes_staging_module_is_replaced_at_the_matching_v0_version():
    (kube,) = shipped_kube_versions()
    staging = f"v0.{kube.split('.', 1)[1]}"
    requires, replaces, _ = go_mod("kubernetes")
    # kubernetes requires its staging modules at v0.0.0, which no proxy serves.
    unreplaced = [m for m, v in requires.items() if v == "v0.0.0" and m not in replaces]
    assert not unreplaced
    k8s = {old: new for old, new in replaces.items() if old.startswith("k8s.io/")}
    assert len(k8s) >= 29
    assert all(new == (old, staging) for old, new in k8s.items()), {
        old: new for old, new in k8s.items() if new != (old, staging)
    }
    assert set(replaces) == set(k8s)


def test_the_kubelet_config_check_is_built_from_the_control_plane_s_kubernetes():
    # The same k8s.io/kubernetes and staging modules as the kubernetes family: the kubelet's validation
    # of the shipped version, and the compiled packages both share come from Go's build cache.
    requires, replaces, tools = go_mod("kubelet-config-check")
    control_plane, control_plane_replaces, _ = go_mod("kubernetes")
    assert tools == ["k8s-node-pools/tools/kubelet-config-check"]
    assert requires["k8s.io/kubernetes"] == control_plane["k8s.io/kubernetes"]
    assert replaces == control_plane_replaces
    assert all(control_plane.get(module, version) == version for module, version in requires.items())


def test_the_image_programs_are_the_project_s_own_and_need_no_module():
    # Static binaries with nothing fetched: the sandbox's images hold only what this repository wrote.
    requires, replaces, tools = go_mod("images")
    assert sorted(tools) == ["k8s-node-pools/tools/images/pause", "k8s-node-pools/tools/images/probe"]
    assert not requires and not replaces and not (TOOLS / "images" / "go.sum").read_text()


def test_nvidia_ctk_is_the_toolkit_version_the_role_installs():
    requires, replaces, tools = go_mod("nvidia-container-toolkit")
    role = yaml.safe_load((ROOT / "ansible/roles/container_runtime/defaults/main.yml").read_text())
    assert tools == ["github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk"] and not replaces
    assert requires["github.com/NVIDIA/nvidia-container-toolkit"] == f"v{role['container_runtime_nvidia_toolkit_version']}"


def test_the_pulumi_cli_matches_the_python_sdk_or_is_the_documented_nearest():
    sdk = pinned("pulumi")
    requires, replaces, tools = go_mod("pulumi")
    cli = requires["github.com/pulumi/pulumi/pkg/v3"]
    assert tools == ["github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"]
    assert requires["github.com/pulumi/pulumi/sdk/v3"] == cli
    if cli != f"v{sdk}":
        header = " ".join((TOOLS / "pulumi" / "go.mod").read_text().replace("//", "").split())
        assert f"pulumi {sdk} (constraints.txt)" in header
        assert f"does not serve pkg/v3 v{sdk}; {cli} is the nearest" in header
        assert tuple(map(int, cli[1:].split("."))) >= tuple(map(int, sdk.split(".")))
    assert replaces == {
        "github.com/atotto/clipboard": (
            "github.com/tgummerer/clipboard",
            "v0.0.0-20241001131231-d02d263e614e",
        )
    }


def test_the_python_language_host_is_the_project_s_own_over_the_cli_s_sdk():
    # Pulumi's host module is not served by the proxy: the project's main.go is built instead, over
    # the gRPC types of the very sdk/v3 the CLI is built with.
    requires, replaces, tools = go_mod(HOST)
    cli, _, _ = go_mod("pulumi")
    assert tools == ["k8s-node-pools/tools/pulumi-language-python"] and not replaces
    assert requires["github.com/pulumi/pulumi/sdk/v3"] == cli["github.com/pulumi/pulumi/sdk/v3"]
    assert requires["github.com/pulumi/pulumi/sdk/v3"] == cli["github.com/pulumi/pulumi/pkg/v3"]
    assert not any(m.startswith("github.com/pulumi/pulumi/pkg/") or "/cmd/" in m for m in requires)
    main = (TOOLS / HOST / "main.go").read_text()
    assert re.search(r"^package main$", main, re.M)
    assert "pulumirpc.UnimplementedLanguageRuntimeServer" in main


def test_the_kubernetes_provider_is_a_pinned_commit_whose_release_is_named():
    text = (TOOLS / "pulumi-kubernetes" / "go.mod").read_text()
    requires, _, tools = parse_go_mod(text)
    assert tools == ["github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes"]
    assert PSEUDO.match(requires["github.com/pulumi/pulumi-kubernetes/provider/v4"])
    (release,) = re.findall(r"^// provider-release: v(\d+\.\d+\.\d+)$", text, re.M)
    # The SDK asks the engine for the plugin of its own version: the provider built must be that release.
    assert release == pinned("pulumi-kubernetes")
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"pulumi-kubernetes=={release}"' in pyproject


def test_etcd_is_a_3_6_release():
    requires, replaces, tools = go_mod("etcd")
    assert re.fullmatch(r"v3\.6\.\d+", requires["go.etcd.io/etcd/server/v3"])
    assert tools == ["go.etcd.io/etcd/server/v3"] and not replaces


def test_kwok_is_a_release_with_the_upstream_stages_it_runs():
    requires, replaces, tools = go_mod("kwok")
    assert re.fullmatch(r"v\d+\.\d+\.\d+", requires["sigs.k8s.io/kwok"])
    assert tools == ["sigs.k8s.io/kwok/cmd/kwok"] and not replaces
    stages = [line for line in (TOOLS / "kwok" / "stages.txt").read_text().splitlines()
              if line and not line.startswith("#")]
    # Nodes keep Ready and their lease; pods become Ready, complete, and their deletion finishes.
    names = {Path(stage).stem for stage in stages}
    assert {"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete"} <= names
    assert all(stage.startswith("kustomize/stage/") and stage.endswith(".yaml") for stage in stages)


def test_the_cache_folder_is_keyed_by_each_family_s_go_mod_and_go_sum(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    printed = subprocess.run(
        [str(TOOLS / "build.sh"), "--print-path"], env=env, check=True, capture_output=True, text=True
    ).stdout.split()
    expected = []
    for family in FAMILIES:
        inputs = [TOOLS / family / "go.mod", TOOLS / family / "go.sum"]
        if family == "pulumi":  # the host is built with the CLI: its source is in the key too
            inputs += [TOOLS / HOST / name for name in HOST_FILES]
        if family == "kwok":  # the stages built beside it
            inputs += [TOOLS / "kwok" / "stages.txt", TOOLS / "kwok" / "stages.sed"]
        if family == "kubelet-config-check":  # the project's own program: its source is in the key too
            inputs += [TOOLS / family / "main.go"]
        if family == "images":  # the project's own programs, likewise
            inputs += [TOOLS / family / name / "main.go" for name in ("pause", "probe")]
        digest = hashlib.sha256(b"".join(path.read_bytes() for path in inputs)).hexdigest()[:16]
        expected.append(str(tmp_path / "k8s-node-pools" / "tools" / f"{family}-{digest}" / "bin"))
    assert sorted(printed) == sorted(expected)
    assert not list(tmp_path.iterdir()), "--print-path must build nothing"


# tools/cluster.sh: the local control plane's command lines, read through `cluster.sh flags`, which
# starts nothing and needs no built tool.
CLUSTER_SH = TOOLS / "cluster.sh"
LOOPBACK = "127.0.0.1"


def cluster_flags(**settings: str) -> dict[str, dict[str, str]]:
    env = {**os.environ, "CLUSTER_BIN_DIRS": "/nonexistent"}
    for name in list(env):
        if name.startswith("CLUSTER_") and name != "CLUSTER_BIN_DIRS":
            del env[name]
    env.update(settings)
    lines = subprocess.run(
        [str(CLUSTER_SH), "flags"], env=env, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    components = {}
    for line in lines:
        binary, *args = line.split()
        components[Path(binary).name] = dict(arg[2:].split("=", 1) for arg in args)
    assert list(components) == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    return components


def test_the_control_plane_listens_on_loopback_only():
    flags = cluster_flags()
    # Each kube-* binds 0.0.0.0 unless told otherwise; etcd's defaults are localhost, said explicitly.
    for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert flags[component]["bind-address"] == LOOPBACK, component
    assert flags["kube-apiserver"]["advertise-address"] == LOOPBACK
    assert flags["kwok"]["server-address"].startswith(f"{LOOPBACK}:")  # it binds 0.0.0.0 with --node-port
    etcd = flags["etcd"]
    for name in ("listen-client-urls", "listen-peer-urls", "advertise-client-urls", "initial-advertise-peer-urls"):
        for url in etcd[name].split(","):
            assert re.fullmatch(rf"https?://{re.escape(LOOPBACK)}:\d+", url), (name, url)
    assert "listen-metrics-urls" not in etcd
    assert flags["kube-apiserver"]["etcd-servers"] == etcd["listen-client-urls"]
    # Every URL any component is given points at loopback, except the token issuer (a name, not a socket).
    for component, args in flags.items():
        for name, value in args.items():
            if "://" in value and name != "service-account-issuer":
                assert f"://{LOOPBACK}:" in value, (component, name, value)


def test_the_service_network_is_the_sandbox_inventory_s():
    all_yml = yaml.safe_load((ROOT / "inventories" / "sandbox" / "group_vars" / "all.yml").read_text())
    assert cluster_flags()["kube-apiserver"]["service-cluster-ip-range"] == all_yml["kube_service_addresses"]


def test_the_api_server_admits_and_authorizes_as_a_production_cluster():
    apiserver = cluster_flags()["kube-apiserver"]
    plugins = apiserver["enable-admission-plugins"].split(",")
    required = {"NodeRestriction", "ResourceQuota", "LimitRanger", "PodSecurity", "Priority",
                "NamespaceLifecycle", "ServiceAccount", "DefaultStorageClass", "TaintNodesByCondition",
                "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}
    assert required <= set(plugins) and len(plugins) == len(set(plugins))
    assert "disable-admission-plugins" not in apiserver
    assert apiserver["authorization-mode"] == "Node,RBAC"
    assert "anonymous-auth" not in apiserver and "insecure-port" not in apiserver


def test_service_account_tokens_are_signed_by_the_controller_manager_with_the_api_server_s_key():
    flags = cluster_flags()
    apiserver, kcm = flags["kube-apiserver"], flags["kube-controller-manager"]
    assert kcm["service-account-private-key-file"] == apiserver["service-account-signing-key-file"]
    assert kcm["root-ca-file"] == apiserver["client-ca-file"]
    assert apiserver["service-account-issuer"].startswith("https://")
    # Single instances: no leader election to wait for.
    assert kcm["leader-elect"] == flags["kube-scheduler"]["leader-elect"] == "false"


def test_the_controller_manager_runs_at_the_client_rate_of_upstream_s_scale_tests():
    """20 requests/s (the default) creates a DaemonSet's pods at 20 a second: 50 s of every `up` of 1,000 Nodes."""
    kcm = cluster_flags()["kube-controller-manager"]
    assert (kcm["kube-api-qps"], kcm["kube-api-burst"]) == ("100", "100")
    default = cluster_flags(CLUSTER_KCM_QPS="20", CLUSTER_KCM_BURST="30")["kube-controller-manager"]
    assert (default["kube-api-qps"], default["kube-api-burst"]) == ("20", "30")


def test_kwok_readies_pods_as_many_kubelets_would():
    """kwok's default of 4 pods at a time readied a 1,000-Node DaemonSet at ~36 pods a second."""
    assert cluster_flags()["kwok"]["config"].endswith("/.state/cluster/kwok-config.yaml")  # the last, after the stages


def test_the_scheduler_runs_the_inventory_s_configuration():
    """--config, written by `up` from `python -m infra scheduler` (what the running scheduler then says it runs is
    tests/live/test_scheduler_config.py's); with --config, kube-scheduler ignores --kubeconfig, so none is given."""
    scheduler = cluster_flags()["kube-scheduler"]
    assert scheduler["config"].endswith("/.state/cluster/scheduler-config.yaml")
    assert "kubeconfig" not in scheduler


def test_dev_sh_help_names_the_cluster_command_and_prints_its_whole_header():
    dev = (ROOT / "dev.sh").read_text().splitlines()
    header_end = dev.index("set -euo pipefail")  # 0-based index = the last header line, 1-based
    assert f"sed -n '2,{header_end}p'" in "\n".join(dev)
    assert any("./dev.sh cluster up|down|status|kubeconfig" in line for line in dev[1:header_end])
    assert "exec tools/cluster.sh" in "\n".join(dev)


def test_make_nodes_registers_each_host_as_its_kubelet_would():
    """The Nodes the local control plane gets: every host of the environment, the pool's labels and taints as the
    kubelet registers them, and the allocatable the plan computes (GPU and MIG resources included)."""
    import json
    import subprocess
    import sys

    from infra.cluster.nodes import kubelet_registration
    from infra.model.resolve import resolve
    from infra.spec import load_environment

    result = subprocess.run([sys.executable, "tools/make_nodes.py", "--dry-run", "inventories/sandbox"],
                            capture_output=True, text=True, cwd=ROOT, check=True)
    nodes = {n["metadata"]["name"]: n for n in json.loads(result.stdout)}
    view = resolve(load_environment(ROOT / "inventories" / "sandbox"))
    assert set(nodes) == set(view.hosts)
    for name, node in nodes.items():
        registration = kubelet_registration(view, name)
        assert registration["node_labels"].items() <= node["metadata"]["labels"].items()
        assert node["spec"]["taints"] == registration["register_with_taints"]
    assert nodes["sb-mig-1"]["status"]["allocatable"]["nvidia.com/mig-1g.6gb"] == "2"
    assert nodes["sb-gpu-1"]["status"]["allocatable"]["nvidia.com/gpu.shared"] == "2"
    # The root filesystem every kubelet reports, less the default nodefs.available hard eviction (10%).
    assert nodes["sb-cpu-1"]["status"]["capacity"]["ephemeral-storage"] == str(100 * 2**30)
    assert nodes["sb-cpu-1"]["status"]["allocatable"]["ephemeral-storage"] == str(90 * 2**30)


def test_make_nodes_registers_the_control_plane_hosts_as_fit_counts_them(inventory, write):
    """A control-plane host outside the pools is a Node too, tainted as fit's is: the real scheduler's
    "0/N nodes are available" counts it as fit does."""
    import json
    import subprocess
    import sys

    from inventory_builder import add_control_plane

    from infra.model.resolve import resolve
    from infra.planning.fit import node_objects
    from infra.spec import load_environment

    folder = write(add_control_plane(inventory, {"cp-1": {"zone": "a"}}))
    result = subprocess.run([sys.executable, "tools/make_nodes.py", "--dry-run", str(folder)],
                            capture_output=True, text=True, cwd=ROOT, check=True)
    nodes = {n["metadata"]["name"]: n for n in json.loads(result.stdout)}
    counted = {n["metadata"]["name"]: n for n in node_objects(resolve(load_environment(folder)))}
    assert set(nodes) == set(counted) and "cp-1" in nodes
    assert nodes["cp-1"]["spec"]["taints"] == counted["cp-1"]["spec"]["taints"] == [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    assert nodes["cp-1"]["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
    assert [c["type"] for c in nodes["cp-1"]["status"]["conditions"]] == ["Ready"]


def test_volcano_is_the_newest_buildable_release_below_the_pinned_chart():
    """The chart's own release cannot be built here (tools/volcano/go.mod says why): the family builds the latest
    patch of the minor before it, whose volcano.sh/apis is the published module of that minor, not a local path."""
    from infra.knowledge.versions import versions

    chart = versions()["volcano"].app_version
    requires, replaces, tools = go_mod("volcano")
    built = requires["volcano.sh/volcano"].removeprefix("v")
    assert built.split(".")[:2] == [chart.split(".")[0], str(int(chart.split(".")[1]) - 1)], (built, chart)
    apis, version = replaces["volcano.sh/apis"]
    assert apis == "volcano.sh/apis" and version.startswith(f"v{'.'.join(built.split('.')[:2])}.")
    assert sorted(tools) == ["volcano.sh/volcano/cmd/controller-manager", "volcano.sh/volcano/cmd/scheduler"]
