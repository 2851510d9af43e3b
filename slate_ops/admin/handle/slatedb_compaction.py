"""Compaction of a SlateDB database through the admin handle: slate_ops' trigger read from SlateDB's
manifest, a request submitted to SlateDB's compactor, followed to a terminal state and reported as
slate_ops' :class:`~slate_ops.compaction.CompactionReport` (the same JSON keys as ours).

SlateDB compacts only where a compactor runs: the embedded one of an open writer, or a standalone
one. slate_ops submits a ``CompactionSpec`` and follows it; it never compacts itself. Outcomes:

* COMPLETED: the report (``executor`` ``slatedb-compactor``; ``bytes_read`` is the inputs'
  estimated size, ``bytes_written`` the outputs'; SlateDB counts no rows: ``rows_in``/``rows_out``
  are 0 and ``notes`` says so);
* still SUBMITTED at the timeout: :class:`~slate_ops.errors.NoCompactorError` (no compactor
  picked it up; the request stays queued and runs when one starts);
* picked up but not finished at the timeout: :class:`~slate_ops.errors.SlateDbCompactionTimeoutError`;
* FAILED: :class:`~slate_ops.errors.SlateDbCompactionFailedError`.

Never two requests at once: when SlateDB already records an active compaction, it is followed
instead of submitting another (``notes`` says so). ``executor`` (Spark) does not apply: noted, not
an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ulid import ULID

from slate_ops.compaction import CompactionReport, CompactorOptions, Executor
from slate_ops.engines.slatedb import ManifestView, SlateDbAdmin
from slate_ops.engines.slatedb.admin import CompactionView
from slate_ops.errors import (
    DbNotFoundError,
    NoCompactorError,
    SlateDbCompactionFailedError,
    SlateDbCompactionTimeoutError,
)
from slate_ops.runtime import SYSTEM_RUNTIME

__all__ = ["DEFAULT_TIMEOUT_S", "Pick", "compact", "pick"]

DEFAULT_TIMEOUT_S = 30.0
"""How long :func:`compact` waits for SlateDB's compactor (a writer's embedded compactor polls
every 5 s by default)."""


@dataclass(frozen=True)
class Pick:
    """What one compaction would take: ``kind`` ``l0`` or ``full``, the L0 view ids, the sorted
    run ids and the destination run (slate_ops' scheduler's choice, :func:`slate_ops.compaction.propose`)."""

    kind: str
    l0_view_ids: tuple[str, ...]
    sorted_runs: tuple[int, ...]
    destination: int


def pick(m: ManifestView, options: CompactorOptions, *, full: bool = False) -> Pick | None:
    """Our trigger on SlateDB's manifest: ``full``, everything when there is anything to merge (any
    L0, or two sorted runs) into the oldest run; else the oldest ``max_sources`` L0 views into a new
    run when L0 holds at least ``min_sources``. Merging sorted runs with each other is left to
    SlateDB's own size-tiered scheduler. None: nothing to compact."""
    runs = [r.id for r in m.sorted_runs]
    next_id = max(runs, default=-1) + 1
    if full:
        if not m.l0 and len(runs) <= 1:
            return None
        return Pick("full", tuple(v.view_id for v in m.l0), tuple(runs), min(runs, default=next_id))
    if len(m.l0) >= options.min_sources:
        oldest = m.l0[-options.max_sources :]  # SlateDB's L0 is newest first, as ours
        return Pick("l0", tuple(v.view_id for v in oldest), (), next_id)
    return None


def compact(
    db: SlateDbAdmin,
    *,
    full: bool = False,
    executor: Executor | None = None,
    options: CompactorOptions | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = 0.05,
    monotonic: Callable[[], float] = SYSTEM_RUNTIME.monotonic,  # SlateDB's compactor runs on real time
) -> CompactionReport | None:
    """One compaction of ``db`` by SlateDB's compactor (module docstring); None when there is
    nothing to compact and no compaction is active."""
    started = monotonic()
    notes: list[str] = []
    if executor is not None:
        notes.append(
            f"the {executor.name} executor does not apply to SlateDB databases: SlateDB's own compactor "
            "ran this compaction"
        )
    before = _manifest(db)
    active = [c for c in db.compactions() if c.active or not c.terminal]
    if active:
        c = active[0]
        kind = "full" if full else "l0"
        notes.append(
            f"compaction {c.id} was already {c.status} in SlateDB; followed it instead of submitting another"
        )
    else:
        chosen = pick(before, options or CompactorOptions(), full=full)
        if chosen is None:
            return None
        kind = chosen.kind
        c = db.submit_compaction(chosen.l0_view_ids, chosen.sorted_runs, chosen.destination)
    c, picked_up = _follow(db, c, started, timeout_s, poll_s, monotonic)
    waited = monotonic() - started
    if c.status == "FAILED":
        raise SlateDbCompactionFailedError(db.db_path, c.id, len(c.sources))
    if not c.terminal:
        if not picked_up:
            raise NoCompactorError(db.db_path, c.id, waited)
        raise SlateDbCompactionTimeoutError(db.db_path, c.id, c.status, waited)
    after = _manifest(db)
    inputs = _inputs(before, c)
    notes.append("SlateDB does not count rows: rows_in and rows_out are 0")
    return CompactionReport(
        id=ULID.from_str(c.id),
        kind=kind,
        sources=c.sources,
        input_ssts=tuple(sst for sst, _ in inputs),
        output_ssts=tuple(sst for sst, _ in c.output_ssts),
        sorted_run_id=c.destination if c.destination is not None else -1,
        bytes_read=sum(size for _, size in inputs),
        bytes_written=sum(size for _, size in c.output_ssts),
        rows_in=0,
        rows_out=0,
        duration_s=waited,
        executor="slatedb-compactor",
        subcompactions=0,
        manifest_id=after.id,
        notes=tuple(notes),
    )


def _manifest(db: SlateDbAdmin) -> ManifestView:
    m = db.read_manifest()
    if m is None:
        raise DbNotFoundError(f"no database at {db.db_path!r} in {db.store.url}: no manifest")
    return m


def _follow(
    db: SlateDbAdmin,
    c: CompactionView,
    started: float,
    timeout_s: float,
    poll_s: float,
    monotonic: Callable[[], float],
) -> tuple[CompactionView, bool]:
    """Poll ``c`` until it is COMPLETED or FAILED or ``timeout_s`` has passed since ``started``;
    the last view and whether any compactor picked it up (a status past SUBMITTED)."""
    picked_up = c.status != "SUBMITTED"
    while not c.terminal and monotonic() - started < timeout_s:
        time.sleep(poll_s)
        got = db.read_compaction(c.id)
        if got is not None:
            c = got
        picked_up = picked_up or c.status != "SUBMITTED"
    return c, picked_up


def _inputs(m: ManifestView, c: CompactionView) -> list[tuple[str, int]]:
    """The physical SSTs (id, estimated size) of ``c``'s sources in manifest ``m``."""
    l0 = {v.view_id: v for v in m.l0}
    runs = {r.id: r for r in m.sorted_runs}
    found: list[tuple[str, int]] = []
    for source in c.sources:
        kind, _, ident = source.partition(":")
        if kind == "l0" and ident in l0:
            found.append((l0[ident].sst_id, l0[ident].size))
        elif kind == "sr" and int(ident) in runs:
            found += [(v.sst_id, v.size) for v in runs[int(ident)].ssts]
    return found
