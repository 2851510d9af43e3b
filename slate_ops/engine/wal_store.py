"""The WAL of one database: ``<db>/wal/<20-digit id>.sst`` (keys: :mod:`slate_ops.layout`).

The WAL is a chain from the replay point (:mod:`slate_ops.engine.wal_chain`): data SSTs, window
fences and legacy empty fences (:mod:`slate_ops.engine.wal_fence`), ending at the first missing id.
An opener fences older writers by creating a window fence at the chain's end: a fenced writer's
create-if-absent of that id then fails, its later PUTs inside the window are never read, and it finds
the newer epoch in the manifest (docs/design/engine.md, "Several WAL PUTs in flight";
docs/design/coordination.md, "Fencing").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import pyarrow as pa

from slate_ops.engine.wal_chain import (
    ChainWalk,
    Segment,
    first_writer_id,
    is_data,
    next_in_chain,
    walk_chain,
    walk_from,
)
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE, WalObjectKind, wal_object_kind
from slate_ops.errors import (
    EpochCollisionError,
    ObjectNotFoundError,
    PreconditionFailedError,
    PutOutcomeUnknownError,
    WalChainOvertakenError,
)
from slate_ops.layout import WAL_DIR, join, normalize_db_path, parse_wal_key, wal_key
from slate_ops.objstore.base import (
    GetResult,
    ObjectStore,
    PutMode,
    new_put_id,
    resolve_put_outcome,
)
from slate_ops.objstore.fetched import FetchedObject
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import SstReader, encode_sst

# WAL SSTs fetched at once by read_many (replay): on S3 each GET waits ~20-50 ms, so fetching one
# after another makes a reopen after a few hundred WAL SSTs take many seconds. Bounded so that at
# most this many segments are held in memory ahead of the one being applied.
WAL_FETCH_PARALLELISM = 16

Entry = tuple[bytes, int, int, bytes]


@dataclass(frozen=True)
class WalFence:
    """What an opener's fence of the WAL chain leaves it: the data segments of the chain below the
    fence (its replay), the id of its window fence, and the first WAL id the new writer writes."""

    segments: tuple[Segment, ...]
    fence_id: int
    first_id: int


class WalStore:
    """Reads, writes and fences the WAL of the database at ``db_path``; ``clock``'s executor runs
    :meth:`read_many`'s fetches."""

    def __init__(self, store: ObjectStore, db_path: str, clock: Runtime = SYSTEM_RUNTIME) -> None:
        self.store = store
        self.clock = clock
        self.db_path = normalize_db_path(db_path)
        self.directory = join(self.db_path, WAL_DIR)

    def key(self, wal_id: int) -> str:
        return wal_key(self.db_path, wal_id)

    def list_ids(self, after: int = 0) -> list[int]:
        """WAL ids greater than ``after``, ascending."""
        return [wal_id for wal_id, _ in self.list_sizes(after)]

    def list_sizes(self, after: int = 0) -> list[tuple[int, int]]:
        """``(id, object size)`` of the WAL SSTs with ids greater than ``after``, ascending; one LIST.

        Keys are compared in full: the objects of a database nested in this one's ``wal/`` directory
        (a database named ``<db>/wal``) are not this database's WAL."""
        found = []
        for meta in self.store.list(self.directory + "/", start_after=self.key(after) if after else None):
            wal_id = parse_wal_key(self.db_path, meta.key)
            if wal_id is not None and wal_id > after:
                found.append((wal_id, meta.size))
        return found

    def max_seq(self, wal_id: int, size: int) -> int | None:
        """The highest sequence number in WAL ``wal_id`` of ``size`` bytes; None for a fence (either kind)."""
        if not is_data(size):
            return None
        return SstReader.open(self.store, self.key(wal_id), size=size).info.max_seq

    def create(self, wal_id: int, data: bytes, put_id: str | None = None) -> bool:
        """Create WAL ``wal_id``; False if the id exists (someone fenced us, or wrote it first).

        A retry of a create whose outcome stayed unknown (it raised) passes the same ``put_id``:
        finding the object stored with that put id means the earlier attempt landed — success.
        """
        key = self.key(wal_id)
        put_id = put_id or new_put_id()
        try:
            try:
                self.store.put(key, data, PutMode.create(), put_id=put_id)
            except PutOutcomeUnknownError:
                resolve_put_outcome(self.store, key, data, PutMode.create(), put_id)
        except PreconditionFailedError:
            return self._holds(key, put_id)
        return True

    def _holds(self, key: str, put_id: str) -> bool:
        try:
            return self.store.head(key).put_id == put_id
        except ObjectNotFoundError:
            return False

    def write(self, wal_id: int, table: pa.Table, put_id: str | None = None) -> bool:
        data, _ = encode_sst(table, order="seq")
        return self.create(wal_id, data, put_id)

    def chain(self, after: int = 0, upto: int | None = None) -> ChainWalk:
        """The WAL chain from ``after + 1`` (to ``upto`` at most); one LIST."""
        return walk_chain(self.list_sizes(after), after, upto)

    def fence(self, after: int, confirm: Callable[[], object] | None = None) -> WalFence:
        """Fence the end of the chain from ``after + 1`` (rule 3 of docs/design/engine.md, "Several WAL
        PUTs in flight"): one LIST, one create-if-absent of a window fence at the first missing id.

        An id created under us meanwhile is HEADed: data extends the chain, a window fence jumps it,
        a legacy empty fence is stepped over, a vanished object is tried again. More than
        :data:`WAL_FENCE_WINDOW` such steps raise :class:`WalChainOvertakenError` (the caller confirms
        its epoch). ``confirm`` (the opener's epoch check, :class:`~slate_ops.errors.FencedError` if
        newer) runs before the fence is created when the listed chain passes a fence, and before the
        walk jumps a window fence found by a HEAD: a fence may be a newer opener's, and an opener that
        lost the race must stop rather than fence the newer writer's first WAL id. The new writer's
        first id is above the fence's window and every listed id.
        """
        listing = self.list_sizes(after)
        walk = walk_chain(listing, after)
        sizes = dict(listing)
        segments, at, highest = list(walk.segments), walk.end, walk.highest
        if confirm is not None and any(after < i < at and not is_data(size) for i, size in listing):
            # The chain passes a fence: possibly a newer opener's, which claimed before our LIST. Our
            # epoch is checked before we fence, so a lost race ends here (FencedError) instead of
            # fencing the newer writer's first WAL id.
            confirm()
        steps = 0
        while not self.create(at, WINDOW_FENCE):
            size = self.size(at)
            if size is None:
                continue  # vanished meanwhile (a deletion): try the id again
            steps += 1
            if steps > WAL_FENCE_WINDOW:
                raise WalChainOvertakenError(self.key(at), steps)
            if confirm is not None and wal_object_kind(size) is WalObjectKind.WINDOW_FENCE:
                confirm()
            highest = max(highest, at)
            sizes[at] = size
            after_step = next_in_chain(at, size, segments)
            more, at = walk_from(sizes, after_step)
            segments += more
        return WalFence(tuple(segments), at, first_writer_id(at, highest))

    def read(self, wal_id: int) -> Iterator[Entry]:
        """The entries of WAL ``wal_id`` in seq order; nothing for a fence. One GET."""
        return self._fetch(wal_id).scan()

    def read_many(
        self, segments: Iterable[tuple[int, int]], parallelism: int | None = None
    ) -> Iterator[tuple[int, Iterator[Entry]]]:
        """``(id, entries)`` of each ``(id, size)`` of ``segments`` (from :meth:`list_sizes`), in order.

        Up to ``parallelism`` (default :data:`WAL_FETCH_PARALLELISM`) WAL SSTs are fetched at once,
        each with one GET and in order of need (the next ones while the caller applies this one); a
        fence costs no request. Stopping early (or an error) cancels the fetches not yet
        started.
        """
        window = max(1, WAL_FETCH_PARALLELISM if parallelism is None else parallelism)
        pending: list[tuple[int, Future[_WalSegment] | None]] = []
        todo = iter(segments)
        with self.clock.executor(window, "slate-ops-wal-fetch") as pool:
            try:
                while True:
                    while len(pending) < window:
                        step = next(todo, None)
                        if step is None:
                            break
                        wal_id, size = step
                        pending.append((wal_id, pool.submit(self._fetch, wal_id) if is_data(size) else None))
                    if not pending:
                        return
                    wal_id, future = pending.pop(0)
                    yield wal_id, iter(()) if future is None else future.result().scan()
            finally:
                for _, future in pending:
                    if future is not None:
                        future.cancel()

    def _fetch(self, wal_id: int) -> _WalSegment:
        """WAL ``wal_id`` read whole with one GET (a WAL SST is read whole anyway): no HEAD, no
        ranged GETs for footer, index and blocks."""
        key = self.key(wal_id)
        return _WalSegment(self.store.url, key, self.store.get(key))

    def size(self, wal_id: int) -> int | None:
        """The size of WAL ``wal_id`` by one HEAD (its kind: ``wal_fence.wal_object_kind``), or None if
        it does not exist."""
        try:
            return self.store.head(self.key(wal_id)).size
        except ObjectNotFoundError:
            return None


