"""The adversarial simulation's shared world, with public names: what every actor reads and changes.

:class:`AdvContext` holds the configuration, the one seeded runtime and the scheduler's random stream,
the store, the family of databases (:class:`~tests.reliability.sim.adversary.model.Member`), the trace
and the counters, the interleaver of the episode running, and the helpers that turn an error into a
trace outcome or an :class:`InvariantViolation`. Actors receive it, never the scheduler.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from slate_ops.gc import GcOptions
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.reliability.sim.adversary.model import AdvConfig, Member, Writer, deleted
from tests.reliability.sim.interleave import Interleaver, Livelock, Stuck, TaskOutcome
from tests.reliability.sim.runtime import START_TIME, InvariantViolation, TraceEntry, derive, sim_runtime


class AdvContext:
    """One adversarial run's state; ``step`` counts API calls of every actor."""

    def __init__(self, config: AdvConfig) -> None:
        self.config = config
        self.clock = sim_runtime(config.seed)
        self.rng = random.Random(derive(config.seed, "adversary"))
        self.trace: list[TraceEntry] = []
        self.actions: Counter[str] = Counter()
        self.checks: Counter[str] = Counter()
        self.figures: Counter[str] = Counter()
        self.step = 0
        self.episode = 0
        self.members: dict[str, Member] = {}
        self.inner: ObjectStore = MemoryStore("adversary")
        self.index = 0  # global write index
        self.counter = 0  # names handed out
        self.values = 0  # values handed out
        self.running = "setup"  # the episode running, for a violation's message
        self.interleaving: Interleaver | None = None

    def tick(self, actor: str, action: str, outcome: str) -> None:
        self.step += 1
        self.actions[f"{actor}.{action} {outcome.split(' ', 1)[0].rstrip(':;')}"] += 1
        self.trace.append(TraceEntry(self.step, actor, action, outcome))

    def violation(self, what: str) -> InvariantViolation:
        tail = "\n".join(str(e) for e in self.trace[-self.config.trace_tail :])
        if self.interleaving is not None:
            events = self.interleaving.events[-self.config.trace_tail :]
            tail += "\nthe interleaved store calls so far (index, task, request, key):\n" + "\n".join(
                f"{e.index:>6}  {e.task:<10} {e.op:<6} {e.key}{'' if e.ok else ' (failed)'}" for e in events
            )
        message = (
            f"adversarial simulation seed {self.config.seed} violated an invariant at step {self.step} "
            f"(episode {self.episode}, {self.running}, clock +{self.clock.now() - START_TIME:.1f}s):\n"
            f"  {what}\nreplay: {self.config.replay_command()}\n"
            f"last {min(len(self.trace), self.config.trace_tail)} trace entries "
            "(step, actor, action, outcome):\n"
            f"{tail}"
        )
        return InvariantViolation(message, list(self.trace))

    def refused(self, what: str, error: BaseException, expected: tuple[type[BaseException], ...]) -> str:
        """The outcome of an allowed refusal; a violation for any other error."""
        if isinstance(error, InvariantViolation):
            raise error
        if isinstance(error, Livelock):
            raise self.violation(f"{what} never finished (nobody may wait forever): {error}") from error
        if isinstance(error, expected):
            return f"refused: {type(error).__name__}"
        raise self.violation(f"{what} raised an unexpected {type(error).__name__}: {error}") from error

    def value(self) -> bytes:
        self.values += 1
        return b"v%06d" % self.values

    def new_path(self, kind: str, parent: str | None = None) -> str:
        self.counter += 1
        if kind == "nested" and parent is not None:
            return f"{parent}/n{self.counter}" if parent else f"n{self.counter}"
        return f"db{self.counter}"

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.state == "live"]

    def present(self) -> list[Member]:
        return [m for m in self.members.values() if m.state != "deleted"]

    def latest(self, path: str) -> Manifest | None:
        latest = ManifestStore(self.inner, path).read_latest()
        return None if latest is None else latest.value

    def gone(self, path: str) -> bool:
        latest = self.latest(path)
        return latest is None or deleted(latest)

    def gc_options(self) -> GcOptions:
        return GcOptions.with_min_age(
            timedelta(seconds=self.config.min_age_s), db_delete_grace=timedelta(seconds=self.config.grace_s)
        )

    def incarnation(self, name: str) -> int:
        old = self.members.get(name)
        return 0 if old is None else old.incarnation + 1

    def new_writer(self, member: Member, label: str) -> Writer:
        return Writer(f"{label}", member, member.incarnation)

    def deleted_now(self, member: Member) -> None:
        if member.path == "":
            self.figures["root_deletions"] += 1
        member.state = "deleted"
        member.reset({})
        member.tags.clear()

    # --- interleaved episodes -----------------------------------------------------------------

    def interleaver(
        self, *, stall_rate: float, max_stall_s: float = 60.0, switch_rate: float = 0.5
    ) -> Interleaver:
        return Interleaver(
            random.Random(derive(self.config.seed, "interleave", str(self.episode))),
            clock=self.clock,
            switch_rate=switch_rate,
            stall_rate=stall_rate,
            max_stall_s=max_stall_s,
            max_calls=self.config.max_calls,
        )

    def interleave(
        self, interleaver: Interleaver, tasks: list[tuple[str, Callable[[], None]]]
    ) -> dict[str, TaskOutcome]:
        self.interleaving = interleaver
        try:
            outcomes = interleaver.run(tasks)
        except Stuck as stuck:
            raise self.violation(f"a task blocked outside the store: {stuck}") from stuck
        self.figures["interleaved_store_calls"] += len(interleaver.events)
        for name, outcome in outcomes.items():
            if outcome.error is not None:
                self.refused(name, outcome.error, ())  # every expected error was handled inside
        self.interleaving = None
        return outcomes
