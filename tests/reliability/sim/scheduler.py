"""The scheduler: one seeded step after another (the clock moves, an actor is chosen and runs one
action), stalls that run another actor inside a hanging request, the periodic full check, the final
phase with faults off, and the run's result (trace, counters and the digest of the store)."""

from __future__ import annotations

import contextlib
import hashlib
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime

from slate_ops import admin
from slate_ops.compaction import Compactor, LocalExecutor
from slate_ops.engine import Db
from slate_ops.gc import GarbageCollector
from slate_ops.objstore import LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.reliability.sim.actors.admin import AdminActor
from tests.reliability.sim.actors.compactor import CompactorActor
from tests.reliability.sim.actors.gc import GcActor, collect
from tests.reliability.sim.actors.lifecycle import Lifecycle
from tests.reliability.sim.actors.reader import ReaderActor
from tests.reliability.sim.actors.writer import WriterActor
from tests.reliability.sim.checks import check_nothing_left_behind, full_check
from tests.reliability.sim.context import SimContext
from tests.reliability.sim.runtime import (
    ACTOR_WEIGHTS,
    ACTORS,
    COMPACTOR_OPTIONS,
    MAIN,
    WRITER_OPTIONS,
    SimConfig,
    SimResult,
    SimTimeStore,
    TraceEntry,
    derive,
    memoized_manifest_decoding,
    without_faults,
)
from tests.reliability.sim.wal_puts import SimRuntime


