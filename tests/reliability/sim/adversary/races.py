"""Racing opens: two or three writers race ``Db.open`` on one path and write, their store calls
interleaved one at a time by a seeded :class:`~tests.reliability.sim.interleave.Interleaver`; and the
plain writer session the scheduler runs between adversarial episodes."""

from __future__ import annotations

from collections.abc import Callable

from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import Writer, task_errors
from tests.reliability.sim.adversary.writers import WriterSessions


class RaceActor:
    """Writers racing for one database, and single writer sessions."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx
        self.writers = WriterSessions(ctx)

    def session_episode(self) -> str:
        member = self.ctx.rng.choice(self.ctx.live())
        ending = self.ctx.rng.choice(("close", "flush_memtable", "flush_memtable", "crash"))
        self.writers.session(
            self.ctx.new_writer(member, "writer"), self.ctx.inner, self.ctx.rng.randint(1, 5), ending
        )
        return f"ok {member.path or '<root>'} ({ending})"

    def race(self) -> str:
        """Two or three writers race Db.open on one path, then write and close, interleaved."""
        member = self.ctx.rng.choice(self.ctx.live())
        n = 3 if self.ctx.rng.random() < 0.25 else 2
        # Some races switch at almost every request, others let one writer run a while (a claim of
        # several requests lands between two of another writer's).
        interleaver = self.ctx.interleaver(stall_rate=0.0, switch_rate=self.ctx.rng.choice((0.15, 0.3, 0.6)))
        writers = [self.ctx.new_writer(member, f"racer{i}") for i in range(n)]

        def task(writer: Writer) -> Callable[[], None]:
            store = interleaver.store(writer.name, self.ctx.inner)

            def work() -> None:
                ending = self.ctx.rng.choice(("close", "flush_memtable", "flush", "crash"))
                self.writers.session(writer, store, self.ctx.rng.randint(1, 3), ending)

            return work

        outcomes = self.ctx.interleave(interleaver, [(w.name, task(w)) for w in writers])
        self.ctx.figures["races"] += 1
        self.ctx.figures["race_interleaved_switches"] += interleaver.switches
        epochs = sorted(w.epoch for w in writers if w.epoch)
        acked = [w.name for w in writers if w.acked]
        if len(acked) > 1:
            self.ctx.figures["races_with_two_acknowledging"] += 1  # legal if each acked before the next open
        return f"ok {member.path or '<root>'}: {n} writers, epochs {epochs}, acknowledged by {acked} " + (
            task_errors(outcomes)
        )