def fence_chain_end(
    wal: WalStore, after: int, confirm: Callable[[], object], location: str, role: str, epoch: int
) -> WalFence:
    """:meth:`WalStore.fence` for an opener holding ``epoch``: the chain overtaken under it
    (:class:`WalChainOvertakenError`) is ``confirm``'s :class:`FencedError` when a newer epoch claimed,
    else another process with our epoch writes the WAL (:class:`EpochCollisionError`)."""
    try:
        return wal.fence(after, confirm)
    except WalChainOvertakenError as error:
        confirm()
        raise EpochCollisionError(location, role, epoch, error.key) from error


class _WalSegment:
    """One fetched WAL SST; :meth:`scan` decodes it from memory (nothing for a fence)."""

    __slots__ = ("_got", "_key", "_url")

    def __init__(self, url: str, key: str, got: GetResult) -> None:
        self._url = url
        self._key = key
        self._got = got

    def scan(self) -> Iterator[Entry]:
        if not is_data(len(self._got.data)):
            return iter(())
        view = FetchedObject(self._url, self._key, self._got)
        return SstReader.open(view, self._key, size=len(self._got.data)).scan()


__all__ = ["WAL_FETCH_PARALLELISM", "Entry", "WalFence", "WalStore", "fence_chain_end"]
