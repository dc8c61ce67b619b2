"""tools/kubelet-config-check, the kubelet's own decoding and validation of KubeletConfiguration drop-ins, for tests.

The binary is built by tools/build.sh into the tools cache (its own family: ~12 s when Go's build cache already
holds the control plane's packages, minutes on a cold one); a test that needs it builds it once. Without Go the
tests fail and say so: there is no other way here to run the kubelet's validation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "tools" / "build.sh"
FAMILY = "kubelet-config-check"


def binary() -> Path:
    """The built checker, building it first when the tools cache lacks this version of it."""
    env = {**os.environ, "TOOLS_FAMILIES": FAMILY}
    folder = Path(subprocess.run([str(BUILD), "--print-path"], env=env, check=True, capture_output=True,
                                 text=True).stdout.strip())
    path = folder / FAMILY
    if not path.is_file():
        if shutil.which("go") is None:
            raise AssertionError(f"{FAMILY} is not built and Go is not on PATH: install Go 1.26, then ./dev.sh tools")
        done = subprocess.run([str(BUILD)], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"building {FAMILY} failed:\n{done.stderr[-3000:]}"
    return path


def check(*files: Path) -> subprocess.CompletedProcess[str]:
    """Run the checker over drop-in files, merged in the order given as the kubelet merges its --config-dir."""
    return subprocess.run([str(binary()), *map(str, files)], capture_output=True, text=True, check=False)
