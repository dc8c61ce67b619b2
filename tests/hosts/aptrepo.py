"""Local, signed apt repositories for the sandbox hosts, which cannot reach the upstream ones. Their signing
keys are made here with gpg, their packages built with dpkg-deb; apt on the host verifies InRelease against
the keyring the role writes, exactly as it would upstream's.

- pkgs.k8s.io channels (flat repositories: `Suites: /`) for the kubelet role's package test. Its packages are
  stand-ins: `kubelet_<version>-1.1_amd64.deb` holds a script that prints the version, not a kubelet (what is
  under test there is the role's repository key, pin and apt path across versions, not the binary).
- The sandbox's repository (`python3 tests/hosts/aptrepo.py sandbox OUT CONTAINERD_DIR KUBELET`, which
  tests/hosts/sandbox.sh up runs), serving REAL binaries built by `tools/build.sh` from their Go modules:
  * containerd, shaped as Docker's download.docker.com/linux/debian (suite bookworm, component stable, the key
    at /gpg): `containerd.io_<version>-1_amd64.deb` holds containerd, containerd-shim-runc-v2 and ctr, a systemd
    unit with upstream's settings and the config.toml Docker's package ships (CRI disabled). Unlike Docker's
    package it does not bundle runc: it depends on Debian's.
  * the kubelet, shaped as pkgs.k8s.io's channel core:/stable:/v<minor>/deb/ (flat, Release.key beside it):
    `kubelet_<version>-1.1_amd64.deb` holds the kubelet and the kubelet.service upstream's packages install.
  * beside them, under images/, the sandbox's container images (tests/hosts/ociimage.py: containerd's sandbox image
    and the probe, from the static programs of tools/images), which the container_runtime role imports.
  It also writes OUT/vars.yml, the role settings that point the sandbox hosts at it: only the repository
  addresses, the key's fingerprint and the images to import differ from production, so the roles' install paths
  run unchanged."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

from ociimage import archive_file, sandbox_images


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
    fingerprint = _fingerprint(key, "--list-keys", f"={uid}")
    return SigningKey(home, fingerprint, key.gpg("--armor", "--export", fingerprint))


def _fingerprint(key: SigningKey, *listing: str) -> str:
    """The first fingerprint gpg lists (LISTING: what to list) in KEY's home."""
    return next(line.split(":")[9] for line in key.gpg("--with-colons", *listing).splitlines()
                if line.startswith("fpr:"))


def build_package(out: Path, name: str, version: str) -> Path:
    """NAME_VERSION_amd64.deb: /usr/bin/NAME, a script printing "NAME VERSION"."""
    script = f"#!/bin/sh\necho '{name} {version} (a stand-in package of tests/hosts/aptrepo.py)'\n"
    return _deb(out, {"Package": name, "Version": version, "Description": f"stand-in {name} for the sandbox's local "
                      "repository"}, {f"usr/bin/{name}": (script.encode(), 0o755)})


def _deb(out: Path, control: dict[str, str], files: dict[str, tuple[bytes, int]],
         scripts: dict[str, str] | None = None, conffiles: tuple[str, ...] = ()) -> Path:
    """A .deb in OUT of CONTROL's fields and FILES (path under / -> content, mode), with maintainer SCRIPTS."""
    fields = {"Architecture": "amd64", "Maintainer": "k8s-node-pools tests", **control}
    with tempfile.TemporaryDirectory() as tree:
        root = Path(tree)
        for path, (content, mode) in files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            target.chmod(mode)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text("".join(f"{key}: {value}\n" for key, value in fields.items()))
        if conffiles:
            (root / "DEBIAN" / "conffiles").write_text("".join(f"/{path}\n" for path in conffiles))
        for name, text in (scripts or {}).items():
            (root / "DEBIAN" / name).write_text(text)
            (root / "DEBIAN" / name).chmod(0o755)
        deb = out / f"{fields['Package']}_{fields['Version']}_amd64.deb"
        done = subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    return deb


def _control(deb: Path) -> str:
    return subprocess.run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True, check=True).stdout


def publish(channel: Path, key: SigningKey, label: str = "kubelet stand-ins") -> None:
    """Index every .deb in CHANNEL (Packages.gz), sign the index (InRelease, Release.gpg) and put
    the key beside it as Release.key, as pkgs.k8s.io does."""
    _sign(channel, _index(channel, sorted(channel.glob("*.deb")), "./"), label, key)
    (channel / "Release.key").write_text(key.armored)


