"""The sandbox's image archives (tests/hosts/ociimage.py), read back as an OCI layout: the same inputs give the same
bytes, every blob is named by its own digest, the index names the image as containerd imports it and points at the
manifest whose digest the role pins. containerd's own reading of them (import, the CRI's pin of its sandbox image,
`ctr images check`) is in test_container_runtime.py, on the hosts."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from typing import Any

import pytest
from ociimage import archive_file, image_archive

PROGRAM = b"\x7fELF a static program"


def members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {info.name: info for info in tar.getmembers()}


def read(archive: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read()


def blob(archive: bytes, digest: str) -> bytes:
    return read(archive, "blobs/sha256/" + digest.removeprefix("sha256:"))


def document(archive: bytes, digest: str) -> Any:
    return json.loads(blob(archive, digest))


def test_the_archive_is_an_oci_layout_naming_the_image_as_containerd_imports_it() -> None:
    image = image_archive("registry.k8s.io/pause:3.10.2", {"pause": (PROGRAM, 0o755)}, ["/pause"])
    assert json.loads(read(image.archive, "oci-layout")) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(read(image.archive, "index.json"))["manifests"]
    assert entry["annotations"] == {"io.containerd.image.name": "registry.k8s.io/pause:3.10.2",
                                    "org.opencontainers.image.ref.name": "3.10.2"}
    assert entry["digest"] == image.digest and entry["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest = document(image.archive, image.digest)
    config = document(image.archive, manifest["config"]["digest"])
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar"
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]  # uncompressed: the layer is its own diff
    assert config["config"]["Entrypoint"] == ["/pause"] and config["config"]["User"] == "65535:65535"
    (program,) = members(blob(image.archive, layer["digest"])).values()
    assert (program.name, program.mode, program.uid, program.mtime) == ("pause", 0o755, 0, 0)


def test_every_blob_is_named_by_its_digest_and_sized_as_referenced() -> None:
    image = image_archive("k8s-node-pools.invalid/probe:1", {"probe": (PROGRAM, 0o755)}, ["/probe"])
    blobs = [name for name in members(image.archive) if name.startswith("blobs/")]
    assert len(blobs) == 3
    for name in blobs:
        assert hashlib.sha256(read(image.archive, name)).hexdigest() == name.rsplit("/", 1)[1]
    manifest = document(image.archive, image.digest)
    for descriptor in (manifest["config"], *manifest["layers"]):
        assert len(blob(image.archive, descriptor["digest"])) == descriptor["size"]


def test_the_same_inputs_give_the_same_bytes_and_another_program_another_digest() -> None:
    first = image_archive("k8s-node-pools.invalid/probe:1", {"probe": (PROGRAM, 0o755)}, ["/probe"])
    again = image_archive("k8s-node-pools.invalid/probe:1", {"probe": (PROGRAM, 0o755)}, ["/probe"])
    other = image_archive("k8s-node-pools.invalid/probe:1", {"probe": (PROGRAM + b"!", 0o755)}, ["/probe"])
    assert first == again
    assert other.digest != first.digest


@pytest.mark.parametrize(("name", "files", "message"), [
    ("registry.k8s.io/pause", {"pause": (PROGRAM, 0o755)}, "needs a tag"),
    ("localhost:5000/pause", {"pause": (PROGRAM, 0o755)}, "needs a tag"),  # a registry's port is no tag
    ("registry.k8s.io/pause:1", {"/pause": (PROGRAM, 0o755)}, "relative to the image's root"),
    ("registry.k8s.io/pause:1", {"../pause": (PROGRAM, 0o755)}, "relative to the image's root"),
])
def test_a_name_without_a_tag_or_a_path_outside_the_image_is_refused(name: str, files: dict[str, tuple[bytes, int]],
                                                                      message: str) -> None:
    with pytest.raises(ValueError, match=message):
        image_archive(name, files, ["/pause"])


def test_archives_are_served_under_file_names_without_slashes_or_colons() -> None:
    image = image_archive("registry.k8s.io/pause:3.10.2", {"pause": (PROGRAM, 0o755)}, ["/pause"])
    assert archive_file(image) == "registry.k8s.io_pause_3.10.2.tar"
