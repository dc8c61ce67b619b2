"""The kubelet role's real install path on a sandbox host, against a local pkgs.k8s.io-shaped channel signed by
a key this test makes (tests/hosts/aptrepo.py; the packages are stand-ins, apt and the role are real): a
channel key without the pinned fingerprint is refused before apt reads it, the pinned one is written and apt
verifies the channel with it, and a patch bump, which leaves the channel's sources file as it was, still
refreshes apt's cache and installs the new patch."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aptrepo import SigningKey, build_package, make_key, publish, tarball
from conftest import PlaybookRun, run_playbook

from infra.hosts.hostvars import environment_host_vars
from infra.spec import load_environment

ROOT = Path(__file__).resolve().parents[2]
NAME = "sb-cpu-1"
NEW = environment_host_vars(load_environment(ROOT / "inventories" / "sandbox"))["hosts"][NAME]["kube_version"]
MINOR, PATCH = NEW.rsplit(".", 1)
OLD = f"{MINOR}.{int(PATCH) - 1}"
SERVED = "/srv/k8s-apt"  # on the host: file:// is apt's and get_url's own scheme, nothing listens
BASE = f"file://{SERVED}/core:/stable:"
KEYRING = "/etc/apt/keyrings/kubernetes-apt-keyring.asc"
STAGED = "/var/lib/k8s-node-pools/apt-keys/kubernetes.asc"
ROLE_FILES = ["/etc/apt/sources.list.d/kubernetes.sources", "/etc/apt/preferences.d/k8s-node-pools-kubelet.pref"]
PUBLISHED_FINGERPRINT = "DE15B14486CD377B9E876E1A234654DA9A296436"  # the role's default pin: pkgs.k8s.io's key


def install(version: str, pins: list[str] | None = None) -> PlaybookRun:
    extra: dict[str, Any] = {"kubelet_package_install": True, "kubelet_repository_base_url": BASE,
                             "kubelet_version": version}
    if pins is not None:
        extra["kubelet_repository_key_fingerprints"] = pins
    return run_playbook("site.yml", "--limit", NAME, "--tags", "kubelet_install", "-e", json.dumps(extra))


def installed(h: Any) -> str:
    return str(h.run("dpkg-query --show --showformat='${Version}' kubelet").stdout)


class Channel:
    """The v<minor> channel, built here and copied to the host whole after every change."""

    def __init__(self, folder: Path, key: SigningKey, h: Any) -> None:
        self.folder, self.key, self.host = folder / f"v{MINOR}" / "deb", key, h
        self.folder.mkdir(parents=True)

    def add(self, version: str) -> None:
        build_package(self.folder, "kubelet", f"{version}-1.1")
        self.publish(self.key)

    def publish(self, signer: SigningKey) -> None:
        publish(self.folder, signer)
        packed = base64.b64encode(tarball(self.folder.parent.parent)).decode()
        self.host.check_output(f"rm -rf {SERVED} && mkdir -p '{SERVED}/core:/stable:' && echo {packed} | base64 -d"
                               f" | tar -xzf - -C '{SERVED}/core:/stable:' && chmod -R a+rX {SERVED}")  # apt reads as _apt


@pytest.fixture(scope="module")
def channel(converged: PlaybookRun, host: Callable[[str], Any],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Channel]:
    """The channel with OLD only, on a host without the kubelet package; afterwards the package, the keyring and
    the channel are removed and the role's files and package are back as site.yml left them (the kubelet from the
    sandbox's own channel, tests/hosts/aptrepo.py)."""
    h = host(NAME)
    before = h.check_output(f"md5sum {' '.join(ROLE_FILES)}")
    h.check_output("dpkg --purge kubelet")
    made = Channel(tmp_path_factory.mktemp("channel"), make_key(tmp_path_factory.mktemp("gnupg")), h)
    made.add(OLD)
    try:
        yield made
    finally:
        h.run(f"dpkg --purge kubelet; rm -rf {SERVED} {KEYRING} {STAGED}")  # other keys staged there stay
        restored = run_playbook("site.yml", "--limit", NAME, "--tags", "kubelet_install")
        assert restored.rc == 0, restored.tail()
        h.check_output("apt-get update -qq")  # apt's lists without the local channel again
        assert h.check_output(f"md5sum {' '.join(ROLE_FILES)}") == before


def test_a_channel_key_without_the_pinned_fingerprint_is_refused(channel: Channel, host: Callable[[str], Any]) -> None:
    h = host(NAME)
    sources = h.check_output(f"md5sum {ROLE_FILES[0]} {KEYRING}")  # the sandbox channel's, from site.yml
    run = install(OLD, [PUBLISHED_FINGERPRINT])  # the role's default pin: pkgs.k8s.io's key, which did not sign it
    assert run.rc != 0
    assert (f"{NAME}: the kubernetes repository key from {BASE}/v{MINOR}/deb/Release.key has fingerprint "
            f"{channel.key.fingerprint}, which is none of the pinned {PUBLISHED_FINGERPRINT}") in run.output
    assert h.check_output(f"md5sum {ROLE_FILES[0]} {KEYRING}") == sources  # the refused key was not written
    assert installed(h) == ""


def test_the_pinned_key_is_written_and_apt_installs_from_the_channel(channel: Channel,
                                                                      host: Callable[[str], Any]) -> None:
    h = host(NAME)
    run = install(OLD, [channel.key.fingerprint])
    assert run.rc == 0, run.tail()
    assert installed(h) == f"{OLD}-1.1"
    # apt's own view: the channel's index was verified with the written keyring and is where kubelet comes from
    policy = h.check_output("apt-cache policy kubelet")
    assert f"500 file:{SERVED}/core:/stable:/v{MINOR}/deb  Packages" in policy, policy  # apt writes file:/
    assert h.file(KEYRING).content_string == channel.key.armored
    assert h.check_output("kubelet").startswith(f"kubelet {OLD}-1.1")
    again = install(OLD, [channel.key.fingerprint])
    assert again.rc == 0 and again.changed() == {}, again.tail()


def test_a_patch_bump_refreshes_apt_s_cache(channel: Channel, host: Callable[[str], Any]) -> None:
    h = host(NAME)
    assert installed(h) == f"{OLD}-1.1"
    channel.add(NEW)
    assert f"{NEW}-1.1" not in h.check_output("apt-cache policy kubelet")  # published, not yet in apt's lists
    run = install(NEW, [channel.key.fingerprint])
    assert run.rc == 0, run.tail()
    assert installed(h) == f"{NEW}-1.1"
    changed = run.changed_tasks()[NAME]
    assert len(changed) == 2 and "Pin the kubelet package" in changed[0], changed  # the pin, then the install
    assert "Install the pinned kubelet package" in changed[1], changed


def test_a_channel_signed_by_another_key_is_refused_by_apt(channel: Channel, host: Callable[[str], Any],
                                                          tmp_path: Path) -> None:
    """The twin of the passing install: apt checks the channel's index against the keyring the role wrote."""
    h = host(NAME)
    assert h.run("apt-get update -qq").rc == 0
    impostor = make_key(tmp_path / "gnupg", "impostor")
    channel.publish(impostor)  # the same packages, signed by a key nobody pinned
    update = h.run("apt-get update -qq")
    assert f"NO_PUBKEY {impostor.fingerprint[-16:]}" in update.stderr, update.stderr
    assert "The repository is not updated" in update.stderr, update.stderr
