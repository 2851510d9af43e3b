"""Read-only consistency checks of one database, for operators and Dagster asset checks.

:func:`verify_db` reads the latest manifest and reports six checks, each a :class:`CheckResult`
whose ``problems`` name the object and why:

* ``ssts_exist`` (error): every SST the latest manifest or a live checkpoint's manifest lists
  exists, resolved to the database that holds it (clones and shards read their sources' files);
* ``sorted_runs_ordered`` (error): in every sorted run of those manifests, the views' effective
  ranges are in key order and do not overlap;
* ``checkpoint_manifests_exist`` (error): the manifest of every live checkpoint exists (an expired
  one's manifest may already be collected; ``no_expired_checkpoints`` reports it);
* ``no_expired_checkpoints`` (warn): no checkpoint past its expiry time is still listed;
* ``l0_below_threshold`` (warn, error): L0 holds fewer views than ``l0_threshold`` (the compaction
  trigger); at the writer's ``l0_max_ssts`` the writer stalls, which is an error;
* ``boundaries_below_latest`` (error): ``gc/manifest.boundary`` is below the latest manifest id and
  ``gc/compactions.boundary`` below the latest ``.compactions`` id. GC only ever advances a boundary to
  an id older than the latest (docs/design/gc.md), so a boundary at or above it lets GC delete the
  current version and refuses the next commits.

Cost: one LIST and one GET for the latest manifest, one GET per distinct manifest a live checkpoint
pins, one HEAD per distinct SST object (``max_workers`` at a time), two GETs for the boundary files
and one LIST of ``compactions/``. Nothing is written. A destroyed database is not checked (its
objects are being deleted): every check passes and says so.
"""

from __future__ import annotations

import enum
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from slate_ops.clock import UTC_SECONDS, render_utc
from slate_ops.compaction.options import CompactorOptions
from slate_ops.compaction.state import CompactionsStore
from slate_ops.engine.options import DbOptions
from slate_ops.errors import CorruptObjectError, InvalidArgumentError, ObjectNotFoundError
from slate_ops.layout import COMPACTIONS_SUFFIX
from slate_ops.manifest.model import Checkpoint, KeyRange, Manifest, resolve_sst_path
from slate_ops.manifest.projection import effective_range
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.txn.boundary import BoundaryObject


class Severity(enum.StrEnum):
    """How serious a failed check is."""

    ERROR = "error"  # data is or will be lost or unreadable
    WARN = "warn"  # maintenance is behind


SSTS_EXIST = "ssts_exist"
SORTED_RUNS_ORDERED = "sorted_runs_ordered"
CHECKPOINT_MANIFESTS_EXIST = "checkpoint_manifests_exist"
NO_EXPIRED_CHECKPOINTS = "no_expired_checkpoints"
L0_BELOW_THRESHOLD = "l0_below_threshold"
BOUNDARIES_BELOW_LATEST = "boundaries_below_latest"

CHECKS: dict[str, tuple[Severity, str]] = {
    SSTS_EXIST: (
        Severity.ERROR,
        "Every SST the latest manifest or a live checkpoint's manifest references exists (one HEAD each).",
    ),
    SORTED_RUNS_ORDERED: (
        Severity.ERROR,
        "The views of every sorted run are in key order and their effective ranges do not overlap.",
    ),
    CHECKPOINT_MANIFESTS_EXIST: (Severity.ERROR, "The manifest file of every live checkpoint exists."),
    NO_EXPIRED_CHECKPOINTS: (
        Severity.WARN,
        "No expired checkpoint is still listed (checkpoint expiry or GC is behind).",
    ),
    L0_BELOW_THRESHOLD: (
        Severity.WARN,
        "L0 holds fewer views than the compaction threshold (warn); error at the writer's l0_max_ssts.",
    ),
    BOUNDARIES_BELOW_LATEST: (
        Severity.ERROR,
        "The GC boundary files are below the latest manifest id and the latest .compactions id.",
    ),
}
"""Every check: its name, the severity of a failure (L0 can also fail as an error) and what it checks."""


@dataclass(frozen=True)
class CheckResult:
    """One check of :func:`verify_db`. ``problems`` names each offending object and why."""

    name: str
    passed: bool
    severity: Severity
    description: str
    problems: tuple[str, ...] = ()


