"""The adversarial simulation (issue 19, "The proof must model the adversary").

The cooperative simulation (tests/reliability/simulation.py) runs actors that never race one another
on purpose: nobody opens a second writer at the same moment, nobody keeps a paused writer across a
destroy, nobody calls admin functions on checkpoints it does not own, every name is tame. Here a
seeded scheduler runs *episodes* of adversarial actors over a family of databases (plain, nested,
clones, shards, the root database, hostile names), next to objects that belong to no database:

* **race**: two or three writers race ``Db.open`` on one path and write (``await_durable`` puts,
  ``flush``, ``flush_memtable``, ``close``), their store calls interleaved one at a time by a seeded
  :class:`~tests.reliability.sim.interleave.Interleaver` (real threads, one holding the baton);
* **paused writer**: a writer opens and writes, then is frozen (no polling: the writer's timers are
  steps here, so it only sees the store when it calls it) across a soft destroy, a soft then a hard
  destroy, a soft destroy and GC past the grace period, a hard destroy and re-creation of the path,
  a split, a rollback to a tag, or a takeover by another writer; then it resumes and writes, flushes
  and closes;
* **paused processes**: a compactor, a second compactor, GC and a writer on one database,
  interleaved with clock jumps up to twice GC's ``min_age`` at the hand-overs (the stalled process
  of SlateDB's GC boundary-file design, in the manifest and ``.compactions`` namespaces);
* **admin**: ``refresh_checkpoint`` (lifetimes from negative to a million years) and
  ``delete_checkpoint`` on random checkpoint ids of random databases — final checkpoints of clones and
  shards, tags, the user's own checkpoints, ids that do not exist — then the clock past every expiry
  and GC of every database;
* **names**: databases created, opened and cloned under hostile names: reserved directory names as the
  last component (``a/wal``, ``a/manifest``, ``a/gc``, ...), nested names at several depths, the root;
* and the cooperative ones the adversary needs material from: writer sessions, clones, splits, tags,
  destroys, compaction and GC of everything.

Invariants, after every episode (and, for acknowledgements, at the moment of the acknowledgement):

1. **references**: :func:`slate_ops.admin.check_references` over every database not deleted finds
   nothing missing or unpinned;
2. **no fenced writer acknowledges**: when ``put(await_durable=True)``, ``flush``, ``flush_memtable`` or
   ``close`` returns, the database it opened is neither deleted nor deleted and created again, and no
   newer writer epoch superseded it first: outside interleaved episodes the latest manifest still
   holds its epoch; inside them no other task's manifest commit with a higher writer epoch precedes
   (in the interleaver's order of store calls) any of the WAL, L0 or manifest writes this
   acknowledgement covers. A ``FencedError`` needs a cause (a newer epoch or a deletion), and an
   ``EpochCollisionError`` is a violation: no two processes here share an epoch;
3. **no deleted database comes back**: a deleted database's path holds no manifest but tombstones, a
   reader refuses it with a typed error, and a database re-created there holds nothing old;
4. **every acknowledged write of a live database is readable**: a fresh reader sees, for every key,
   the latest acknowledged write or a write issued after it (by any writer); then the model settles on
   what it saw. Tags read what they pinned;
5. objects that belong to no database are never deleted or changed; nobody retries without end (a
   task making more than ``max_calls`` store calls in an episode is a violation) or blocks outside a
   store call; and every error is typed (a :class:`~slate_ops.errors.SlateOpsError`) and one the
   situation explains.

Determinism: one seeded :class:`~slate_ops.runtime.ManualRuntime` passed as ``clock=`` to everything,
so time and every id come from it (:func:`~tests.reliability.sim.runtime.sim_runtime`; nothing is
patched for it), every choice from ``random.Random``
seeded from the seed, WAL fetches one at a time; the same seed gives the same trace and the same
objects, byte for byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from slate_ops import admin
from slate_ops.admin.reachability import check_references
from slate_ops.compaction import Compactor, LocalExecutor
from slate_ops.engine import Db, DbReader
from slate_ops.errors import (
    DbNotFoundError,
    EpochCollisionError,
    FencedError,
    InvalidDeletionError,
    SlateOpsError,
    WalNotFlushedError,
)
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.reliability.sim.interleave import (
    Event,
    Interleaver,
    Livelock,
    Stuck,
    TaskOutcome,
)
from tests.reliability.sim.runtime import (
    COMPACTOR_OPTIONS,
    READER_OPTIONS,
    START_TIME,
    WRITER_OPTIONS,
    InvariantViolation,
    TraceEntry,
    derive,
    diff,
    memoized_manifest_decoding,
    short,
    sim_runtime,
)
from tests.support.engine import simulate_crash

KEYS = tuple(b"k%02d" % i for i in range(16))
RESERVED = ("wal", "manifest", "compacted", "compactions", "gc")
STRAYS = {
    "README": b"objects that belong to no database",
    "backup/2026-11-01.tar": b"a backup",
    "notes/wal/00000000000000000001.sst": b"looks like a WAL SST of a database named notes",
}
REPLAY = (
    "SLATE_OPS_ADV_SEED={seed} SLATE_OPS_ADV_STEPS={steps} "
    "pytest tests/reliability/test_adversary.py -k replay -s"
)
MemberState = Literal["live", "soft", "deleted"]


@dataclass(frozen=True)
class AdvConfig:
    """One adversarial run; ``steps`` counts API calls of every actor."""

    seed: int
    steps: int = 300
    min_age_s: float = 120.0  # GC's min_age for every namespace
    grace_s: float = 900.0  # GC's grace period for destroyed databases
    family_size: int = 7  # live databases the scheduler keeps at most (besides hostile ones)
    max_calls: int = 600  # store calls of one task in one episode before it counts as livelock
    trace_tail: int = 40

    def replay_command(self) -> str:
        return REPLAY.format(seed=self.seed, steps=self.steps)


@dataclass
class AdvResult:
    """What one adversarial run did (tests/reliability/results/adversary*.json)."""

    config: AdvConfig
    trace: list[TraceEntry]
    digest: str
    actions: Counter[str]
    checks: Counter[str]
    figures: Counter[str]
    duration_s: float

    def summary(self) -> str:
        c = self.config
        return "\n".join(
            [
                f"adversary seed {c.seed}: {c.steps} steps in {self.duration_s:.1f}s, "
                f"{len(self.trace)} trace entries, digest {self.digest[:16]}",
                "  checks: " + ", ".join(f"{k}={v}" for k, v in sorted(self.checks.items())),
                "  figures: " + ", ".join(f"{k}={v}" for k, v in sorted(self.figures.items())),
            ]
        )

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {
            "seed": c.seed,
            "steps": c.steps,
            "duration_s": round(self.duration_s, 2),
            "trace_entries": len(self.trace),
            "digest": self.digest,
            "checks": dict(sorted(self.checks.items())),
            "operations": dict(sorted(self.actions.items())),
            "figures": dict(sorted(self.figures.items())),
        }


@dataclass(eq=False)
class Member:
    """A database of the family and the model of what it must read."""

    path: str
    kind: str  # root, plain, nested, hostile, clone, shard
    state: MemberState = "live"
    settled: dict[bytes, bytes] = field(default_factory=dict)
    # Writes since the model last settled: (global index, key, value or None for a delete, writer).
    writes: list[tuple[int, bytes, bytes | None, str]] = field(default_factory=list)
    acked: dict[bytes, int] = field(default_factory=dict)  # key -> index of its latest acknowledged write
    lo: bytes | None = None  # a shard's range [lo, hi)
    hi: bytes | None = None
    tags: dict[str, dict[bytes, bytes]] = field(default_factory=dict)
    incarnation: int = 0  # bumped when the path is deleted and created again
    removed_by_hand: bool = False  # its objects deleted outside slate_ops (no tombstone)
    parents: tuple[str, ...] = ()

    def keys(self) -> list[bytes]:
        return [k for k in KEYS if (self.lo is None or k >= self.lo) and (self.hi is None or k < self.hi)]

    def allowed(self, key: bytes) -> set[bytes | None]:
        """The values a fresh reader may see for ``key``: the latest acknowledged write or any write
        issued after it; without an acknowledged write, the settled value or any write."""
        floor = self.acked.get(key)
        issued = [(i, v) for i, k, v, _ in self.writes if k == key]
        if floor is None:
            return {self.settled.get(key), *(v for _, v in issued)}
        return {v for i, v in issued if i >= floor}

    def reset(self, content: dict[bytes, bytes]) -> None:
        self.settled = dict(content)
        self.writes.clear()
        self.acked.clear()


@dataclass(eq=False)
class Writer:
    """A writer process of the simulation."""

    name: str
    member: Member
    incarnation: int
    db: Db | None = None
    epoch: int = 0
    issued: list[int] = field(default_factory=list)  # global indexes of its writes
    acked: int = 0  # writes acknowledged so far
    fenced_seen: bool = False
    acked_at: int = 0  # interleaved store calls made before its last acknowledgement


class Adversary:
    """One adversarial run (see the module docstring)."""

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
        self._index = 0  # global write index
        self._counter = 0
        self._values = 0
        self._running = "setup"
        self._interleaving: Interleaver | None = None

    # --- running ------------------------------------------------------------------------------

    def run(self) -> AdvResult:
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            stack.enter_context(memoized_manifest_decoding())  # speed only
            self.inner = MemoryStore("adversary", now=lambda: datetime.fromtimestamp(self.clock.now(), UTC))
            for key, data in STRAYS.items():
                self.inner.put(key, data)
            self._create("", "root")  # every other database is nested under it
            for _ in range(2):
                self._create(self._new_path("plain"), "plain")
            while self.step < self.config.steps:
                self.episode += 1
                self.clock.advance(round(self.rng.uniform(0, 20), 3))
                self._one_episode()
                self._check_all()
            self._running = "final"
            self._maintain()
            self._check_all()
            listing = [
                (m.key, hashlib.sha256(self.inner.get(m.key).data).hexdigest()) for m in self.inner.list("")
            ]
        self.figures["objects_at_end"] = len(listing)
        self.figures["databases_at_end"] = sum(m.state != "deleted" for m in self.members.values())
        digest = hashlib.sha256(repr(([tuple(vars(e).values()) for e in self.trace], listing)).encode())
        return AdvResult(
            self.config,
            self.trace,
            digest.hexdigest(),
            self.actions,
            self.checks,
            self.figures,
            time.monotonic() - started,
        )

    def _one_episode(self) -> None:
        live = self._live()
        crowded = len([m for m in live if m.kind not in ("hostile",)]) >= self.config.family_size
        weights = {
            "session": 14 if live else 0,
            "race": 16 if live else 0,
            "paused_writer": (20 if crowded else 12) if live else 0,
            "paused_processes": 9 if live else 0,
            "admin": 10,
            "names": 6,
            "clone": 6 if live and not crowded else 0,
            "split": 5 if live and not crowded else 0,
            "tag": 5 if live else 0,
            "create": 0 if crowded else (12 if len(live) < 3 else 3),
            "destroy": (10 if crowded else 2) if live else 0,
            "maintain": 3,
        }
        episode = self.rng.choices(list(weights), weights=list(weights.values()))[0]
        self._running = episode
        handlers: dict[str, Callable[[], str]] = {
            "session": self._session_episode,
            "race": self._race,
            "paused_writer": self._paused_writer,
            "paused_processes": self._paused_processes,
            "admin": self._admin,
            "names": self._names,
            "clone": self._clone,
            "split": self._split,
            "tag": self._tag,
            "create": lambda: self._create(self._new_path("plain"), "plain"),
            "destroy": self._destroy_episode,
            "maintain": self._maintain,
        }
        outcome = handlers[episode]()
        self.figures[f"episodes_{episode}"] += 1
        self.trace.append(TraceEntry(self.step, "episode", episode, outcome))

    # --- bookkeeping ----------------------------------------------------------------------------

    def _tick(self, actor: str, action: str, outcome: str) -> None:
        self.step += 1
        self.actions[f"{actor}.{action} {outcome.split(' ', 1)[0].rstrip(':;')}"] += 1
        self.trace.append(TraceEntry(self.step, actor, action, outcome))

    def violation(self, what: str) -> InvariantViolation:
        tail = "\n".join(str(e) for e in self.trace[-self.config.trace_tail :])
        if self._interleaving is not None:
            events = self._interleaving.events[-self.config.trace_tail :]
            tail += "\nthe interleaved store calls so far (index, task, request, key):\n" + "\n".join(
                f"{e.index:>6}  {e.task:<10} {e.op:<6} {e.key}{'' if e.ok else ' (failed)'}" for e in events
            )
        message = (
            f"adversarial simulation seed {self.config.seed} violated an invariant at step {self.step} "
            f"(episode {self.episode}, {self._running}, clock +{self.clock.now() - START_TIME:.1f}s):\n"
            f"  {what}\nreplay: {self.config.replay_command()}\n"
            f"last {min(len(self.trace), self.config.trace_tail)} trace entries "
            "(step, actor, action, outcome):\n"
            f"{tail}"
        )
        return InvariantViolation(message, list(self.trace))

    def _refused(self, what: str, error: BaseException, expected: tuple[type[BaseException], ...]) -> str:
        """The outcome of an allowed refusal; a violation for any other error."""
        if isinstance(error, InvariantViolation):
            raise error
        if isinstance(error, Livelock):
            raise self.violation(f"{what} never finished (nobody may wait forever): {error}") from error
        if isinstance(error, expected):
            return f"refused: {type(error).__name__}"
        raise self.violation(f"{what} raised an unexpected {type(error).__name__}: {error}") from error

    def _value(self) -> bytes:
        self._values += 1
        return b"v%06d" % self._values

    def _new_path(self, kind: str, parent: str | None = None) -> str:
        self._counter += 1
        if kind == "nested" and parent is not None:
            return f"{parent}/n{self._counter}" if parent else f"n{self._counter}"
        return f"db{self._counter}"

    def _live(self) -> list[Member]:
        return [m for m in self.members.values() if m.state == "live"]

    def _present(self) -> list[Member]:
        return [m for m in self.members.values() if m.state != "deleted"]

    def _latest(self, path: str) -> Manifest | None:
        latest = ManifestStore(self.inner, path).read_latest()
        return None if latest is None else latest.value

    def _gone(self, path: str) -> bool:
        latest = self._latest(path)
        return latest is None or _deleted(latest)

    def _gc_options(self) -> GcOptions:
        return GcOptions.with_min_age(
            timedelta(seconds=self.config.min_age_s), db_delete_grace=timedelta(seconds=self.config.grace_s)
        )

    # --- writers ----------------------------------------------------------------------------------

    def _open(self, writer: Writer, store: ObjectStore) -> bool:
        """Open ``writer``'s database; False when refused (a typed refusal the situation explains)."""
        try:
            db = Db.open(writer.member.path, store, WRITER_OPTIONS, clock=self.clock, background=False)
        except Exception as error:
            outcome = self._refused(f"{writer.name} opening {writer.member.path}", error, _WRITER_REFUSALS)
            self._tick(writer.name, "open", outcome)
            return False
        writer.db = db
        writer.epoch = db.writer_epoch
        latest = self._latest(writer.member.path)
        if latest is not None and latest.writer_epoch > writer.epoch:
            self.figures["opens_returning_already_fenced"] += 1
        self._tick(writer.name, "open", f"ok epoch {writer.epoch}")
        return True

    def _write(self, writer: Writer, *, durable: bool, delete: bool = False) -> bool:
        """One put or delete; True if it returned. An await_durable one is acknowledged when it returns."""
        assert writer.db is not None
        member = writer.member
        key = self.rng.choice(member.keys())
        value = None if delete else self._value()
        self._index += 1
        index = self._index
        member.writes.append((index, key, value, writer.name))
        writer.issued.append(index)
        try:
            if value is None:
                writer.db.delete(key, await_durable=durable)
            else:
                writer.db.put(key, value, await_durable=durable)
        except Exception as error:
            self._fenced(writer, error, "put")
            self._tick(
                writer.name, "delete" if delete else "put", self._refused(writer.name, error, _WRITE_REFUSALS)
            )
            return False
        if durable:
            self._acknowledged(writer, "put(await_durable=True)")
            self.figures["durable_writes_acknowledged"] += 1
        self._tick(writer.name, "delete" if delete else "put", f"ok {key.decode()}={short(value)}")
        return True

    def _finish(self, writer: Writer, how: str) -> str:
        """``flush``, ``flush_memtable``, ``close`` or ``crash``; acknowledged when it returns."""
        db = writer.db
        assert db is not None
        if how == "crash":
            simulate_crash(db)
            writer.db = None
            self._tick(writer.name, "crash", "ok")
            return "crashed"
        try:
            if how == "flush":
                db.flush()
            elif how == "flush_memtable":
                db.flush_memtable()
            else:
                db.close()
        except Exception as error:
            self._fenced(writer, error, how)
            outcome = self._refused(f"{writer.name}.{how}", error, _WRITE_REFUSALS)
            if how == "close" or isinstance(error, FencedError):
                simulate_crash(db)
                writer.db = None
            self._tick(writer.name, how, outcome)
            return outcome
        if how == "close":
            writer.db = None
        self._acknowledged(writer, f"{how}()")
        self._tick(writer.name, how, "ok")
        return "ok"

    def _fenced(self, writer: Writer, error: Exception, what: str) -> None:
        """The first FencedError a writer sees must have a cause: a newer epoch holds the database, or
        it was deleted (or deleted and created again). Two processes never share an epoch here, so
        an :class:`EpochCollisionError` is a violation too: the rightful writer could not write."""
        if isinstance(error, EpochCollisionError):
            raise self.violation(
                f"{writer.name} (epoch {writer.epoch}) on {writer.member.path or '<root>'} stopped with "
                f"EpochCollisionError in {what}, but no other process holds its epoch: {error}"
            ) from error
        if not isinstance(error, FencedError) or writer.fenced_seen:
            return
        writer.fenced_seen = True
        member = writer.member
        latest = self._latest(member.path)
        self.checks["fenced_only_by_a_newer_epoch_or_deletion"] += 1
        if (
            latest is not None
            and not _deleted(latest)
            and member.incarnation == writer.incarnation
            and latest.writer_epoch <= writer.epoch
        ):
            raise self.violation(
                f"{writer.name} (epoch {writer.epoch}) was refused as fenced in {what} on "
                f"{member.path or '<root>'}, but the latest manifest still holds its epoch "
                f"({latest.writer_epoch}) and nobody deleted the database: {error}"
            ) from error

    def _acknowledged(self, writer: Writer, what: str) -> None:
        """Invariant 2: the writer's epoch was not superseded (and its database not deleted or
        re-created) before this acknowledgement; then every write it issued is acknowledged."""
        member = writer.member
        latest = self._latest(member.path)
        self.checks["no_fenced_writer_acknowledges"] += 1
        if latest is None or _deleted(latest):
            raise self.violation(
                f"{writer.name} (epoch {writer.epoch}) acknowledged {what} on {member.path or '<root>'}, "
                "which was deleted before the acknowledgement"
            )
        interleaving = self._interleaving
        if interleaving is None and latest.writer_epoch > writer.epoch:
            # Nothing runs concurrently: the newer epoch claimed before this operation's requests.
            raise self.violation(
                f"{writer.name} acknowledged {what} on {member.path or '<root>'} with epoch {writer.epoch}, "
                f"but writer epoch {latest.writer_epoch} had claimed the database before it returned "
                "(a fenced writer acknowledged)"
            )
        if interleaving is not None:
            self._check_interleaved_ack(writer, what, interleaving)
        if member.incarnation != writer.incarnation:
            raise self.violation(
                f"{writer.name} acknowledged {what} on {member.path or '<root>'}, which was deleted and "
                "created again since it opened (a stale writer wrote into a new database)"
            )
        for index in writer.issued[writer.acked :]:
            for i, key, _, _ in member.writes:
                if i == index:
                    member.acked[key] = max(member.acked.get(key, 0), index)
        writer.acked = len(writer.issued)

    def _check_interleaved_ack(self, writer: Writer, what: str, interleaving: Interleaver) -> None:
        """In an interleaved episode, an acknowledgement is wrong when a newer epoch's claim landed
        before one of the requests that wrote what it acknowledges (its WAL SSTs, L0 SSTs, manifest
        commits since its previous acknowledgement): the newer writer may not see it, or it lands on
        top of the newer writer's state. Requests after the last such write (a boundary read after a
        commit) do not matter: the acknowledged state was decided before the claim."""
        prefix = f"{writer.member.path}/" if writer.member.path else ""
        events = interleaving.events
        claim = self._claimed_after(events, prefix, writer)
        written = [
            e
            for e in events[writer.acked_at :]
            if e.task == writer.name
            and e.ok
            and e.op == "put"
            and e.key.startswith(prefix)
            and e.key[len(prefix) :].split("/")[0] in ("wal", "compacted", "manifest")
        ]
        writer.acked_at = len(events)
        late = [e for e in written if claim is not None and e.index > claim.index]
        if late:
            assert claim is not None
            raise self.violation(
                f"{writer.name} (epoch {writer.epoch}) acknowledged {what} on "
                f"{writer.member.path or '<root>'}, but {claim.task}'s claim of a newer epoch "
                f"({claim.key}, store call {claim.index}) landed before its write {late[0].key} (store "
                f"call {late[0].index}): a fenced writer acknowledged"
            )

    def _claimed_after(self, events: list[Event], prefix: str, writer: Writer) -> Event | None:
        """The first manifest another task committed with a writer epoch above ``writer``'s."""
        for event in events:
            relative = event.key[len(prefix) :] if event.key.startswith(prefix) else ""
            if event.task == writer.name or not event.ok or event.op != "put":
                continue
            if not relative.startswith("manifest/") or relative.count("/") != 1:
                continue
            manifest = ManifestStore(self.inner, writer.member.path)
            object_id = manifest.sequence.parse_id(event.key)
            if object_id is None:
                continue
            try:
                committed = manifest.sequence.read(object_id).value
            except SlateOpsError:
                continue
            if committed.writer_epoch > writer.epoch:
                return event
        return None

    def _session(self, writer: Writer, store: ObjectStore, writes: int, ending: str) -> None:
        if not self._open(writer, store):
            return
        for _ in range(writes):
            if (
                not self._write(writer, durable=self.rng.random() < 0.35, delete=self.rng.random() < 0.1)
                and writer.fenced_seen
            ):
                break
        if writer.db is not None:
            self._finish(writer, ending)
            if writer.db is not None and ending != "close":
                self._finish(writer, "close")

    def _new_writer(self, member: Member, label: str) -> Writer:
        return Writer(f"{label}", member, member.incarnation)

    # --- episodes ---------------------------------------------------------------------------------

    def _session_episode(self) -> str:
        member = self.rng.choice(self._live())
        ending = self.rng.choice(("close", "flush_memtable", "flush_memtable", "crash"))
        self._session(self._new_writer(member, "writer"), self.inner, self.rng.randint(1, 5), ending)
        return f"ok {member.path or '<root>'} ({ending})"

    def _race(self) -> str:
        """Two or three writers race Db.open on one path, then write and close, interleaved."""
        member = self.rng.choice(self._live())
        n = 3 if self.rng.random() < 0.25 else 2
        # Some races switch at almost every request, others let one writer run a while (a claim of
        # several requests lands between two of another writer's).
        interleaver = self._interleaver(stall_rate=0.0, switch_rate=self.rng.choice((0.15, 0.3, 0.6)))
        writers = [self._new_writer(member, f"racer{i}") for i in range(n)]

        def task(writer: Writer) -> Callable[[], None]:
            store = interleaver.store(writer.name, self.inner)

            def work() -> None:
                ending = self.rng.choice(("close", "flush_memtable", "flush", "crash"))
                self._session(writer, store, self.rng.randint(1, 3), ending)

            return work

        outcomes = self._interleave(interleaver, [(w.name, task(w)) for w in writers])
        self.figures["races"] += 1
        self.figures["race_interleaved_switches"] += interleaver.switches
        epochs = sorted(w.epoch for w in writers if w.epoch)
        acked = [w.name for w in writers if w.acked]
        if len(acked) > 1:
            self.figures["races_with_two_acknowledging"] += 1  # legal if each acked before the next open
        return f"ok {member.path or '<root>'}: {n} writers, epochs {epochs}, acknowledged by {acked} " + (
            _errors(outcomes)
        )

    def _paused_writer(self) -> str:
        """A writer opens, writes, then is frozen across an interference; then it resumes."""
        candidates = [m for m in self._live() if m.kind != "hostile"] or self._live()
        member = self.rng.choice(candidates)
        interference = self.rng.choice(
            ("soft", "soft_hard", "soft_gc", "hard_recreate", "split", "rollback", "takeover", "by_hand")
        )
        if interference == "by_hand" and self._has_dependents(member):
            interference = "soft_hard"
        tag_content: dict[bytes, bytes] | None = None
        if interference == "rollback":
            tag_content = self._tag_member(member, "pause")
            if tag_content is None:
                interference = "takeover"
        writer = self._new_writer(member, "paused")
        if not self._open(writer, self.inner):
            return "refused: open"
        for _ in range(self.rng.randint(1, 3)):
            self._write(writer, durable=self.rng.random() < 0.5)
        if interference == "split" or self.rng.random() < 0.3:
            self._finish(writer, "flush_memtable")
        if writer.db is None:
            return "the writer was refused"
        self.figures[f"paused_writer_across_{interference}"] += 1
        done = self._interfere(member, interference, tag_content)
        # Resume: the writer never polled meanwhile.
        for _ in range(self.rng.randint(1, 2)):
            if writer.db is None:
                break
            self._write(writer, durable=True)
        if writer.db is not None:
            self._finish(writer, self.rng.choice(("flush", "close")))
        if writer.db is not None:
            self._finish(writer, "close")
        if writer.fenced_seen:
            self.figures["paused_writers_fenced"] += 1
        return f"ok {member.path or '<root>'} across {interference}: {done}"

    def _interfere(self, member: Member, interference: str, tag_content: dict[bytes, bytes] | None) -> str:
        if interference == "takeover":
            other = self._new_writer(member, "takeover")
            self._session(other, self.inner, self.rng.randint(1, 2), "close")
            return "taken over"
        if interference == "split":
            return self._split_member(member)
        if interference == "rollback":
            assert tag_content is not None
            try:
                admin.rollback_to_tag(member.path, self.inner, "pause", dry_run=False, clock=self.clock)
            except Exception as error:
                outcome = self._refused("rollback", error, (SlateOpsError,))
                self._tick("admin", "rollback", outcome)
                return outcome
            member.reset(tag_content)
            self._tick("admin", "rollback", "ok")
            return "rolled back"
        if interference == "by_hand":
            return self._remove_by_hand(member)
        outcome = self._destroy(member, soft=True)
        if interference == "soft":
            return outcome
        if interference == "soft_gc":
            self.clock.advance(self.config.grace_s + self.config.min_age_s + 1)
            return outcome + "; " + self._collect(member)
        outcome += "; " + self._destroy(member, soft=False)
        if interference == "hard_recreate" and member.state == "deleted":
            outcome += "; " + self._recreate(member)
        return outcome

    def _paused_processes(self) -> str:
        """A compactor, a second compactor, GC and a writer on one database, interleaved with clock
        jumps up to twice min_age at the hand-overs."""
        member = self.rng.choice(self._live())
        self._l0_material(member)
        interleaver = self._interleaver(stall_rate=0.35, max_stall_s=2 * self.config.min_age_s)
        tasks: list[tuple[str, Callable[[], None]]] = []
        roster = ["compactor", "compactor2", "gc", "writer"]
        chosen = [r for r in roster if self.rng.random() < 0.7] or ["compactor", "gc"]
        for name in chosen:
            store = interleaver.store(name, self.inner)
            tasks.append((name, self._process_task(name, member, store)))
        outcomes = self._interleave(interleaver, tasks)
        self.figures["paused_process_episodes"] += 1
        self.figures["paused_process_stalls"] += interleaver.stalls
        return f"ok {member.path or '<root>'}: {', '.join(chosen)}, {interleaver.stalls} stalls " + _errors(
            outcomes
        )

    def _process_task(self, name: str, member: Member, store: ObjectStore) -> Callable[[], None]:
        def compactor() -> None:
            try:
                report = Compactor(
                    member.path,
                    store,
                    COMPACTOR_OPTIONS,
                    LocalExecutor(threads=1, clock=self.clock),
                    clock=self.clock,
                ).run_once(full=self.rng.random() < 0.5)
            except Exception as error:
                self._tick(name, "run_once", self._refused(name, error, _PROCESS_REFUSALS))
                return
            self._tick(name, "run_once", "ok" if report is None else f"ok {report.kind}")

        def gc() -> None:
            self._tick(name, "run_once", self._collect(member, store=store))

        def writer() -> None:
            w = self._new_writer(member, name)
            self._session(w, store, self.rng.randint(1, 3), self.rng.choice(("flush_memtable", "close")))

        return {"compactor": compactor, "compactor2": compactor, "gc": gc, "writer": writer}[name]

    def _admin(self) -> str:
        """refresh_checkpoint / delete_checkpoint on random checkpoint ids of random databases, then
        the clock past every expiry and GC of everything."""
        present = self._present()
        ids: list[tuple[uuid.UUID, str, str]] = []
        for m in present:
            latest = self._latest(m.path)
            if latest is not None and not _deleted(latest):
                ids += [(c.id, c.name or type(c.metadata).__name__, m.path) for c in latest.checkpoints]
        calls = self.rng.randint(1, 4)
        done = []
        for _ in range(calls):
            target = self.rng.choice(present) if present else None
            path = target.path if target is not None else "nowhere"
            protected = [i for i in ids if i[1].startswith(("slate_ops/", "tag:"))]
            if protected and self.rng.random() < 0.5:  # what an operator must not be able to release
                checkpoint_id, what, owner = self.rng.choice(protected)
                path = owner
            elif ids and self.rng.random() < 0.85:
                checkpoint_id, what, owner = self.rng.choice(ids)
                if self.rng.random() < 0.8:
                    path = owner  # mostly at the database that holds it: the call would act
            else:
                checkpoint_id, what = uuid.UUID(int=self.rng.getrandbits(128)), "random"
            if self.rng.random() < 0.6:
                lifetime = self.rng.choice(_LIFETIMES)
                action = f"refresh_checkpoint({what}, {lifetime})"
                try:
                    admin.refresh_checkpoint(path, self.inner, checkpoint_id, lifetime, clock=self.clock)
                    outcome = "ok"
                except Exception as error:
                    outcome = self._refused(action, error, (SlateOpsError,))
            else:
                action = f"delete_checkpoint({what})"
                try:
                    admin.delete_checkpoint(path, self.inner, checkpoint_id, dry_run=False)
                    outcome = "ok"
                except Exception as error:
                    outcome = self._refused(action, error, (SlateOpsError,))
            self.figures["admin_calls_" + outcome.split(" ", 1)[0].rstrip(":")] += 1
            self._tick("admin", action, f"{outcome} ({path or '<root>'})")
            done.append(outcome)
        # Protection must hold once time passes: everything that may expire does, GC runs.
        self.clock.advance(3600.0)
        self._collect_everything()
        return f"ok {calls} calls: {', '.join(done)}"

    def _names(self) -> str:
        """Databases created, opened or cloned under hostile names."""
        present = [m for m in self._live() if m.kind != "hostile"]
        base = self.rng.choice(present).path if present and self.rng.random() < 0.8 else "x"
        reserved = self.rng.choice(RESERVED)
        candidates = [
            f"{base}/{reserved}" if base else reserved,
            reserved,
            self._new_path("nested", base),
            self._new_path("nested", self._new_path("nested", base)),
            "",
        ]
        name = self.rng.choice(candidates)
        existing = self.members.get(name)
        if existing is not None and existing.state != "deleted":
            name = self._new_path("nested", base)
        elif existing is not None and existing.removed_by_hand:
            self.figures["paths_removed_by_hand_created_again"] += 1
        kind = "root" if name == "" else ("hostile" if name.split("/")[-1] in RESERVED else "nested")
        how = self.rng.choice(("create_db", "open", "clone"))
        parent = self.rng.choice(present) if present else None
        try:
            if how == "create_db" or parent is None:
                admin.create_db(name, self.inner)
                self.members[name] = Member(name, kind, incarnation=self._incarnation(name))
            elif how == "open":
                Db.open(name, self.inner, WRITER_OPTIONS, clock=self.clock, background=False).close()
                self.members[name] = Member(name, kind, incarnation=self._incarnation(name))
            else:
                admin.create_clone(name, parent.path, self.inner, clock=self.clock)
                self.members[name] = Member(
                    name,
                    kind,
                    settled=dict(parent.settled),
                    lo=parent.lo,
                    hi=parent.hi,
                    incarnation=self._incarnation(name),
                    parents=(parent.path,),
                )
        except Exception as error:
            outcome = self._refused(f"{how}({name!r})", error, (SlateOpsError,))
            self.figures[f"names_refused_{kind}"] += 1
            self._tick("names", how, f"{outcome} {name!r}")
            return f"{outcome} {name!r}"
        self.figures[f"names_accepted_{kind}"] += 1
        self._tick("names", how, f"ok {name!r}")
        member = self.members[name]
        if member.kind != "clone" and self.rng.random() < 0.8:
            self._session(
                self._new_writer(member, "names-writer"), self.inner, self.rng.randint(1, 3), "close"
            )
        return f"ok {how} {name!r}"

    def _incarnation(self, name: str) -> int:
        old = self.members.get(name)
        return 0 if old is None else old.incarnation + 1

    def _clone(self) -> str:
        parents = self._live()
        if not parents:
            return "nothing to clone"
        parent = self.rng.choice(parents)
        path = self._new_path("plain")
        try:
            admin.create_clone(path, parent.path, self.inner, clock=self.clock)
        except Exception as error:
            outcome = self._refused("create_clone", error, (SlateOpsError,))
            self._tick("admin", "clone", outcome)
            return outcome
        self.members[path] = Member(
            path, "clone", settled=dict(parent.settled), lo=parent.lo, hi=parent.hi, parents=(parent.path,)
        )
        self._tick("admin", "clone", f"ok {path} of {parent.path or '<root>'}")
        return f"ok {path}"

    def _split(self) -> str:
        member = self.rng.choice(self._live())
        return self._split_member(member)

    def _split_member(self, member: Member) -> str:
        keys = member.keys()
        if len(keys) < 2:
            return "too narrow to split"
        at = self.rng.choice(keys[1:])
        targets = [self._new_path("plain"), self._new_path("plain")]
        try:
            admin.split(member.path, self.inner, [at], targets, clock=self.clock)
        except Exception as error:
            outcome = self._refused("split", error, (WalNotFlushedError, SlateOpsError))
            self._tick("admin", "split", outcome)
            return outcome
        for target, (lo, hi) in zip(targets, ((member.lo, at), (at, member.hi)), strict=True):
            content = {
                k: v
                for k, v in self._readable(member).items()
                if (lo is None or k >= lo) and (hi is None or k < hi)
            }
            self.members[target] = Member(
                target, "shard", settled=content, lo=lo, hi=hi, parents=(member.path,)
            )
        self._tick("admin", "split", f"ok {member.path or '<root>'} at {at.decode()}")
        return "split"

    def _readable(self, member: Member) -> dict[bytes, bytes]:
        """What the source of a split holds: a fresh read, checked against its model."""
        return self._check_member(member)

    def _tag(self) -> str:
        member = self.rng.choice(self._live())
        name = self.rng.choice(("t1", "t2"))
        content = self._tag_member(member, name)
        return "ok" if content is not None else "refused"

    def _tag_member(self, member: Member, name: str) -> dict[bytes, bytes] | None:
        content = self._check_member(member)
        try:
            admin.create_tag(member.path, self.inner, name, replace=True, clock=self.clock)
        except Exception as error:
            self._tick("admin", f"tag {name}", self._refused("create_tag", error, (SlateOpsError,)))
            return None
        member.tags[name] = content
        self._tick("admin", f"tag {name}", f"ok {member.path or '<root>'}")
        return content

    def _destroy_episode(self) -> str:
        live = self._live()
        root = self.members.get("")
        member = root if root in live and self.rng.random() < 0.3 else self.rng.choice(live)
        outcome = self._destroy(member, soft=True)
        if self.rng.random() < 0.5:
            outcome += "; " + self._destroy(member, soft=False)
        return outcome

    def _destroy(self, member: Member, *, soft: bool) -> str:
        action = "destroy_soft" if soft else "destroy_hard"
        try:
            admin.destroy(member.path, self.inner, soft=soft, dry_run=False, clock=self.clock)
        except Exception as error:
            outcome = self._refused(action, error, (InvalidDeletionError, DbNotFoundError, SlateOpsError))
            self._tick("admin", action, f"{outcome} {member.path or '<root>'}")
            return outcome
        member.state = "soft" if soft else "deleted"
        if not soft:
            self._deleted_now(member)
        self._tick("admin", action, f"ok {member.path or '<root>'}")
        self.figures[f"{action}s"] += 1
        return f"{action} ok"

    def _has_dependents(self, member: Member) -> bool:
        """Whether a checkpoint of ``member`` pins it for another database (a clone, a shard)."""
        latest = self._latest(member.path)
        return latest is not None and any((c.name or "").startswith("slate_ops/") for c in latest.checkpoints)

    def _remove_by_hand(self, member: Member) -> str:
        """An operator deletes every object of the database's own directories with a tool that knows
        nothing of slate_ops (``aws s3 rm --recursive``): no tombstone, no fence, nothing left.

        The paused writer must acknowledge nothing after it and commit no manifest there, and a
        database created at the path later (the names episode may) must hold nothing old. The long
        run's seeds 2014 and 2017 found that it replayed the stale writer's refused WAL write (created
        before the confirmation that refused it); fixed in the writer, which now withdraws the WAL
        SSTs it wrote since its last acknowledgement when it finds its database deleted
        (``test_adversary.py::test_a_path_removed_by_hand_and_created_again_holds_nothing_old``)."""
        prefix = f"{member.path}/" if member.path else ""
        removed = 0
        for meta in list(self.inner.list(prefix)):
            parts = meta.key[len(prefix) :].split("/")
            if len(parts) == 2 and parts[0] in RESERVED:
                self.inner.delete(meta.key)
                removed += 1
        self._deleted_now(member)
        member.removed_by_hand = True
        self.figures["databases_removed_by_hand"] += 1
        self._tick("operator", "rm -r", f"ok {removed} objects of {member.path or '<root>'}")
        return f"removed {removed} objects by hand"

    def _recreate(self, member: Member) -> str:
        try:
            admin.create_db(member.path, self.inner)
        except Exception as error:
            outcome = self._refused("create_db on a deleted path", error, (SlateOpsError,))
            self._tick("admin", "recreate", outcome)
            return outcome
        member.incarnation += 1
        member.state = "live"
        member.reset({})
        member.tags.clear()
        self.figures["paths_reused"] += 1
        self._tick("admin", "recreate", f"ok {member.path or '<root>'}")
        return "re-created"

    def _deleted_now(self, member: Member) -> None:
        if member.path == "":
            self.figures["root_deletions"] += 1
        member.state = "deleted"
        member.reset({})
        member.tags.clear()

    def _l0_material(self, member: Member) -> None:
        for _ in range(self.rng.randint(1, 3)):
            self._session(self._new_writer(member, "loader"), self.inner, 2, "flush_memtable")

    def _collect(self, member: Member, store: ObjectStore | None = None) -> str:
        gc = GarbageCollector(member.path, store or self.inner, self._gc_options(), clock=self.clock)
        try:
            gc.run_once(dry_run=False)
        except Exception as error:
            return self._refused(f"GC of {member.path or '<root>'}", error, _PROCESS_REFUSALS)
        if member.state == "soft" and self._gone(member.path):
            self._deleted_now(member)
            self.figures["gc_deleted_destroyed_dbs"] += 1
        return "ok"

    def _collect_everything(self) -> None:
        for member in reversed(self._present()):
            self._tick("gc", "run_once", self._collect(member) + f" {member.path or '<root>'}")

    def _maintain(self) -> str:
        for member in self._live():
            try:
                Compactor(
                    member.path,
                    self.inner,
                    COMPACTOR_OPTIONS,
                    LocalExecutor(threads=1, clock=self.clock),
                    clock=self.clock,
                ).run_once(full=True)
                outcome = "ok"
            except Exception as error:
                outcome = self._refused("compaction", error, _PROCESS_REFUSALS)
            self._tick("compactor", "full", f"{outcome} {member.path or '<root>'}")
        self.clock.advance(max(self.config.grace_s, self.config.min_age_s) + 3600.0)
        self._collect_everything()
        return "ok"

    def _interleaver(
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

    def _interleave(
        self, interleaver: Interleaver, tasks: list[tuple[str, Callable[[], None]]]
    ) -> dict[str, TaskOutcome]:
        self._interleaving = interleaver
        try:
            outcomes = interleaver.run(tasks)
        except Stuck as stuck:
            raise self.violation(f"a task blocked outside the store: {stuck}") from stuck
        self.figures["interleaved_store_calls"] += len(interleaver.events)
        for name, outcome in outcomes.items():
            if outcome.error is not None:
                self._refused(name, outcome.error, ())  # every expected error was handled inside
        self._interleaving = None
        return outcomes

    # --- invariants -------------------------------------------------------------------------------

    def _check_member(self, member: Member) -> dict[bytes, bytes]:
        """Invariant 4 on one live database; the model then settles on what was read."""
        try:
            reader = DbReader.open(
                member.path, self.inner, None, READER_OPTIONS, clock=self.clock, background=False
            )
            try:
                observed = dict(reader.scan())
            finally:
                reader.close()
        except Exception as error:
            raise self.violation(
                f"{member.path or '<root>'} ({member.kind}) cannot be read: {type(error).__name__}: {error}"
            ) from error
        self.checks["acknowledged_writes_readable"] += 1
        wrong = {
            k: observed.get(k)
            for k in set(KEYS) | observed.keys()
            if observed.get(k) not in member.allowed(k)
        }
        if wrong:
            shown = ", ".join(
                f"{k!r}: {short(v)} (allowed {sorted(short(a) for a in member.allowed(k))})"
                for k, v in sorted(wrong.items())[:5]
            )
            raise self.violation(
                f"{member.path or '<root>'} ({member.kind}) does not hold its acknowledged writes: {shown}"
            )
        member.reset(observed)
        return observed

    def _check_all(self) -> None:
        self._running = f"checks after episode {self.episode}"
        for member in list(self.members.values()):
            if member.state == "soft" and self._gone(member.path):
                self._deleted_now(member)
            if member.state == "live":
                self._check_member(member)
                for name, content in member.tags.items():
                    self._check_tag(member, name, content)
            elif member.state == "deleted":
                self._check_deleted(member)
        paths = [m.path for m in self._present()]
        problems = check_references(self.inner, paths, now=self.clock.now())
        self.checks["references_reachable"] += 1
        if problems:
            shown = "\n    ".join(str(p) for p in problems[:6])
            raise self.violation(f"check_references over {len(paths)} database(s) found:\n    {shown}")
        self.checks["objects_of_no_database_kept"] += 1
        for key, data in STRAYS.items():
            try:
                found = self.inner.get(key).data
            except Exception as error:
                raise self.violation(f"{key}, which belongs to no database, was deleted ({error})") from error
            if found != data:
                raise self.violation(f"{key}, which belongs to no database, was changed")

    def _check_tag(self, member: Member, name: str, content: dict[bytes, bytes]) -> None:
        latest = self._latest(member.path)
        tag = (
            None if latest is None else next((c for c in latest.checkpoints if c.name == f"tag:{name}"), None)
        )
        self.checks["tags_read_what_they_pinned"] += 1
        if tag is None:
            raise self.violation(f"the tag {name} of {member.path or '<root>'} is gone (nobody deleted it)")
        try:
            reader = DbReader.open(
                member.path, self.inner, tag.id, READER_OPTIONS, clock=self.clock, background=False
            )
            try:
                observed = dict(reader.scan())
            finally:
                reader.close()
        except Exception as error:
            raise self.violation(
                f"the tag {name} of {member.path or '<root>'} cannot be read: {error}"
            ) from error
        if observed != content:
            raise self.violation(
                f"the tag {name} of {member.path or '<root>'} reads differently: {diff(observed, content)}"
            )

    def _check_deleted(self, member: Member) -> None:
        """Invariant 3: only tombstones, and a reader refuses the path with a typed error."""
        manifests = ManifestStore(self.inner, member.path)
        self.checks["deleted_database_stays_deleted"] += 1
        for listed in manifests.sequence.list():
            try:
                manifest = manifests.read(listed.id).value
            except Exception as error:
                raise self.violation(
                    f"{member.path or '<root>'} was deleted, but manifest {listed.id} is there and "
                    f"unreadable: {type(error).__name__}: {error}"
                ) from error
            if not _deleted(manifest):
                raise self.violation(
                    f"{member.path or '<root>'} was deleted, but manifest {listed.id} is not a tombstone "
                    "(a stale process brought the database back)"
                )
        try:
            reader = DbReader.open(
                member.path, self.inner, None, READER_OPTIONS, clock=self.clock, background=False
            )
        except SlateOpsError as error:
            if isinstance(error, DbNotFoundError) or type(error).__name__ in _GONE_ERRORS:
                return
            raise self.violation(
                f"a reader of the deleted {member.path or '<root>'} fails with {type(error).__name__}: "
                f"{error}"
            ) from error
        reader.close()
        raise self.violation(f"a reader opened the deleted database {member.path or '<root>'}")

    # --- setup --------------------------------------------------------------------------------

    def _create(self, path: str, kind: str) -> str:
        try:
            admin.create_db(path, self.inner)
        except Exception as error:
            outcome = self._refused("create_db", error, (SlateOpsError,))
            self._tick("admin", "create", outcome)
            return outcome
        self.members[path] = Member(path, kind, incarnation=self._incarnation(path))
        self._tick("admin", "create", f"ok {path or '<root>'}")
        return f"ok {path}"


_WRITER_REFUSALS: tuple[type[BaseException], ...] = (SlateOpsError,)
"""Opening a writer may be refused by a typed error (fenced meanwhile, the database destroyed)."""
_WRITE_REFUSALS: tuple[type[BaseException], ...] = (SlateOpsError,)
"""A write, flush or close may fail with a typed error: fenced, destroyed, deleted, closed."""
_PROCESS_REFUSALS: tuple[type[BaseException], ...] = (SlateOpsError,)
"""A stale compactor or GC fails with a typed error (fenced, boundary, conflict, a deleted version)."""
_GONE_ERRORS = ("DbDestroyedError", "DbDeletedError", "NamespaceDeletedError")
_LIFETIMES = (
    timedelta(seconds=1),
    timedelta(seconds=-5),
    timedelta(0),
    timedelta(minutes=10),
    None,
    timedelta(days=365 * 1_000_000),
)


def _deleted(manifest: Manifest) -> bool:
    return getattr(manifest, "deleted_at_s", None) is not None


def _errors(outcomes: dict[str, TaskOutcome]) -> str:
    failed = {n: type(o.error).__name__ for n, o in outcomes.items() if o.error is not None}
    return "" if not failed else f"(errors: {failed})"


def run_adversary(config: AdvConfig) -> AdvResult:
    return Adversary(config).run()
