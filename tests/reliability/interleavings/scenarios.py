"""The three scenarios of the fencing protocol (issue 19) and their invariants, over the real code.

Every scenario starts from a fresh :class:`MemoryStore` prepared without gating, then runs its
actors through :class:`~tests.reliability.interleavings.explorer.GatedStore` views. Writers run with
``wal_flush_interval`` and ``manifest_poll_interval`` of an hour, so their flusher thread acts only
when a durable put wakes it (no timer-driven calls); a WAL replay fetches one SST at a time. Steps are
numbered by the gated calls released so far; an operation "starts after" another "ended" when its
start step is at least the other's end step (see :class:`OpRecord`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from slate_ops.admin.destroy import destroy
from slate_ops.admin.reachability import check_references
from slate_ops.compaction import Compactor, CompactorOptions, LocalExecutor
from slate_ops.engine import Db, DbOptions, DbReader
from slate_ops.engine.wal_chain import is_data
from slate_ops.errors import (
    DbDestroyedError,
    DbNotFoundError,
    FencedError,
    InvalidDeletionError,
    ObjectNotFoundError,
    SlateOpsError,
)
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.reliability.interleavings.explorer import Context, OpRecord, Outcome

PATH = "db"
HOUR = timedelta(hours=1)
WRITER_OPTIONS = DbOptions(wal_flush_interval=HOUR, manifest_poll_interval=HOUR)
START = 1_700_000_000.0


def _name(error: BaseException | None) -> str:
    return "-" if error is None else type(error).__name__


def _typed(error: BaseException, allowed: tuple[type[BaseException], ...]) -> bool:
    """An allowed, typed error: a subclass of one of ``allowed``, never the bare base class and never
    a missing object."""
    return (
        isinstance(error, allowed)
        and type(error) is not SlateOpsError
        and not isinstance(error, ObjectNotFoundError)
    )


def _unexpected(record: OpRecord | None, allowed: tuple[type[BaseException], ...]) -> list[str]:
    if record is None or record.error is None or _typed(record.error, allowed):
        return []
    return [f"unexpected error: {record.describe()}"]


def _read_all(store: ObjectStore) -> tuple[str, dict[bytes, bytes]]:
    """What a fresh reader of the path finds: ``("live", contents)``, ``("deleted:<Error>", {})`` for
    a typed refusal, ``("broken:<Error>: ...", {})`` for anything else."""
    try:
        with DbReader.open(PATH, store) as reader:
            return "live", dict(reader.scan())
    except (DbDestroyedError, DbNotFoundError) as error:
        return f"deleted:{type(error).__name__}", {}
    except Exception as error:
        return f"broken:{type(error).__name__}: {error}", {}


# --- (1) two writers, each opening and writing one durable put -------------------------------------


class TwoWriters:
    """Writers A and B each ``Db.open`` the same existing database, ``put(await_durable=True)`` one
    key, and ``close``.

    Invariants: both finish (no livelock, nobody waits forever); a writer with the lower epoch never
    acknowledges after the higher-epoch writer's open returned, and its every operation that starts
    after that raises FencedError; every acknowledged write is read by a fresh reader at the end; errors
    are typed; the path stays readable.
    """

    name = "two_writers"
    actors: tuple[str, ...] = ("A", "B")

    def setup(self) -> tuple[ObjectStore, Any]:
        store = MemoryStore()
        Db.open(PATH, store, WRITER_OPTIONS, clock=ManualRuntime(START)).close()
        return store, None

    def act(self, actor: str, ctx: Context, setup: Any) -> None:
        opened = ctx.op("open", lambda: Db.open(PATH, ctx.store, WRITER_OPTIONS, clock=ManualRuntime(START)))
        if not opened.ok:
            return
        db: Db = opened.value
        ctx.keep(db)
        ctx.op("put", lambda: db.put(actor.encode(), b"v-" + actor.encode(), await_durable=True))
        ctx.op("close", db.close)

    def check(self, outcome: Outcome) -> list[str]:
        problems: list[str] = []
        for actor in self.actors:
            for name in ("open", "put", "close"):
                problems += _unexpected(outcome.of(actor, name), (FencedError,))
        opens = {a: outcome.of(a, "open") for a in self.actors}
        opened = {a: r for a, r in opens.items() if r is not None and r.ok}
        epoch = {a: r.value.writer_epoch for a, r in opened.items()}
        if len(set(epoch.values())) < len(epoch):
            problems.append(f"same epoch: both writers opened with epoch {epoch}")
        if len(opened) == 2:
            high = max(opened, key=lambda a: epoch[a])
            low = next(a for a in opened if a != high)
            high_open = opened[high]
            assert high_open.end is not None
            for name in ("put", "close"):
                record = outcome.of(low, name)
                if record is None:
                    continue
                # A durable put acknowledges when it returns; a close that started before the newer
                # writer opened may finish its own (earlier) commit after it.
                if name == "put" and record.ok and record.end is not None and record.end > high_open.end:
                    problems.append(
                        f"fenced writer acknowledged: {low} (epoch {epoch[low]}) {name} returned at step "
                        f"{record.end}, after {high} (epoch {epoch[high]}) opened at step {high_open.end}"
                    )
                elif record.began > high_open.end and not isinstance(record.error, FencedError):
                    problems.append(
                        f"not fenced: {low}.{name} started at step {record.began}, after {high} opened "
                        f"(step {high_open.end}), and ended {_name(record.error)} instead of FencedError"
                    )
        state, contents = _read_all(outcome.store)
        if state != "live":
            problems.append(f"path unreadable: {state}")
        for actor in self.actors:
            put = outcome.of(actor, "put")
            if put is not None and put.ok and contents.get(actor.encode()) != b"v-" + actor.encode():
                problems.append(f"acknowledged write lost: {actor}'s durable put is not read at the end")
        return problems

    def classify(self, outcome: Outcome) -> str:
        parts = []
        for actor in self.actors:
            ops = [outcome.of(actor, name) for name in ("open", "put", "close")]
            parts.append(
                actor
                + ":"
                + "/".join("ok" if r and r.ok else _name(r.error if r else None) for r in ops if r)
            )
        return " ".join(parts)


# --- (2) a writer putting while a soft destroy then a hard destroy run ----------------------------


class WriterAcrossDestroy:
    """Writer W opens the database (which holds an older write), ``put(await_durable=True)`` one key
    and closes, while D runs ``destroy`` (soft) then ``destroy`` (hard), both for real.

    A W whose first manifest commit comes after the hard destroy's tombstone (its first manifest
    commit; the end of the hard destroy if it commits none) creates a new database at the path: its
    writes must then be kept, and nothing old read.

    Invariants: both finish; every error is typed (W: FencedError, DbDestroyedError or DbNotFoundError;
    D: FencedError or InvalidDeletionError); a W that claimed before the destroy did (a stale writer)
    acknowledges no put and commits no close after the destroy's claim; after a hard destroy no
    manifest besides the tombstone and no WAL or SST object holding data is left (fence objects may
    stay), unless W created a new database after it; a fresh reader reads the path or is refused
    with a typed error (never ObjectNotFoundError); the path is reusable: a new writer opens there and
    holds nothing old.
    """

    name = "writer_across_destroy"
    actors: tuple[str, ...] = ("W", "D")

    def setup(self) -> tuple[ObjectStore, Any]:
        store = MemoryStore()
        with Db.open(PATH, store, WRITER_OPTIONS, clock=ManualRuntime(START)) as db:
            db.put(b"old", b"v-old", await_durable=True)
        return store, None

    def act(self, actor: str, ctx: Context, setup: Any) -> None:
        clock = ManualRuntime(START)
        if actor == "D":
            soft = ctx.op(
                "destroy-soft", lambda: destroy(PATH, ctx.store, soft=True, dry_run=False, clock=clock)
            )
            if soft.ok:
                ctx.op(
                    "destroy-hard", lambda: destroy(PATH, ctx.store, soft=False, dry_run=False, clock=clock)
                )
            return
        opened = ctx.op("open", lambda: Db.open(PATH, ctx.store, WRITER_OPTIONS, clock=clock))
        if not opened.ok:
            return
        db: Db = opened.value
        ctx.keep(db)
        ctx.op("put", lambda: db.put(b"new", b"v-new", await_durable=True))
        ctx.op("close", db.close)

    def check(self, outcome: Outcome) -> list[str]:
        problems: list[str] = []
        for name in ("open", "put", "close"):
            problems += _unexpected(outcome.of("W", name), (FencedError, DbDestroyedError, DbNotFoundError))
        for name in ("destroy-soft", "destroy-hard"):
            problems += _unexpected(outcome.of("D", name), (FencedError, InvalidDeletionError))
        opened, put = outcome.of("W", "open"), outcome.of("W", "put")
        hard = outcome.of("D", "destroy-hard")
        claim, w_claim = _claim_step(outcome, "D"), _claim_step(outcome, "W")
        # W created a new database at the path if its first manifest commit came after the hard
        # destroy's tombstone (its first manifest put), or after the hard destroy (none committed).
        tombstone = _first_put_within(outcome, "D", "/manifest/", hard)
        w_first = _first_put_within(outcome, "W", "/manifest/", opened)
        new_db = bool(
            hard is not None
            and hard.ok
            and opened is not None
            and opened.ok
            and w_first is not None
            and w_first > (tombstone if tombstone is not None else (hard.end or 0))
        )
        # W is stale once the destroy claimed the database after W's own claim (a W that claimed after
        # the destroy is the newer writer: the destroy then fails with FencedError, or W's open with
        # DbDestroyedError).
        stale = claim is not None and w_claim is not None and w_claim < claim
        if stale and put is not None and put.ok and (put.end or 0) > (claim or 0):
            problems.append(
                f"stale writer acknowledged: W's durable put returned at step {put.end}, after the "
                f"soft destroy claimed the database (step {claim}; W claimed at step {w_claim})"
            )
        close = outcome.of("W", "close")
        if stale and close is not None and close.ok and close.began > (claim or 0):
            problems.append(
                f"stale writer committed: W's close (from step {close.began}) released its checkpoint "
                f"after the soft destroy claimed the database (step {claim})"
            )
        state, contents = _read_all(outcome.store)
        if state.startswith("broken"):
            problems.append(f"path unreadable: {state}")
        try:
            found = check_references(outcome.store, [PATH], now=START)
        except Exception as error:
            problems.append(f"check_references fails: {_name(error)}: {error}")
        else:
            if found:
                problems.append(f"references broken: {'; '.join(str(p) for p in found[:3])}")
        if hard is not None and hard.ok and not new_db:
            # The tombstone may stay, and so may fence objects (WAL window fences, .compactions) that keep
            # stale processes fenced; nothing else: no older manifest, no WAL SST holding writes.
            left = _objects(outcome.store)
            manifests = [k for k in left if k.startswith(f"{PATH}/manifest/")]
            data = [
                k
                for k, size in left.items()
                if (k.startswith(f"{PATH}/wal/") and is_data(size))
                or (k.startswith(f"{PATH}/compacted/") and size)
            ]
            if len(manifests) > 1 or data:
                problems.append(f"left after hard destroy: {', '.join(manifests + data)}")
            if state == "live":
                problems.append(f"deleted database came back: a reader reads {sorted(contents)}")
            problems += _reusable(outcome.store)
        if new_db and put is not None and put.ok and contents.get(b"new") != b"v-new":
            problems.append("acknowledged write lost: W's durable put into the new database is not read")
        if b"old" in contents and hard is not None and hard.ok:
            problems.append("deleted database came back: the old write is read after the hard destroy")
        return problems

    def classify(self, outcome: Outcome) -> str:
        parts = []
        for actor, names in (("W", ("open", "put", "close")), ("D", ("destroy-soft", "destroy-hard"))):
            ops = [outcome.of(actor, name) for name in names]
            parts.append(
                actor
                + ":"
                + "/".join("ok" if r and r.ok else _name(r.error if r else None) for r in ops if r)
            )
        return " ".join(parts)


def _first_put_within(outcome: Outcome, actor: str, directory: str, op: OpRecord | None) -> int | None:
    """The step (1-based) of ``actor``'s first put under ``directory`` during operation ``op``."""
    if op is None:
        return None
    last = op.end if op.end is not None else len(outcome.schedule)
    for step, call in enumerate(outcome.schedule, 1):
        if op.began <= step <= last and call.actor == actor and call.op == "put" and directory in call.key:
            return step
    return None


