"""`ansible-playbook ansible/site.yml` checks the inventory first and stops on errors."""

import shutil
import subprocess
import sys
from pathlib import Path

from inventory_builder import ROOT

PLAYBOOK = shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) or shutil.which("ansible-playbook")


def play(inventory: Path, playbook: str = "site.yml") -> subprocess.CompletedProcess:
    assert PLAYBOOK, "ansible-playbook not installed (pip install -e .[test] brings ansible-core)"
    return subprocess.run([PLAYBOOK, "-i", str(inventory), str(ROOT / "ansible" / playbook)],
                          capture_output=True, text=True, cwd=ROOT)


def test_a_clean_inventory_passes_preflight():
    # preflight.yml alone: the example's hosts are not reachable from here (site.yml's next play would log in).
    result = play(ROOT / "inventories" / "example", "preflight.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "failed=0" in result.stdout and "unreachable=0" in result.stdout
    assert "Give each host its derived settings." in result.stdout


def test_an_inventory_with_errors_stops_the_play(inventory, write):
    inventory["group_vars"]["gpu"]["node_taints"] = []
    result = play(write(inventory))
    assert result.returncode == 2
    assert "POOL-GPU-TAINT" in result.stdout
    assert "No host was changed" in result.stdout
    assert "Learn what each host is" not in result.stdout  # stopped before any play that logs in


def test_a_containerd_below_containerds_table_stops_the_play_before_any_host(inventory, write):
    """Debian 12's own containerd (1.6.20) for Kubernetes 1.34: refused with the table's source and what it lists."""
    inventory["group_vars"]["all"]["containerd_version"] = "1.6.20"
    result = play(write(inventory))
    assert result.returncode == 2
    assert "CONTAINERD-VERSION" in result.stdout
    assert "containerd 1.6.20 is below 1.6.39, the lowest 1.6 release containerd recommends for Kubernetes" \
           in result.stdout
    assert "No host was changed" in result.stdout
    assert "Learn what each host is" not in result.stdout
