"""site.yml as a whole on the sandbox hosts: with a file edited by hand on one host, check mode reports that file's
task on that host and nothing else, and a second run repairs it and changes nothing else (the check-mode and
idempotence proofs, in two runs); a bad spec stops the run before any host is touched.

The same checks are first run on a probe playbook (tests/hosts/playbooks/probe.yml) that has a managed
file and, on demand, a task that changes on every run: they must catch that task and name it, so they
are shown able to fail, whatever roles site.yml holds.
"""

from __future__ import annotations

import base64
import math
import re
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.hosts.ansible_run import OVERLAY, PLAYBOOKS, ROOT, SANDBOX_INVENTORY, PlaybookRun, run_playbook

PROBE = ROOT / "tests" / "hosts" / "playbooks" / "probe.yml"
PROBE_FILE = "/etc/k8s-node-pools-probe.conf"
PROBE_TASK = "Write the probe file."
SYSCTL_TASK = "base : Write the sysctl drop-in."
# The base role's sysctl drop-in (its base_sysctl_file): the drift the issue names, a value edited by hand.
BASE_DEFAULTS = PLAYBOOKS / "roles" / "base" / "defaults" / "main.yml"
SETTING = re.compile(r"^(?P<key>[\w.\-/]+)\s*=\s*(?P<value>\S+)\s*$", re.MULTILINE)


def assert_idempotent(run: PlaybookRun, what: str) -> None:
    assert run.rc == 0, f"{what} failed (rc {run.rc}):\n{run.tail()}"
    assert run.changed() == {}, f"{what} changed tasks on converged hosts:\n{run.describe_changes()}"


def edit_first_setting(host: Any, path: str) -> tuple[str, str]:
    """Change the value of the first `key = value` line of PATH on HOST, as a person would by hand.
    Returns the content before and after."""
    before = host.file(path).content_string
    match = SETTING.search(before)
    assert match, f"{path} has no `key = value` line to edit:\n{before}"
    value = "7" if match["value"] != "7" else "8"
    after = before[:match.start("value")] + value + before[match.end("value"):]
    encoded = base64.b64encode(after.encode()).decode()
    host.run_expect([0], f"echo {encoded} | base64 -d > {path}")
    return before, after


def assert_drift_reported_and_repaired(playbook: str | Path, host: Callable[[str], Any], name: str, path: str,
                                       hosts: list[str], task: str) -> None:
    """Edit a managed file on host NAME, then: `--check --diff` reports TASK on NAME and nothing else on any host
    (and names the file), and a real run changes TASK on NAME only and restores the file. Everything else the
    playbook does reports no change on any host: the two runs are also its check-mode and idempotence proofs."""
    before, after = edit_first_setting(host(name), path)
    check = run_playbook(playbook, "--check", "--diff")
    assert check.rc == 0, check.tail()
    assert check.changed_tasks() == {name: [task]}, (
        f"check mode after editing {path} on {name}: expected {task!r} on {name} only, got\n"
        f"{check.describe_changes() or 'no change'}")
    assert path in check.output, f"the diff does not name {path}:\n{check.tail()}"
    assert host(name).file(path).content_string == after, "check mode wrote to the host"
    repair = run_playbook(playbook)
    assert repair.rc == 0, repair.tail()
    assert repair.changed_tasks() == {name: [task]}, (
        f"the repairing run should change {task!r} on {name} only, got\n{repair.describe_changes() or 'no change'}")
    assert host(name).file(path).content_string == before
    assert set(hosts) <= set(repair.recap) and set(hosts) <= set(check.recap)


# The probe: the checks themselves, shown to pass on an idempotent play and to fail on one that is not.

@pytest.fixture(scope="module")
def probe(sandbox_hosts: dict[str, Any], host: Callable[[str], Any]) -> Any:
    first = run_playbook(PROBE)
    assert first.rc == 0, first.tail()
    yield first
    cleanup = run_playbook(PROBE, "-e", "probe_state=absent")
    assert cleanup.rc == 0, cleanup.tail()


def test_probe_second_run_is_idempotent(probe: PlaybookRun) -> None:
    assert_idempotent(run_playbook(PROBE), "the probe's second run")
    assert_idempotent(run_playbook(PROBE, "--check", "--diff"), "the probe in check mode")


def test_a_task_that_always_changes_is_caught_and_named(probe: PlaybookRun, sandbox_hosts: dict[str, Any]) -> None:
    run_playbook(PROBE, "-e", "probe_always_change=true")
    again = run_playbook(PROBE, "-e", "probe_always_change=true")
    with pytest.raises(AssertionError) as caught:
        assert_idempotent(again, "the probe with a task that always changes")
    task = "Stamp the probe file with the time, which changes on every run."
    for name in sandbox_hosts:
        assert f"{name}: changed {task}" in str(caught.value)
    assert again.changed_tasks() == {name: [task] for name in sandbox_hosts}


