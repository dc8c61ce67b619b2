"""Filters that read containerd's config.toml and write the node's CRI drop-in for it, in the configuration
version the installed containerd writes itself (`containerd config default`), so it never migrates the file.

- Version 2 (containerd 1.6, 1.7): containerd 1.6 merges an imported file into config.toml one plugin at a time:
  the drop-in's `plugins."io.containerd.grpc.v1.cri"` table replaces config.toml's whole CRI table (measured:
  Debian's `cni.bin_dir = "/usr/lib/cni"` fell back to /opt/cni/bin when a drop-in named only the runtime).
  So the drop-in carries config.toml's CRI settings with what every node needs set over them.
- Version 3 and 4 (containerd 2.x): the CRI runtime settings are the plugin `io.containerd.cri.v1.runtime`,
  and an import merges key by key (measured with containerd 2.3.7's `config dump`: config.toml's cni.conf_dir
  and enable_selinux stayed beside the drop-in's cni.bin_dirs), so the drop-in holds only what the role sets.

What every node needs: the CNI plugin folder, runc's cgroup driver and, on GPU hosts, NVIDIA's runtime. The role
rewrites the drop-in whenever config.toml changes; config.toml itself is only touched to import the drop-in
folder and to take the CRI plugin out of `disabled_plugins` (Docker's containerd.io package ships it disabled).
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from typing import Any

from ansible.errors import AnsibleFilterError

CRI = "io.containerd.grpc.v1.cri"  # version 2's CRI table, and the CRI service's plugin id in every version
CRI_RUNTIME = "io.containerd.cri.v1.runtime"  # version 3 and later
CRI_IMAGES = "io.containerd.cri.v1.images"  # version 3 and later: the image service (sandbox image, snapshotter)
CRI_NAMES = ("cri", CRI)  # how disabled_plugins may name it
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _parse(text: str, path: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise AnsibleFilterError(f"{path} is not valid TOML ({error}); fix it before the role adds to it") from error


def containerd_imports(text: str, path: str = "config.toml") -> list[str] | None:
    """config.toml's `imports` list, or None when it has none."""
    imports = _parse(text, path).get("imports")
    if imports is None:
        return None
    if not isinstance(imports, list):
        raise AnsibleFilterError(f"{path}: imports must be a list of paths, got {imports!r}")
    return [str(item) for item in imports]


def containerd_config_version(default: str, what: str = "containerd config default") -> int:
    """The configuration version the installed containerd writes (DEFAULT: `containerd config default`)."""
    version = _parse(default, what).get("version")
    if not isinstance(version, int) or version < 2:
        raise AnsibleFilterError(f"{what} gives version {version!r}; the role writes configuration versions 2 to 4 "
                                 "(containerd 1.6 to 2.x)")
    return version


def containerd_cri_dropin(text: str, cni_bin_dir: str, cgroup_driver: str, nvidia_binary: str = "",
                          nvidia_default: bool = False, path: str = "config.toml", version: int = 2) -> str:
    """The drop-in, in configuration VERSION: CNI_BIN_DIR as the plugin folder and runc on CGROUP_DRIVER (systemd
    or cgroupfs, the kubelet's cgroupDriver), plus, when NVIDIA_BINARY is given, the runtime `nvidia` (runc v2
    shim running it, on the same cgroup driver), optionally as the default. In version 2 over config.toml's CRI
    table (runc kept), which it replaces; from version 3 on alone, as containerd merges it key by key."""
    if cgroup_driver not in ("systemd", "cgroupfs"):
        raise AnsibleFilterError(f"cgroup driver {cgroup_driver!r}: the kubelet and runc know systemd and cgroupfs")
    if version not in (2, 3, 4):
        raise AnsibleFilterError(f"configuration version {version}: the role writes versions 2 to 4")
    config = _parse(text, path)
    if version == 2:
        cri = copy.deepcopy(config.get("plugins", {}).get(CRI, {}))
        cri.setdefault("cni", {})["bin_dir"] = cni_bin_dir
    else:
        cri = {"cni": {"bin_dirs": [cni_bin_dir]}}
    containerd = cri.setdefault("containerd", {})
    runtimes = containerd.setdefault("runtimes", {})
    # containerd's built-in runc entry lives in the default CRI table that a version 2 drop-in replaces: keep it
    # (measured: without it `containerd config dump` lists the nvidia runtime alone).
    runc = runtimes.setdefault("runc", {"runtime_type": "io.containerd.runc.v2"})
    systemd = cgroup_driver == "systemd"
    runc.setdefault("options", {})["SystemdCgroup"] = systemd
    if nvidia_binary:
        runtimes["nvidia"] = {"runtime_type": "io.containerd.runc.v2",
                              "options": {"BinaryName": nvidia_binary, "SystemdCgroup": systemd}}
        if nvidia_default:
            containerd["default_runtime_name"] = "nvidia"
    body = _tables(["plugins", CRI if version == 2 else CRI_RUNTIME], cri)
    return f"version = {version}\n" + body


