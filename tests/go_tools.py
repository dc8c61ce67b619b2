"""The pinned Go tools (tools/build.sh) for tests: a test that needs one builds its family once into the tools
cache (seconds to minutes, depending on Go's build cache). Without Go the tests fail and say so: these are the
real programs, and there is no other way here to run them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "tools" / "build.sh"


def go_tool(family: str, name: str) -> Path:
    """The built binary NAME of tools/FAMILY, building the family first when the cache lacks this version."""
    env = {**os.environ, "TOOLS_FAMILIES": family}
    folder = Path(subprocess.run([str(BUILD), "--print-path"], env=env, check=True, capture_output=True,
                                 text=True).stdout.strip())
    path = folder / name
    if not path.is_file():
        if shutil.which("go") is None:
            raise AssertionError(f"{name} is not built and Go is not on PATH: install Go 1.26, then ./dev.sh tools")
        done = subprocess.run([str(BUILD)], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"building {family} failed:\n{done.stderr[-3000:]}"
    return path