def test_a_drifted_probe_file_is_reported_and_repaired_on_that_host_only(
        probe: PlaybookRun, sandbox_hosts: dict[str, Any], host: Callable[[str], Any]) -> None:
    assert_drift_reported_and_repaired(PROBE, host, sorted(sandbox_hosts)[0], PROBE_FILE, list(sandbox_hosts),
                                       PROBE_TASK)


# site.yml

def test_check_mode_and_a_second_run_report_only_a_sysctl_edited_by_hand(converged: PlaybookRun,
                                                                          sandbox_hosts: dict[str, Any],
                                                                          host: Callable[[str], Any]) -> None:
    """site.yml's check-mode and idempotence proofs in two runs: on converged hosts with one file edited by hand,
    check mode reports that file's task on that host and nothing else anywhere, and the next run repairs it and
    changes nothing else on any host."""
    assert set(sandbox_hosts) <= set(converged.recap), converged.tail()
    drop_in = yaml.safe_load(BASE_DEFAULTS.read_text())["base_sysctl_file"]
    name = "sb-mem-1"  # a pool with sysctls of its own (vm.max_map_count) on top of the base ones
    assert host(name).file(drop_in).is_file, f"{drop_in} is missing on {name}"
    assert_drift_reported_and_repaired("site.yml", host, name, drop_in, list(sandbox_hosts), SYSCTL_TASK)


def ssh_logins(host: Any, since: float, until: float) -> list[str]:
    """sshd's `Accepted` lines on HOST between two moments (the hosts share the machine's clock)."""
    lines = host.run_expect([0], f"journalctl -u ssh --no-pager -q -o short-unix --since @{math.floor(since)} "
                                 f"--until @{math.ceil(until)}").stdout.splitlines()
    return [line for line in lines if "Accepted" in line and since <= float(line.split()[0]) <= until]


def test_a_bad_spec_stops_site_before_any_host_is_touched(sandbox_hosts: dict[str, Any], tmp_path: Path,
                                                          host: Callable[[str], Any]) -> None:
    broken = tmp_path / "sandbox"
    shutil.copytree(SANDBOX_INVENTORY, broken)
    gpu = broken / "group_vars" / "sb_gpu.yml"
    gpu.write_text(yaml.safe_dump({**yaml.safe_load(gpu.read_text()), "node_taints": []}))
    began = time.time()
    # A fresh ssh connection for anything that reaches a host (none should), so sshd logs it.
    run = run_playbook("site.yml", inventories=(broken, OVERLAY),
                       env={"ANSIBLE_SSH_ARGS": "-o ControlMaster=no -o ControlPersist=no"})
    ended = time.time()
    assert run.rc != 0, run.tail()
    assert "POOL-GPU-TAINT" in run.output, run.tail()
    assert "No host was changed" in run.output, run.tail()
    preflight = {play["name"] for play in yaml.safe_load((PLAYBOOKS / "preflight.yml").read_text())}
    outside = [result for result in run.results if result.play not in preflight]
    assert outside == [], f"tasks ran after the preflight play: {outside}"
    assert not any(counts.get("changed") for counts in run.recap.values()), run.recap
    for name in sandbox_hosts:
        assert ssh_logins(host(name), began, ended) == [], f"{name} was reached during the failed run"


def test_an_unproven_operating_system_stops_site_before_any_host_is_changed(converged: PlaybookRun,
                                                                             host: Callable[[str], Any]) -> None:
    """One host reports Ubuntu 24.04 (its /etc/os-release, which Ansible's facts read): the run stops on every
    host before the first play that changes one, naming the host, its OS and the supported list."""
    cpu = host("sb-cpu-1")
    ubuntu = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n'
    cpu.check_output("mv /etc/os-release /etc/os-release.saved && printf '%s' " + shlex.quote(ubuntu)
                     + " > /etc/os-release")
    try:
        run = run_playbook("site.yml")
        assert run.rc != 0, run.tail()
        assert ("sb-cpu-1 runs Ubuntu 24 (noble); the roles are proven only on Debian 12: their packages and "
                "repositories are that release's.") in run.output, run.tail()
        assert "No host was changed" in run.output
        facts = {play["name"] for play in yaml.safe_load((PLAYBOOKS / "host_facts.yml").read_text())}
        preflight = {play["name"] for play in yaml.safe_load((PLAYBOOKS / "preflight.yml").read_text())}
        outside = [result for result in run.results if result.play not in facts | preflight]
        assert outside == [], f"tasks ran after the OS check: {outside}"
        assert run.changed() == {}, run.recap
    finally:
        cpu.check_output("mv -f /etc/os-release.saved /etc/os-release")
    assert_idempotent(run_playbook("site.yml", "--limit", "sb-cpu-1"), "site.yml after the OS was restored")