def verify_db(
    path: str,
    store: ObjectStore,
    *,
    l0_threshold: int = CompactorOptions().min_sources,
    l0_max_ssts: int = DbOptions().l0_max_ssts,
    clock: Runtime = SYSTEM_RUNTIME,
    max_workers: int = 8,
) -> list[CheckResult]:
    """Run every check of :data:`CHECKS` on the database at ``path``, in that order; read-only.

    ``l0_threshold`` is the database's compaction trigger (``compaction_l0_threshold``), ``l0_max_ssts``
    the L0 size at which its writer stops flushing. :class:`~slate_ops.errors.DbNotFoundError` if
    there is no database.
    """
    if l0_threshold < 1 or l0_max_ssts < 1 or max_workers < 1:
        raise InvalidArgumentError(
            f"l0_threshold ({l0_threshold}), l0_max_ssts ({l0_max_ssts}) and max_workers ({max_workers}) "
            "must be positive"
        )
    manifests = ManifestStore(store, path)
    latest = manifests.read_latest_required()
    if latest.value.destroyed_at_s is not None:
        note = f"skipped: the database was destroyed at {_utc(latest.value.destroyed_at_s)}"
        return [CheckResult(name, True, severity, note) for name, (severity, _) in CHECKS.items()]
    now = clock.now()
    live = [c for c in latest.value.checkpoints if not c.is_expired(now)]
    read, missing = _checkpoint_manifests(manifests, latest, live)
    labels = manifest_labels(latest.id, [(c.manifest_id, checkpoint_label(str(c.id), c.name)) for c in live])
    expired = [c for c in latest.value.checkpoints if c.is_expired(now)]
    return [
        _check_ssts(store, manifests.path, read, labels, max_workers, clock),
        _check_runs(read, labels),
        check_checkpoint_manifests(
            [(checkpoint_label(str(c.id), c.name), c.manifest_id) for c in live], missing
        ),
        check_expired(
            latest.id,
            len(latest.value.checkpoints),
            [(checkpoint_label(str(c.id), c.name), c.manifest_id, c.expire_time_s or 0) for c in expired],
            now,
        ),
        check_l0(latest.id, [str(v.sst_id) for v in latest.value.l0], l0_threshold, l0_max_ssts),
        _check_boundaries(store, manifests, latest.id),
    ]


def failed(results: Iterable[CheckResult]) -> list[CheckResult]:
    """The results that did not pass."""
    return [r for r in results if not r.passed]


# --- the checks ----------------------------------------------------------------------------------


def _checkpoint_manifests(
    manifests: ManifestStore, latest: VersionedManifest, live: list[Checkpoint]
) -> tuple[dict[int, Manifest], dict[int, str]]:
    """The latest manifest and every manifest a live checkpoint pins, by id; and the ids that could
    not be read, with why."""
    read = {latest.id: latest.value}
    missing: dict[int, str] = {}
    for manifest_id in sorted({c.manifest_id for c in live} - {latest.id}):
        try:
            read[manifest_id] = manifests.read(manifest_id).value
        except ObjectNotFoundError:
            missing[manifest_id] = f"{manifests.sequence.key(manifest_id)} is missing"
        except CorruptObjectError as error:
            missing[manifest_id] = str(error)
    return read, missing


def _check_ssts(
    store: ObjectStore,
    db_path: str,
    read: dict[int, Manifest],
    labels: dict[int, str],
    max_workers: int,
    clock: Runtime,
) -> CheckResult:
    needed_by: dict[str, list[str]] = defaultdict(list)
    what: dict[str, str] = {}
    problems: list[str] = []
    for manifest_id, manifest in sorted(read.items(), reverse=True):
        known = {s.id for s in manifest.ssts}
        for sst in manifest.ssts:
            key = resolve_sst_path(manifest, db_path, sst)
            needed_by[key].append(labels[manifest_id])
            owner = manifest.owner_of(sst)
            what[key] = f"SST {sst.id}" + ("" if owner is None else f" of external database {owner.path!r}")
        views = (*manifest.l0, *(v for run in manifest.compacted for v in run.views))
        for view in views:
            if view.sst_id not in known:
                problems.append(
                    f"{labels[manifest_id]}: view {view.view_id} references SST {view.sst_id}, "
                    "which the manifest's SST list lacks"
                )
    return check_ssts_exist(store, needed_by, what, len(read), max_workers, problems, clock=clock)


def _check_runs(read: dict[int, Manifest], labels: dict[int, str]) -> CheckResult:
    runs: list[tuple[str, int, list[RunView[KeyRange]]]] = []
    for manifest_id, manifest in sorted(read.items(), reverse=True):
        infos = {s.id: s.info for s in manifest.ssts}
        for run in manifest.compacted:
            ranged = [(v, effective_range(infos[v.sst_id], v)) for v in run.views if v.sst_id in infos]
            views = [(str(v.view_id), str(v.sst_id), r) for v, r in ranged if not r.is_empty()]
            runs.append((labels[manifest_id], run.id, views))
    return check_sorted_runs(runs, len(read), _disorder, str)


