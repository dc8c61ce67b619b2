"""Filters that read containerd's config.toml and write the NVIDIA runtime's drop-in for it.

containerd 1.6 (Debian bookworm's) merges an imported file into config.toml one plugin at a time: the
drop-in's `plugins."io.containerd.grpc.v1.cri"` table replaces config.toml's whole CRI table (measured:
Debian's `cni.bin_dir = "/usr/lib/cni"` fell back to /opt/cni/bin when a drop-in named only the runtime).
So the drop-in carries config.toml's CRI settings with the nvidia runtime added, and the role rewrites it
whenever config.toml's CRI table changes. config.toml itself is never rewritten.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from typing import Any

from ansible.errors import AnsibleFilterError

CRI = "io.containerd.grpc.v1.cri"
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


def containerd_nvidia_dropin(text: str, name: str, binary: str, default: bool, path: str = "config.toml") -> str:
    """The drop-in: config.toml's CRI table (runc kept) plus runtime NAME (runc v2 shim running BINARY),
    optionally as the default. The runtime takes runc's cgroup driver (SystemdCgroup), so that it agrees with
    the kubelet as runc does."""
    config = _parse(text, path)
    cri = copy.deepcopy(config.get("plugins", {}).get(CRI, {}))
    containerd = cri.setdefault("containerd", {})
    runtimes = containerd.setdefault("runtimes", {})
    # containerd's built-in runc entry lives in the default CRI table that this one replaces: keep it
    # (measured: without it `containerd config dump` lists the nvidia runtime alone).
    runtimes.setdefault("runc", {"runtime_type": "io.containerd.runc.v2"})
    runc_options = runtimes.get("runc", {}).get("options", {})
    options: dict[str, Any] = {"BinaryName": binary}
    if "SystemdCgroup" in runc_options:
        options["SystemdCgroup"] = runc_options["SystemdCgroup"]
    runtimes[name] = {"runtime_type": "io.containerd.runc.v2", "options": options}
    if default:
        containerd["default_runtime_name"] = name
    body = _tables(["plugins", CRI], cri)
    return "version = 2\n" + body


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
        return {"containerd_imports": containerd_imports, "containerd_nvidia_dropin": containerd_nvidia_dropin}
