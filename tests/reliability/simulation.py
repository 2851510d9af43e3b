"""Seeded multi-actor simulation of slate_ops (issue 8, "Seeded multi-actor simulation"; issue 12,
the lifecycle of a family of databases).

A writer, a tailing reader, a compactor, a garbage collector and an admin actor (checkpoints, tags,
clones) share one database; a lifecycle actor (tests/reliability/sim/lifecycle.py) operates on a
family of databases around it: clones (of main, of clones, of shards, of merged databases), splits,
merges, writes, tags, rollbacks, compactions, GC of every database and soft and hard destroys of any
member. A scheduler driven by ``random.Random(seed)`` picks the next actor and its action; every
action is one synchronous call of the public API (the writer's flusher thread and the reader's poll
thread are replaced by explicit steps), so the only source of choice is the seed. Between steps the
scheduler advances one seeded :class:`~slate_ops.runtime.ManualRuntime`, passed as ``clock=`` to every
component: the memory store's ``last_modified``, the sequenced stores' cache age and every UUID and
ULID come from it, without patching anything, so the same seed gives the same trace, the same
object names and the same store requests.

Faults come from one :class:`~slate_ops.objstore.FaultInjectingStore` per actor incarnation (seeded
from the simulation seed): transient errors before a request is applied, lost responses after a put
was applied, crashes part-way through an operation (the actor's process "dies"; a new incarnation
reopens), and stalls — a request hangs, the clock moves on and another actor runs a step in the
middle of the stalled operation (a deterministic interleaving inside an operation).

Invariants, checked as the run goes:

* every write acknowledged as durable is readable: a fresh reader sees the writer's history at some
  prefix between the acknowledged one and the issued one, never earlier than any state seen before;
  after a writer crash, the reopened database holds such a prefix (unacknowledged writes may be lost);
  a write that returned from ``await_durable=True`` counts as acknowledged, with every write before it;
* the reader's reads are monotonic and consistent: each get or scan matches the writer's history at
  a prefix no earlier than the reader has already seen;
* the writer reads its own writes; a scan held open across steps (while compaction and GC go on)
  completes as a snapshot of the moment it started (SlateDB issue 604: GC under an in-flight read);
* checkpoints, tags and clones read their pinned content for as long as they live;
* GC never deletes an object that the latest manifest, a live checkpoint or a live reader or writer
  references, nothing outside its database, no database that was not destroyed, and a dry run
  writes nothing;
* :func:`slate_ops.admin.verify_db` reports no error-severity problem (SSTs of the latest and every
  live checkpoint's manifest exist, runs are ordered, checkpoint manifests exist, GC boundaries
  below the latest ids), and every WAL SST those manifests need exists;
* :func:`slate_ops.admin.reachability.check_references` over every database finds nothing (every
  SST a live database can read exists; every external entry is pinned by its own unexpired final
  checkpoint) — after every lifecycle step and in every full sweep;
* every live lifecycle database reads exactly its model (a clone its parent's content, a shard its
  source's within its range, a merge the union, plus its own writes; after a rollback the tag's), and
  its tags read what they pinned; after a crashed writer session it holds every acknowledged write;
* a fenced (zombie) writer or compactor never acknowledges a flush or commits;
* an interrupted admin or lifecycle operation (clone, split, merge, destroy, tag, rollback)
  completes when re-run; a finished hard destroy leaves no object under the path;
* at the end, with faults off: a reopened writer recovers, maintenance runs cleanly, GC leaves no
  unreferenced SST or WAL SST older than ``min_age``, and every destroyed database GC may delete
  (grace period over, no live checkpoint) is gone.

A failed invariant (or an error no fault explains) raises :class:`InvariantViolation` naming the
seed, the step, the command that replays it and the tail of the trace.

The code: ``tests/reliability/sim/runtime.py`` (configuration, deterministic runtime, stores,
model), ``sim/lifecycle.py`` (the lifecycle actor), ``sim/invariants.py`` (the family-wide
invariants); this module holds the scheduler and the other actors.

Not simulated: the background threads themselves (their work is done by explicit steps, so a race
between a flusher thread and a caller is out of scope here; tests/engine/test_concurrency.py covers
those; ``await_durable`` runs the flusher's round synchronously), and real S3 (the soak test).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from slate_ops import admin
from slate_ops.admin.verify import Severity
from slate_ops.compaction import Compactor, LocalExecutor
from slate_ops.config import CheckpointOptions
from slate_ops.engine import CheckpointScope, Db, DbReader
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CloneWalMissingError,
    CompactionConflictError,
    DbNotFoundError,
    FencedError,
    GcFailedError,
    ObjectNotFoundError,
    TagExistsError,
    TagNotFoundError,
)
from slate_ops.gc import GarbageCollector, GcOptions, GcReport
from slate_ops.manifest.model import Manifest, WriterCheckpoint, resolve_sst_path
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from tests.reliability.sim.invariants import check_reachable
from tests.reliability.sim.lifecycle import Lifecycle
from tests.reliability.sim.runtime import (
    ACTOR_WEIGHTS,
    ACTORS,
    COMPACTOR_OPTIONS,
    MAIN,
    READER_OPTIONS,
    START_TIME,
    WRITER_OPTIONS,
    InvariantViolation,
    Model,
    SimConfig,
    SimResult,
    SimStore,
    SimTimeStore,
    TraceEntry,
    derive,
    diff,
    is_injected,
    memoized_manifest_decoding,
    seconds,
    short,
    sim_runtime,
    without_faults,
    write_ops,
)
from tests.support.engine import simulate_crash

__all__ = [
    "WRITER_OPTIONS",
    "InvariantViolation",
    "SimConfig",
    "SimResult",
    "Simulation",
    "TraceEntry",
    "run_simulation",
]

DB_DELETE_GRACE = timedelta(seconds=900)
"""GC's grace period for soft-destroyed databases in the simulation (the default is a day)."""


@dataclass
class Pinned:
    """A checkpoint or tag the simulation created, with the content it must read while it lives."""

    kind: Literal["checkpoint", "tag"]
    checkpoint_id: uuid.UUID
    content: dict[bytes, bytes]
    expire_time_s: int | None
    name: str | None = None

    def live(self, now: float, margin: float = 0.0) -> bool:
        return self.expire_time_s is None or self.expire_time_s > now + margin


@dataclass
class Clone:
    path: str
    source: uuid.UUID | None  # the parent checkpoint, or None: an ephemeral one of the current state
    lo: int  # the prefix range of the parent's history the clone may hold, until it is read
    hi: int
    started_at: float
    state: Literal["creating", "live", "dropping"] = "creating"
    content: dict[bytes, bytes] = field(default_factory=dict)
    expected: dict[bytes, bytes] | None = None  # the source checkpoint's content


