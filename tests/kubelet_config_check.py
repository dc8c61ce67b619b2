"""tools/kubelet-config-check, the kubelet's own decoding and validation of KubeletConfiguration drop-ins, for tests.

The binary is built by tools/build.sh into the tools cache (its own family: ~12 s when Go's build cache already
holds the control plane's packages, minutes on a cold one); a test that needs it builds it once. Without Go the
tests fail and say so: there is no other way here to run the kubelet's validation.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from go_tools import go_tool

FAMILY = "kubelet-config-check"


def binary() -> Path:
    """The built checker, building it first when the tools cache lacks this version of it."""
    return go_tool(FAMILY, FAMILY)


def check(*files: Path) -> subprocess.CompletedProcess[str]:
    """Run the checker over drop-in files, merged in the order given as the kubelet merges its --config-dir."""
    return subprocess.run([str(binary()), *map(str, files)], capture_output=True, text=True, check=False)
