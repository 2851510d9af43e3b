"""The persistent half of a read: L0 views and sorted runs of one manifest, with SST path resolution.

An SST belongs to this database (``<db>/compacted/<id>.sst``) unless its physical id is listed in
one of the manifest's ``external_dbs`` (clones, unions): then it lives under that database's path
(:func:`slate_ops.manifest.model.resolve_sst_path`). Views narrow an SST to their ``visible_range``.

A scan reads ahead (:mod:`slate_ops.sst.readahead`): the SSTs of every L0 view and the first SST
of every sorted run it needs are opened concurrently, and each source fetches its next block runs
(and opens its run's next SST) while the merge consumes the current ones.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

from ulid import ULID

from slate_ops.manifest.model import CompactedSst, KeyRange, Manifest, SstView, resolve_sst_path
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import BlockCache, SstReader
from slate_ops.sst.readahead import BlockStream, ReadAhead, ReadAheadLimits, Segment

Entry = tuple[bytes, int, int, bytes]


def sst_set(manifest: Manifest) -> tuple[tuple[ULID, ...], tuple[tuple[int, tuple[ULID, ...]], ...]]:
    """The identity of the L0 views and sorted runs: when it changes, a pinned checkpoint is stale."""
    return (
        tuple(v.view_id for v in manifest.l0),
        tuple((run.id, tuple(v.view_id for v in run.views)) for run in manifest.compacted),
    )


class SstReaders:
    """Opened SST readers by object key, shared across manifest versions (SSTs never change);
    ``clock``'s executor runs the scans' read-ahead fetches."""

    def __init__(
        self,
        store: ObjectStore,
        cache: BlockCache | None,
        read_ahead: ReadAheadLimits | None = None,
        clock: Runtime = SYSTEM_RUNTIME,
    ) -> None:
        self.store = store
        self.cache = cache
        self.read_ahead = ReadAheadLimits() if read_ahead is None else read_ahead
        self.clock = clock
        self._readers: dict[str, SstReader] = {}
        self._lock = threading.Lock()

    def open(self, key: str, size: int) -> SstReader:
        reader = self._readers.get(key)
        if reader is None:
            reader = SstReader.open(self.store, key, size=size, cache=self.cache)
            with self._lock:
                self._readers[key] = reader
        return reader

    def opened(self, key: str) -> SstReader | None:
        """The reader of ``key`` if it is open already."""
        return self._readers.get(key)

    def retain(self, keys: set[str]) -> None:
        """Forget readers of SSTs no longer referenced, so memory does not grow with history."""
        with self._lock:
            self._readers = {k: r for k, r in self._readers.items() if k in keys}


@dataclass(frozen=True)
class ViewHandle:
    """One SST view ready to read: where it lives and which keys it may return."""

    key: str
    size: int
    first_key: bytes
    last_key: bytes
    visible: KeyRange | None

    @property
    def start(self) -> bytes:
        """The smallest key the view can return (its first key, or its visible start if later)."""
        if self.visible is None or self.visible.start is None:
            return self.first_key
        return max(self.first_key, self.visible.start)

    def may_contain(self, key: bytes) -> bool:
        if key < self.first_key or key > self.last_key:
            return False
        return self.visible is None or self.visible.contains(key)

    def clip(self, start: bytes | None, end: bytes | None) -> tuple[bytes | None, bytes | None] | None:
        """The scan bounds intersected with the visible range; None when nothing can match."""
        if self.visible is not None:
            if self.visible.start is not None and (start is None or start < self.visible.start):
                start = self.visible.start
            if self.visible.end is not None and (end is None or end > self.visible.end):
                end = self.visible.end
        if (start is not None and start > self.last_key) or (end is not None and end <= self.first_key):
            return None
        if start is not None and end is not None and start >= end:
            return None
        return start, end


class LsmState:
    """L0 (newest first) and sorted runs (newest first) of one manifest version."""

    def __init__(self, manifest: Manifest, db_path: str, readers: SstReaders) -> None:
        self.manifest = manifest
        self._readers = readers
        ssts = {s.id: s for s in manifest.ssts}
        self.l0 = [self._handle(manifest, db_path, ssts, v) for v in manifest.l0]
        self.runs = [
            [self._handle(manifest, db_path, ssts, v) for v in run.views] for run in manifest.compacted
        ]
        # By effective start: views of one SST narrowed to adjacent ranges share a first key.
        self._run_firsts = [[h.start for h in run] for run in self.runs]

    @staticmethod
    def _handle(
        manifest: Manifest, db_path: str, ssts: dict[ULID, CompactedSst], view: SstView
    ) -> ViewHandle:
        sst = ssts[view.sst_id]
        key = resolve_sst_path(manifest, db_path, sst)
        return ViewHandle(key, sst.info.size_bytes, sst.info.first_key, sst.info.last_key, view.visible_range)

    def object_keys(self) -> set[str]:
        return {h.key for h in self.l0} | {h.key for run in self.runs for h in run}

    def get(self, key: bytes) -> Entry | None:
        """The newest entry for ``key`` (tombstones included), or None."""
        for handle in self.l0:
            if handle.may_contain(key):
                entry = self._readers.open(handle.key, handle.size).get(key)
                if entry is not None:
                    return entry
        for run, firsts in zip(self.runs, self._run_firsts, strict=True):
            index = bisect.bisect_right(firsts, key) - 1
            if index >= 0 and run[index].may_contain(key):
                handle = run[index]
                entry = self._readers.open(handle.key, handle.size).get(key)
                if entry is not None:
                    return entry
        return None

    def sources(
        self, start: bytes | None, end: bytes | None, read_ahead: ReadAhead | None = None
    ) -> list[Iterator[Entry]]:
        """One iterator per L0 view and per sorted run, newest first, for a merged scan.

        With ``read_ahead`` the SSTs are opened concurrently now (their errors raised here) and
        every source fetches ahead; without it each source reads its runs when it reaches them.
        """
        if read_ahead is not None:
            return self._read_ahead_sources(start, end, read_ahead)
        sources = [it for it in (self._scan_view(h, start, end) for h in self.l0) if it is not None]
        for run in self.runs:
            sources.append(self._scan_run(run, start, end))
        return sources

    def read_ahead(self) -> ReadAhead | None:
        """A new scan's read-ahead (None if the options turn it off); close it when the scan ends."""
        limits = self._readers.read_ahead
        return ReadAhead(limits, self._readers.clock) if limits.enabled else None

    def _read_ahead_sources(
        self, start: bytes | None, end: bytes | None, read_ahead: ReadAhead
    ) -> list[Iterator[Entry]]:
        def segments(views: list[ViewHandle]) -> list[Segment]:
            found = []
            for handle in views:
                bounds = handle.clip(start, end)
                if bounds is not None:
                    found.append(Segment(self._opener(handle, read_ahead), *bounds))
            return found

        streams = [BlockStream(read_ahead, segments([h])) for h in self.l0 if h.clip(start, end) is not None]
        streams += [BlockStream(read_ahead, segments(run)) for run in self.runs]
        for stream in streams:
            stream.start()
        return [iter(stream) for stream in streams]

    def _opener(
        self, handle: ViewHandle, read_ahead: ReadAhead
    ) -> Callable[[], SstReader | Future[SstReader]]:
        def open_reader() -> SstReader | Future[SstReader]:
            reader = self._readers.opened(handle.key)
            if reader is not None:
                return reader
            return read_ahead.submit(lambda: self._readers.open(handle.key, handle.size))

        return open_reader

    def _scan_view(
        self, handle: ViewHandle, start: bytes | None, end: bytes | None
    ) -> Iterator[Entry] | None:
        bounds = handle.clip(start, end)
        if bounds is None:
            return None
        return self._readers.open(handle.key, handle.size).scan(*bounds)

    def _scan_run(self, run: list[ViewHandle], start: bytes | None, end: bytes | None) -> Iterator[Entry]:
        for handle in run:
            it = self._scan_view(handle, start, end)
            if it is not None:
                yield from it
