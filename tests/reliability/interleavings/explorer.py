"""An exhaustive explorer of the interleavings of real actors' store calls (stateless model checking).

Each actor (a writer, a destroyer, a compactor: real ``slate_ops`` code) runs in a thread of its own
and talks to the store through its own :class:`GatedStore`. Every gated call parks until the explorer
lets exactly one parked call proceed; the explorer then waits until every actor has parked again or
finished, and chooses the next call. Calls are attributed to an actor by the store they go through,
so the writer's flusher thread and the thread pools an actor starts count as that actor (each actor
has its own store view, as each process has its own client).

Only coordination calls are gated: every call except reads and writes of SST data (``get``/``head``/
``put`` under ``<db>/compacted/``), whose keys are unique and which nobody deletes in these scenarios.
Lists and deletes of ``compacted/`` (a hard destroy) are gated.

**Search.** Depth-first over the choice of which parked call proceeds, replaying every schedule from
scratch (a fresh store and fresh actors per execution; the scenario provides them). The reduction is
**sleep sets** (Godefroid), which is sound and explores at least one execution of every Mazurkiewicz
trace; with sleep sets alone no two *complete* executions explored are equivalent. Two calls are
*independent* when they come from different actors and either both only read or they touch disjoint
keys (a LIST of a prefix touches every key under it); calls of one actor are always dependent (the
actor's threads share memory). A branch whose every enabled call is asleep is *sleep-set blocked*:
it is cut (counted, not checked) because an equivalent execution is explored elsewhere. An optional
preemption bound (CHESS) limits how often the explorer switches away from an *actor* that could go on
(switching between threads of one actor, or away from an actor that finished or waits, is free).
Without a bound the search is exhaustive up to trace equivalence. With a bound it covers every
execution within the bound except that sleep sets may also cut one whose equivalent explored
execution needs more preemptions (a known interaction of the two reductions), so bounded counts are
what was checked, not a count of all executions within the bound; tests/reliability/interleavings/
run.py states the bound of each scenario.

**Settling.** After releasing a call the explorer waits until nothing can run: no submitted pool
task is waiting to start, and every thread started during the execution (the actors, a writer's
flusher, pool workers running one of the execution's tasks) is parked at the gate, finished, or
waits in ``Condition.wait`` (an Event, a Future, a Condition) with its waiter still queued, i.e.
not notified, or joins such a thread (:meth:`_Run.blocked`).
``ThreadPoolExecutor.submit`` is wrapped during an exploration so a task counts as running from its
submission until its future's waiters are notified. Then every actor with a parked call is enabled.
That state is stable — no thread of the execution moves until the explorer releases a call — so the
set of parked calls is a function of the schedule, not of how long the threads took to get there.
(A wait with a timeout counts as blocked: the scenarios' timers are an hour, and a durability wait's
50 ms poll only waits again unless something notified it, which counts as running.)
**No decision depends on the clock**: a thread that still runs (a slow step, a garbage-collection
pause, a loaded machine) is waited for however long it takes; ``settle_timeout_s`` only bounds a
settle that never ends (a thread blocked on a plain lock, which never looks blocked): the
exploration then fails with :class:`Unsettled` and the threads' stacks, never goes on without it.

**Termination.** "Nobody waits forever" is checked in two ways: an actor that makes more than
``max_calls`` gated calls retries without end (:class:`Livelock`, raised in its thread); an actor
that is neither parked nor finished once nothing can run waits on something no store call can
change — if it still does when nobody else can move, it waits forever and the execution fails with
its schedule.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import thread as _pool_thread
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from slate_ops.engine import wal_store
from slate_ops.objstore.base import ObjectStore
from tests.reliability.hooked_store import HookedStore

_R = TypeVar("_R")
WRITE_OPS = frozenset({"put", "delete"})


class Abandoned(BaseException):
    """Raised in an actor's thread at its parked call when the explorer abandons the execution
    (sleep-set blocked, a violation found, the end of a run). A BaseException, so no retry loop of
    the code under test catches it."""


class Livelock(BaseException):
    """An actor made more gated store calls than the explorer allows: it retries without end."""


class Nondeterminism(AssertionError):
    """Replaying a schedule reached a different set of parked calls than the first time."""


class Unsettled(AssertionError):
    """A settle did not end within ``settle_timeout_s``: some thread of the execution neither parked,
    finished nor blocked (a plain lock, or a hang). The exploration stops rather than go on without
    that thread's next call, which would make the schedule depend on timing."""