def publish_suite(root: Path, suite: str, component: str, key: SigningKey) -> None:
    """A repository shaped as download.docker.com/linux/debian: every .deb in ROOT/pool/COMPONENT indexed in
    ROOT/dists/SUITE/COMPONENT/binary-amd64, SUITE's Release signed, the key at ROOT/gpg."""
    dists = root / "dists" / suite
    arch = dists / component / "binary-amd64"
    arch.mkdir(parents=True, exist_ok=True)
    debs = sorted((root / "pool" / component).glob("*.deb"))
    index = _index(arch, debs, "", relative_to=root)
    _sign(dists, {f"{component}/binary-amd64/{name}": data for name, data in index.items()}, "containerd.io",
          key, f"Suite: {suite}\nCodename: {suite}\nComponents: {component}\nArchitectures: amd64\n")
    (root / "gpg").write_text(key.armored)


def _index(folder: Path, debs: list[Path], prefix: str, relative_to: Path | None = None) -> dict[str, bytes]:
    """Packages.gz of DEBS in FOLDER (Filename: PREFIX + the name, or the path under RELATIVE_TO); returns both
    indexes' bytes by name: Release names the uncompressed one too (apt wants its hash), but the folder holds
    Packages.gz only: given an uncompressed index on a file: URI, apt links its lists to it instead of copying,
    and would see a new package without `apt-get update`, which no remote repository allows."""
    stanzas = []
    for deb in debs:
        data = deb.read_bytes()
        name = deb.relative_to(relative_to).as_posix() if relative_to else prefix + deb.name
        stanzas.append(f"{_control(deb).rstrip()}\nFilename: {name}\nSize: {len(data)}\n"
                       f"SHA256: {hashlib.sha256(data).hexdigest()}\n")
    packages = "\n".join(stanzas).encode()
    packed = gzip.compress(packages, mtime=0)
    (folder / "Packages.gz").write_bytes(packed)
    return {"Packages": packages, "Packages.gz": packed}


def _sign(folder: Path, indexes: dict[str, bytes], label: str, key: SigningKey, fields: str = "") -> None:
    """FOLDER/Release naming INDEXES (path under FOLDER -> bytes), clear-signed (InRelease) and detached-signed."""
    sums = "".join(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}\n" for name, data in indexes.items())
    release = f"Origin: k8s-node-pools tests\nLabel: {label}\n{fields}Date: {formatdate(usegmt=True)}\nSHA256:\n{sums}"
    (folder / "Release").write_text(release)
    for stale in ("InRelease", "Release.gpg"):
        (folder / stale).unlink(missing_ok=True)
    key.gpg("--local-user", key.fingerprint, "--clearsign", "--output", str(folder / "InRelease"),
            str(folder / "Release"))
    key.gpg("--local-user", key.fingerprint, "--armor", "--detach-sign", "--output", str(folder / "Release.gpg"),
            str(folder / "Release"))


def tarball(folder: Path) -> bytes:
    """FOLDER as a gzip'd tar (its contents at the archive's root), to unpack on a host."""
    return subprocess.run(["tar", "-C", str(folder), "-czf", "-", "."], capture_output=True, check=True,
                          env={**os.environ, "GZIP": "-n"}).stdout


# ---- the sandbox's repository: containerd.io and the kubelet ---------------------------------------------

CONTAINERD_SUITE, CONTAINERD_COMPONENT = "bookworm", "stable"
CONTAINERD_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr")  # what tools/build.sh builds, packaged
IMAGE_PROGRAMS = ("pause", "probe")  # tools/images, what the sandbox's container images run
SERVED = "/srv/k8s-node-pools-apt"  # where sandbox.sh mounts OUT/repo on every container host
KUBERNETES_CHANNELS = "core:/stable:"  # pkgs.k8s.io's folder of channels, under SERVED
# Upstream's containerd.service settings (containerd/containerd, containerd.service), with the binary where
# Debian packages install it, as Docker's containerd.io does.
CONTAINERD_UNIT = """\
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target dbus.service

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
"""
# What Docker's containerd.io package ships as /etc/containerd/config.toml: no version line, the CRI plugin off.
DOCKER_CONFIG = '#   containerd.io stand-in (tests/hosts/aptrepo.py): as Docker\'s package ships it\n\ndisabled_plugins = ["cri"]\n'
POSTINST = """#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl enable containerd.service
  systemctl restart containerd.service
fi
"""
PRERM = """#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop containerd.service || true
fi
"""