def _claim_step(outcome: Outcome, actor: str) -> int | None:
    """The step (1-based) of ``actor``'s epoch claim: its last manifest put before its first WAL put
    (the fence a new writer and a soft destroy create right after claiming); None if it never fenced."""
    claim = None
    for step, call in enumerate(outcome.schedule, 1):
        if call.actor != actor or call.op != "put":
            continue
        if "/wal/" in call.key:
            return claim
        if "/manifest/" in call.key:
            claim = step
    return None


def _objects(store: ObjectStore) -> dict[str, int]:
    """Every object under the path, with its size."""
    return {meta.key: meta.size for meta in store.list(f"{PATH}/")}


def _reusable(store: ObjectStore) -> list[str]:
    """A new writer opens at the deleted path and holds nothing old."""
    try:
        with Db.open(PATH, store, WRITER_OPTIONS, clock=ManualRuntime(START)) as db:
            old = db.get(b"old")
            new = db.get(b"new")
    except SlateOpsError as error:
        return [f"path not reusable: a new writer cannot open it: {_name(error)}: {error}"]
    if old is not None or new is not None:
        return ["path not reusable: a new database at the deleted path holds old writes"]
    return []


# --- (3) a compactor committing while a second compactor starts -----------------------------------


@dataclass(frozen=True)
class CompactionSetup:
    keys: dict[bytes, bytes]