def containerd_enabled_cri(text: str, path: str = "config.toml") -> list[str] | None:
    """config.toml's disabled_plugins without the CRI plugin, or None when it does not disable it."""
    disabled = _parse(text, path).get("disabled_plugins", [])
    if not isinstance(disabled, list):
        raise AnsibleFilterError(f"{path}: disabled_plugins must be a list of plugin names, got {disabled!r}")
    kept = [str(name) for name in disabled if name not in CRI_NAMES]
    return None if len(kept) == len(disabled) else kept


def containerd_cri_settings(dump: str, path: str = "containerd config dump") -> dict[str, Any]:
    """What containerd runs with, read from DUMP (`containerd config dump`, its merged view): the CNI plugin
    folder(s), the default runtime and that runtime's cgroup driver (systemd when its options set
    SystemdCgroup = true, else cgroupfs, runc's own default), whether the CRI plugin is disabled, and the sandbox
    (pause) image every pod's sandbox runs."""
    config = _parse(dump, path)
    plugins = config.get("plugins", {})
    if config.get("version", 1) >= 3:
        cri = plugins.get(CRI_RUNTIME, {})
        cni_bin_dir = ":".join(cri.get("cni", {}).get("bin_dirs", [])) or cri.get("cni", {}).get("bin_dir", "")
        sandbox_image = plugins.get(CRI_IMAGES, {}).get("pinned_images", {}).get("sandbox", "")
    else:
        cri = plugins.get(CRI, {})
        cni_bin_dir = cri.get("cni", {}).get("bin_dir", "")
        sandbox_image = cri.get("sandbox_image", "")
    containerd = cri.get("containerd", {})
    name = containerd.get("default_runtime_name", "runc")
    options = containerd.get("runtimes", {}).get(name, {}).get("options", {})
    return {"cni_bin_dir": cni_bin_dir, "default_runtime": name,
            "cgroup_driver": "systemd" if options.get("SystemdCgroup") is True else "cgroupfs",
            "cri_disabled": any(name in CRI_NAMES for name in config.get("disabled_plugins", [])),
            "sandbox_image": sandbox_image}


def containerd_image_digests(listing: str) -> dict[str, str]:
    """Image name -> manifest digest, from LISTING (`ctr images ls`: a header, then REF TYPE DIGEST ... per image).
    The CRI's own references by image id (`sha256:...`) are left out: they name no image a pod asks for."""
    rows = [line.split() for line in listing.splitlines()[1:] if line.strip()]
    return {row[0]: row[2] for row in rows if len(row) >= 3 and not row[0].startswith("sha256:")}


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise AnsibleFilterError(f"cannot write {value!r} ({type(value).__name__}) as TOML")


def _tables(path: list[str], table: dict[str, Any]) -> str:
    """TOML for TABLE at PATH: its scalar keys under one header, then each sub-table, sorted for a stable file."""
    scalars = {k: v for k, v in sorted(table.items()) if not isinstance(v, dict)}
    out = "\n[" + ".".join(_key(part) for part in path) + "]\n"
    out += "".join(f"{_key(k)} = {_value(v)}\n" for k, v in scalars.items())
    for key, value in sorted(table.items()):
        if isinstance(value, dict):
            out += _tables([*path, key], value)
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"containerd_imports": containerd_imports, "containerd_cri_dropin": containerd_cri_dropin,
                "containerd_image_digests": containerd_image_digests,
                "containerd_cri_settings": containerd_cri_settings,
                "containerd_config_version": containerd_config_version,
                "containerd_enabled_cri": containerd_enabled_cri}