@dataclass(frozen=True, order=True)
class Call:
    """One parked store call: the transition the explorer schedules."""

    actor: str
    thread: str
    op: str
    key: str  # the prefix, for list

    @property
    def writes(self) -> bool:
        return self.op in WRITE_OPS

    def __str__(self) -> str:
        return f"{self.actor}[{self.thread}] {self.op} {self.key}"


def _touches(a: Call, b: Call) -> bool:
    if a.op == "list" and b.op == "list":
        return a.key.startswith(b.key) or b.key.startswith(a.key)
    if a.op == "list":
        return b.key.startswith(a.key)
    if b.op == "list":
        return a.key.startswith(b.key)
    return a.key == b.key


def dependent(a: Call, b: Call) -> bool:
    """Whether the order of ``a`` and ``b`` can matter (see the module docstring)."""
    if a.actor == b.actor:
        return True
    if not (a.writes or b.writes):
        return False
    return _touches(a, b)


def is_sst_data(op: str, key: str) -> bool:
    """Reads and writes of SST data: not gated (unique keys, nobody deletes them concurrently here)."""
    return op in ("get", "head", "put") and "/compacted/" in f"/{key}"


def thread_label(thread: threading.Thread) -> str:
    """A stable name for the calling thread: the actor's own, the flusher, a pool worker."""
    name = thread.name
    if name.startswith("actor:"):
        return "main"
    return re.sub(r"_\d+$", "", name.split(":", 1)[0])  # pool workers: whichever worker runs it


@dataclass
class OpRecord:
    """One operation of an actor (``open``, ``put``, ``close``, ``destroy-soft``, ...): when it
    started and ended (as the number of gated calls released so far) and how it ended."""

    actor: str
    name: str
    start: int
    end: int | None = None
    error: BaseException | None = None
    value: Any = None
    first: int | None = None  # the step of its first gated call

    @property
    def began(self) -> int:
        """The step at which the operation first touched the store (all actors start at step 0 and
        run to their first call at once, so entering an operation orders nothing)."""
        if self.first is not None:
            return self.first
        return self.end if self.end is not None else self.start

    @property
    def ok(self) -> bool:
        return self.end is not None and self.error is None

    def describe(self) -> str:
        how = (
            "ok"
            if self.ok
            else (f"{type(self.error).__name__}: {self.error}" if self.error else "unfinished")
        )
        return f"{self.actor}.{self.name} [{self.began}..{self.end}] {how}"


