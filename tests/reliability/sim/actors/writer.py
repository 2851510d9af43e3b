"""The writer actor: puts, deletes, batches, reads of its own writes, flushes, checkpoints, crashes,
clean restarts and takeovers (the old writer is then a zombie that must never acknowledge)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from slate_ops.config import CheckpointOptions
from slate_ops.engine import CheckpointScope, Db
from slate_ops.errors import FencedError
from slate_ops.manifest.model import WriterCheckpoint
from slate_ops.manifest.store import ManifestStore
from tests.reliability.sim.actors.scans import finish_scan, open_scan
from tests.reliability.sim.context import SimContext
from tests.reliability.sim.pins import track_checkpoint
from tests.reliability.sim.runtime import MAIN, WRITER_OPTIONS, SimStore, diff, short, write_ops
from tests.support.engine import simulate_crash

WEIGHTS = {
    "put": 40,
    "delete": 6,
    "batch": 10,
    "get": 6,
    "scan": 2,
    "scan_open": 2,
    "scan_finish": 4,
    "flush": 10,
    "flush_memtable": 7,
    "poll": 3,
    "checkpoint": 3,
    "crash": 0.7,
    "crash_mid": 1.3,
    "takeover": 0.7,
    "reopen": 0.7,
}


class WriterActor:
    """The writer of main (``ctx.db``), one process at a time."""

    def __init__(self, ctx: SimContext) -> None:
        self.ctx = ctx
        self.store: SimStore | None = None

    def step(self, forced: str | None) -> tuple[str, str]:
        ctx = self.ctx
        if ctx.db is None:
            return "open", self.open()
        db = ctx.db
        scanning = ctx.writer_scan is not None
        actions = {
            **WEIGHTS,
            "scan_open": 0 if scanning else WEIGHTS["scan_open"],
            "scan_finish": WEIGHTS["scan_finish"] if scanning else 0,
        }
        action = ctx.doing(forced or ctx.rng.choices(list(actions), weights=list(actions.values()))[0])
        if action in ("crash", "crash_mid", "takeover", "reopen"):
            ctx.writer_scan = None
        if action == "takeover":
            return action, self._takeover()
        if action == "reopen":
            return action, self._reopen(db)
        if action == "crash_mid":
            assert self.store is not None
            self.store.faulty.crash_after(ctx.rng.randrange(0, 10))
            action = "crash_mid:" + ctx.rng.choice(("flush", "flush_memtable", "checkpoint"))
        try:
            outcome = self._act(db, action.removeprefix("crash_mid:"))
        except FencedError as error:
            raise ctx.violation(f"the writer was fenced although no other writer opened: {error}") from error
        except Exception as error:
            outcome = ctx.outcome(error)
        if action.startswith("crash") or outcome == "crashed":
            self._crash()
            outcome += "; writer process died"
        return action, outcome

    def _act(self, db: Db, action: str) -> str:
        ctx = self.ctx
        model = ctx.model
        if action in ("put", "delete", "batch"):
            if action == "batch":
                ops = tuple((ctx.key(), ctx.value() if ctx.rng.random() < 0.8 else None) for _ in range(3))
            else:
                key = ctx.key()
                ops = ((key, None if action == "delete" else ctx.value()),)
            await_durable = ctx.rng.random() < ctx.config.durable_write_rate
            write_ops(db, model, ops, await_durable)
            if await_durable:
                ctx.figures["durable_writes"] += 1
            what = f"{len(ops)} ops" if action == "batch" else ops[0][0].decode()
            return f"ok {what}{' durable' if await_durable else ''}"
        if action == "get":
            key = ctx.key()
            got = db.get(key)
            ctx.checks["writer_reads_own_writes"] += 1
            if got != model.current.get(key):
                raise ctx.violation(
                    f"the writer reads {short(got)} for {key!r}, its last write was "
                    f"{short(model.current.get(key))}"
                )
            return "ok"
        if action == "scan_open":
            ctx.writer_scan = open_scan(ctx, db.scan(), model.issued, db.writer_checkpoint_id)
            return f"ok pins its checkpoint, {len(ctx.writer_scan.seen)} keys read"
        if action == "scan_finish":
            assert ctx.writer_scan is not None
            scan, ctx.writer_scan = ctx.writer_scan, None
            return finish_scan(ctx, scan, "writer")
        if action == "scan":
            observed = dict(db.scan())
            ctx.checks["writer_reads_own_writes"] += 1
            if observed != model.current:
                raise ctx.violation(
                    f"the writer's scan differs from its writes: {diff(observed, model.current)}"
                )
            return f"ok {len(observed)} keys"
        if action == "crash":
            return "ok"
        if action == "flush":
            db.flush()
            model.acknowledge()
            return "ok"
        if action == "flush_memtable":
            before = db.writer_checkpoint_id
            db.flush_memtable()
            model.acknowledge()
            self._check_writer_checkpoints(db, before)
            return f"ok l0={len(db.manifest.l0)}"
        if action == "poll":
            before = db.writer_checkpoint_id
            db.poll_manifest()  # what the flusher thread does every manifest_poll_interval
            self._check_writer_checkpoints(db, before)
            return "ok"
        if action == "checkpoint":
            scope = ctx.rng.choice((CheckpointScope.ALL, CheckpointScope.DURABLE))
            lifetime = timedelta(seconds=ctx.rng.choice((120, 600, 1800)))
            lo = ctx.seen_floor()
            created = db.create_checkpoint(scope, CheckpointOptions(lifetime=lifetime))
            if scope is CheckpointScope.ALL:
                model.acknowledge()
                lo = model.issued
            track_checkpoint(ctx, "checkpoint", created.id, lo, model.issued, f"writer {scope.value}")
            return f"ok {scope.value}"
        raise AssertionError(action)

    def open(self) -> str:
        """Open a new writer process and check what it recovered."""
        ctx = self.ctx
        store = ctx.store_for("writer")
        try:
            db = Db.open(MAIN, store, WRITER_OPTIONS, clock=ctx.clock, background=False)
        except Exception as error:
            return ctx.outcome(error)
        ctx.db, self.store = db, store
        self.check_recovery()
        return f"ok epoch={db.writer_epoch} recovered={ctx.model.issued}"

    def _reopen(self, db: Db) -> str:
        """A clean restart: close (which flushes the WAL), then open again."""
        ctx = self.ctx
        ctx.db = self.store = None
        try:
            db.close()
            ctx.model.acknowledge()
            outcome = "closed"
        except Exception as error:
            outcome = "close " + ctx.outcome(error)
        return f"{outcome}; open {self.open()}"

    def _crash(self) -> None:
        ctx = self.ctx
        if ctx.db is not None:
            simulate_crash(ctx.db)
        ctx.db = self.store = ctx.writer_scan = None
        ctx.figures["writer_crashes"] += 1

    def drop(self) -> None:
        """The process dies (nothing is flushed or closed)."""
        ctx = self.ctx
        if ctx.db is not None:
            simulate_crash(ctx.db)
        ctx.db = self.store = ctx.writer_scan = None

    def check_recovery(self) -> None:
        """A writer just opened: the database holds a prefix of the history at least as long as the
        acknowledged one and as every state a reader saw; the writes after it are lost."""
        ctx = self.ctx
        observed = ctx.oracle_read(MAIN)
        model = ctx.model
        lo = max(model.durable, ctx.reader_floor, ctx.oracle_floor)
        ctx.checks["recovery_keeps_acknowledged_writes"] += 1
        if model.durable_writes:
            ctx.checks["durable_writes_survive_crash"] += 1
        prefix = model.last_match(observed, lo, model.issued)
        if prefix is None:
            raise ctx.violation(
                f"after reopening, the database is not the history at any prefix in [{lo}, "
                f"{model.issued}] (acknowledged {model.durable}, by await_durable "
                f"{model.durable_writes}, reader saw {ctx.reader_floor}, fresh "
                f"readers saw {ctx.oracle_floor}); vs the acknowledged state: "
                f"{diff(observed, model.state(model.durable))}"
            )
        ctx.figures["unacknowledged_writes_lost"] += model.issued - prefix
        model.truncate(prefix)
        if ctx.reader_scan is not None:  # it started before the crash: it cannot hold lost writes
            ctx.reader_scan.hi = min(ctx.reader_scan.hi, prefix)

    def _takeover(self) -> str:
        """A second writer opens while the first still runs: the first is fenced and must never
        acknowledge another flush."""
        ctx = self.ctx
        zombie = ctx.db
        assert zombie is not None
        ctx.db = self.store = None
        outcome = self.open()
        ctx.figures["writer_takeovers"] += 1
        if ctx.db is None:  # the new writer did not open (or not fully): the old one just dies
            simulate_crash(zombie)
            return outcome + "; the old writer died"
        ctx.values += 1
        zombie.put(ctx.key(), b"z%07d" % ctx.values)  # never in the model: must never be read
        try:
            zombie.flush()
        except FencedError:
            outcome += "; zombie fenced"
        except Exception as error:
            outcome += "; zombie " + ctx.outcome(error)
        else:
            raise ctx.violation("a fenced writer acknowledged a flush after a newer writer opened")
        simulate_crash(zombie)
        return outcome

    def _check_writer_checkpoints(self, db: Db, before: uuid.UUID) -> None:
        """After a commit that re-established the writer's checkpoint (with no scan open), the
        manifest holds exactly one writer checkpoint: the writer's own."""
        ctx = self.ctx
        if db.writer_checkpoint_id == before or ctx.writer_scan is not None:
            return  # nothing committed, or a scan still pins the replaced checkpoint
        latest = ManifestStore(ctx.inner, MAIN).read_latest_required().value
        ours = [c.id for c in latest.checkpoints if isinstance(c.metadata, WriterCheckpoint)]
        ctx.checks["one_writer_checkpoint"] += 1
        if ours != [db.writer_checkpoint_id]:
            raise ctx.violation(
                f"the manifest holds writer checkpoints {ours}, the writer's own is "
                f"{db.writer_checkpoint_id}: a replaced writer checkpoint was left behind and pins its "
                "manifest forever"
            )
