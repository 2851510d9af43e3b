"""A deterministic interleaver of real threads, one store call at a time (the adversarial simulation,
tests/reliability/sim/adversary/, and its bite tests).

Each task (a callable: two writers racing ``Db.open``, a paused compactor and GC) runs in a thread of
its own and talks to the store through its own :class:`TurnStore`. Exactly one task holds the baton at
any time; the others wait at a store call (or have not started). Before every store call the holder
asks the interleaver whether to go on or to hand the baton over, and the answer comes from a seeded
``random.Random`` (or from a fixed schedule), so the order of every store call of every task is a
function of the seed: the same seed gives the same interleaving, also across processes.

A hand-over can also let time pass (the clock jumps): a task paused that way is a process stalled
across the other tasks' calls — longer than GC's ``min_age`` if the jump says so.

A task that makes more than ``max_calls`` store calls is stopped with :class:`Livelock` (a
``BaseException``, so no retry loop catches it): "nobody waits forever" is checked by counting calls,
not by waiting. A task that blocks somewhere other than a store call (a lock, a condition) is reported
by :meth:`Interleaver.run` after ``stuck_after_s`` seconds of real time as :class:`Stuck`.

Tasks must not run store calls on several threads at once: every task runs slate_ops with the
interleaver's :class:`~slate_ops.runtime.ManualRuntime`, whose executor runs the I/O pools' calls
(WAL fetches, read-ahead, compaction reads and writes) on the caller's thread, one request after
another.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.reliability.hooked_store import HookedStore

_R = TypeVar("_R")


class Livelock(BaseException):
    """A task made more store calls than the interleaver allows: it retries without end."""


class Stuck(AssertionError):
    """A task blocked outside a store call (a lock, a condition) and never came back."""


@dataclass
class TaskOutcome:
    """How a task ended: its return value or the exception it raised, and its store calls."""

    name: str
    value: Any = None
    error: BaseException | None = None
    calls: int = 0
    done: bool = False


@dataclass
class Event:
    """One completed store call: the global order of every task's requests."""

    index: int
    task: str
    op: str
    key: str
    ok: bool


@dataclass
class _Task:
    name: str
    work: Callable[[], Any]
    outcome: TaskOutcome
    thread: threading.Thread | None = None


@dataclass
class Interleaver:
    """Runs tasks one store call at a time; ``rng`` (or ``schedule``) decides who goes next."""

    rng: random.Random
    clock: ManualRuntime | None = None
    switch_rate: float = 0.5  # before a call: hand the baton to another waiting task
    stall_rate: float = 0.0  # on a hand-over: the clock jumps (the paused task stalls)
    max_stall_s: float = 60.0
    max_calls: int = 400
    stuck_after_s: float = 60.0
    schedule: Sequence[str] | None = None  # a fixed order of hand-overs (bite tests), then rng
    events: list[Event] = field(default_factory=list)
    stalls: int = 0
    switches: int = 0
    on_call: Callable[[str, str, str], None] | None = None  # (task, op, key) before a call runs

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._tasks: dict[str, _Task] = {}
        self._holder: str | None = None
        self._scripted = iter(self.schedule or ())

    # --- the tasks' side ----------------------------------------------------------------------

    def store(self, task: str, inner: ObjectStore) -> TurnStore:
        """The store ``task`` talks to: every call waits for the baton."""
        return TurnStore(self, task, inner)

    def before_call(self, task: str, op: str, key: str) -> None:
        with self._cond:
            outcome = self._tasks[task].outcome
            outcome.calls += 1
            if outcome.calls > self.max_calls:
                raise Livelock(
                    f"{task} made more than {self.max_calls} store calls in one episode ({op} {key}): "
                    "it retries without end"
                )
            waiting = self._others(task)
            target = self._pick(task, waiting)
            if target != task:
                self._hand_to(target)
                self._cond.wait_for(lambda: self._holder == task)
        if self.on_call is not None:
            self.on_call(task, op, key)

    def after_call(self, task: str, op: str, key: str, ok: bool) -> None:
        self.events.append(Event(len(self.events), task, op, key, ok))

    def _others(self, task: str) -> list[str]:
        return [t for t in self._tasks if t != task and not self._tasks[t].outcome.done]

    def _pick(self, task: str, waiting: list[str]) -> str:
        if not waiting:
            return task
        scripted = next(self._scripted, None)
        if scripted is not None:
            return scripted if scripted in waiting or scripted == task else task
        if self.rng.random() >= self.switch_rate:
            return task
        return self.rng.choice(waiting)

    def _hand_to(self, target: str) -> None:
        """Give the baton to ``target`` (called with the condition held)."""
        self.switches += 1
        if self.clock is not None and self.stall_rate and self.rng.random() < self.stall_rate:
            self.stalls += 1
            self.clock.advance(round(self.rng.uniform(1.0, self.max_stall_s), 3))
        self._holder = target
        self._cond.notify_all()

    # --- running --------------------------------------------------------------------------------

    def run(self, tasks: Sequence[tuple[str, Callable[[], Any]]]) -> dict[str, TaskOutcome]:
        """Run ``tasks`` to completion, interleaved; every task's outcome by name."""
        self._tasks = {name: _Task(name, work, TaskOutcome(name)) for name, work in tasks}
        for task in self._tasks.values():
            task.thread = threading.Thread(
                target=self._body, args=(task,), name=f"interleaved:{task.name}", daemon=True
            )
        first = next(self._scripted, None) if self.schedule else None
        names = list(self._tasks)
        with self._cond:
            self._holder = first if first in self._tasks else self.rng.choice(names)
        for task in self._tasks.values():
            assert task.thread is not None
            task.thread.start()
        with self._cond:
            finished = self._cond.wait_for(
                lambda: all(t.outcome.done for t in self._tasks.values()), timeout=self.stuck_after_s
            )
            if not finished:
                blocked = [t.name for t in self._tasks.values() if not t.outcome.done]
                raise Stuck(
                    f"task(s) {', '.join(blocked)} blocked outside a store call for "
                    f"{self.stuck_after_s:.0f} s (the baton is with {self._holder})"
                )
        for task in self._tasks.values():
            assert task.thread is not None
            task.thread.join()
        return {name: task.outcome for name, task in self._tasks.items()}

    def _body(self, task: _Task) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._holder == task.name)
        try:
            task.outcome.value = task.work()
        except BaseException as error:
            task.outcome.error = error
        finally:
            with self._cond:
                task.outcome.done = True
                waiting = self._others(task.name)
                if waiting:
                    self._hand_to(self.rng.choice(waiting))
                else:
                    self._cond.notify_all()


class TurnStore(HookedStore):
    """A task's view of the store: each call waits for the task's turn (see :class:`Interleaver`)."""

    def __init__(self, interleaver: Interleaver, task: str, inner: ObjectStore) -> None:
        self._interleaver = interleaver
        self.task = task
        super().__init__(inner)

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        self._interleaver.before_call(self.task, op, key)
        try:
            result = call()
        except BaseException:
            self._interleaver.after_call(self.task, op, key, False)
            raise
        self._interleaver.after_call(self.task, op, key, True)
        return result