class Simulation:
    """One seeded run: the actors on one :class:`SimContext`, interleaved by its random stream."""

    def __init__(self, config: SimConfig) -> None:
        self.ctx = SimContext(config)
        self._stall_rng = random.Random(derive(config.seed, "stalls"))
        self._stalls_this_step = 0
        self.writer = WriterActor(self.ctx)
        self.reader = ReaderActor(self.ctx)
        self.compactor = CompactorActor(self.ctx)
        self.gc = GcActor(self.ctx)
        self.admin = AdminActor(self.ctx)
        self.lifecycle = Lifecycle(self.ctx)
        self.ctx.family = self.lifecycle
        self.ctx.on_request = self._stall
        self._steps: dict[str, Callable[[str | None], tuple[str, str]]] = {
            "writer": self.writer.step,
            "reader": self.reader.step,
            "compactor": self.compactor.step,
            "gc": self.gc.step,
            "admin": self.admin.step,
            "lifecycle": self.lifecycle.step,
        }

    def run(self) -> SimResult:
        ctx = self.ctx
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            stack.enter_context(memoized_manifest_decoding())  # speed only
            ctx.inner = self._make_inner()
            try:
                admin.create_db(MAIN, ctx.inner)
                for step in range(1, ctx.config.steps + 1):
                    ctx.step = step
                    self._one_step()
                ctx.step = ctx.config.steps + 1
                self._final_phase()
            finally:
                self._drop_everything()
            listing = [
                (m.key, hashlib.sha256(ctx.inner.get(m.key).data).hexdigest()) for m in ctx.inner.list("")
            ]
        figures = {k: float(v) for k, v in ctx.figures.items()}
        figures["writes_issued"] = float(ctx.model.issued)
        figures["objects_at_end"] = float(len(listing))
        if isinstance(ctx.clock, SimRuntime):  # WAL PUTs started together that landed out of id order
            figures["wal_put_batches_reordered"] = float(sum(p.reordered for p in ctx.clock.wal_put_pools))
        digest = hashlib.sha256(repr(([tuple(vars(e).values()) for e in ctx.trace], listing)).encode())
        return SimResult(
            ctx.config,
            ctx.trace,
            digest.hexdigest(),
            ctx.actions,
            ctx.faults,
            ctx.checks,
            figures,
            time.monotonic() - started,
        )

    def _make_inner(self) -> ObjectStore:
        ctx = self.ctx
        if ctx.config.store == "local":
            if ctx.config.root is None:
                raise ValueError("a local-store simulation needs SimConfig.root")
            return SimTimeStore(LocalStore(ctx.config.root), ctx.clock)
        return MemoryStore("sim", now=lambda: datetime.fromtimestamp(ctx.clock.now(), UTC))

    def _one_step(self) -> None:
        ctx = self.ctx
        self._stalls_this_step = 0
        ctx.clock.advance(self._clock_step())
        if self.reader.poll_due():
            self._run_actor("reader", forced="poll")
        actor = ctx.rng.choices(ACTORS, weights=ACTOR_WEIGHTS)[0]
        self._run_actor(actor)
        if ctx.step % ctx.config.check_every == 0:
            full_check(ctx)

    def _clock_step(self) -> float:
        roll = self.ctx.rng.random()
        if roll < 0.3:
            return 0.0
        if roll < 0.8:
            return round(self.ctx.rng.uniform(0, 5), 3)
        return round(self.ctx.rng.uniform(5, 60), 3)

    def _run_actor(self, actor: str, forced: str | None = None, during: str | None = None) -> None:
        ctx = self.ctx
        ctx.running.append(actor)
        try:
            action, outcome = self._steps[actor](forced)
        finally:
            ctx.running.pop()
        label = action if during is None else f"{action} (during {during})"
        ctx.trace.append(TraceEntry(ctx.step, actor, label, outcome))
        ctx.actions[f"{actor}.{action} {outcome.split(' ', 1)[0].rstrip(':;')}"] += 1

    def _stall(self, actor: str, op: str) -> None:
        """A stall: the request hangs for a while; another actor may run a step meanwhile."""
        ctx = self.ctx
        if self._stall_rng.random() >= ctx.config.stall_rate or self._stalls_this_step >= 2:
            return
        self._stalls_this_step += 1  # bounded, so an operation never stalls past GC's min_age
        ctx.faults["stall"] += 1
        ctx.clock.advance(round(self._stall_rng.uniform(1, ctx.config.max_stall_s), 3))
        busy = {r.split(".", 1)[0] for r in ctx.running}
        candidates = [a for a in ACTORS if a not in busy]
        if candidates and self._stall_rng.random() < 0.7:
            other = self._stall_rng.choice(candidates)
            ctx.faults["interleaved-step"] += 1
            self._run_actor(other, during=f"{actor}.{op}")

    def _final_phase(self) -> None:
        """Faults off: every process restarts, the writer recovers, maintenance runs cleanly, and GC
        leaves nothing unreferenced that is older than min_age."""
        ctx = self.ctx
        self._drop_everything()
        ctx.config = without_faults(ctx.config)
        store = ctx.store_for("final")
        db = ctx.db = Db.open(MAIN, store, WRITER_OPTIONS, clock=ctx.clock, background=False)
        self.writer.store = store
        self.writer.check_recovery()
        self.admin.finish_interrupted(store)
        db.flush_memtable()
        ctx.model.acknowledge()
        compactor = Compactor(
            MAIN, store, COMPACTOR_OPTIONS, LocalExecutor(threads=1, clock=ctx.clock), clock=ctx.clock
        )
        compactor.run_once(full=True)
        gc = GarbageCollector(MAIN, store, ctx.gc_options(), clock=ctx.clock)
        for advance in (3600.0, ctx.config.min_age_s + 1, ctx.config.min_age_s + 1):
            ctx.clock.advance(advance)
            db.poll_manifest()  # drops the writer's hold on the pre-compaction state
            collect(ctx, gc, MAIN, dry_run=False, store=self.gc.store)
        ctx.trace.append(TraceEntry(ctx.step, "final", "recover, compact, collect", "ok"))
        self.lifecycle.finish(ctx.store_for("lifecycle"))
        full_check(ctx)
        check_nothing_left_behind(ctx)

    def _drop_everything(self) -> None:
        """Every process dies (nothing is flushed or closed)."""
        self.writer.drop()
        self.reader.drop()
        self.compactor.drop()
        self.gc.drop()
        self.admin.store = None
        self.lifecycle.store = None


def run_simulation(config: SimConfig) -> SimResult:
    return Simulation(config).run()
