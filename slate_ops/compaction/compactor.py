"""The compactor: plans size-tiered compactions, runs them on an executor, commits the result.

It bumps the compactor epoch when it starts (fencing older compactors) and keeps its state in the
``.compactions`` namespace. Results are committed to the manifest with the ownership rule: the
compactor owns the sorted runs and the L0 watermark, the writer owns L0 additions and the WAL
fields; on a lost race the change is re-applied to the latest manifest, so writes, flushes and
checkpoints go on during a compaction. The commit also prunes ``external_dbs[].sst_ids`` of SSTs no
longer referenced, and adds a short checkpoint on the pre-compaction manifest so in-flight readers
can finish reading the inputs (SlateDB's compaction checkpoint).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor as Pool
from concurrent.futures import Future, wait
from dataclasses import dataclass, field, replace

from ulid import ULID

from slate_ops.compaction import subcompaction
from slate_ops.compaction.executor import Executor, LocalExecutor
from slate_ops.compaction.firstreads import FirstReads
from slate_ops.compaction.options import CompactorOptions
from slate_ops.compaction.scheduler import Proposal, propose
from slate_ops.compaction.spec import CompactionSpec, ExecutionResult, SourceRun, SourceView
from slate_ops.compaction.state import CompactionRecord, CompactionsStore
from slate_ops.errors import CompactionConflictError, FencedError, SlateOpsError
from slate_ops.manifest.checkpoints import expiry_time
from slate_ops.manifest.model import Checkpoint, KeyRange, Manifest, SortedRun, SstView, resolve_sst_path
from slate_ops.manifest.store import COMPACTOR_EPOCH, ManifestStore, VersionedManifest, require_usable
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import SstReader

log = logging.getLogger(__name__)

COMPACTION_CHECKPOINT = "slate_ops/compaction"


@dataclass(frozen=True)
class CompactionReport:
    """What one compaction did."""

    id: ULID
    kind: str
    sources: tuple[str, ...]
    input_ssts: tuple[str, ...]
    output_ssts: tuple[str, ...]
    sorted_run_id: int
    bytes_read: int
    bytes_written: int
    rows_in: int
    rows_out: int
    duration_s: float
    executor: str
    subcompactions: int
    manifest_id: int
    notes: tuple[str, ...] = ()
    """What the report cannot say as numbers: e.g. on a SlateDB database, that SlateDB's compactor
    ran it (the executor does not apply) and that it does not count rows."""
    requests: RequestCounts = field(default=ZERO, compare=False)
    """The object-store requests and bytes this operation made (through the admin handle; zero
    when called directly)."""


class Compactor:
    def __init__(
        self,
        path: str,
        store: ObjectStore,
        options: CompactorOptions | None = None,
        executor: Executor | None = None,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
    ) -> None:
        self.options = options or CompactorOptions()
        self.executor = executor or LocalExecutor(clock=clock)
        self._store = store
        self._clock = clock
        self._manifests = ManifestStore(store, path, clock=clock)
        self.path = self._manifests.path
        require_usable(self._manifests.read_latest_required().value, self._manifests.location)
        self._state = CompactionsStore(store, self.path, clock=clock)
        self._state.read()  # a damaged .compactions file fails here, before the epoch is bumped

        def usable(current: VersionedManifest, epoch: int) -> Manifest:
            require_usable(current.value, self._manifests.location)  # refuse before writing anything
            return current.value

        self._fenced, _ = self._manifests.claim(COMPACTOR_EPOCH, usable)
        self.epoch = self._fenced.epoch
        self._state.claim(self.epoch, clock.now())
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._completing: _Completion | None = None  # the last "completed" record, being written

    @property
    def compactions(self) -> CompactionsStore:
        """The database's ``.compactions`` namespace, held at this compactor's epoch."""
        return self._state

    def wait_recorded(self) -> None:
        """Wait until the last compaction's "completed" record is durable in ``.compactions``.

        :meth:`run_once` returns once its commit is durable and writes that record in the
        background. If the write failed (already logged), it is tried once more here; an error of
        that retry is raised (:class:`FencedError` if a newer compactor took over). The next
        :meth:`run_once` calls this before its own records, :meth:`close` too (logging instead of
        raising), and ``slate_ops.admin.compact`` before it returns.
        """
        completing, self._completing = self._completing, None
        if completing is None or completing.written.exception() is None:
            return
        try:
            self._state.record(completing.record)
        except BaseException:
            self._completing = completing  # still not written: the next wait tries again
            raise

    def _record_completed(self, record: CompactionRecord) -> None:
        try:
            self._state.record(record)
        except SlateOpsError as error:
            log.warning(
                'compaction %s committed, but its "completed" record could not be written (tried again '
                "before the next compaction and on close): %s",
                record.id, error,
            )  # fmt: skip
            raise

    # --- one compaction ---------------------------------------------------------------------------

    def run_once(self, *, full: bool = False) -> CompactionReport | None:
        """Run the next compaction the scheduler proposes (everything with ``full``); None if none.

        Raises :class:`FencedError` if a newer compactor has started.
        """
        started = self._clock.monotonic()
        planned = self._plan_latest(full)
        if planned is None:
            return None
        latest, proposal, spec = planned
        compaction_id = self._clock.new_ulid()
        record = CompactionRecord(
            id=str(compaction_id),
            epoch=self.epoch,
            kind=proposal.kind,
            status="running",
            sources=_source_names(proposal),
            started_at_s=self._clock.now(),
        )
        # The "running" record is written while the executor runs (its round trips hidden behind
        # the merge) and is durable before the commit: a compactor fenced meanwhile still fails
        # before committing, and its outputs are orphans for GC, as for any failed compaction. The
        # previous compaction's "completed" record lands first: records stay in order.
        try:
            self.wait_recorded()
        except BaseException:
            _close_first_reads(spec)
            raise
        background = self._clock.executor(1, "slate-ops-compaction-record")
        try:
            recorded = background.submit(self._state.record, record)
            try:
                try:
                    result = self.executor.execute(self._store, spec)
                finally:
                    _close_first_reads(spec)
                recorded.result()
                committed = self._commit(proposal, result)
            except BaseException:
                wait([recorded])  # "failed" must land after "running"
                try:
                    self._state.record(_finished(record, "failed", self._clock.now()))
                except SlateOpsError as error:  # e.g. fenced meanwhile: the original error matters more
                    log.warning("could not record compaction %s as failed: %s", record.id, error)
                raise
            output_ids = tuple(str(s.id) for s in result.outputs)
            # The commit is durable (and checked against GC's boundary): the report can say so now.
            # The "completed" record follows in the background; wait_recorded(), the next run_once
            # and close() wait for it (docs/design/compaction.md, "I/O: streaming from and to").
            completed = _finished(record, "completed", self._clock.now(), output_ids, committed.id)
            self._completing = _Completion(completed, background.submit(self._record_completed, completed))
        finally:
            background.shutdown(wait=False)  # its one thread ends once the record is written
        input_ssts = _input_ssts(latest.value, proposal)
        report = CompactionReport(
            id=compaction_id,
            kind=proposal.kind,
            sources=record.sources,
            input_ssts=tuple(str(s) for s in input_ssts),
            output_ssts=output_ids,
            sorted_run_id=proposal.destination,
            bytes_read=result.bytes_read,
            bytes_written=result.bytes_written,
            rows_in=result.rows_in,
            rows_out=result.rows_out,
            duration_s=self._clock.monotonic() - started,
            executor=self.executor.name,
            subcompactions=result.subcompactions,
            manifest_id=committed.id,
        )
        log.info(
            "compacted %s of %s: %d rows -> %d rows, %d bytes read, %d written, %.2fs",
            report.kind, self._manifests.location, report.rows_in, report.rows_out,
            report.bytes_read, report.bytes_written, report.duration_s,
        )  # fmt: skip
        return report

    def _plan_latest(self, full: bool) -> tuple[VersionedManifest, Proposal, CompactionSpec] | None:
        """Re-read the manifest, ask the scheduler, plan; None if there is nothing to compact.

        Planning reads every input's tail (footer, index, bloom filter). Those of the inputs the
        last manifest this compactor saw would compact are read on a guess while the manifest is
        re-read (an SST never changes once written), so planning usually adds no round trip of its
        own. A wrong guess costs those reads, never a wrong plan: only the latest manifest's inputs
        are planned, and any of them the guess missed (or failed to open) is opened then.

        For a :class:`LocalExecutor`, each input's first blocks are fetched as soon as its tail is
        read (:mod:`slate_ops.compaction.firstreads`; the spec's ``first_reads``, closed by the
        caller once the executor is done).
        """
        first_reads = self._first_reads()
        try:
            planned = self._plan_with(full, first_reads)
        except BaseException:
            if first_reads is not None:
                first_reads.close()
            raise
        if planned is None and first_reads is not None:
            first_reads.close()
        return planned

    def _first_reads(self) -> FirstReads | None:
        """Only an executor in this process can take blocks fetched here (a spec is pickled
        without them)."""
        if not isinstance(self.executor, LocalExecutor):
            return None
        budget = self.options.max_subcompaction_bytes * 5 // 4  # firstreads: the first cut's margin
        return FirstReads(
            budget, subcompaction.FETCH_RUN_BYTES, subcompaction.READ_CONCURRENCY, clock=self._clock
        )

    def _plan_with(
        self, full: bool, first_reads: FirstReads | None
    ) -> tuple[VersionedManifest, Proposal, CompactionSpec] | None:
        with contextlib.ExitStack() as stack:
            if first_reads is None:
                pool = stack.enter_context(
                    self._clock.executor(subcompaction.READ_CONCURRENCY, "slate-ops-compaction-plan")
                )
            else:  # the tails and first blocks on the pool the executor will fetch with
                pool = first_reads.reads
            guessed: dict[str, Future[SstReader]] = {}
            cached = self._fenced.sequence.cached()
            guess = None if cached is None else propose(cached.value, self.options, full=full)
            if cached is not None and guess is not None:
                guessed = self._open(pool, self._sources(cached.value, guess), first_reads)
            latest = self._fenced.refresh()
            proposal = propose(latest.value, self.options, full=full)
            if proposal is None:
                for future in guessed.values():
                    future.cancel()
                return None
            sources = self._sources(latest.value, proposal)
            if first_reads is not None:
                first_reads.keep({v.key for run in sources for v in run.views})
            missing = [SourceRun((v,)) for run in sources for v in run.views if v.key not in guessed]
            opening = {**guessed, **self._open(pool, missing, first_reads)}
            opened: dict[str, SstReader] = {}
            for view in (v for run in sources for v in run.views if v.key not in opened):
                opened[view.key] = self._opened(view, opening[view.key], guessed=view.key in guessed)
        spec = CompactionSpec(
            db_path=self.path,
            sources=tuple(sources),
            drop_tombstones=proposal.drop_tombstones,
            target_sst_bytes=self.options.target_sst_bytes,
            subcompactions=self._plan(sources, opened),
            opened=opened,
            first_reads=first_reads,
        )
        return latest, proposal, spec

    def _sources(self, manifest: Manifest, proposal: Proposal) -> list[SourceRun]:
        ssts = {s.id: s for s in manifest.ssts}

        def source(view: SstView) -> SourceView:
            sst = ssts[view.sst_id]
            return SourceView(
                resolve_sst_path(manifest, self.path, sst), sst.info.size_bytes, view.visible_range
            )

        runs = {r.id: r for r in manifest.compacted}
        sources = [SourceRun((source(v),)) for v in proposal.l0_views]
        sources += [SourceRun(tuple(source(v) for v in runs[run_id].views)) for run_id in proposal.run_ids]
        return sources

    def _open(
        self, pool: Pool, sources: list[SourceRun], first_reads: FirstReads | None
    ) -> dict[str, Future[SstReader]]:
        """Start opening every input SST's reader (footer, index, bloom filter) on ``pool``: one round
        trip for all, not one per input, on a remote store. The executor reuses them
        (``CompactionSpec.opened``); ``first_reads`` starts fetching each one's first blocks as
        soon as it is open."""
        views = {view.key: view for run in sources for view in run.views}

        def open_view(view: SourceView) -> SstReader:
            reader = SstReader.open(self._store, view.key, size=view.size)
            if first_reads is not None:
                first_reads.start(view.key, reader, view.visible, len(views))
            return reader

        return {key: pool.submit(open_view, view) for key, view in views.items()}

    def _opened(self, view: SourceView, opening: Future[SstReader], *, guessed: bool) -> SstReader:
        try:
            return opening.result()
        except SlateOpsError:
            if not guessed:
                raise
            # Opened on a guess, before the latest manifest was read: e.g. a transient error. Again.
            return SstReader.open(self._store, view.key, size=view.size)

    def _plan(self, sources: list[SourceRun], opened: dict[str, SstReader]) -> tuple[KeyRange, ...]:
        """Cut the key space where about ``max_subcompaction_bytes`` of input blocks accumulate."""
        blocks = [block for run in sources for view in run.views for block in opened[view.key].block_sizes()]
        blocks.sort()
        cuts: list[bytes] = []
        accumulated = 0
        for first_key, size in blocks:
            if accumulated >= self.options.max_subcompaction_bytes and (not cuts or first_key > cuts[-1]):
                cuts.append(first_key)
                accumulated = 0
            accumulated += size
        bounds: list[bytes | None] = [None, *cuts, None]
        return tuple(KeyRange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1))

    def _commit(self, proposal: Proposal, result: ExecutionResult) -> VersionedManifest:
        compacted_views = {v.view_id for v in proposal.l0_views}
        new_run = SortedRun(
            proposal.destination, tuple(SstView(self._clock.new_ulid(), s.id) for s in result.outputs)
        )
        now = self._clock.now()

        def apply(current: VersionedManifest) -> Manifest:
            manifest = current.value
            present = {v.view_id for v in manifest.l0}
            if not compacted_views <= present:
                raise CompactionConflictError(
                    f"L0 views of this compaction left {self._manifests.location} meanwhile"
                )
            runs = {r.id: r for r in manifest.compacted}
            if any(run_id not in runs for run_id in proposal.run_ids):
                raise CompactionConflictError(
                    f"sorted runs of this compaction left {self._manifests.location} meanwhile"
                )
            l0 = tuple(v for v in manifest.l0 if v.view_id not in compacted_views)
            compacted = _replace_runs(manifest.compacted, proposal, new_run)
            referenced = {v.sst_id for v in l0} | {v.sst_id for r in compacted for v in r.views}
            ssts = tuple(s for s in (*manifest.ssts, *result.outputs) if s.id in referenced)
            kept = {s.id for s in ssts}
            external = tuple(
                replace(ext, sst_ids=tuple(i for i in ext.sst_ids if i in kept))
                for ext in manifest.external_dbs
            )
            checkpoints = tuple(
                c for c in manifest.checkpoints if not (c.name == COMPACTION_CHECKPOINT and c.is_expired(now))
            )
            checkpoints += (
                Checkpoint(
                    id=self._clock.new_uuid(),
                    manifest_id=current.id,  # still references every input
                    create_time_s=int(now),
                    expire_time_s=expiry_time(now, self.options.compaction_checkpoint_lifetime),
                    name=COMPACTION_CHECKPOINT,
                ),
            )
            watermark = proposal.l0_views[0].view_id if proposal.l0_views else manifest.l0_last_compacted
            return manifest.with_changes(
                l0=l0,
                compacted=compacted,
                ssts=ssts,
                external_dbs=external,
                checkpoints=checkpoints,
                l0_last_compacted=watermark,
            )

        return self._fenced.update(apply)

    # --- long-running ----------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        """Compact until ``stop`` is set: as long as there is work, then every ``poll_interval``."""
        stop = stop or self._stopping
        interval = self.options.poll_interval.total_seconds()
        while not stop.is_set():
            try:
                while not stop.is_set() and self.run_once() is not None:
                    pass
            except FencedError as error:
                log.error("%s", error)
                raise
            except SlateOpsError as error:
                log.warning("compaction of %s failed, will retry: %s", self._manifests.location, error)
            stop.wait(interval)

    def start(self) -> Compactor:
        """Run :meth:`run` on a background thread (what a writer opened with :func:`embedded` does)."""
        self._thread = threading.Thread(
            target=self._run_quietly, name=f"slate-ops-compactor:{self.path}", daemon=True
        )
        self._thread.start()
        return self

    def _run_quietly(self) -> None:
        with contextlib.suppress(FencedError):  # logged by run(); a fenced compactor just stops
            self.run(self._stopping)

    def close(self) -> None:
        """Stop :meth:`run` and wait for the last "completed" record (a failure is logged: the
        commit it describes is durable, and a restarted compactor marks the record failed)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.wait_recorded()
        except SlateOpsError as error:
            log.warning("a compaction record of %s is left unwritten: %s", self._manifests.location, error)