class _Run:
    """The shared state of one execution: parked calls, finished actors, the step counter."""

    def __init__(self, actors: Sequence[str], max_calls: int) -> None:
        self.cond = threading.Condition()
        self.parked: dict[str, list[tuple[Call, threading.Event, int]]] = {a: [] for a in actors}
        self.done: set[str] = set()
        self.steps = 0
        self.calls: Counter[str] = Counter()
        self.max_calls = max_calls
        self.abandoned = False
        self.livelocked: set[str] = set()
        self.parked_threads: set[int] = set()
        self.queued = 0  # pool tasks submitted during the execution and not started
        self.task_threads: set[int] = set()  # pool workers running one of those tasks
        # The threads that existed before the execution (not checked), by ident. The Thread object is
        # kept too: a thread of the execution may get the ident of one of them that ended since.
        self.known: dict[int, threading.Thread | None] = {}
        self.ops: list[OpRecord] = []
        self.current: dict[str, OpRecord] = {}  # each actor's operation in progress
        self.resources: list[Any] = []  # closed at the end of the execution (writers, compactors)

    def gate(self, actor: str, op: str, key: str) -> None:
        me = Call(actor, thread_label(threading.current_thread()), op, key)
        go = threading.Event()
        with self.cond:
            if self.abandoned:
                raise Abandoned(str(me))
            self.calls[actor] += 1
            if self.calls[actor] > self.max_calls:
                self.livelocked.add(actor)
                self.cond.notify_all()
                raise Livelock(f"{actor} made more than {self.max_calls} store calls ({op} {key})")
            ident = threading.get_ident()
            self.parked[actor].append((me, go, ident))
            self.parked_threads.add(ident)
            self.cond.notify_all()
            while not go.is_set() and not self.abandoned:
                self.cond.wait()
            if not go.is_set():
                raise Abandoned(str(me))

    def waiting(self) -> list[str]:
        return sorted(a for a in self.parked if a not in self.done and not self.parked[a])

    def quiet(self) -> bool:
        """No thread of the execution can run: every pool task is parked, and every thread started
        during the execution (actors, flushers) is parked, finished, or waits on a condition nobody
        has notified (see :meth:`blocked`). Called with ``cond`` held."""
        if self.queued:
            return False
        frames = sys._current_frames()
        threads = {t.ident: t for t in threading.enumerate()}
        for ident in frames:
            if ident in self.parked_threads:
                continue
            if ident not in self.task_threads:  # a worker (maybe of an earlier execution) runs ours
                thread = threads.get(ident)
                if ident in self.known and self.known[ident] is thread:
                    continue
                if thread is None:
                    return False  # starting: not yet registered
                if _is_pool_worker(thread):
                    continue  # an idle worker
            if not self.blocked(ident, frames):
                return False
        return True

    def blocked(self, ident: int, frames: dict[int, Any], depth: int = 0) -> bool:
        """Whether thread ``ident`` waits until another thread of the execution acts: parked at the
        gate, in ``Condition.wait`` with its waiter not notified (:func:`_waits_unnotified`), or
        joining a thread that is blocked itself. Joining a thread that runs, or whose code has ended
        (no frame in ``frames``, every thread's innermost frame), returns without anyone's help
        however late the joiner is scheduled: that counts as running, like anything else (running,
        sleeping, blocked on a plain lock)."""
        if ident in self.parked_threads:
            return True
        frame = frames.get(ident)
        if frame is None:
            return False
        if frame.f_code is _JOIN_WAIT:
            scope = frame.f_locals
            joined = scope.get("self")
            if not scope.get("block", True) or joined is None or joined.ident is None or depth > 8:
                return False  # is_alive() looks without waiting
            return self.blocked(joined.ident, frames, depth + 1)
        return _waits_unnotified(frame)

    def enabled(self) -> list[Call]:
        return sorted(entry[0] for calls in self.parked.values() for entry in calls)

    def release(self, call: Call) -> None:
        with self.cond:
            calls = self.parked[call.actor]
            for i, (parked, go, ident) in enumerate(calls):
                if parked == call:
                    del calls[i]
                    self.parked_threads.discard(ident)  # running from now on
                    self.steps += 1
                    op = self.current.get(call.actor)
                    if op is not None and op.first is None:
                        op.first = self.steps
                    go.set()
                    self.cond.notify_all()
                    return
        raise Nondeterminism(f"{call} is not parked")

    def abandon(self) -> None:
        with self.cond:
            self.abandoned = True
            for calls in self.parked.values():
                for _, _, ident in calls:
                    self.parked_threads.discard(ident)
                calls.clear()
            self.cond.notify_all()


class Context:
    """What an actor's code gets: its gated store, and a way to record its operations."""

    def __init__(self, run: _Run, actor: str, inner: ObjectStore) -> None:
        self._run = run
        self.actor = actor
        self.store = GatedStore(run, actor, inner)

    def op(self, name: str, work: Callable[[], _R]) -> OpRecord:
        """Run ``work`` as operation ``name``; its outcome (value or error) is recorded, not raised
        (except :class:`Abandoned` and :class:`Livelock`, which end the actor)."""
        with self._run.cond:
            record = OpRecord(self.actor, name, self._run.steps)
            self._run.ops.append(record)
            self._run.current[self.actor] = record
        try:
            record.value = work()
        except (Abandoned, Livelock):
            raise
        except BaseException as error:
            record.error = error
        with self._run.cond:
            record.end = self._run.steps
            del self._run.current[self.actor]
        return record

    def keep(self, resource: Any) -> None:
        """Close ``resource`` (``close()``) when the execution ends, if the actor did not."""
        with self._run.cond:
            self._run.resources.append(resource)


