"""Callback that ends a run of the host layer's playbooks with where each host stands: done, failed, untouched.

The plays that change hosts roll over them in batches (serial, from the spec's host_rollout); a batch that fails
past max_fail_percentage stops the run and the later batches are never reached. With hundreds of hosts the PLAY
RECAP does not say which hosts those are (a host no play reached is not in it), so this callback lists them:

    done        every rollout play that ran reached the host, and nothing on it failed
    failed      a task failed on it or it was unreachable
    stopped     rollout plays reached it, but the run stopped before the others did
    untouched   no rollout play reached it (a later batch of a stopped run)

A rollout play is a play with `serial`; the spec checks and fact plays before them change nothing. Enabled in
the repository's ansible.cfg (callbacks_enabled).
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: rollout_summary
type: aggregate
short_description: List the hosts a batched run left done, failed, stopped or untouched.
description:
  - At the end of a run, names the hosts every rollout play (a play with serial) reached, the failed ones, those a
    stopped run reached only partly and those it never reached.
requirements:
  - enable in ansible.cfg (callbacks_enabled = rollout_summary)
"""


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "rollout_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._planned = 0  # rollout plays in the playbook (imports included)
        self._started: list[str] = []  # rollout plays that started, in order
        self._current: str | None = None  # the running play, when it is a rollout play
        self._selected: set[str] = set()  # hosts the rollout plays were to run on (--limit applied)
        self._reached: dict[str, set[str]] = {}  # host -> rollout plays that ran a task on it
        self._ran: set[str] = set()  # rollout plays that ran a task on any host

    def v2_playbook_on_start(self, playbook: Any) -> None:
        self._planned = sum(1 for play in playbook.get_plays() if play.serial)

    def v2_playbook_on_play_start(self, play: Any) -> None:
        # Called once per batch: a play counts once, and its hosts are all the batches' (--limit applied).
        self._current = play.get_name() if play.serial else None
        if self._current is None or self._current in self._started:
            return
        self._started.append(self._current)
        inventory = play.get_variable_manager()._inventory
        self._selected.update(host.get_name() for host in inventory.get_hosts(play.hosts, ignore_restrictions=True))

    def _reach(self, result: Any, *_: Any, **__: Any) -> None:
        if self._current is not None:
            self._reached.setdefault(result._host.get_name(), set()).add(self._current)
            self._ran.add(self._current)

    v2_runner_on_ok = v2_runner_on_failed = v2_runner_on_skipped = v2_runner_on_unreachable = _reach

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if not self._started:
            return
        failed = {host for host in stats.processed if stats.failures.get(host) or stats.dark.get(host)}
        failed &= self._selected
        complete = len(self._started) == self._planned
        done, stopped = set(), set()
        for host, plays in self._reached.items():
            if host in failed:
                continue
            (done if complete and self._ran <= plays else stopped).add(host)
        untouched = self._selected - failed - done - stopped
        self._display.banner("ROLLOUT SUMMARY")
        for label, hosts in (("done", done), ("failed", failed), ("stopped", stopped), ("untouched", untouched)):
            self._display.display(f"{label:<10} {len(hosts):>4}  {', '.join(sorted(hosts)) or '-'}")
        if not complete:
            self._display.display(f"the run stopped after rollout play {len(self._started)} of {self._planned}: "
                                  f"{self._started[-1]}")