@dataclass(frozen=True)
class _Completion:
    """A "completed" record and its write, running in the background."""

    record: CompactionRecord
    written: Future[None]


def _replace_runs(
    runs: tuple[SortedRun, ...], proposal: Proposal, new_run: SortedRun
) -> tuple[SortedRun, ...]:
    """Remove the source runs and put the output where the newest of them was (L0: in front)."""
    sources = set(proposal.run_ids)
    kept = [r for r in runs if r.id not in sources]
    position = 0
    if proposal.run_ids:
        newest_source = next(i for i, r in enumerate(runs) if r.id in sources)
        position = sum(1 for r in runs[:newest_source] if r.id not in sources)
    if new_run.views:
        kept.insert(position, new_run)
    return tuple(kept)


def _close_first_reads(spec: CompactionSpec) -> None:
    if spec.first_reads is not None:
        spec.first_reads.close()


def _source_names(proposal: Proposal) -> tuple[str, ...]:
    return tuple(f"l0:{v.view_id}" for v in proposal.l0_views) + tuple(f"sr:{i}" for i in proposal.run_ids)


def _input_ssts(manifest: Manifest, proposal: Proposal) -> list[ULID]:
    runs = {r.id: r for r in manifest.compacted}
    ids = [v.sst_id for v in proposal.l0_views]
    ids += [v.sst_id for run_id in proposal.run_ids for v in runs[run_id].views]
    return ids


def _finished(
    record: CompactionRecord,
    status: str,
    now: float,
    outputs: tuple[str, ...] = (),
    manifest_id: int | None = None,
) -> CompactionRecord:
    return replace(record, status=status, finished_at_s=now, outputs=outputs, manifest_id=manifest_id)


def embedded(options: CompactorOptions | None = None) -> Callable[[str, ObjectStore, Runtime], Compactor]:
    """A compactor for a writer to start beside itself in this process::

        Db.open(path, store, compactor=embedded(CompactorOptions(min_sources=4)))

    The writer starts it once it has opened and closes it when it closes.
    """

    def start(path: str, store: ObjectStore, clock: Runtime) -> Compactor:
        return Compactor(path, store, options, clock=clock).start()

    return start