class GatedStore(HookedStore):
    """An actor's view of the store: coordination calls park until the explorer releases them."""

    def __init__(self, run: _Run, actor: str, inner: ObjectStore) -> None:
        self._run = run
        self.actor = actor
        super().__init__(inner)

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        if not is_sst_data(op, key):
            self._run.gate(self.actor, op, key)
        return call()


@dataclass
class Outcome:
    """One complete execution, handed to the scenario's invariant check."""

    store: ObjectStore
    ops: list[OpRecord]
    schedule: list[Call]
    waiting_forever: list[str]
    livelocked: list[str]
    setup: Any

    def of(self, actor: str, name: str) -> OpRecord | None:
        for record in self.ops:
            if record.actor == actor and record.name == name:
                return record
        return None


class Scenario(Protocol):
    """A scenario: named actors over a fresh store, and the invariants of a complete execution."""

    name: str
    actors: tuple[str, ...]

    def setup(self) -> tuple[ObjectStore, Any]:
        """A fresh store with the starting state (not gated), and anything the actors need."""
        ...

    def act(self, actor: str, ctx: Context, setup: Any) -> None:
        """The actor's code: real slate_ops calls through ``ctx.store``, recorded with ``ctx.op``."""
        ...

    def check(self, outcome: Outcome) -> list[str]:
        """The violated invariants of a complete execution (empty: all hold)."""
        ...


@dataclass
class Violation:
    scenario: str
    execution: int
    problems: list[str]
    schedule: list[Call]
    ops: list[str]

    def render(self) -> str:
        lines = [f"{self.scenario}, execution {self.execution}: " + "; ".join(self.problems), "schedule:"]
        lines += [f"  {i + 1:3d}. {call}" for i, call in enumerate(self.schedule)]
        lines += ["operations:"] + [f"  {op}" for op in self.ops]
        return "\n".join(lines)


@dataclass
class Report:
    """What one exploration did; ``interleavings`` counts complete executions (one per trace)."""

    scenario: str
    interleavings: int = 0
    sleep_blocked: int = 0
    max_depth: int = 0
    max_enabled: int = 0
    preemption_bound: int | None = None
    complete: bool = True  # False when stopped early (max_executions, stop_on_violation)
    violating: int = 0
    violations: list[Violation] = field(default_factory=list)  # the first few, with schedules
    problem_kinds: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    duration_s: float = 0.0

    def summary(self) -> str:
        bound = "none (exhaustive)" if self.preemption_bound is None else str(self.preemption_bound)
        return (
            f"{self.scenario}: {self.interleavings} interleavings (+{self.sleep_blocked} sleep-set blocked "
            f"prefixes), depth <= {self.max_depth}, preemption bound {bound}, {self.violating} violating, "
            f"{self.duration_s:.1f} s{'' if self.complete else ' (stopped early)'}"
        )


@dataclass
class _Node:
    enabled: list[Call]
    sleep: frozenset[Call]
    tried: list[Call] = field(default_factory=list)
    last_actor: str | None = None
    preemptions: int = 0