def containerd_release(binaries: Path) -> str:
    """The release the built containerd reports ("2.3.7" from `containerd ... v2.3.7 v2.3.7`)."""
    words = subprocess.run([str(binaries / "containerd"), "--version"], capture_output=True, text=True,
                           check=True).stdout.split()
    return words[2].removeprefix("v")


def build_containerd_package(out: Path, binaries: Path) -> Path:
    """containerd.io_<release>-1_amd64.deb of the containerd, shim and ctr in BINARIES."""
    release = containerd_release(binaries)
    files = {f"usr/bin/{name}": ((binaries / name).read_bytes(), 0o755)
             for name in CONTAINERD_BINARIES}
    files["lib/systemd/system/containerd.service"] = (CONTAINERD_UNIT.encode(), 0o644)
    files["etc/containerd/config.toml"] = (DOCKER_CONFIG.encode(), 0o644)
    control = {"Package": "containerd.io", "Version": f"{release}-1", "Depends": "runc (>= 1.1)",
               "Provides": "containerd", "Conflicts": "containerd", "Replaces": "containerd",
               "Description": "containerd built from its Go module for the sandbox (tests/hosts/aptrepo.py)"}
    return _deb(out, control, files, {"postinst": POSTINST, "prerm": PRERM}, ("etc/containerd/config.toml",))


# upstream's kubelet.service (kubernetes/release, the packages' kubelet.service): the role's drop-ins add the rest
KUBELET_UNIT = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""
# what the kubelet runs at run time (the packages' Depends: iptables, iproute2, mount, ethtool, conntrack)
KUBELET_DEPENDS = "iptables (>= 1.4.21), iproute2, mount, ethtool, conntrack"


def kubelet_release(kubelet: Path) -> str:
    """The release the built kubelet reports ("1.34.2" from `Kubernetes v1.34.2`)."""
    words = subprocess.run([str(kubelet), "--version"], capture_output=True, text=True, check=True).stdout.split()
    return words[1].removeprefix("v")


def build_kubelet_package(out: Path, kubelet: Path) -> Path:
    """kubelet_<release>-1.1_amd64.deb, as pkgs.k8s.io names and versions it, of the built KUBELET."""
    files = {"usr/bin/kubelet": (kubelet.read_bytes(), 0o755),
             "usr/lib/systemd/system/kubelet.service": (KUBELET_UNIT.encode(), 0o644)}
    control = {"Package": "kubelet", "Version": f"{kubelet_release(kubelet)}-1.1", "Depends": KUBELET_DEPENDS,
               "Description": "the kubelet built from k8s.io/kubernetes for the sandbox (tests/hosts/aptrepo.py)"}
    return _deb(out, control, files)


def sandbox_repository(out: Path, binaries: Path, kubelet: Path, programs: Path) -> bool:
    """OUT/repo: the signed repository serving containerd.io from BINARIES and the kubelet KUBELET, the image archives
    of the static PROGRAMS (tools/images) under images/, and OUT/vars.yml, the role settings for the sandbox hosts
    (it is mounted at SERVED). The key (OUT/signing-key.asc) is kept across rebuilds; nothing is rebuilt while the
    binaries and these files are unchanged. True when it was (re)built."""
    digest = hashlib.sha256(Path(__file__).read_bytes() + (Path(__file__).parent / "ociimage.py").read_bytes())
    for path in (*(binaries / name for name in CONTAINERD_BINARIES), kubelet,
                 *(programs / name for name in IMAGE_PROGRAMS)):
        digest.update(path.read_bytes())
    stamp, vars_file = out / "repo.sha256", out / "vars.yml"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest() and vars_file.is_file():
        return False
    out.mkdir(parents=True, exist_ok=True)
    # gpg's agent listens on a socket in its home, whose path may not pass ~100 characters: the key is kept as a
    # file in OUT and imported into a short-lived home for each build.
    with tempfile.TemporaryDirectory(prefix="k8snp-gpg-") as home:
        key = _signing_key(Path(home) / "g", out / "signing-key.asc")
        try:
            _build_repository(out / "repo", binaries, kubelet, key)
        finally:
            subprocess.run(["gpgconf", "--homedir", str(key.home), "--kill", "gpg-agent"], check=False)
    images = []
    (out / "repo" / "images").mkdir(mode=0o755)
    for image in sandbox_images(programs, binaries / "containerd"):
        archive = out / "repo" / "images" / archive_file(image)
        archive.write_bytes(image.archive)
        archive.chmod(0o644)
        given = {"name": image.name, "archive": f"{SERVED}/images/{archive.name}", "digest": image.digest}
        images.append(f"  - {json.dumps(given)}\n")
    vars_file.write_text(
        "# Written by tests/hosts/aptrepo.py: the sandbox's repository of containerd.io and the kubelet (mounted by\n"
        "# sandbox.sh up).\n"
        f"container_runtime_containerd_repo_url: file://{SERVED}\n"
        f"container_runtime_containerd_repo_key_fingerprints: [\"{key.fingerprint}\"]\n"
        "kubelet_package_install: true\n"
        f"kubelet_repository_base_url: \"file://{SERVED}/{KUBERNETES_CHANNELS}\"\n"
        f"kubelet_repository_key_fingerprints: [\"{key.fingerprint}\"]\n"
        "# The hosts reach no registry: containerd's sandbox image and the probe come as archives (tests/hosts/ociimage.py).\n"
        "container_runtime_images:\n" + "".join(images))
    stamp.write_text(digest.hexdigest())
    return True


