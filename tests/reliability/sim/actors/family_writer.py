"""Writer sessions on the lifecycle family's databases (part of the lifecycle actor): a writer opens,
issues a few puts, deletes and batches (some with ``await_durable``), then closes, flushes to L0 and
closes, or crashes; after a crash the store is settled at once — a fresh reader must see a prefix of
the session's writes at least as long as the acknowledged one, and the model keeps that prefix.
Also the L0 flush a split or merge asks of a source whose data is still only in its WAL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slate_ops.engine import Db
from tests.reliability.sim import invariants
from tests.reliability.sim.family import FAMILY_KEYS, LANES, Member
from tests.reliability.sim.runtime import WRITER_OPTIONS, InvariantViolation, Op, SimStore, diff, write_ops
from tests.support.engine import simulate_crash

if TYPE_CHECKING:
    from tests.reliability.sim.context import SimContext


class FamilyWriterActor:
    """Writer sessions of the lifecycle actor; it tells the lifecycle step what it armed and touched."""

    def __init__(self, ctx: SimContext) -> None:
        self.ctx = ctx
        self.universe = tuple(sorted((*FAMILY_KEYS, *ctx.keys)))
        self.armed = False  # a crash is due part-way through the lifecycle step (the lifecycle sets it)

    def session(self, store: SimStore, member: Member) -> str:
        """Open a writer, issue a few writes (some awaiting durability), then close, flush to L0 and
        close, or crash; a crashed session is settled at once (see the module docstring). A session
        ending in a crash part-way arms the store's crash unless :attr:`armed` already is."""
        ctx = self.ctx
        model = member.model
        keys = member.writable_keys(self.universe)
        home = [k for k in keys if k[0] == LANES[member.lane]] or keys
        try:
            db = Db.open(member.path, store, WRITER_OPTIONS, clock=ctx.clock, background=False)
        except Exception as error:
            return ctx.outcome(error) + " (opening the writer)"
        ending = ctx.rng.choices(("close", "flush_memtable", "crash", "crash_mid"), weights=(45, 30, 12, 13))[
            0
        ]
        if ending == "crash_mid" and not self.armed:
            store.faulty.crash_after(ctx.rng.randrange(0, 12))
            self.armed = True
        written = durable = 0
        try:
            seen = dict(db.scan())
            ctx.checks["family_writer_opens_on_its_model"] += 1
            if seen != model.current:
                raise ctx.violation(
                    f"a writer opened on {member.path} reads {diff(seen, model.current)} vs its model"
                )
            for _ in range(ctx.rng.randint(1, 6)):
                # Mostly its own lane: databases without a range then often hold disjoint data (two
                # clones of one parent taken at different times can be merged).
                stray = 0.25 if member.key_range is not None else 0.0
                ops = self._ops(keys if ctx.rng.random() < stray else home)
                await_durable = ctx.rng.random() < ctx.config.durable_write_rate
                member.data_keys.update(k for k, _ in ops)  # before: it may fail once applied
                member.wal_only = True
                write_ops(db, model, ops, await_durable)
                written += 1
                if await_durable:
                    durable += 1
                    ctx.figures["durable_writes"] += 1
            if ending == "flush_memtable":
                db.flush_memtable()
                model.acknowledge()
                member.wal_only = False
            if ending in ("close", "flush_memtable"):
                db.close()
                model.acknowledge()
                return f"ok {written} writes ({durable} durable), {ending}"
            simulate_crash(db)
            return f"ok {written} writes ({durable} durable); crashed on purpose, " + self.settle(member)
        except InvariantViolation:
            raise
        except Exception as error:
            simulate_crash(db)
            outcome = ctx.outcome(error)
            return f"{outcome} after {written} writes ({durable} durable); " + self.settle(member)

    def _ops(self, keys: list[bytes]) -> tuple[Op, ...]:
        ctx = self.ctx
        if ctx.rng.random() < 0.2:
            return tuple(
                (ctx.rng.choice(keys), ctx.value() if ctx.rng.random() < 0.8 else None) for _ in range(3)
            )
        return ((ctx.rng.choice(keys), ctx.value() if ctx.rng.random() < 0.85 else None),)

    def settle(self, member: Member) -> str:
        """After a writer crash: a fresh reader sees a prefix of the writes at least as long as the
        acknowledged one (every write acknowledged with await_durable included); the rest is lost."""
        ctx = self.ctx
        model = member.model
        observed = invariants.read(ctx, member.path, what=f"{member.path} after a writer crash")
        ctx.checks["family_crash_keeps_acknowledged_writes"] += 1
        if model.durable_writes:
            ctx.checks["durable_writes_survive_crash"] += 1
        prefix = model.last_match(observed, model.durable, model.issued)
        if prefix is None:
            raise ctx.violation(
                f"after a writer crash, {member.path} holds no prefix of its writes in [{model.durable}, "
                f"{model.issued}] (durable writes acknowledged up to {model.durable_writes}); vs the "
                f"acknowledged state: {diff(observed, model.state(model.durable))}"
            )
        lost = model.issued - prefix
        ctx.figures["unacknowledged_writes_lost"] += lost
        model.truncate(prefix)
        return f"settled: {lost} unacknowledged lost"

    def flush_source(self, store: SimStore, member: Member, touched: list[Member]) -> str | None:
        """What WalNotFlushedError says to do: a writer that flushes its memtable to L0 and closes.
        None when it worked, else its outcome (``member`` joins ``touched``, the members the step
        checks after it, when the writer failed after opening)."""
        ctx = self.ctx
        try:
            db = Db.open(member.path, store, WRITER_OPTIONS, clock=ctx.clock, background=False)
        except Exception as error:
            return ctx.outcome(error) + " (opening the writer)"
        try:
            db.flush_memtable()
            db.close()
        except InvariantViolation:
            raise
        except Exception as error:
            simulate_crash(db)
            touched.append(member)
            return ctx.outcome(error) + "; " + self.settle(member)
        member.wal_only = False
        ctx.figures["family_flushes_before_rescale"] += 1
        return None