class Explorer:
    def __init__(
        self,
        scenario: Scenario,
        *,
        max_calls: int = 80,
        settle_timeout_s: float = 300.0,  # only a hang: a loaded machine's pauses must not fail a run
        preemption_bound: int | None = None,
        max_executions: int | None = None,
        stop_on_violation: bool = False,
        keep_violations: int = 3,
        classify: Callable[[Outcome], str] | None = None,
    ) -> None:
        self.scenario = scenario
        self.max_calls = max_calls
        self.settle_timeout_s = settle_timeout_s
        self.preemption_bound = preemption_bound
        self.max_executions = max_executions
        self.stop_on_violation = stop_on_violation
        self.keep_violations = keep_violations
        self.classify = classify
        self._current_run: _Run | None = None

    def explore(self) -> Report:
        report = Report(self.scenario.name, preemption_bound=self.preemption_bound)
        started = time.monotonic()
        stack: list[_Node] = []
        schedule: list[Call] = []
        with self._instrumented():
            while True:
                executions = report.interleavings + report.sleep_blocked
                if self.max_executions is not None and executions >= self.max_executions:
                    report.complete = False
                    break
                self._execute(schedule, stack, report)
                if self.stop_on_violation and report.violating:
                    report.complete = False
                    break
                schedule = self._backtrack(stack)
                if not stack:
                    break
        report.duration_s = time.monotonic() - started
        return report

    def follow(self, choose: Callable[[list[Call]], Call]) -> list[list[Call]]:
        """Run one execution outside the search, releasing ``choose(enabled)`` at every step until
        no call is parked; return the parked calls before each step (the last list: those left,
        empty when every actor finished). Two runs with the same ``choose`` must return the same
        lists: the determinism the search relies on (tests/reliability/interleavings/
        test_interleavings.py replays schedules with and without a stalled actor)."""
        seen: list[list[Call]] = []
        with self._instrumented():
            store, setup = self.scenario.setup()
            run, threads = self._start(store, setup)
            try:
                while True:
                    self._settle(run)
                    with run.cond:
                        enabled = run.enabled()
                    seen.append(enabled)
                    if not enabled or run.livelocked:
                        break
                    run.release(choose(enabled))
            finally:
                run.abandon()
                self._finish(run, threads)
        return seen

    @contextlib.contextmanager
    def _instrumented(self) -> Iterator[None]:
        """While exploring: helper threads end quietly when cut, a WAL replay fetches one SST at a
        time, and pool submissions are tracked (:meth:`_tracked_submit`)."""
        hook = threading.excepthook
        threading.excepthook = _quiet_hook(hook)
        parallelism = wal_store.WAL_FETCH_PARALLELISM
        wal_store.WAL_FETCH_PARALLELISM = 1  # a replay fetches one WAL SST at a time
        submit = ThreadPoolExecutor.submit
        ThreadPoolExecutor.submit = self._tracked_submit(submit)  # type: ignore[method-assign]
        try:
            yield
        finally:
            threading.excepthook = hook
            wal_store.WAL_FETCH_PARALLELISM = parallelism
            ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]
            self._current_run = None

    # --- the search -------------------------------------------------------------------------------

    def _allowed(self, node: _Node, call: Call) -> bool:
        if self.preemption_bound is None or node.last_actor is None or call.actor == node.last_actor:
            return True
        if all(c.actor != node.last_actor for c in node.enabled):
            return True  # the last actor cannot go on: switching is not a preemption
        return node.preemptions < self.preemption_bound

    def _candidates(self, node: _Node) -> list[Call]:
        return [
            c for c in node.enabled if c not in node.sleep and c not in node.tried and self._allowed(node, c)
        ]

    def _backtrack(self, stack: list[_Node]) -> list[Call]:
        while stack:
            node = stack[-1]
            candidates = self._candidates(node)
            if candidates:
                node.tried.append(candidates[0])
                return [n.tried[-1] for n in stack]
            stack.pop()
        return []

    @staticmethod
    def _child_sleep(node: _Node, chosen: Call) -> frozenset[Call]:
        asleep = set(node.sleep) | set(node.tried[:-1])
        return frozenset(s for s in asleep if not dependent(s, chosen))

    def _child_preemptions(self, node: _Node, chosen: Call) -> int:
        if node.last_actor is None or chosen.actor == node.last_actor:
            return node.preemptions
        if all(c.actor != node.last_actor for c in node.enabled):
            return node.preemptions
        return node.preemptions + 1

    # --- one execution ----------------------------------------------------------------------------

    def _execute(self, schedule: list[Call], stack: list[_Node], report: Report) -> None:
        store, setup = self.scenario.setup()
        run, threads = self._start(store, setup)
        taken: list[Call] = []
        waiting: list[str] = []
        blocked = False
        depth = 0
        try:
            while True:
                waiting = self._settle(run)
                with run.cond:
                    enabled = run.enabled()
                    livelocked = sorted(run.livelocked)
                if livelocked:
                    break
                if depth < len(stack):
                    node = stack[depth]
                    if node.enabled != enabled:
                        raise Nondeterminism(
                            f"{self.scenario.name}: replaying {[str(c) for c in schedule]} reached "
                            f"{[str(c) for c in enabled]} at step {depth + 1}, first time "
                            f"{[str(c) for c in node.enabled]}"
                        )
                else:
                    if depth == 0:
                        node = _Node(enabled, frozenset())
                    else:
                        parent = stack[depth - 1]
                        chosen_before = parent.tried[-1]
                        node = _Node(
                            enabled,
                            self._child_sleep(parent, chosen_before),
                            last_actor=chosen_before.actor,
                            preemptions=self._child_preemptions(parent, chosen_before),
                        )
                    if not enabled:
                        break
                    candidates = self._candidates(node)
                    if not candidates:
                        blocked = True
                        break
                    node.tried.append(candidates[0])
                    stack.append(node)
                chosen = node.tried[-1]
                report.max_enabled = max(report.max_enabled, len(enabled))
                run.release(chosen)
                taken.append(chosen)
                depth += 1
        finally:
            run.abandon()
            self._finish(run, threads)
        report.max_depth = max(report.max_depth, depth)
        if blocked:
            report.sleep_blocked += 1
            return
        report.interleavings += 1
        outcome = Outcome(store, list(run.ops), taken, waiting, livelocked, setup)
        problems: list[str] = []
        for actor in livelocked:
            problems.append(f"retries without end: {actor} made more than {self.max_calls} store calls")
        for actor in waiting:
            problems.append(f"waits forever: {actor} is blocked outside the store and nobody else can move")
        if not problems:
            problems = self.scenario.check(outcome)
        if self.classify is not None:
            report.outcomes[self.classify(outcome)] += 1
        if problems:
            report.violating += 1
            for problem in problems:
                report.problem_kinds[problem.split(":", 1)[0]] += 1
            if len(report.violations) < self.keep_violations:
                report.violations.append(
                    Violation(
                        self.scenario.name,
                        report.interleavings,
                        problems,
                        taken,
                        [op.describe() for op in run.ops],
                    )
                )

    def _tracked_submit(self, submit: Callable[..., Future[Any]]) -> Callable[..., Future[Any]]:
        """``ThreadPoolExecutor.submit`` that counts the task as runnable until it parks or ends (the
        writer's confirmation HEAD, WAL fetches, a compactor's reads run on pools)."""
        explorer = self

        def tracked(
            pool: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> Future[Any]:
            run = explorer._current_run
            if run is None:
                return submit(pool, fn, *args, **kwargs)
            started: list[int] = []
            with run.cond:
                run.queued += 1

            def task() -> Any:
                ident = threading.get_ident()
                with run.cond:
                    run.queued -= 1
                    run.task_threads.add(ident)
                    started.append(ident)
                return fn(*args, **kwargs)

            def finished(_: Future[Any]) -> None:
                # Runs after the result's waiters are notified (in the worker, or in the thread that
                # cancelled a task that never started), so a waiter never looks blocked in between.
                with run.cond:
                    if started:
                        run.task_threads.discard(started[0])
                    else:
                        run.queued -= 1
                    run.cond.notify_all()

            try:
                future = submit(pool, task)
            except BaseException:
                with run.cond:
                    run.queued -= 1
                raise
            future.add_done_callback(finished)
            return future

        return tracked

    def _body(self, run: _Run, actor: str, store: ObjectStore, setup: Any) -> None:
        ctx = Context(run, actor, store)
        try:
            self.scenario.act(actor, ctx, setup)
        except (Abandoned, Livelock):
            pass
        finally:
            with run.cond:
                run.done.add(actor)
                run.cond.notify_all()

    def _start(self, store: ObjectStore, setup: Any) -> tuple[_Run, list[threading.Thread]]:
        """A new execution: its shared state, and one started thread per actor."""
        run = _Run(self.scenario.actors, self.max_calls)
        threads = {t.ident: t for t in threading.enumerate()}
        run.known = {ident: threads.get(ident) for ident in sys._current_frames()}
        self._current_run = run
        actors = [
            threading.Thread(
                target=self._body, args=(run, actor, store, setup), name=f"actor:{actor}", daemon=True
            )
            for actor in self.scenario.actors
        ]
        for thread in actors:
            thread.start()
        return run, actors

    def _settle(self, run: _Run) -> list[str]:
        """Wait until no thread of the execution can run (:meth:`_Run.quiet`), however long that
        takes; return the actors then neither parked nor finished: they wait outside the store
        (nothing a store call does can wake them), and the others go on — at the end they wait
        forever. :class:`Unsettled` after ``settle_timeout_s`` (see the module docstring)."""
        deadline = time.monotonic() + self.settle_timeout_s
        with run.cond:
            while not run.livelocked and not run.quiet():
                if time.monotonic() >= deadline:
                    raise Unsettled(
                        f"{self.scenario.name}: after step {run.steps}, a thread of the execution neither "
                        f"parked, finished nor blocked within {self.settle_timeout_s:.0f} s:\n"
                        + _running_threads(run)
                    )
                run.cond.wait(POLL_S)
            return run.waiting()

    def _finish(self, run: _Run, threads: list[threading.Thread]) -> None:
        """Stop everything the execution started: actors end at their next store call (every call
        raises :class:`Abandoned` now); the writers they opened are closed here too, which stops
        their flushers (an actor cut mid-way never closed its writer; one waiting forever for
        durability is woken by the close)."""
        for thread in threads:
            thread.join(0.2)
        for resource in list(run.resources):
            with contextlib.suppress(BaseException):
                resource.close()
        for thread in threads:
            thread.join(10)
            if thread.is_alive():
                raise AssertionError(f"{thread.name} did not stop after the execution was abandoned")


def _running_threads(run: _Run) -> str:
    """The threads of the execution, parked or not, each with its innermost frames (for
    :class:`Unsettled`)."""
    frames = sys._current_frames()
    lines = []
    for thread in threading.enumerate():
        ident = thread.ident or 0
        frame = frames.get(ident)
        if frame is None or run.known.get(ident, False) is thread:
            continue
        where: list[str] = []
        f: Any = frame
        while f is not None and len(where) < 6:
            where.append(f"{f.f_code.co_name}:{f.f_lineno}")
            f = f.f_back
        lines.append(f"  {thread.name} parked={ident in run.parked_threads}: {' < '.join(where)}")
    return "\n".join(lines)


POLL_S = 0.0005
_CONDITION_WAIT = threading.Condition.wait.__code__
_THREAD_START = threading.Thread.start.__code__
# Thread.join waits in here (Python 3.11; also is_alive, without blocking).
_JOIN_WAIT = threading.Thread._wait_for_tstate_lock.__code__  # type: ignore[attr-defined]


def _is_pool_worker(thread: threading.Thread) -> bool:
    return getattr(thread, "_target", None) is _pool_thread._worker


def _waits_unnotified(frame: Any) -> bool:
    """Whether a thread whose innermost frame is ``frame`` waits in ``Condition.wait`` (an Event, a
    Future, a Condition) with its waiter lock still queued, i.e. nobody has notified it yet."""
    if frame.f_code is not _CONDITION_WAIT:
        return False
    caller = frame.f_back
    for _ in range(2):
        if caller is None:
            break
        if caller.f_code is _THREAD_START:
            return False  # waits for a new thread to start: that thread runs
        caller = caller.f_back
    scope = frame.f_locals
    waiter, condition = scope.get("waiter"), scope.get("self")
    return waiter is not None and condition is not None and waiter in condition._waiters


def _quiet_hook(
    previous: Callable[[threading.ExceptHookArgs], Any],
) -> Callable[[threading.ExceptHookArgs], Any]:
    """Helper threads (a writer's flusher) end with :class:`Abandoned` when an execution is cut."""

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not None and issubclass(args.exc_type, (Abandoned, Livelock)):
            return
        previous(args)

    return hook
