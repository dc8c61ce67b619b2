"""The main job's host stages on the sandbox: start the hosts, bootstrap them with site.yml, verify,
report, clean up. Thin orchestration over tests/hosts/sandbox.sh and ansible-playbook (through
infra.hosts.ansible_run, the runner the host test suite uses too); nothing here decides what a host gets.

Each stage returns a StageResult (success and a one-line summary) and prints its progress as it goes:
sandbox.sh's own step lines, and each play and task of a playbook run as it starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import yaml

from infra.hosts.ansible_run import OVERLAY, PLAY, PLAYBOOKS, TASK, PlaybookRun, run_playbook, sandbox

BOOTSTRAP = "site.yml"
# Another part of the host layer adds it: the read-only checks of a real environment, run if present.
VERIFY = "verify.yml"


@dataclass(frozen=True)
class StageResult:
    ok: bool
    summary: str


@dataclass
class HostStages:
    """The host stages for one inventory; runs are kept so that `report` can tell what each did."""

    inventory: Path
    keep_hosts: bool = False
    out: TextIO | None = None
    runs: dict[str, PlaybookRun] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    hosts_started: bool = False

    def stages(self) -> list[tuple[str, Callable[[], StageResult]]]:
        """The stages in order; `cleanup` is separate because it runs even when one of these fails."""
        return [("start hosts", self.up), ("bootstrap", self.bootstrap), ("verify", self.verify),
                ("report", self.report)]

    def up(self) -> StageResult:
        began = time.perf_counter()
        done = sandbox("up", "--from-inventory", str(self.inventory))
        self.seconds["start hosts"] = time.perf_counter() - began
        self._print(done.stdout.rstrip())
        self.hosts_started = True  # even a failed `up` may have started some: cleanup removes them
        if done.returncode != 0:
            self._print(done.stderr.rstrip())
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return StageResult(False, f"sandbox.sh up failed: {last}")
        return StageResult(True, f"{len(self._hosts())} hosts running, connection in {OVERLAY.name}")

    def bootstrap(self) -> StageResult:
        run = self._play("bootstrap", BOOTSTRAP)
        if run.rc != 0:
            return StageResult(False, f"{BOOTSTRAP} failed (rc {run.rc}) on {run.failed() or 'the controller'}")
        changed = sum(run.changed().values())
        return StageResult(True, f"{BOOTSTRAP} on {len(run.recap)} hosts: {changed} changes in {run.seconds:.1f} s")

    def verify(self) -> StageResult:
        """The bootstrap again must change nothing (skipped when the bootstrap itself changed nothing,
        as on a warm re-run: it already was that second run), then verify.yml where it exists."""
        first = self.runs.get("bootstrap")
        notes = []
        if first is None or first.changed():
            again = self._play("verify", BOOTSTRAP)
            if again.rc != 0 or again.changed():
                detail = again.describe_changes() or again.tail(20)
                self._print(detail)
                return StageResult(False, f"the second run of {BOOTSTRAP} is not idempotent "
                                          f"(rc {again.rc}, changed {again.changed()})")
            notes.append(f"second run of {BOOTSTRAP}: changed=0 in {again.seconds:.1f} s")
        else:
            notes.append(f"{BOOTSTRAP} already changed nothing")
        if (PLAYBOOKS / VERIFY).is_file():
            checks = self._play("verify checks", VERIFY)
            if checks.rc != 0:
                return StageResult(False, f"{VERIFY} failed (rc {checks.rc}) on {checks.failed() or 'the controller'}")
            notes.append(f"{VERIFY} passed in {checks.seconds:.1f} s")
        return StageResult(True, "; ".join(notes))

    def report(self) -> StageResult:
        names = [name for name in ("bootstrap", "verify", "verify checks") if name in self.runs]
        hosts = sorted({host for run in self.runs.values() for host in run.recap})
        width = max((len(host) for host in hosts), default=4)
        self._print(f"{'host':{width}}  " + "  ".join(f"{name + ' ok/changed':>22}" for name in names))
        for host in hosts:
            cells = []
            for name in names:
                counts = self.runs[name].recap.get(host, {})
                cells.append(f"{counts.get('ok', 0)}/{counts.get('changed', 0)}".rjust(22))
            self._print(f"{host:{width}}  " + "  ".join(cells))
        times = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.seconds.items())
        self._print(f"wall time: {times}")
        return StageResult(True, f"{len(hosts)} hosts, {sum(self.seconds.values()):.1f} s in the host stages so far")

    def cleanup(self) -> StageResult:
        if self.keep_hosts:
            return StageResult(True, "hosts kept (--keep-hosts): tests/hosts/sandbox.sh down removes them")
        if not self.hosts_started:
            return StageResult(True, "no hosts were started")
        done = sandbox("down")
        self._print(done.stdout.rstrip())
        if done.returncode != 0:
            return StageResult(False, f"sandbox.sh down failed: {done.stderr.strip()}")
        return StageResult(True, "hosts removed")

    def _play(self, stage: str, playbook: str) -> PlaybookRun:
        run = run_playbook(playbook, inventories=(self.inventory, OVERLAY), progress=self._progress)
        self.runs[stage] = run
        self.seconds[stage] = run.seconds
        return run

    def _progress(self, line: str) -> None:
        if header := PLAY.match(line) or TASK.match(line):
            self._print(f"    {header['name']}")
        elif line.startswith(("fatal:", "failed:")) or "ERROR!" in line:
            self._print(f"    {line}")

    def _hosts(self) -> list[str]:
        data = yaml.safe_load(OVERLAY.read_text()) if OVERLAY.is_file() else None
        return sorted((data or {}).get("all", {}).get("hosts", {}) or {})

    def _print(self, text: str) -> None:
        if text:
            print(text, file=self.out, flush=True)
