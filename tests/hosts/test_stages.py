"""The main job's host stages, with the sandbox script and ansible-playbook replaced by fakes: what each
stage concludes from a run, and that the hosts are cleaned up even after a failed stage."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from infra import cli
from infra.hosts import stages as hoststages
from infra.hosts.ansible_run import PlaybookRun, parse_recap, parse_results

SANDBOX = Path("inventories/sandbox")


def playbook_run(changed: int, rc: int = 0) -> PlaybookRun:
    output = "PLAY [Prepare.] ***\n\nTASK [base : Write the sysctl drop-in.] ***\n"
    output += ("changed" if changed else "ok") + ": [sb-cpu-1]\n\nPLAY RECAP ***\n"
    output += f"sb-cpu-1 : ok=3 changed={changed} unreachable=0 failed={int(rc != 0)} skipped=0 rescued=0 ignored=0\n"
    return PlaybookRun(rc, output, parse_recap(output), 1.5, parse_results(output))


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    calls: dict[str, list] = {"sandbox": [], "playbooks": [], "runs": []}

    def sandbox(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        calls["sandbox"].append(args)
        return subprocess.CompletedProcess(args, 0, "==> up finished in 1.0 s\n", "")

    def run_playbook(playbook: str, *args: str, **kwargs: object) -> PlaybookRun:
        calls["playbooks"].append(playbook)
        return calls["runs"].pop(0)

    monkeypatch.setattr(hoststages, "sandbox", sandbox)
    monkeypatch.setattr(hoststages, "run_playbook", run_playbook)
    return calls


def test_a_converging_bootstrap_is_verified_by_a_second_run_that_changes_nothing(fakes: dict[str, list]) -> None:
    fakes["runs"] += [playbook_run(changed=2), playbook_run(changed=0), playbook_run(changed=0)]
    stages = hoststages.HostStages(SANDBOX)
    assert stages.up().ok
    assert stages.bootstrap() == hoststages.StageResult(True, "site.yml on 1 hosts: 2 changes in 1.5 s")
    assert stages.verify().ok
    assert fakes["playbooks"] == ["site.yml", "site.yml", "verify.yml"]


def test_a_failing_verify_playbook_fails_verify(fakes: dict[str, list]) -> None:
    fakes["runs"] += [playbook_run(changed=0), playbook_run(changed=0, rc=2)]
    stages = hoststages.HostStages(SANDBOX)
    stages.bootstrap()
    result = stages.verify()
    assert not result.ok and "verify.yml failed (rc 2)" in result.summary


def test_a_second_run_that_changes_fails_verify_and_names_the_host(fakes: dict[str, list]) -> None:
    fakes["runs"] += [playbook_run(changed=2), playbook_run(changed=1)]
    stages = hoststages.HostStages(SANDBOX)
    stages.bootstrap()
    result = stages.verify()
    assert not result.ok
    assert "not idempotent" in result.summary and "sb-cpu-1" in result.summary


def test_a_bootstrap_that_changed_nothing_is_not_run_again(fakes: dict[str, list]) -> None:
    fakes["runs"] += [playbook_run(changed=0), playbook_run(changed=0)]
    stages = hoststages.HostStages(SANDBOX)
    stages.bootstrap()
    assert stages.verify().ok
    assert fakes["playbooks"] == ["site.yml", "verify.yml"]


def test_the_hosts_are_removed_after_a_failed_stage_unless_kept(fakes: dict[str, list], capsys) -> None:
    fakes["runs"] += [playbook_run(changed=0, rc=2)]
    assert cli.main(["run", "inventories/sandbox", "--hosts"]) == cli.EXIT_ERRORS
    out = capsys.readouterr().out
    assert "<== bootstrap FAILED" in out
    assert "==> [7/9] verify" not in out and "==> [9/9] clean up hosts" in out
    assert fakes["sandbox"][-1] == ("down",)


def test_kept_hosts_are_not_removed(fakes: dict[str, list], capsys) -> None:
    fakes["runs"] += [playbook_run(changed=0), playbook_run(changed=0)]  # site.yml, verify.yml
    assert cli.main(["run", "inventories/sandbox", "--hosts", "--keep-hosts"]) == cli.EXIT_OK
    assert ("down",) not in fakes["sandbox"]
    assert "hosts kept (--keep-hosts)" in capsys.readouterr().out


def test_without_the_flag_the_main_job_touches_no_host(fakes: dict[str, list], capsys) -> None:
    assert cli.main(["run", "inventories/sandbox"]) == cli.EXIT_OK
    assert fakes["sandbox"] == [] and fakes["playbooks"] == []
    assert "main job done: 4 stages" in capsys.readouterr().out