@dataclass
class OpenScan:
    """A scan started in one step and finished in a later one: a snapshot as of its start, which
    holds a pin on the checkpoint it reads (so GC keeps what it still has to read)."""

    iterator: Iterator[tuple[bytes, bytes]]
    seen: dict[bytes, bytes]
    lo: int  # the history prefix already seen when it started
    hi: int  # the writes issued when it started
    checkpoint_id: uuid.UUID
    step: int


# --- the simulation -------------------------------------------------------------------------------


class Simulation:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.clock = sim_runtime(config.seed)
        self.rng = random.Random(derive(config.seed, "scheduler"))
        self._stall_rng = random.Random(derive(config.seed, "stalls"))
        self.trace: list[TraceEntry] = []
        self.actions: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.checks: Counter[str] = Counter()
        self.figures: Counter[str] = Counter()
        self.step = 0
        self.model = Model()
        self.keys = [b"k%02d" % i for i in range(config.keys)]
        self._values = 0
        self._incarnations: Counter[str] = Counter()
        self._running: list[str] = []  # "actor.action" of the steps in progress, outermost first
        self._stalls_this_step = 0
        self.inner: ObjectStore = MemoryStore("sim")  # replaced in run()

        self.db: Db | None = None
        self.writer_store: SimStore | None = None
        self.reader: DbReader | None = None
        self.reader_store: SimStore | None = None
        self.reader_last_poll = 0.0
        self.reader_floor = 0  # the reader has seen the history up to this prefix
        self.reader_scan: OpenScan | None = None
        self.writer_scan: OpenScan | None = None
        self.oracle_floor = 0  # fresh readers have seen the history up to this prefix
        self.compactor: Compactor | None = None
        self.compactor_store: SimStore | None = None
        self.zombie_compactor: Compactor | None = None
        self.gc: GarbageCollector | None = None
        self.gc_store: SimStore | None = None
        self.admin_store: SimStore | None = None
        self.pinned: dict[uuid.UUID, Pinned] = {}
        self.clones: dict[str, Clone] = {}
        self.pending_tag: str | None = None
        self.tag_state: dict[str, str] = {}  # "absent", "present" (tracked in pinned) or "unknown"
        self._tag_name = ""
        self._tag_expected = "absent"
        self._clone_counter = 0
        self._tag_names = [f"t{i}" for i in range(5)]
        self._finished_checkpoint = uuid.UUID(int=0)
        self.lifecycle = Lifecycle(self)

    # --- running ----------------------------------------------------------------------------------

    def run(self) -> SimResult:
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            stack.enter_context(memoized_manifest_decoding())  # speed only
            self.inner = self._make_inner()
            try:
                admin.create_db(MAIN, self.inner)
                for step in range(1, self.config.steps + 1):
                    self.step = step
                    self._one_step()
                self.step = self.config.steps + 1
                self._final_phase()
            finally:
                self._drop_everything()
            listing = [
                (m.key, hashlib.sha256(self.inner.get(m.key).data).hexdigest()) for m in self.inner.list("")
            ]
        figures = {k: float(v) for k, v in self.figures.items()}
        figures["writes_issued"] = float(self.model.issued)
        figures["objects_at_end"] = float(len(listing))
        digest = hashlib.sha256(repr(([tuple(vars(e).values()) for e in self.trace], listing)).encode())
        return SimResult(
            self.config,
            self.trace,
            digest.hexdigest(),
            self.actions,
            self.faults,
            self.checks,
            figures,
            time.monotonic() - started,
        )

    def _make_inner(self) -> ObjectStore:
        if self.config.store == "local":
            if self.config.root is None:
                raise ValueError("a local-store simulation needs SimConfig.root")
            return SimTimeStore(LocalStore(self.config.root), self.clock)
        return MemoryStore("sim", now=lambda: datetime.fromtimestamp(self.clock.now(), UTC))

    def _one_step(self) -> None:
        self._stalls_this_step = 0
        self.clock.advance(self._clock_step())
        if self.reader is not None and self.clock.now() - self.reader_last_poll >= seconds(
            READER_OPTIONS.manifest_poll_interval
        ):
            self._run_actor("reader", forced="poll")
        actor = self.rng.choices(ACTORS, weights=ACTOR_WEIGHTS)[0]
        self._run_actor(actor)
        if self.step % self.config.check_every == 0:
            self._full_check()

    def _clock_step(self) -> float:
        roll = self.rng.random()
        if roll < 0.3:
            return 0.0
        if roll < 0.8:
            return round(self.rng.uniform(0, 5), 3)
        return round(self.rng.uniform(5, 60), 3)

    def _run_actor(self, actor: str, forced: str | None = None, during: str | None = None) -> None:
        steps: dict[str, Callable[[str | None], tuple[str, str]]] = {
            "writer": self._writer_step,
            "reader": self._reader_step,
            "compactor": self._compactor_step,
            "gc": self._gc_step,
            "admin": self._admin_step,
            "lifecycle": self.lifecycle.step,
        }
        self._running.append(actor)
        try:
            action, outcome = steps[actor](forced)
        finally:
            self._running.pop()
        label = action if during is None else f"{action} (during {during})"
        self.trace.append(TraceEntry(self.step, actor, label, outcome))
        self.actions[f"{actor}.{action} {outcome.split(' ', 1)[0].rstrip(':;')}"] += 1

    def before_request(self, actor: str, op: str) -> None:
        """A stall: the request hangs for a while; another actor may run a step meanwhile."""
        if self._stall_rng.random() >= self.config.stall_rate or self._stalls_this_step >= 2:
            return
        self._stalls_this_step += 1  # bounded, so an operation never stalls past GC's min_age
        self.faults["stall"] += 1
        self.clock.advance(round(self._stall_rng.uniform(1, self.config.max_stall_s), 3))
        busy = {r.split(".", 1)[0] for r in self._running}
        candidates = [a for a in ACTORS if a not in busy]
        if candidates and self._stall_rng.random() < 0.7:
            other = self._stall_rng.choice(candidates)
            self.faults["interleaved-step"] += 1
            self._run_actor(other, during=f"{actor}.{op}")

    def _store_for(self, actor: str) -> SimStore:
        """A new process of ``actor``: its own seeded fault-injecting store."""
        self._incarnations[actor] += 1
        faulty = FaultInjectingStore(
            self.inner, seed=derive(self.config.seed, actor, str(self._incarnations[actor]))
        )
        c = self.config
        for op in ("get", "head", "put", "list", "delete"):
            if c.error_rate:
                faulty.fail(op, times=None, probability=c.error_rate)
            if c.latency_s:
                faulty.latency(op, c.latency_s)
        if c.lost_response_rate:
            faulty.fail_after("put", times=None, probability=c.lost_response_rate)
        return SimStore(self, actor, faulty)

    def _crashes(self) -> bool:
        return self.rng.random() < self.config.crash_rate

    def _doing(self, action: str) -> str:
        """Name the action of the innermost running step (for a violation's message)."""
        self._running[-1] = f"{self._running[-1].split('.', 1)[0]}.{action}"
        return action

    def known_paths(self) -> list[str]:
        """Every database that exists and is not half-created or half-destroyed: main, the admin
        actor's live clones and the lifecycle databases."""
        clones = [c.path for c in self.clones.values() if c.state == "live"]
        return [MAIN, *clones, *self.lifecycle.paths()]

    # --- outcomes and violations ------------------------------------------------------------------

    def violation(self, what: str) -> InvariantViolation:
        tail = "\n".join(str(e) for e in self.trace[-self.config.trace_tail :])
        running = " > ".join(self._running) or "checks"
        message = (
            f"simulation seed {self.config.seed} violated an invariant at step {self.step} "
            f"(clock +{self.clock.now() - START_TIME:.1f}s, running {running}):\n  {what}\n"
            f"replay: {self.config.replay_command()}\n"
            f"last {min(len(self.trace), self.config.trace_tail)} trace entries "
            "(step, actor, action, outcome):\n"
            f"{tail}"
        )
        return InvariantViolation(message, list(self.trace))

    def _outcome(self, error: Exception, expected: tuple[type[Exception], ...] = ()) -> str:
        """The trace outcome of an error that is allowed here; a violation for any other."""
        if isinstance(error, InvariantViolation):
            raise error
        if isinstance(error, SimulatedCrash):
            return "crashed"
        if is_injected(error):
            return f"failed: injected {type(error).__name__}"
        if isinstance(error, expected):
            return f"refused: {type(error).__name__}"
        raise self.violation(
            f"{' > '.join(self._running) or 'final'} raised an unexpected {type(error).__name__}: {error}"
        ) from error

    # --- the writer -------------------------------------------------------------------------------

    def _writer_step(self, forced: str | None) -> tuple[str, str]:
        if self.db is None:
            return "open", self._open_writer()
        db = self.db
        scanning = self.writer_scan is not None
        actions = {
            "put": 40,
            "delete": 6,
            "batch": 10,
            "get": 6,
            "scan": 2,
            "scan_open": 0 if scanning else 2,
            "scan_finish": 4 if scanning else 0,
            "flush": 10,
            "flush_memtable": 7,
            "poll": 3,
            "checkpoint": 3,
            "crash": 0.7,
            "crash_mid": 1.3,
            "takeover": 0.7,
            "reopen": 0.7,
        }
        action = self._doing(forced or self.rng.choices(list(actions), weights=list(actions.values()))[0])
        if action in ("crash", "crash_mid", "takeover", "reopen"):
            self.writer_scan = None
        if action == "takeover":
            return action, self._takeover()
        if action == "reopen":
            return action, self._reopen_writer(db)
        if action == "crash_mid":
            assert self.writer_store is not None
            self.writer_store.faulty.crash_after(self.rng.randrange(0, 10))
            action = "crash_mid:" + self.rng.choice(("flush", "flush_memtable", "checkpoint"))
        try:
            outcome = self._writer_action(db, action.removeprefix("crash_mid:"))
        except FencedError as error:
            raise self.violation(f"the writer was fenced although no other writer opened: {error}") from error
        except Exception as error:
            outcome = self._outcome(error)
        if action.startswith("crash") or outcome == "crashed":
            self._crash_writer()
            outcome += "; writer process died"
        return action, outcome

    def _writer_action(self, db: Db, action: str) -> str:
        model = self.model
        if action in ("put", "delete", "batch"):
            if action == "batch":
                ops = tuple(
                    (self._key(), self._value() if self.rng.random() < 0.8 else None) for _ in range(3)
                )
            else:
                key = self._key()
                ops = ((key, None if action == "delete" else self._value()),)
            await_durable = self.rng.random() < self.config.durable_write_rate
            write_ops(db, model, ops, await_durable)
            if await_durable:
                self.figures["durable_writes"] += 1
            what = f"{len(ops)} ops" if action == "batch" else ops[0][0].decode()
            return f"ok {what}{' durable' if await_durable else ''}"
        if action == "get":
            key = self._key()
            got = db.get(key)
            self.checks["writer_reads_own_writes"] += 1
            if got != model.current.get(key):
                raise self.violation(
                    f"the writer reads {short(got)} for {key!r}, its last write was "
                    f"{short(model.current.get(key))}"
                )
            return "ok"
        if action == "scan_open":
            self.writer_scan = self._open_scan(db.scan(), model.issued, db.writer_checkpoint_id)
            return f"ok pins its checkpoint, {len(self.writer_scan.seen)} keys read"
        if action == "scan_finish":
            assert self.writer_scan is not None
            scan, self.writer_scan = self.writer_scan, None
            return self._finish_scan(scan, "writer")
        if action == "scan":
            observed = dict(db.scan())
            self.checks["writer_reads_own_writes"] += 1
            if observed != model.current:
                raise self.violation(
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
            scope = self.rng.choice((CheckpointScope.ALL, CheckpointScope.DURABLE))
            lifetime = timedelta(seconds=self.rng.choice((120, 600, 1800)))
            lo = self._seen_floor()
            created = db.create_checkpoint(scope, CheckpointOptions(lifetime=lifetime))
            if scope is CheckpointScope.ALL:
                model.acknowledge()
                lo = model.issued
            self._track_checkpoint("checkpoint", created.id, lo, model.issued, f"writer {scope.value}")
            return f"ok {scope.value}"
        raise AssertionError(action)

    def _open_writer(self) -> str:
        store = self._store_for("writer")
        try:
            db = Db.open(MAIN, store, WRITER_OPTIONS, clock=self.clock, background=False)
        except Exception as error:
            return self._outcome(error)
        self.db, self.writer_store = db, store
        self._check_recovery()
        return f"ok epoch={db.writer_epoch} recovered={self.model.issued}"

    def _reopen_writer(self, db: Db) -> str:
        """A clean restart: close (which flushes the WAL), then open again."""
        self.db = self.writer_store = None
        try:
            db.close()
            self.model.acknowledge()
            outcome = "closed"
        except Exception as error:
            outcome = "close " + self._outcome(error)
        return f"{outcome}; open {self._open_writer()}"

    def _crash_writer(self) -> None:
        if self.db is not None:
            simulate_crash(self.db)
        self.db = self.writer_store = self.writer_scan = None
        self.figures["writer_crashes"] += 1

    def _check_recovery(self) -> None:
        """A writer just opened: the database holds a prefix of the history at least as long as the
        acknowledged one and as every state a reader saw; the writes after it are lost."""
        observed = self._oracle_read(MAIN)
        model = self.model
        lo = max(model.durable, self.reader_floor, self.oracle_floor)
        self.checks["recovery_keeps_acknowledged_writes"] += 1
        if model.durable_writes:
            self.checks["durable_writes_survive_crash"] += 1
        prefix = model.last_match(observed, lo, model.issued)
        if prefix is None:
            raise self.violation(
                f"after reopening, the database is not the history at any prefix in [{lo}, "
                f"{model.issued}] (acknowledged {model.durable}, by await_durable "
                f"{model.durable_writes}, reader saw {self.reader_floor}, fresh "
                f"readers saw {self.oracle_floor}); vs the acknowledged state: "
                f"{diff(observed, model.state(model.durable))}"
            )
        self.figures["unacknowledged_writes_lost"] += model.issued - prefix
        model.truncate(prefix)
        if self.reader_scan is not None:  # it started before the crash: it cannot hold lost writes
            self.reader_scan.hi = min(self.reader_scan.hi, prefix)

    def _takeover(self) -> str:
        """A second writer opens while the first still runs: the first is fenced and must never
        acknowledge another flush."""
        zombie = self.db
        assert zombie is not None
        self.db = self.writer_store = None
        outcome = self._open_writer()
        self.figures["writer_takeovers"] += 1
        if self.db is None:  # the new writer did not open (or not fully): the old one just dies
            simulate_crash(zombie)
            return outcome + "; the old writer died"
        self._values += 1
        zombie.put(self._key(), b"z%07d" % self._values)  # never in the model: must never be read
        try:
            zombie.flush()
        except FencedError:
            outcome += "; zombie fenced"
        except Exception as error:
            outcome += "; zombie " + self._outcome(error)
        else:
            raise self.violation("a fenced writer acknowledged a flush after a newer writer opened")
        simulate_crash(zombie)
        return outcome

    def _check_writer_checkpoints(self, db: Db, before: uuid.UUID) -> None:
        """After a commit that re-established the writer's checkpoint (with no scan open), the
        manifest holds exactly one writer checkpoint: the writer's own."""
        if db.writer_checkpoint_id == before or self.writer_scan is not None:
            return  # nothing committed, or a scan still pins the replaced checkpoint
        latest = ManifestStore(self.inner, MAIN).read_latest_required().value
        ours = [c.id for c in latest.checkpoints if isinstance(c.metadata, WriterCheckpoint)]
        self.checks["one_writer_checkpoint"] += 1
        if ours != [db.writer_checkpoint_id]:
            raise self.violation(
                f"the manifest holds writer checkpoints {ours}, the writer's own is "
                f"{db.writer_checkpoint_id}: a replaced writer checkpoint was left behind and pins its "
                "manifest forever"
            )

    def _key(self) -> bytes:
        if self.rng.random() < 0.5:
            return self.rng.choice(self.keys[:6])
        return self.rng.choice(self.keys)

    def _value(self) -> bytes:
        self._values += 1
        return b"v%07d:" % self._values + b"x" * self.rng.randrange(0, 150)

    # --- the reader -------------------------------------------------------------------------------

    def _reader_step(self, forced: str | None) -> tuple[str, str]:
        if self.reader is None:
            store = self._store_for("reader")
            try:
                self.reader = DbReader.open(
                    MAIN, store, options=READER_OPTIONS, clock=self.clock, background=False
                )
            except Exception as error:
                return "open", self._outcome(error)
            self.reader_store = store
            self.reader_last_poll = self.clock.now()
            return "open", "ok"
        reader = self.reader
        open_scan = self.reader_scan is not None
        action = (
            forced
            or self.rng.choices(
                ("get", "scan", "scan_open", "scan_finish", "poll", "reopen", "crash"),
                weights=(40, 15, 0 if open_scan else 6, 10 if open_scan else 0, 15, 3, 2),
            )[0]
        )
        self._doing(action)
        if action in ("reopen", "crash"):
            self.reader_scan = None
        try:
            if action == "scan_open":
                self.reader_scan = self._open_scan(reader.scan(), self.reader_floor, reader.checkpoint_id)
                return action, f"ok pins its checkpoint, {len(self.reader_scan.seen)} keys read"
            if action == "scan_finish":
                assert self.reader_scan is not None
                scan, self.reader_scan = self.reader_scan, None
                return action, self._finish_scan(scan, "reader")
            if action == "get":
                key = self._key()
                value = reader.get(key)
                self._observe_get(key, value)
                return action, f"ok {key.decode()}={short(value)}"
            if action == "scan":
                self._observe_scan(reader, "scan")
                return action, "ok"
            if action == "poll":
                reader.poll()
                self.reader_last_poll = self.clock.now()
                return action, "ok"
            if action == "reopen":
                self.reader = None
                reader.close()
                return action, "ok"
            if action == "crash":
                self.reader = None  # dropped without closing: its checkpoint expires
                self.figures["reader_crashes"] += 1
                return action, "ok; reader process died"
        except ObjectNotFoundError as error:
            checkpoint = reader.checkpoint_id if action != "scan_finish" else self._finished_checkpoint
            if not is_injected(error) and self._checkpoint_live(checkpoint):
                raise self.violation(
                    f"the reader ({action}) lost an object while the checkpoint it reads, {checkpoint}, "
                    f"was live: {error}"
                ) from error
            return action, "failed: its checkpoint expired"
        except Exception as error:
            if action == "reopen":
                self.reader = None
            return action, self._outcome(error)
        raise AssertionError(action)

    def _observe_get(self, key: bytes, value: bytes | None) -> None:
        self.checks["reader_monotonic"] += 1
        prefix = self.model.first_key_match(key, value, self.reader_floor, self.model.issued)
        if prefix is None:
            raise self.violation(
                f"the reader read {short(value)} for {key!r}, which is no value of that key at or after "
                f"prefix {self.reader_floor} it had already seen (a stale, lost or unknown value)"
            )
        self.reader_floor = prefix

    def _observe_scan(self, reader: DbReader, what: str) -> None:
        observed = dict(reader.scan())
        self.checks["reader_monotonic"] += 1
        prefix = self.model.first_match(observed, self.reader_floor, self.model.issued)
        if prefix is None:
            raise self.violation(
                f"the reader's {what} is the history at no prefix in [{self.reader_floor}, "
                f"{self.model.issued}]; vs the newest state: {diff(observed, self.model.current)}"
            )
        self.reader_floor = prefix

    def _checkpoint_live(self, checkpoint_id: uuid.UUID) -> bool:
        latest = ManifestStore(self.inner, MAIN).read_latest_required().value
        checkpoint = latest.checkpoint(checkpoint_id)
        return checkpoint is not None and not checkpoint.is_expired(self.clock.now())

    def _open_scan(
        self, iterator: Iterator[tuple[bytes, bytes]], lo: int, checkpoint_id: uuid.UUID
    ) -> OpenScan:
        seen = dict(itertools.islice(iterator, 3))
        return OpenScan(iterator, seen, lo, self.model.issued, checkpoint_id, self.step)

    def _finish_scan(self, scan: OpenScan, who: str) -> str:
        """Read the rest of a scan opened earlier: it must be the history at one prefix between what
        was seen and what was issued when it started (the writer's: exactly what was issued)."""
        self._finished_checkpoint = scan.checkpoint_id
        scan.seen.update(scan.iterator)
        self.checks["long_scan_is_a_snapshot"] += 1
        lo = scan.hi if who == "writer" else scan.lo
        prefix = self.model.first_match(scan.seen, lo, scan.hi)
        if prefix is None:
            raise self.violation(
                f"the {who}'s scan opened at step {scan.step} is the history at no prefix in [{lo}, "
                f"{scan.hi}]; vs the state at its start: {diff(scan.seen, self.model.state(scan.hi))}"
            )
        if who == "reader":
            self.reader_floor = max(self.reader_floor, prefix)
        return f"ok {len(scan.seen)} keys as of step {scan.step}"

    # --- the compactor ----------------------------------------------------------------------------

    def _compactor_step(self, forced: str | None) -> tuple[str, str]:
        if self.zombie_compactor is not None:
            zombie, self.zombie_compactor = self.zombie_compactor, None
            try:
                report = zombie.run_once()
            except FencedError:
                return "zombie run", "refused: FencedError"
            except Exception as error:
                return "zombie run", self._outcome(error, (CompactionConflictError,))
            if report is not None:
                raise self.violation("a fenced compactor committed a compaction")
            return "zombie run", "ok nothing to do"
        if self.compactor is None:
            store = self._store_for("compactor")
            try:
                self.compactor = Compactor(
                    MAIN,
                    store,
                    COMPACTOR_OPTIONS,
                    LocalExecutor(threads=1, clock=self.clock),
                    clock=self.clock,
                )
            except Exception as error:
                return "open", self._outcome(error)
            self.compactor_store = store
            return "open", f"ok epoch={self.compactor.epoch}"
        action = self._doing(
            self.rng.choices(("run", "full", "crash_mid", "takeover"), weights=(70, 10, 8, 5))[0]
        )
        if action == "takeover":
            old, self.compactor = self.compactor, None
            outcome = self._compactor_step(None)[1]  # opens the new one, fencing the old
            if self.compactor is not None:
                self.zombie_compactor = old  # its next step must be refused
            return action, outcome
        compactor = self.compactor
        if action == "crash_mid":
            assert self.compactor_store is not None
            self.compactor_store.faulty.crash_after(self.rng.randrange(0, 12))
        try:
            report = compactor.run_once(full=action == "full")
            outcome = (
                "ok nothing to do"
                if report is None
                else (f"ok {report.kind} {len(report.input_ssts)}->{len(report.output_ssts)} SSTs")
            )
            if report is not None:
                self.figures["compactions"] += 1
        except Exception as error:
            outcome = self._outcome(error, (CompactionConflictError,))
        if action == "crash_mid" or outcome == "crashed":
            self.compactor = self.compactor_store = None
            self.figures["compactor_crashes"] += 1
            outcome += "; compactor process died"
        return action, outcome

    # --- the garbage collector ----------------------------------------------------------------------

    def _gc_step(self, forced: str | None) -> tuple[str, str]:
        if self.gc is None:
            self.gc_store = self._store_for("gc")
            self.gc = GarbageCollector(MAIN, self.gc_store, self.gc_options(), clock=self.clock)
        live_clones = [c.path for c in self.clones.values() if c.state == "live"]
        action = self.rng.choices(
            ("run", "dry_run", "clone", "crash_mid"), weights=(70, 15, 8 if live_clones else 0, 5)
        )[0]
        path = self.rng.choice(live_clones) if self._doing(action) == "clone" else MAIN
        gc = self.gc
        if path != MAIN:
            assert self.gc_store is not None
            gc = GarbageCollector(path, self.gc_store, self.gc_options(), clock=self.clock)
        if action == "crash_mid":
            assert self.gc_store is not None
            self.gc_store.faulty.crash_after(self.rng.randrange(0, 15))
        outcome = self._collect(gc, path, dry_run=action == "dry_run")
        if action == "crash_mid":
            self.gc = self.gc_store = None
            self.figures["gc_crashes"] += 1
            outcome += "; gc process died"
        return action, outcome

    def gc_options(self) -> GcOptions:
        return GcOptions.with_min_age(
            timedelta(seconds=self.config.min_age_s), db_delete_grace=DB_DELETE_GRACE
        )

    def _collect(
        self, gc: GarbageCollector, path: str, *, dry_run: bool, store: SimStore | None = None
    ) -> str:
        """One GC run, checked: nothing referenced, nothing outside ``path``, no database deleted
        that was not destroyed; a dry run changes nothing."""
        latest = ManifestStore(self.inner, path).read_latest()
        destroyed = latest is not None and latest.value.destroyed_at_s is not None
        referenced = self._referenced(path)
        store = store or self.gc_store
        faulty = store.faulty if store is not None else None
        calls_before = len(faulty.calls) if faulty is not None else 0
        report: GcReport | None = None
        try:
            report = gc.run_once(dry_run=dry_run)
            outcome = "ok"
        except Exception as error:
            if isinstance(error, GcFailedError) and isinstance(error.report, GcReport):
                report = error.report
            if not self._known(path):
                return f"failed: {type(error).__name__}; the clone was dropped meanwhile"
            outcome = self._outcome(error)
        if not self._known(path):
            return "ok; the clone was dropped meanwhile"
        if report is not None:
            deleted = report.deleted_keys()
            self.checks["gc_deletes_nothing_referenced"] += 1
            if report.destroyed and not destroyed:
                raise self.violation(f"GC of {path} deleted the database, which was not destroyed")
            kept = set() if report.destroyed else referenced  # a due destroyed database goes whole
            wrong = sorted(deleted & kept) + sorted(k for k in deleted if not k.startswith(path + "/"))
            if wrong:
                raise self.violation(
                    f"GC of {path}{' (dry run)' if dry_run else ''} deleted (or planned) referenced or "
                    f"foreign objects: {wrong[:5]}"
                )
            if not dry_run:
                self.figures["gc_deleted_objects"] += len(deleted)
                self.figures["gc_detached_external_dbs"] += len(report.clones_detached)
                self.figures["gc_deleted_destroyed_dbs"] += report.destroyed
            outcome += f" {'would delete' if dry_run else 'deleted'} {len(deleted)}"
            if report.clones_detached:
                outcome += f", detached {len(report.clones_detached)}"
            if report.destroyed:
                outcome += ", the destroyed database"
        if dry_run and faulty is not None:
            # Its own requests: other actors may run during a stall of the dry run.
            writes = [(op, key) for op, key in faulty.calls[calls_before:] if op in ("put", "delete")]
            self.checks["gc_dry_run_writes_nothing"] += 1
            if writes:
                raise self.violation(f"a GC dry run of {path} wrote to the store: {writes[:5]}")
        return outcome

    def _known(self, path: str) -> bool:
        return path == MAIN or path in self.clones or self.lifecycle.knows(path)

    def _referenced(self, path: str) -> set[str]:
        """Every object GC of ``path`` must keep now: the SSTs (resolved as readers resolve them) and
        WAL SSTs of the latest manifest and of every live checkpoint's manifest, and what the live
        writer and reader have loaded."""
        manifests = ManifestStore(self.inner, path)
        latest = manifests.read_latest()
        if latest is None:
            return set()
        now = self.clock.now()
        wal = WalStore(self.inner, manifests.path)
        wal_ids = wal.list_ids()
        keys: set[str] = set()

        def add(manifest: Manifest, upto: int) -> None:
            keys.update(resolve_sst_path(manifest, manifests.path, s) for s in manifest.ssts)
            keys.update(wal.key(i) for i in wal_ids if manifest.replay_after_wal_id < i <= upto)

        add(latest.value, wal_ids[-1] if wal_ids else 0)
        for checkpoint in latest.value.checkpoints:
            if not checkpoint.is_expired(now):
                pinned = manifests.read(checkpoint.manifest_id).value
                add(pinned, pinned.wal_id_last_seen)
        if path == MAIN:
            checkpoints = {c.id for c in latest.value.checkpoints if not c.is_expired(now)}
            if self.db is not None and self.db.writer_checkpoint_id in checkpoints:
                keys |= self.db.sst_object_keys
            if self.reader is not None and self.reader.checkpoint_id in checkpoints:
                keys |= self.reader.sst_object_keys
        return keys

    # --- the admin actor --------------------------------------------------------------------------

    def _admin_step(self, forced: str | None) -> tuple[str, str]:
        if self.admin_store is None:
            self.admin_store = self._store_for("admin")
        store = self.admin_store
        pending = next((c for c in self.clones.values() if c.state != "live"), None)
        if pending is not None:
            action = "re-run " + ("clone" if pending.state == "creating" else "drop_clone")
        elif self.pending_tag is not None:
            action = "re-run tag"
        else:
            live_clones = sum(1 for c in self.clones.values() if c.state == "live")
            action = self.rng.choices(
                ("checkpoint", "checkpoint_from", "refresh", "delete_checkpoint", "tag", "delete_tag",
                 "clone", "drop_clone"),
                weights=(20, 4, 5, 6, 10, 6, 6 if live_clones < 3 else 0, 4 if live_clones else 0),
            )[0]  # fmt: skip
        self._doing(action)
        crash = self._crashes()
        if crash:
            store.faulty.crash_after(self.rng.randrange(0, 8))
        try:
            outcome = self._admin_action(store, action.removeprefix("re-run "), pending)
        except Exception as error:
            outcome = self._admin_error(action, error, pending)
        if crash or outcome == "crashed":
            self.admin_store = None
            self.figures["admin_crashes"] += 1
            outcome += "; admin process died"
        return action, outcome

    def _admin_action(self, store: SimStore, action: str, pending: Clone | None) -> str:
        now = self.clock.now()
        live = [p for p in self.pinned.values() if p.kind == "checkpoint" and p.live(now, margin=60)]
        if action == "checkpoint":
            lo = self._seen_floor()
            lifetime = timedelta(seconds=self.rng.choice((60, 300, 900, 3600)))
            created = admin.create_checkpoint(
                MAIN, store, CheckpointOptions(lifetime=lifetime), clock=self.clock
            )
            self._track_checkpoint("checkpoint", created.id, lo, self.model.issued, "admin")
            return f"ok manifest {created.manifest_id}"
        if action == "checkpoint_from":
            if not live:
                return "skipped: no live checkpoint"
            source = self.rng.choice(live)
            created = admin.create_checkpoint(
                MAIN, store, CheckpointOptions(lifetime=timedelta(seconds=600), source=source.checkpoint_id),
                clock=self.clock,
            )  # fmt: skip
            self._track_checkpoint("checkpoint", created.id, 0, self.model.issued, "admin", source.content)
            return f"ok manifest {created.manifest_id}"
        if action == "refresh":
            if not live:
                return "skipped: no live checkpoint"
            target = self.rng.choice(live)
            # Until the call returns, the expiry is the earlier of the old and the new one.
            target.expire_time_s = min(target.expire_time_s or 2**62, math.ceil(now + 900))
            refreshed = admin.refresh_checkpoint(
                MAIN, store, target.checkpoint_id, timedelta(seconds=900), clock=self.clock
            )
            target.expire_time_s = refreshed.expire_time_s
            return "ok"
        if action == "delete_checkpoint":
            if not live:
                return "skipped: no live checkpoint"
            target = self.rng.choice(live)
            del self.pinned[target.checkpoint_id]  # whatever happens next, it is no longer relied on
            admin.delete_checkpoint(MAIN, store, target.checkpoint_id, dry_run=False)
            return "ok"
        if action == "tag":
            # An interrupted create is re-run with replace: it must then complete.
            name = self.pending_tag or self.rng.choice(self._tag_names)
            replace = self.pending_tag is not None or self.rng.random() < 0.3
            before = self._tag_expected = self.tag_state.get(name, "absent")
            self._tag_name = self.pending_tag = name
            if replace or before != "present":
                self._forget_tag(name, "unknown")  # until the call returns
            lo = self._seen_floor()
            tag = admin.create_tag(MAIN, store, name, replace=replace, clock=self.clock)
            self.pending_tag = None
            if before == "present" and not replace:
                raise self.violation(f"create_tag({name!r}) replaced an existing tag without replace=True")
            self._track_checkpoint("tag", tag.checkpoint_id, lo, self.model.issued, f"tag {name}", name=name)
            self.tag_state[name] = "present"
            return f"ok {name}{' (replaced)' if replace else ''}"
        if action == "delete_tag":
            name = self._tag_name = self.rng.choice(self._tag_names)
            before = self._tag_expected = self.tag_state.get(name, "absent")
            self._forget_tag(name, "unknown")
            admin.delete_tag(MAIN, store, name, dry_run=False)
            if before == "absent":
                raise self.violation(f"delete_tag({name!r}) succeeded although no such tag exists")
            self.tag_state[name] = "absent"
            return f"ok {name}"
        if action == "clone":
            clone = pending
            if clone is None:
                self._clone_counter += 1
                parent = self.rng.choice(live) if live and self.rng.random() < 0.5 else None
                clone = Clone(
                    f"clone{self._clone_counter}",
                    None if parent is None else parent.checkpoint_id,
                    self._seen_floor(),
                    self.model.issued,
                    now,
                    expected=None if parent is None else parent.content,
                )
                self.clones[clone.path] = clone
            admin.create_clone(clone.path, MAIN, store, clone.source, clock=self.clock)
            clone.hi = max(clone.hi, self.model.issued)
            self._resolve_clone(clone)
            return f"ok {clone.path}"
        if action == "drop_clone":
            clone = pending or self.rng.choice([c for c in self.clones.values() if c.state == "live"])
            clone.state = "dropping"
            try:
                admin.destroy(clone.path, store, soft=False, clock=self.clock, dry_run=False)
            except DbNotFoundError:
                if pending is None:
                    raise
            del self.clones[clone.path]
            return f"ok {clone.path}"
        raise AssertionError(action)

    def _admin_error(self, action: str, error: Exception, pending: Clone | None) -> str:
        if pending is not None and pending.state == "creating" and self._clone_source_gone(pending, error):
            pending.state = "dropping"  # as the error says: destroy the clone and clone again
            return f"refused: {type(error).__name__}; the clone is dropped"
        name = self._tag_name
        if action == "delete_tag" and isinstance(error, TagNotFoundError):
            if self._tag_expected == "present":
                raise self.violation(f"delete_tag({name!r}) found no tag, but it was created") from error
            self.tag_state[name] = "absent"
            return "refused: TagNotFoundError"
        if action == "tag" and isinstance(error, TagExistsError):
            if self._tag_expected == "absent":
                raise self.violation(f"create_tag({name!r}) found a tag that was never created") from error
            self.pending_tag = None  # refused: nothing to re-run
            return "refused: TagExistsError"
        return self._outcome(error)

    def _clone_source_gone(self, clone: Clone, error: Exception) -> bool:
        """A clone re-run may fail only because its source checkpoint expired or was deleted meanwhile
        (the ephemeral one lives 5 minutes); then a WAL SST it covered may be gone too."""
        if not isinstance(error, CheckpointExpiredError | CheckpointNotFoundError | CloneWalMissingError):
            return False
        if clone.source is None:
            return self.clock.now() - clone.started_at >= 300
        return clone.source not in self.pinned or not self.pinned[clone.source].live(self.clock.now())

    def _forget_tag(self, name: str, state: str) -> None:
        """Stop relying on the tag ``name`` (about to change); ``state`` is what is known meanwhile."""
        for pinned in list(self.pinned.values()):
            if pinned.kind == "tag" and pinned.name == name:
                del self.pinned[pinned.checkpoint_id]
        self.tag_state[name] = state

    def _seen_floor(self) -> int:
        """Every write up to here is durable: acknowledged, or already seen by a reader."""
        return max(self.model.durable, self.reader_floor, self.oracle_floor)

    def _track_checkpoint(
        self,
        kind: Literal["checkpoint", "tag"],
        checkpoint_id: uuid.UUID,
        lo: int,
        hi: int,
        what: str,
        content: dict[bytes, bytes] | None = None,
        name: str | None = None,
    ) -> None:
        """Read a checkpoint just created: it must hold the history at a prefix in ``[lo, hi]`` (or
        ``content``, when made from another checkpoint); from now on it must read the same."""
        latest = ManifestStore(self.inner, MAIN).read_latest_required().value
        checkpoint = latest.checkpoint(checkpoint_id)
        if checkpoint is None:
            raise self.violation(
                f"{what} checkpoint {checkpoint_id} is not in the manifest after its creation"
            )
        observed = self._oracle_read(MAIN, checkpoint_id)
        self.checks["checkpoint_content"] += 1
        if content is not None:
            if observed != content:
                raise self.violation(
                    f"{what} checkpoint made from another reads differently: {diff(observed, content)}"
                )
        elif self.model.first_match(observed, max(lo, 0), hi) is None:
            raise self.violation(
                f"{what} checkpoint {checkpoint_id} holds no prefix of the history in [{lo}, {hi}]: "
                f"vs the acknowledged state {diff(observed, self.model.state(lo))}"
            )
        self.pinned[checkpoint_id] = Pinned(kind, checkpoint_id, observed, checkpoint.expire_time_s, name)
        self.figures[f"{kind}s_created"] += 1

    def _resolve_clone(self, clone: Clone) -> None:
        observed = self._oracle_read(clone.path)
        self.checks["clone_content"] += 1
        if clone.expected is not None:
            if observed != clone.expected:
                raise self.violation(
                    f"{clone.path} differs from its source checkpoint: {diff(observed, clone.expected)}"
                )
        elif self.model.first_match(observed, clone.lo, clone.hi) is None:
            raise self.violation(
                f"{clone.path} holds no prefix of the parent's history in [{clone.lo}, {clone.hi}]"
            )
        clone.content = observed
        clone.state = "live"
        self.figures["clones_created"] += 1

    # --- checks -----------------------------------------------------------------------------------

    def _oracle_read(self, path: str, checkpoint_id: uuid.UUID | None = None) -> dict[bytes, bytes]:
        """A fresh reader on the fault-free store (it runs no step and injects nothing)."""
        reader = DbReader.open(
            path, self.inner, checkpoint_id, READER_OPTIONS, clock=self.clock, background=False
        )
        try:
            return dict(reader.scan())
        finally:
            reader.close()

    def _full_check(self) -> None:
        model = self.model
        observed = self._oracle_read(MAIN)
        lo = max(model.durable, self.reader_floor, self.oracle_floor)
        self.checks["fresh_reader_sees_acknowledged_writes"] += 1
        prefix = model.first_match(observed, lo, model.issued)
        if prefix is None:
            raise self.violation(
                f"a fresh reader sees the history at no prefix in [{lo}, {model.issued}] (acknowledged "
                f"{model.durable}, by await_durable {model.durable_writes}); vs the acknowledged state: "
                f"{diff(observed, model.state(model.durable))}"
            )
        self.oracle_floor = prefix
        self._verify(MAIN)
        now = self.clock.now()
        for pinned in list(self.pinned.values()):
            if not pinned.live(now):
                del self.pinned[pinned.checkpoint_id]
                continue
            try:
                content = self._oracle_read(MAIN, pinned.checkpoint_id)
            except (CheckpointNotFoundError, CheckpointExpiredError, ObjectNotFoundError) as error:
                raise self.violation(
                    f"the live {pinned.kind} {pinned.name or pinned.checkpoint_id} cannot be read: "
                    f"{type(error).__name__}: {error}"
                ) from error
            self.checks["pinned_content_unchanged"] += 1
            if content != pinned.content:
                raise self.violation(
                    f"the {pinned.kind} {pinned.name or pinned.checkpoint_id} reads differently than when "
                    f"created: {diff(content, pinned.content)}"
                )
        for clone in self.clones.values():
            if clone.state != "live":
                continue
            self._verify(clone.path)
            content = self._oracle_read(clone.path)
            self.checks["clone_content_unchanged"] += 1
            if content != clone.content:
                raise self.violation(f"{clone.path} reads differently: {diff(content, clone.content)}")
        check_reachable(self)
        self.lifecycle.check_all()
        self.trace.append(TraceEntry(self.step, "check", "invariants", f"ok prefix {prefix}/{model.issued}"))

    def _verify(self, path: str) -> None:
        results = admin.verify_db(path, self.inner, l0_max_ssts=1_000_000, clock=self.clock, max_workers=1)
        self.checks["verify_db"] += 1
        errors = [p for r in results if not r.passed and r.severity is Severity.ERROR for p in r.problems]
        if errors:
            raise self.violation(f"verify_db({path}) reports: {errors[:4]}")
        self._check_wal(path)

    def _check_wal(self, path: str) -> None:
        """Every WAL SST a reader of the latest manifest or of a live checkpoint replays exists."""
        manifests = ManifestStore(self.inner, path)
        latest = manifests.read_latest_required().value
        wal = WalStore(self.inner, manifests.path)
        ids = set(wal.list_ids())
        needed = [(f"latest manifest of {path}", latest, max(ids, default=0))]
        for checkpoint in latest.checkpoints:
            if not checkpoint.is_expired(self.clock.now()):
                pinned = manifests.read(checkpoint.manifest_id).value
                needed.append(
                    (f"checkpoint {checkpoint.name or checkpoint.id}", pinned, pinned.wal_id_last_seen)
                )
        self.checks["wal_needed_exists"] += 1
        for what, manifest, upto in needed:
            missing = [i for i in range(manifest.replay_after_wal_id + 1, upto + 1) if i not in ids]
            if missing:
                raise self.violation(f"{what} needs WAL SSTs {missing[:5]}, which are missing")

    # --- the end ----------------------------------------------------------------------------------

    def _final_phase(self) -> None:
        """Faults off: every process restarts, the writer recovers, maintenance runs cleanly, and GC
        leaves nothing unreferenced that is older than min_age."""
        self._drop_everything()
        self.config = without_faults(self.config)
        store = self._store_for("final")
        self.db = Db.open(MAIN, store, WRITER_OPTIONS, clock=self.clock, background=False)
        self.writer_store = store
        self._check_recovery()
        self._finish_interrupted_admin(store)
        self.db.flush_memtable()
        self.model.acknowledge()
        compactor = Compactor(
            MAIN, store, COMPACTOR_OPTIONS, LocalExecutor(threads=1, clock=self.clock), clock=self.clock
        )
        compactor.run_once(full=True)
        gc = GarbageCollector(MAIN, store, self.gc_options(), clock=self.clock)
        for advance in (3600.0, self.config.min_age_s + 1, self.config.min_age_s + 1):
            self.clock.advance(advance)
            self.db.poll_manifest()  # drops the writer's hold on the pre-compaction state
            self._collect(gc, MAIN, dry_run=False)
        self.trace.append(TraceEntry(self.step, "final", "recover, compact, collect", "ok"))
        self.lifecycle.finish(self._store_for("lifecycle"))
        self._full_check()
        self._check_nothing_left_behind()

    def _finish_interrupted_admin(self, store: SimStore) -> None:
        """Re-run every interrupted clone, clone drop and tag: each must complete now."""
        for clone in [c for c in self.clones.values() if c.state != "live"]:
            action = "clone" if clone.state == "creating" else "drop_clone"
            try:
                outcome = self._admin_action(store, action, clone)
            except Exception as error:
                outcome = self._admin_error(action, error, clone)
                if clone.state == "dropping":
                    outcome += "; " + self._admin_action(store, "drop_clone", clone)
            self.trace.append(TraceEntry(self.step, "final", f"re-run {action}", outcome))
        if self.pending_tag is not None:
            outcome = self._admin_action(store, "tag", None)
            self.trace.append(TraceEntry(self.step, "final", "re-run tag", outcome))

    def _check_nothing_left_behind(self) -> None:
        cutoff = self.clock.now() - self.config.min_age_s
        referenced = self._referenced(MAIN)
        wal = WalStore(self.inner, MAIN)
        left = [
            m.key
            for m in self.inner.list(MAIN + "/")
            if (m.key.startswith(MAIN + "/compacted/") or m.key.startswith(wal.directory + "/"))
            and m.key not in referenced
            and m.size > 0  # empty WAL objects are fences, kept on purpose
            and m.last_modified.timestamp() <= cutoff
        ]
        self.checks["gc_leaves_nothing_unreferenced"] += 1
        if left:
            raise self.violation(
                f"after GC, {len(left)} unreferenced object(s) older than min_age remain: {left[:5]}"
            )

    def _drop_everything(self) -> None:
        """Every process dies (nothing is flushed or closed)."""
        if self.db is not None:
            simulate_crash(self.db)
        self.db = self.writer_store = self.writer_scan = None
        self.reader = self.reader_store = self.reader_scan = None
        self.compactor = self.compactor_store = self.zombie_compactor = None
        self.gc = self.gc_store = None
        self.admin_store = None
        self.lifecycle.store = None


def run_simulation(config: SimConfig) -> SimResult:
    return Simulation(config).run()
