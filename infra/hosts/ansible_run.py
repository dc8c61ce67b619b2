"""Running the host layer's playbooks and reading what they did: one runner and one parser of
ansible-playbook's output, shared by the main job's host stages (infra.hosts.stages) and the host test
suite (tests/hosts/conftest.py), so the job and the tests judge a run the same way.

A run is read from the default callback's text (the project's ansible.cfg): the PLAY RECAP's counts per
host, and each task's result lines (`changed: [host]`) under their `TASK [...]` header, so a failed
idempotence check can name the tasks that changed instead of only a count.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "ansible"
SANDBOX = ROOT / "tests" / "hosts" / "sandbox.sh"
STATE = Path(os.environ.get("SANDBOX_STATE", ROOT / ".state"))
# The sandbox hosts' connection variables, written by `sandbox.sh up`, layered over the environment.
OVERLAY = STATE / "hosts" / "inventory.yml"
SANDBOX_INVENTORY = ROOT / "inventories" / "sandbox"
# What the sandbox hosts need that a real environment does not (card-less GPU hosts, unreachable vendor
# repositories), passed as extra vars to every run on them: the spec's group_vars cannot hold role settings.
SANDBOX_VARS = ROOT / "tests" / "hosts" / "sandbox-vars.yml"
# Where the sandbox's containerd.io repository is and its key's fingerprint, written by `sandbox.sh up`.
SANDBOX_APT_VARS = STATE / "apt" / "vars.yml"
# ansible-playbook of the interpreter that runs this (the project's venv), not whatever is on PATH.
ANSIBLE_BIN = Path(sys.executable).parent

RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$", re.MULTILINE)
PLAY = re.compile(r"^PLAY \[(?P<name>.*)\] \*+\s*$")
TASK = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(?P<name>.*)\] \*+\s*$")
# `ok: [h]`, `changed: [h -> localhost]`, `changed: [h] => (item=x)`, `fatal: [h]: FAILED! => ...`
RESULT = re.compile(r"^(?P<status>ok|changed|skipping|failed|fatal|unreachable): "
                    r"\[(?P<host>[^\]\s]+)(?: -> [^\]]+)?\]")


@dataclass(frozen=True)
class TaskResult:
    """One result line: which play and task, on which host, with what status."""

    play: str
    task: str
    host: str
    status: str


@dataclass(frozen=True)
class PlaybookRun:
    """One ansible-playbook run: exit code, whole output, wall time, the PLAY RECAP counts per host and
    every task result line."""

    rc: int
    output: str
    recap: dict[str, dict[str, int]]
    seconds: float = 0.0
    results: tuple[TaskResult, ...] = field(default=())

    def changed(self) -> dict[str, int]:
        """Hosts with changed tasks, and how many."""
        return {host: counts["changed"] for host, counts in self.recap.items() if counts.get("changed")}

    def failed(self) -> dict[str, int]:
        """Hosts with failed or unreachable tasks, and how many."""
        return {host: counts.get("failed", 0) + counts.get("unreachable", 0) for host, counts in self.recap.items()
                if counts.get("failed") or counts.get("unreachable")}

    def changed_tasks(self) -> dict[str, list[str]]:
        """Per host, the names of the tasks (and handlers) that reported changed, in run order."""
        out: dict[str, list[str]] = {}
        for result in self.results:
            if result.status == "changed" and result.task not in out.setdefault(result.host, []):
                out[result.host].append(result.task)
        return {host: tasks for host, tasks in out.items() if tasks}

    def describe_changes(self) -> str:
        """`host: task; task` lines for an assertion message; empty when nothing changed."""
        changes = sorted(self.changed_tasks().items())
        return "\n".join(f"  {host}: changed {'; '.join(tasks)}" for host, tasks in changes)

    def tail(self, lines: int = 60) -> str:
        """The output's last LINES lines, after every failed task's result line (with its task), which
        the recap alone does not name."""
        all_lines = self.output.splitlines()
        failures = [f"TASK [{task}]\n{line}" for task, line in self._failure_lines(all_lines)]
        return "\n".join([*failures, *(["..."] if failures else []), *all_lines[-lines:]])

    @staticmethod
    def _failure_lines(lines: list[str]) -> list[tuple[str, str]]:
        task = ""
        out = []
        for line in lines:
            if header := TASK.match(line):
                task = header["name"]
            elif line.startswith(("fatal: [", "failed: [")):
                out.append((task, line))
        return out


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP's counters per host (ok, changed, unreachable, failed, skipped, rescued, ignored)."""
    recap = output.rpartition("PLAY RECAP")[2]
    return {match["host"]: {key: int(value) for key, value in (pair.split("=") for pair in match["counts"].split())}
            for match in RECAP.finditer(recap)}


def parse_results(output: str) -> tuple[TaskResult, ...]:
    """Every task result line, attributed to the play and task whose header precedes it."""
    play = task = ""
    out: list[TaskResult] = []
    for line in output.splitlines():
        if header := PLAY.match(line):
            play, task = header["name"], ""
        elif header := TASK.match(line):
            task = header["name"]
        elif task and (result := RESULT.match(line)):
            out.append(TaskResult(play, task, result["host"], result["status"]))
    return tuple(out)


def ansible_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every run gets: the project's ansible.cfg, plain text, `infra` importable."""
    return {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0", "PYTHONPATH": str(ROOT), **(extra or {})}


def run_playbook(playbook: str | Path, *args: str, inventories: Sequence[Path] = (SANDBOX_INVENTORY, OVERLAY),
                 env: dict[str, str] | None = None, progress: Callable[[str], None] | None = None) -> PlaybookRun:
    """ansible-playbook PLAYBOOK (a name under ansible/, or a path) on the given inventories: the
    environment first, then the connection overlay of the sandbox hosts, with the sandbox's extra vars
    (SANDBOX_VARS, and SANDBOX_APT_VARS once `sandbox.sh up` wrote it). PROGRESS, if given, is called
    with each output line as it arrives (stderr merged into stdout)."""
    path = Path(playbook) if Path(playbook).is_absolute() else PLAYBOOKS / playbook
    command = [str(ANSIBLE_BIN / "ansible-playbook")]
    for inventory in inventories:
        command += ["-i", str(inventory)]
    command += [str(path), "-e", f"@{SANDBOX_VARS}"]
    if SANDBOX_APT_VARS.is_file():
        command += ["-e", f"@{SANDBOX_APT_VARS}"]
    command += args
    began = time.perf_counter()
    lines: list[str] = []
    with subprocess.Popen(command, cwd=ROOT, env=ansible_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if progress is not None:
                progress(line.rstrip("\n"))
    seconds = time.perf_counter() - began
    output = "".join(lines)
    return PlaybookRun(process.returncode, output, parse_recap(output), seconds, parse_results(output))


def sandbox(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """tests/hosts/sandbox.sh ARGS with this checkout's state folder; output captured."""
    return subprocess.run([str(SANDBOX), *args], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "SANDBOX_STATE": str(STATE), **(env or {})})
