"""Paused processes: a compactor, a second compactor, GC and a writer on one database, interleaved
with clock jumps up to twice GC's ``min_age`` at the hand-overs (the stalled process of SlateDB's GC
boundary-file design, in the manifest and ``.compactions`` namespaces)."""

from __future__ import annotations

from collections.abc import Callable

from slate_ops.compaction import Compactor, LocalExecutor
from slate_ops.objstore.base import ObjectStore
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import PROCESS_REFUSALS, Member, task_errors
from tests.reliability.sim.adversary.moves import DatabaseMoves
from tests.reliability.sim.adversary.writers import WriterSessions
from tests.reliability.sim.runtime import COMPACTOR_OPTIONS


class PausedProcessesActor:
    """Compactors, GC and a writer stalled and resumed in a seeded order on one database."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx
        self.writers = WriterSessions(ctx)
        self.moves = DatabaseMoves(ctx)

    def paused_processes(self) -> str:
        """A compactor, a second compactor, GC and a writer on one database, interleaved with clock
        jumps up to twice min_age at the hand-overs."""
        member = self.ctx.rng.choice(self.ctx.live())
        self.moves.l0_material(member)
        interleaver = self.ctx.interleaver(stall_rate=0.35, max_stall_s=2 * self.ctx.config.min_age_s)
        tasks: list[tuple[str, Callable[[], None]]] = []
        roster = ["compactor", "compactor2", "gc", "writer"]
        chosen = [r for r in roster if self.ctx.rng.random() < 0.7] or ["compactor", "gc"]
        for name in chosen:
            store = interleaver.store(name, self.ctx.inner)
            tasks.append((name, self._process_task(name, member, store)))
        outcomes = self.ctx.interleave(interleaver, tasks)
        self.ctx.figures["paused_process_episodes"] += 1
        self.ctx.figures["paused_process_stalls"] += interleaver.stalls
        return (
            f"ok {member.path or '<root>'}: {', '.join(chosen)}, {interleaver.stalls} stalls "
            + task_errors(outcomes)
        )

    def _process_task(self, name: str, member: Member, store: ObjectStore) -> Callable[[], None]:
        def compactor() -> None:
            try:
                report = Compactor(
                    member.path,
                    store,
                    COMPACTOR_OPTIONS,
                    LocalExecutor(threads=1, clock=self.ctx.clock),
                    clock=self.ctx.clock,
                ).run_once(full=self.ctx.rng.random() < 0.5)
            except Exception as error:
                self.ctx.tick(name, "run_once", self.ctx.refused(name, error, PROCESS_REFUSALS))
                return
            self.ctx.tick(name, "run_once", "ok" if report is None else f"ok {report.kind}")

        def gc() -> None:
            self.ctx.tick(name, "run_once", self.moves.collect(member, store=store))

        def writer() -> None:
            w = self.ctx.new_writer(member, name)
            self.writers.session(
                w, store, self.ctx.rng.randint(1, 3), self.ctx.rng.choice(("flush_memtable", "close"))
            )

        return {"compactor": compactor, "compactor2": compactor, "gc": gc, "writer": writer}[name]
