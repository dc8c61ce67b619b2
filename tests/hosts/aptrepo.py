"""A local, signed apt repository in the shape of one pkgs.k8s.io channel (a flat repository: `Suites: /`),
for the sandbox hosts, which cannot reach the Kubernetes project's. Its signing key is made here with gpg;
its packages are built with dpkg-deb; apt on the host verifies its InRelease against the keyring the role
writes, exactly as it would pkgs.k8s.io's.

The packages are stand-ins: `kubelet_<version>-1.1_amd64.deb` holds a script that prints the version, not
a kubelet (what is under test is the role's repository key, pin and apt path, not the binary)."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path


@dataclass(frozen=True)
class SigningKey:
    home: Path  # the GNUPGHOME holding the secret key
    fingerprint: str
    armored: str

    def gpg(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(self.home), *args], input=stdin,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout


def make_key(home: Path, name: str = "k8s-node-pools test repository", algorithm: str = "ed25519",
             usage: str = "sign") -> SigningKey:
    """A new key (no passphrase) in HOME, beside any already there, with gpg's own view of its fingerprint."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    uid = f"{name} <test@k8s-node-pools.invalid>"
    key = SigningKey(home, "", "")
    key.gpg("--passphrase", "", "--quick-gen-key", uid, algorithm, usage, "never")
    fingerprint = next(line.split(":")[9] for line in key.gpg("--with-colons", "--list-keys", f"={uid}").splitlines()
                       if line.startswith("fpr:"))
    return SigningKey(home, fingerprint, key.gpg("--armor", "--export", fingerprint))


def build_package(out: Path, name: str, version: str) -> Path:
    """NAME_VERSION_amd64.deb: /usr/bin/NAME, a script printing "NAME VERSION"."""
    with tempfile.TemporaryDirectory() as tree:
        root = Path(tree)
        binary = root / "usr" / "bin" / name
        binary.parent.mkdir(parents=True)
        binary.write_text(f"#!/bin/sh\necho '{name} {version} (a stand-in package of tests/hosts/aptrepo.py)'\n")
        binary.chmod(0o755)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: k8s-node-pools tests\n"
            f"Description: stand-in {name} for the sandbox's local repository\n")
        deb = out / f"{name}_{version}_amd64.deb"
        done = subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    return deb


def _control(deb: Path) -> str:
    return subprocess.run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True, check=True).stdout


def publish(channel: Path, key: SigningKey) -> None:
    """Index every .deb in CHANNEL (Packages.gz), sign the index (InRelease, Release.gpg) and put
    the key beside it as Release.key, as pkgs.k8s.io does."""
    stanzas = []
    for deb in sorted(channel.glob("*.deb")):
        data = deb.read_bytes()
        stanzas.append(f"{_control(deb).rstrip()}\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"SHA256: {hashlib.sha256(data).hexdigest()}\n")
    # Release names both indexes (apt wants the uncompressed one's hash), the folder holds Packages.gz only: given
    # an uncompressed index on a file: URI, apt links its lists to it instead of copying, and would see a new
    # package without `apt-get update`, which no remote repository allows.
    packages = "\n".join(stanzas).encode()
    packed = gzip.compress(packages, mtime=0)
    (channel / "Packages.gz").write_bytes(packed)
    sums = "".join(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}\n"
                   for name, data in (("Packages", packages), ("Packages.gz", packed)))
    release = f"Origin: k8s-node-pools tests\nLabel: kubelet stand-ins\nDate: {formatdate(usegmt=True)}\nSHA256:\n{sums}"
    (channel / "Release").write_text(release)
    for stale in ("InRelease", "Release.gpg"):
        (channel / stale).unlink(missing_ok=True)
    key.gpg("--local-user", key.fingerprint, "--clearsign", "--output", str(channel / "InRelease"),
            str(channel / "Release"))
    key.gpg("--local-user", key.fingerprint, "--armor", "--detach-sign", "--output", str(channel / "Release.gpg"),
            str(channel / "Release"))
    (channel / "Release.key").write_text(key.armored)


def tarball(folder: Path) -> bytes:
    """FOLDER as a gzip'd tar (its contents at the archive's root), to unpack on a host."""
    return subprocess.run(["tar", "-C", str(folder), "-czf", "-", "."], capture_output=True, check=True,
                          env={**os.environ, "GZIP": "-n"}).stdout