def _disorder(a: KeyRange, b: KeyRange) -> str | None:
    if a.overlaps(b):
        return "overlap"
    if (b.start or b"") < (a.start or b""):
        return "are out of key order"
    return None


def _check_boundaries(store: ObjectStore, manifests: ManifestStore, latest_id: int) -> CheckResult:
    compactions = CompactionsStore(store, manifests.path).sequence
    latest_compactions = max((f.id for f in compactions.list()), default=0)
    checked = [
        (manifests.sequence.boundary, latest_id, "manifest"),
        (compactions.boundary, latest_compactions, f".{COMPACTIONS_SUFFIX}"),
    ]
    problems: list[str] = []
    values: list[str] = []
    for boundary, latest, what in checked:
        try:
            value = _read_boundary(boundary)
        except CorruptObjectError as error:
            problems.append(str(error))
            continue
        if value:
            values.append(f"{boundary.key}={value}")
        if value and value >= latest:
            problems.append(
                f"{boundary.key} is {value}, not below the latest {what} id {latest}: GC may delete the "
                f"current {what} and commits at ids up to {value} are refused"
            )
    return boundaries_result(problems, values, latest_id, latest_compactions)


def _read_boundary(boundary: BoundaryObject) -> int:
    value, _ = boundary.read()  # a fresh object: a missing file reads as 0, never as an error
    return value


# --- the checks' bookkeeping, shared with SlateDB databases (admin.handle.slatedb_verify) -------

R = TypeVar("R")
RunView = tuple[str, str, R]
"""A sorted run's view for :func:`check_sorted_runs`: view id, SST id, its key range (any type)."""


def manifest_labels(latest_id: int, pins: Iterable[tuple[int, str]]) -> dict[int, str]:
    """How problems name each manifest: ``latest manifest 12``, ``manifest 7 (checkpoint ...)``;
    ``pins`` are the live checkpoints' (manifest id, :func:`checkpoint_label`)."""
    pinned: dict[int, list[str]] = defaultdict(list)
    for manifest_id, name in pins:
        pinned[manifest_id].append(name)
    labels = {m: f"manifest {m} (checkpoint {', '.join(names)})" for m, names in pinned.items()}
    labels[latest_id] = f"latest manifest {latest_id}" + (
        f" (also checkpoint {', '.join(pinned[latest_id])})" if latest_id in pinned else ""
    )
    return labels


def checkpoint_label(checkpoint_id: str, name: str | None) -> str:
    return checkpoint_id + ("" if name is None else f" {name!r}")


def object_exists(store: ObjectStore, key: str) -> bool:
    """One HEAD."""
    try:
        store.head(key)
    except ObjectNotFoundError:
        return False
    return True