def _signing_key(home: Path, kept: Path) -> SigningKey:
    """The repository's key in HOME: the one KEPT (an armored secret key), or a new one, then kept there."""
    if not kept.is_file():
        key = make_key(home, "k8s-node-pools sandbox containerd.io repository")
        kept.write_text(key.gpg("--armor", "--export-secret-keys", key.fingerprint))
        kept.chmod(0o600)
        return key
    home.mkdir(mode=0o700)
    importer = SigningKey(home, "", "")
    importer.gpg("--import", str(kept))
    fingerprint = _fingerprint(importer, "--list-secret-keys")
    return SigningKey(home, fingerprint, importer.gpg("--armor", "--export", fingerprint))


def _build_repository(repo: Path, binaries: Path, kubelet: Path, key: SigningKey) -> None:
    pool = repo / "pool" / CONTAINERD_COMPONENT
    # The folder itself stays (sandbox.sh mounts it into running hosts); what it held is replaced.
    repo.mkdir(parents=True, exist_ok=True)
    for stale in repo.iterdir():
        subprocess.run(["rm", "-rf", str(stale)], check=True)
    pool.mkdir(parents=True)
    build_containerd_package(pool, binaries)
    publish_suite(repo, CONTAINERD_SUITE, CONTAINERD_COMPONENT, key)
    minor = ".".join(kubelet_release(kubelet).split(".")[:2])
    channel = repo / KUBERNETES_CHANNELS / f"v{minor}" / "deb"
    channel.mkdir(parents=True)
    build_kubelet_package(channel, kubelet)
    publish(channel, key, "kubelet")
    for path in [repo, *repo.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # apt reads as _apt


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="tests/hosts/aptrepo.py", description=(
        "Build the sandbox's apt repository of containerd.io and the kubelet (OUT/repo, signed), its container "
        "images (OUT/repo/images) and the role settings pointing the sandbox hosts at them (OUT/vars.yml) from "
        "binaries built by tools/build.sh."))
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("sandbox", help="build or refresh the sandbox's repository")
    build.add_argument("out", type=Path, help="the folder to write (kept across runs: its key stays)")
    build.add_argument("binaries", type=Path, help="the folder holding containerd, containerd-shim-runc-v2 and ctr")
    build.add_argument("kubelet", type=Path, help="the kubelet binary")
    build.add_argument("programs", type=Path, help="the folder holding the images' programs (pause, probe)")
    args = parser.parse_args(argv)
    missing = [str(path) for path in (*(args.binaries / name for name in CONTAINERD_BINARIES), args.kubelet,
                                      *(args.programs / name for name in IMAGE_PROGRAMS)) if not path.is_file()]
    if missing:
        parser.error(f"missing {', '.join(missing)}: run ./dev.sh tools (tools/build.sh builds them)")
    built = sandbox_repository(args.out, args.binaries, args.kubelet, args.programs)
    print(f"containerd.io {containerd_release(args.binaries)}, kubelet {kubelet_release(args.kubelet)} and images in "
          f"{args.out / 'repo'}: {'built' if built else 'up to date'}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
