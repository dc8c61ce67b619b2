"""Filter that reads which cgroup driver the node's container runtime uses, so that the kubelet uses the same.

The kubelet's cgroupDriver must be the runtime's: with two drivers, pods' cgroups are made in two hierarchies
and the kubelet's accounting, QoS and evictions act on the wrong ones. containerd 1.x cannot tell the kubelet
its driver (the CRI RuntimeConfig call came with containerd 2.0), so the role compares them before it writes
the kubelet's configuration, whichever containerd runs.
"""

from __future__ import annotations

import tomllib
from typing import Any

from ansible.errors import AnsibleFilterError

CRI = "io.containerd.grpc.v1.cri"  # configuration version 2 (containerd 1.x)
CRI_RUNTIME = "io.containerd.cri.v1.runtime"  # version 3 and later (containerd 2.x)


def containerd_runtime_cgroup_driver(dump: str) -> str:
    """The cgroup driver of containerd's default runtime in DUMP (`containerd config dump`): systemd when its
    options set SystemdCgroup = true, else cgroupfs (runc's own default)."""
    try:
        config = tomllib.loads(dump)
    except tomllib.TOMLDecodeError as error:
        raise AnsibleFilterError(f"`containerd config dump` printed no valid TOML ({error})") from error
    plugin = CRI_RUNTIME if config.get("version", 1) >= 3 else CRI
    containerd = config.get("plugins", {}).get(plugin, {}).get("containerd", {})
    name = containerd.get("default_runtime_name", "runc")
    options = containerd.get("runtimes", {}).get(name, {}).get("options", {})
    return "systemd" if options.get("SystemdCgroup") is True else "cgroupfs"


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"containerd_runtime_cgroup_driver": containerd_runtime_cgroup_driver}