class CompactorTakeover:
    """Compactor C1 starts and runs one L0 compaction (4 L0 SSTs, ``min_sources=4``) while C2 starts
    (``Compactor(...)``: it claims the compactor epoch) and runs once too.

    Invariants: both finish; errors are typed (FencedError, CompactionConflictError); every manifest
    version that changes the sorted runs is committed under the compactor epoch of the compactor that
    committed it, at most one such commit per epoch, never from a compactor after a newer one's claim
    (its epoch is below the stored one); ``check_references`` finds nothing missing or unpinned; a fresh
    reader reads every key of the setup.
    """

    name = "compactor_takeover"
    actors: tuple[str, ...] = ("C1", "C2")

    def __init__(self, second_runs: bool = True) -> None:
        self.second_runs = second_runs
        if not second_runs:
            self.name = "compactor_takeover_start_only"

    def setup(self) -> tuple[ObjectStore, Any]:
        store = MemoryStore()
        keys: dict[bytes, bytes] = {}
        with Db.open(PATH, store, WRITER_OPTIONS, clock=ManualRuntime(START)) as db:
            for i in range(4):
                key, value = f"k{i}".encode(), f"v{i}".encode()
                db.put(key, value)
                keys[key] = value
                db.flush_memtable()
        return store, CompactionSetup(keys)

    def act(self, actor: str, ctx: Context, setup: Any) -> None:
        clock = ManualRuntime(START)
        options = CompactorOptions(min_sources=4)
        started = ctx.op(
            "start", lambda: Compactor(PATH, ctx.store, options, LocalExecutor(threads=1), clock=clock)
        )
        if not started.ok or (actor == "C2" and not self.second_runs):
            return
        compactor: Compactor = started.value
        ctx.op("run", compactor.run_once)

    def check(self, outcome: Outcome) -> list[str]:
        from slate_ops.errors import CompactionConflictError

        problems: list[str] = []
        for actor in self.actors:
            for name in ("start", "run"):
                problems += _unexpected(outcome.of(actor, name), (FencedError, CompactionConflictError))
        epochs = {}
        for actor in self.actors:
            started = outcome.of(actor, "start")
            if started is not None and started.ok:
                epochs[actor] = started.value.epoch
        manifests = ManifestStore(outcome.store, PATH)
        versions = [manifests.read(f.id) for f in manifests.list()]
        commits: dict[int, list[int]] = {}
        for before, after in itertools.pairwise(versions):
            if after.value.compacted != before.value.compacted:
                commits.setdefault(after.value.compactor_epoch, []).append(after.id)
        for epoch, ids in commits.items():
            if len(ids) > 1:
                problems.append(
                    f"two commits in one epoch: compactor epoch {epoch} committed manifests {ids}"
                )
            if epoch not in epochs.values():
                problems.append(f"commit under a foreign epoch: manifests {ids} at compactor epoch {epoch}")
        for actor in self.actors:
            run = outcome.of(actor, "run")
            if run is None or not run.ok or run.value is None:
                continue
            landed = manifests.read(run.value.manifest_id).value
            if landed.compactor_epoch != epochs[actor]:
                problems.append(
                    f"fenced compactor committed: {actor} (epoch {epochs[actor]}) reported manifest "
                    f"{run.value.manifest_id}, which holds compactor epoch {landed.compactor_epoch}"
                )
        found = check_references(outcome.store, [PATH], now=START)
        if found:
            problems.append(f"references broken: {'; '.join(str(p) for p in found[:3])}")
        state, contents = _read_all(outcome.store)
        if state != "live":
            problems.append(f"path unreadable: {state}")
        elif contents != outcome.setup.keys:
            problems.append(f"data changed by compaction: read {contents}, wrote {outcome.setup.keys}")
        return problems

    def classify(self, outcome: Outcome) -> str:
        parts = []
        for actor in self.actors:
            ops = [outcome.of(actor, name) for name in ("start", "run")]
            parts.append(
                actor
                + ":"
                + "/".join("ok" if r and r.ok else _name(r.error if r else None) for r in ops if r)
            )
        return " ".join(parts)


SCENARIOS = {
    "two_writers": TwoWriters,
    "writer_across_destroy": WriterAcrossDestroy,
    "compactor_takeover": CompactorTakeover,
}