def test_a_batch_that_fails_stops_the_rollout_and_later_batches_are_untouched(converged: PlaybookRun,
                                                                              tmp_path: Path) -> None:
    """The spec's host_rollout: batches of one host, no failure tolerated. The second host (inventory order) fails
    in the first play that changes hosts: the run stops there, the first host is left part-way, the last two are
    never reached, and the summary says so."""
    inventory = tmp_path / "sandbox"
    shutil.copytree(SANDBOX_INVENTORY, inventory)
    cluster = inventory / "group_vars" / "all.yml"
    cluster.write_text(yaml.safe_dump({**yaml.safe_load(cluster.read_text()),
                                       "host_rollout": {"batch_size": 1, "max_fail_percentage": 0}}))
    # sb-mem-1's sysctl drop-in goes to a folder that does not exist: the base role fails there.
    breaker = tmp_path / "break.yml"
    breaker.write_text(yaml.safe_dump({"all": {"hosts": {"sb-mem-1": {"base_sysctl_file": "/nonexistent/90.conf"}}}}))
    run = run_playbook("site.yml", inventories=(inventory, OVERLAY, breaker))
    assert run.rc != 0, run.tail()
    rollout = [play["name"] for play in yaml.safe_load((PLAYBOOKS / "site.yml").read_text()) if "roles" in play]
    reached = {result.host for result in run.results if result.play in rollout}
    assert reached == {"sb-cpu-1", "sb-mem-1"}, run.tail(80)
    assert {result.play for result in run.results if result.play in rollout} == {rollout[0]}
    summary = run.output.rpartition("ROLLOUT SUMMARY")[2]
    assert re.search(r"^done\s+0\s+-$", summary, re.MULTILINE), summary
    assert re.search(r"^failed\s+1\s+sb-mem-1$", summary, re.MULTILINE), summary
    assert re.search(r"^stopped\s+1\s+sb-cpu-1$", summary, re.MULTILINE), summary
    assert re.search(r"^untouched\s+2\s+sb-gpu-1, sb-mig-1$", summary, re.MULTILINE), summary
    assert f"the run stopped after rollout play 1 of 9: {rollout[0]}" in summary


def test_the_default_rollout_reaches_every_host_and_says_so(converged: PlaybookRun) -> None:
    summary = converged.output.rpartition("ROLLOUT SUMMARY")[2]
    assert re.search(r"^done\s+4\s+sb-cpu-1, sb-gpu-1, sb-mem-1, sb-mig-1$", summary, re.MULTILINE), summary
    assert re.search(r"^untouched\s+0\s+-$", summary, re.MULTILINE), summary


def test_a_non_root_ssh_user_converges_through_sudo(converged: PlaybookRun, host: Callable[[str], Any]) -> None:
    """Users log in as themselves and sudo. A user with sudo and root's key repairs a hand-edited sysctl drop-in;
    the same run without escalation cannot write it."""
    cpu = host("sb-cpu-1")
    cpu.check_output("id deploy || useradd --create-home --shell /bin/sh deploy")
    cpu.check_output("install -d -m 700 -o deploy -g deploy ~deploy/.ssh && install -m 600 -o deploy -g deploy "
                     "/root/.ssh/authorized_keys ~deploy/.ssh/authorized_keys")
    cpu.check_output("echo 'deploy ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/deploy && chmod 440 /etc/sudoers.d/deploy")
    drop_in = yaml.safe_load(BASE_DEFAULTS.read_text())["base_sysctl_file"]
    try:
        cpu.check_output(f"sed -i 's/^net.ipv4.ip_forward=1$/net.ipv4.ip_forward=0/' {drop_in}")
        assert "net.ipv4.ip_forward=0" in cpu.file(drop_in).content_string
        as_user = ("--limit", "sb-cpu-1", "--tags", "base", "-e", "ansible_user=deploy")
        refused = run_playbook("site.yml", *as_user, "-e", "ansible_become=false")
        assert refused.rc != 0, refused.tail()
        assert refused.failed() == {"sb-cpu-1": 1} and "net.ipv4.ip_forward=0" in cpu.file(drop_in).content_string
        run = run_playbook("site.yml", *as_user)
        assert run.rc == 0, run.tail()
        assert "net.ipv4.ip_forward=1" in cpu.file(drop_in).content_string
        assert cpu.file(drop_in).user == "root"
    finally:
        cpu.check_output("rm -f /etc/sudoers.d/deploy && userdel --remove deploy")
