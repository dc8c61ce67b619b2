"""Container images for the sandbox hosts, which reach no registry: OCI image layouts packed as tar archives that
`ctr -n k8s.io images import` takes, each naming its image with the annotation containerd reads
(`io.containerd.image.name`), so the hosts hold them under the names production pulls and containerd's
configuration stays the production one.

- `image_archive(...)`: the archive of one single-layer image, written by a pure function: the same inputs give
  the same bytes (no time stamps, owners or compression), so the manifest digest the role pins is known before
  any host sees the archive.
- The sandbox's images (`sandbox_images`) hold the static programs of tools/images (built by tools/build.sh):
  containerd's own sandbox image (the name `containerd config default` of the built containerd gives) runs the
  project's `pause`; `PROBE` runs `probe`, the sandbox's workload."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"
INDEX = "application/vnd.oci.image.index.v1+json"
NAME_ANNOTATION = "io.containerd.image.name"  # what containerd names an imported image by
REF_ANNOTATION = "org.opencontainers.image.ref.name"  # the OCI layout's own (its tag)
# The sandbox's workload image: no registry serves it, so it carries a name that cannot be pulled either.
PROBE = "k8s-node-pools.invalid/probe"
# The user upstream's pause image runs as; the probe runs as it too (it needs no privilege).
NOBODY = "65535:65535"


@dataclass(frozen=True)
class Image:
    """An image archive: the name it is imported under, its manifest's digest (what containerd lists) and bytes."""

    name: str
    digest: str
    archive: bytes


def _digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _json(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _tar(members: dict[str, tuple[bytes, int]]) -> bytes:
    """A tar of MEMBERS (path -> content, mode), in path order, owned by root, dated 1970: the same bytes each time."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, (content, mode) in sorted(members.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, 0
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def image_archive(name: str, files: dict[str, tuple[bytes, int]], entrypoint: list[str], user: str = NOBODY) -> Image:
    """The OCI archive of image NAME ("registry/repository:tag"): one uncompressed layer of FILES (path in the
    image -> content, mode), linux/amd64, running ENTRYPOINT as USER."""
    repository, _, tag = name.rpartition(":")
    if not repository or "/" in tag or not tag:
        raise ValueError(f"image name {name!r} needs a tag (registry/repository:tag)")
    if any(path.startswith("/") or ".." in path.split("/") for path in files):
        raise ValueError(f"image {name}: file paths are relative to the image's root, got {sorted(files)}")
    layer = _tar(files)
    config = _json({"architecture": "amd64", "os": "linux",
                    "config": {"Entrypoint": entrypoint, "User": user, "WorkingDir": "/",
                               "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
                    "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]}})
    manifest = _json({"schemaVersion": 2, "mediaType": MANIFEST,
                      "config": {"mediaType": CONFIG, "digest": _digest(config), "size": len(config)},
                      "layers": [{"mediaType": LAYER, "digest": _digest(layer), "size": len(layer)}]})
    index = _json({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
        {"mediaType": MANIFEST, "digest": _digest(manifest), "size": len(manifest),
         "platform": {"architecture": "amd64", "os": "linux"},
         "annotations": {NAME_ANNOTATION: name, REF_ANNOTATION: tag}}]})
    members = {"oci-layout": (_json({"imageLayoutVersion": "1.0.0"}), 0o644), "index.json": (index, 0o644)}
    for blob in (layer, config, manifest):
        members[f"blobs/sha256/{_digest(blob).removeprefix('sha256:')}"] = (blob, 0o644)
    return Image(name, _digest(manifest), _tar(members))


def sandbox_image_name(containerd: Path) -> str:
    """The sandbox (pause) image the built CONTAINERD is configured with by default (`containerd config default`)."""
    default = tomllib.loads(subprocess.run([str(containerd), "config", "default"], capture_output=True, text=True,
                                           check=True).stdout)
    name: str = default["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"]
    return name


def sandbox_images(programs: Path, containerd: Path) -> list[Image]:
    """The sandbox's images from the static programs in PROGRAMS (tools/images): containerd's sandbox image and
    the probe, tagged with the first 12 hex digits of its program's digest (a new build, a new tag)."""
    pause, probe = (programs / "pause").read_bytes(), (programs / "probe").read_bytes()
    return [image_archive(sandbox_image_name(containerd), {"pause": (pause, 0o755)}, ["/pause"]),
            image_archive(f"{PROBE}:{hashlib.sha256(probe).hexdigest()[:12]}", {"probe": (probe, 0o755)}, ["/probe"])]


def archive_file(image: Image) -> str:
    """The file name an image's archive is served under ("registry.k8s.io_pause_3.10.2.tar")."""
    return image.name.replace("/", "_").replace(":", "_") + ".tar"