def check_ssts_exist(
    store: ObjectStore,
    needed_by: dict[str, list[str]],
    what: dict[str, str],
    manifests: int,
    max_workers: int,
    problems: Sequence[str] = (),
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> CheckResult:
    """``ssts_exist``: one HEAD per SST object key of ``needed_by`` (the labels of the manifests
    that need it; ``what`` names the SST), ``max_workers`` at a time (on ``clock``'s executor),
    after ``problems`` found while listing them."""
    keys = sorted(needed_by)
    with clock.executor(max(1, min(max_workers, len(keys))), "slate-ops-verify") as pool:
        found = list(pool.map(lambda key: object_exists(store, key), keys))
    missing = [
        f"{key} is missing ({what[key]}); needed by {'; '.join(needed_by[key])}"
        for key, ok in zip(keys, found, strict=True)
        if not ok
    ]
    return _result(
        SSTS_EXIST,
        [*problems, *missing],
        f"{len(keys)} SST object(s) referenced by {manifests} manifest(s) exist",
        f"{len(problems) + len(missing)} problem(s) among {len(keys)} SST object(s) referenced by "
        f"{manifests} manifest(s)",
    )


def check_sorted_runs(
    runs: Iterable[tuple[str, int, Sequence[RunView[R]]]],
    manifests: int,
    disorder: Callable[[R, R], str | None],
    render: Callable[[R], str],
) -> CheckResult:
    """``sorted_runs_ordered``: ``runs`` are (manifest label, run id, its views in order); each
    pair of neighbouring views is a problem when ``disorder`` says why ("overlap", ...)."""
    problems: list[str] = []
    count = 0
    for label, run_id, views in runs:
        count += 1
        for (a_view, a_sst, ra), (b_view, b_sst, rb) in itertools.pairwise(views):
            why = disorder(ra, rb)
            if why is not None:
                problems.append(
                    f"{label}: sorted run {run_id}: views {a_view} (SST {a_sst}, {render(ra)}) "
                    f"and {b_view} (SST {b_sst}, {render(rb)}) {why}"
                )
    return _result(
        SORTED_RUNS_ORDERED,
        problems,
        f"{count} sorted run(s) in {manifests} manifest(s) are ordered without overlaps",
        f"{len(problems)} overlapping or unordered view pair(s) in {count} sorted run(s)",
    )


def check_checkpoint_manifests(live: Iterable[tuple[str, int]], missing: dict[int, str]) -> CheckResult:
    """``checkpoint_manifests_exist``: ``live`` are (checkpoint label, manifest id), ``missing`` the
    manifest ids that could not be read, with why."""
    problems = [
        f"checkpoint {name} pins manifest {manifest_id}: {missing[manifest_id]}"
        for name, manifest_id in live
        if manifest_id in missing
    ]
    return _result(
        CHECKPOINT_MANIFESTS_EXIST,
        problems,
        "every live checkpoint's manifest exists",
        f"{len(problems)} live checkpoint(s) pin a missing or unreadable manifest",
    )


def check_expired(
    latest_id: int, listed: int, expired: Sequence[tuple[str, int, float]], now: float
) -> CheckResult:
    """``no_expired_checkpoints``: ``expired`` are (checkpoint label, manifest id, expiry time) of
    the ``listed`` checkpoints of the latest manifest."""
    problems = [
        f"checkpoint {name} (manifest {manifest_id}) expired at {_utc(at)}, "
        f"{now - at:.0f} s ago, and is still listed in manifest {latest_id}"
        for name, manifest_id, at in expired
    ]
    return _result(
        NO_EXPIRED_CHECKPOINTS,
        problems,
        f"none of {listed} checkpoint(s) has expired",
        f"{len(expired)} expired checkpoint(s) still listed; run checkpoint expiry (or GC)",
    )


def check_l0(
    latest_id: int,
    sst_ids: Sequence[str],
    threshold: int,
    max_ssts: int,
    behind: str = "compaction is behind",
) -> CheckResult:
    """``l0_below_threshold`` of L0's views (their SST ids); ``behind`` says why a warning matters."""
    summary = (
        f"L0 holds {len(sst_ids)} view(s); compaction threshold {threshold}, writer stalls at {max_ssts}"
    )
    if len(sst_ids) < min(threshold, max_ssts):
        return CheckResult(L0_BELOW_THRESHOLD, True, Severity.WARN, summary)
    severity = Severity.ERROR if len(sst_ids) >= max_ssts else Severity.WARN
    why = "the writer stops flushing" if severity is Severity.ERROR else behind
    problems = (
        f"L0 of latest manifest {latest_id} holds {len(sst_ids)} view(s) (SSTs {', '.join(sst_ids)}): {why}",
    )
    return CheckResult(L0_BELOW_THRESHOLD, False, severity, summary, problems)


def boundaries_result(
    problems: list[str], values: list[str], latest_id: int, latest_compactions: int
) -> CheckResult:
    """``boundaries_below_latest`` from its problems and the boundary values read (``key=value``)."""
    return _result(
        BOUNDARIES_BELOW_LATEST,
        problems,
        f"boundaries below the latest ids (manifest {latest_id}, .compactions {latest_compactions}): "
        + (", ".join(values) or "no boundary written yet"),
        f"{len(problems)} boundary file(s) at or above the latest id, or unreadable",
    )


def _result(name: str, problems: list[str], ok: str, bad: str) -> CheckResult:
    severity = CHECKS[name][0]
    return CheckResult(name, not problems, severity, bad if problems else ok, tuple(problems))


def _utc(seconds: float) -> str:
    return render_utc(seconds, UTC_SECONDS)


__all__ = [
    "BOUNDARIES_BELOW_LATEST",
    "CHECKPOINT_MANIFESTS_EXIST",
    "CHECKS",
    "L0_BELOW_THRESHOLD",
    "NO_EXPIRED_CHECKPOINTS",
    "SORTED_RUNS_ORDERED",
    "SSTS_EXIST",
    "CheckResult",
    "Severity",
    "failed",
    "verify_db",
]
