"""The asset checks' findings for a SlateDB database: the same six checks as ours
(:data:`slate_ops.admin.verify.CHECKS`, same names, severities and descriptions), computed from
SlateDB's manifest through the binding and the objects through slate_ops' store:

* ``ssts_exist``: every SST the latest manifest or a live checkpoint's manifest references exists
  (one HEAD each): own SSTs at ``<db>/compacted/<ulid>.sst`` (L0 SSTs live there too in SlateDB),
  an external database's at ``<its path>/compacted/<ulid>.sst``;
* ``sorted_runs_ordered``: in every sorted run of those manifests, the views' visible key ranges
  (first and last entry narrowed by a projection) are in key order and do not overlap;
* ``checkpoint_manifests_exist``: the manifest object of every live checkpoint exists (one HEAD);
* ``no_expired_checkpoints``: no checkpoint past its expiry is still listed (SlateDB's GC removes
  them before each task);
* ``l0_below_threshold``: L0 holds fewer views than ``l0_threshold``; at ``l0_max_ssts`` (SlateDB's
  writer setting of the same name, 8 by default) the writer stalls: an error;
* ``boundaries_below_latest``: ``gc/manifest.boundary`` is below the latest manifest id and
  ``gc/compactions.boundary`` below the latest ``.compactions`` id (SlateDB writes the same files
  with the same meaning: ids up to the boundary may already be deleted). Checked first, from the
  store alone: with ``gc/manifest.boundary`` at or above the latest manifest id, the binding's
  manifest reads never return (measured on 0.17.0), so then no other check runs (each passes with
  a note saying why).

Nothing is written. SlateDB has no soft destroy, so no check is skipped for one.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from slate_ops.admin.verify import (
    BOUNDARIES_BELOW_LATEST,
    CHECKPOINT_MANIFESTS_EXIST,
    CHECKS,
    L0_BELOW_THRESHOLD,
    NO_EXPIRED_CHECKPOINTS,
    SORTED_RUNS_ORDERED,
    SSTS_EXIST,
    CheckResult,
    Severity,
)
from slate_ops.clock import UTC_SECONDS, render_utc
from slate_ops.engines.slatedb import CheckpointView, ManifestView, SlateDbAdmin
from slate_ops.engines.slatedb.store import store_prefix
from slate_ops.engines.slatedb.views import SstView
from slate_ops.errors import DbNotFoundError, InvalidArgumentError, ObjectNotFoundError, SlateDbError
from slate_ops.layout import compactions_key, manifest_key, parse_compactions_key, parse_own_manifest_key
from slate_ops.objstore.base import ObjectStore

__all__ = ["check_boundaries", "verify"]


def verify(
    db: SlateDbAdmin,
    read_latest: Callable[[], ManifestView],
    *,
    now: float,
    l0_threshold: int,
    l0_max_ssts: int,
    max_workers: int = 8,
) -> list[CheckResult]:
    """Every check of :data:`CHECKS` on ``db`` (``read_latest`` reads its latest manifest through
    the binding), in that order.

    The boundary check runs first, from a LIST and GETs only: measured on 0.17.0, the binding's
    ``read_manifest`` and ``list_checkpoints`` never return while ``gc/manifest.boundary`` is at
    or above the latest manifest id. Then nothing is read through the binding: the boundary check
    fails and every other check passes with a note saying it could not run.
    """
    if l0_threshold < 1 or l0_max_ssts < 1:
        raise InvalidArgumentError(
            f"l0_threshold ({l0_threshold}) and l0_max_ssts ({l0_max_ssts}) must be positive"
        )
    store, path = db.store, db.db_path
    boundaries = check_boundaries(store, path)
    if not boundaries.passed:
        note = (
            "not checked: a GC boundary is at or above the latest id, and SlateDB's binding does not "
            "return from reading the manifest then (see boundaries_below_latest)"
        )
        return [
            boundaries if name == BOUNDARIES_BELOW_LATEST else CheckResult(name, True, severity, note)
            for name, (severity, _) in CHECKS.items()
        ]
    latest = read_latest()
    live = [c for c in latest.checkpoints if c.expire_time_s is None or c.expire_time_s > now]
    missing = {
        c.manifest_id
        for c in live
        if c.manifest_id != latest.id and not _exists(store, manifest_key(path, c.manifest_id))
    }
    read: dict[int, ManifestView] = {latest.id: latest}
    for manifest_id in sorted({c.manifest_id for c in live} - {latest.id} - missing):
        try:
            m = db.read_manifest(manifest_id)
        except SlateDbError:
            m = None
        if m is None:
            missing.add(manifest_id)
        else:
            read[manifest_id] = m
    labels = _labels(latest.id, live)
    return [
        _check_ssts(store, path, read, labels, max_workers),
        _check_runs(read, labels),
        _check_checkpoint_manifests(path, live, missing),
        _check_expired(latest, now),
        _check_l0(latest, l0_threshold, l0_max_ssts),
        boundaries,
    ]


def _labels(latest_id: int, live: list[CheckpointView]) -> dict[int, str]:
    pinned: dict[int, list[str]] = defaultdict(list)
    for c in live:
        pinned[c.manifest_id].append(_name(c))
    labels = {m: f"manifest {m} (checkpoint {', '.join(names)})" for m, names in pinned.items()}
    labels[latest_id] = f"latest manifest {latest_id}" + (
        f" (also checkpoint {', '.join(pinned[latest_id])})" if latest_id in pinned else ""
    )
    return labels


def _views(m: ManifestView) -> Iterable[SstView]:
    return itertools.chain(m.l0, (v for r in m.sorted_runs for v in r.ssts))


def _check_ssts(
    store: ObjectStore, path: str, read: dict[int, ManifestView], labels: dict[int, str], max_workers: int
) -> CheckResult:
    needed_by: dict[str, list[str]] = defaultdict(list)
    what: dict[str, str] = {}
    prefix = store_prefix(store)  # SlateDB records an external database by the binding's path
    for manifest_id, m in sorted(read.items(), reverse=True):
        owner = {sst: e.path.strip("/") for e in m.external_dbs for sst in e.sst_ids}
        for view in _views(m):
            base = owner.get(view.sst_id, path)
            if prefix and base.startswith(prefix + "/"):
                base = base[len(prefix) + 1 :]
            key = f"{base}/compacted/{view.sst_id}.sst"
            if labels[manifest_id] not in needed_by[key]:
                needed_by[key].append(labels[manifest_id])
            what[key] = f"SST {view.sst_id}" + (
                f" of external database {base!r}" if view.sst_id in owner else ""
            )
    keys = sorted(needed_by)
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(keys)))) as pool:
        found = list(pool.map(lambda key: _exists(store, key), keys))
    problems = [
        f"{key} is missing ({what[key]}); needed by {'; '.join(needed_by[key])}"
        for key, ok in zip(keys, found, strict=True)
        if not ok
    ]
    return _result(
        SSTS_EXIST,
        problems,
        f"{len(keys)} SST object(s) referenced by {len(read)} manifest(s) exist",
        f"{len(problems)} problem(s) among {len(keys)} SST object(s) referenced by {len(read)} manifest(s)",
    )


def _check_runs(read: dict[int, ManifestView], labels: dict[int, str]) -> CheckResult:
    problems: list[str] = []
    runs = 0
    for manifest_id, m in sorted(read.items(), reverse=True):
        for run in m.sorted_runs:
            runs += 1
            for a, b in itertools.pairwise(run.ssts):
                if a.first_key is None or b.first_key is None:
                    continue  # an empty SST (no entries) has no range to order
                if b.first_key < a.first_key:
                    why = "are out of key order"
                elif a.last_key is not None and a.last_key >= b.first_key:
                    why = "overlap"
                else:
                    continue
                problems.append(
                    f"{labels[manifest_id]}: sorted run {run.id}: views {a.view_id} (SST {a.sst_id}, "
                    f"{_range(a)}) and {b.view_id} (SST {b.sst_id}, {_range(b)}) {why}"
                )
    return _result(
        SORTED_RUNS_ORDERED,
        problems,
        f"{runs} sorted run(s) in {len(read)} manifest(s) are ordered without overlaps",
        f"{len(problems)} overlapping or unordered view pair(s) in {runs} sorted run(s)",
    )


def _check_checkpoint_manifests(path: str, live: list[CheckpointView], missing: set[int]) -> CheckResult:
    problems = [
        f"checkpoint {_name(c)} pins manifest {c.manifest_id}: "
        f"{manifest_key(path, c.manifest_id)} is missing or unreadable"
        for c in live
        if c.manifest_id in missing
    ]
    return _result(
        CHECKPOINT_MANIFESTS_EXIST,
        problems,
        "every live checkpoint's manifest exists",
        f"{len(problems)} live checkpoint(s) pin a missing or unreadable manifest",
    )


def _check_expired(latest: ManifestView, now: float) -> CheckResult:
    expired = [
        (c, c.expire_time_s)
        for c in latest.checkpoints
        if c.expire_time_s is not None and c.expire_time_s <= now
    ]
    problems = [
        f"checkpoint {_name(c)} (manifest {c.manifest_id}) expired at {render_utc(at, UTC_SECONDS)}, "
        f"{now - at:.0f} s ago, and is still listed in manifest {latest.id}"
        for c, at in expired
    ]
    return _result(
        NO_EXPIRED_CHECKPOINTS,
        problems,
        f"none of {len(latest.checkpoints)} checkpoint(s) has expired",
        f"{len(expired)} expired checkpoint(s) still listed; run checkpoint expiry (or GC)",
    )


def _check_l0(latest: ManifestView, threshold: int, max_ssts: int) -> CheckResult:
    views = latest.l0
    summary = f"L0 holds {len(views)} view(s); compaction threshold {threshold}, writer stalls at {max_ssts}"
    if len(views) < min(threshold, max_ssts):
        return CheckResult(L0_BELOW_THRESHOLD, True, Severity.WARN, summary)
    severity = Severity.ERROR if len(views) >= max_ssts else Severity.WARN
    why = (
        "the writer stops flushing"
        if severity is Severity.ERROR
        else "compaction is behind (a SlateDB compactor must be running)"
    )
    problems = (
        f"L0 of latest manifest {latest.id} holds {len(views)} view(s) (SSTs "
        f"{', '.join(v.sst_id for v in views)}): {why}",
    )
    return CheckResult(L0_BELOW_THRESHOLD, False, severity, summary, problems)


def check_boundaries(store: ObjectStore, path: str) -> CheckResult:
    """``boundaries_below_latest`` from the store alone (a LIST of ``manifest/`` and of
    ``compactions/``, a GET per boundary file): safe to run before the binding reads anything."""
    manifests = [parse_own_manifest_key(path, m.key) for m in store.list(f"{path}/manifest/")]
    latest_id = max((i for i in manifests if i is not None), default=None)
    if latest_id is None:
        raise DbNotFoundError(f"no database at {path!r} in {store.url}: no manifest")
    ids = [parse_compactions_key(path, m.key) for m in store.list(f"{path}/compactions/")]
    latest_compactions = max((i for i in ids if i is not None), default=0)
    problems: list[str] = []
    values: list[str] = []
    for name, latest, what, current in (
        ("manifest", latest_id, "manifest", manifest_key(path, latest_id)),
        ("compactions", latest_compactions, ".compactions", compactions_key(path, latest_compactions)),
    ):
        key = f"{path}/gc/{name}.boundary"
        try:
            raw = store.get(key).data
        except ObjectNotFoundError:
            continue
        try:
            value = int(raw.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            problems.append(f"{key} is not an ASCII unsigned integer ({raw[:20]!r})")
            continue
        values.append(f"{key}={value}")
        if value >= latest:
            problems.append(
                f"{key} is {value}, not below the latest {what} id {latest}: GC may delete the current "
                f"{what} ({current})"
            )
    return _result(
        BOUNDARIES_BELOW_LATEST,
        problems,
        f"boundaries below the latest ids (manifest {latest_id}, .compactions {latest_compactions}): "
        + (", ".join(values) or "no boundary written yet"),
        f"{len(problems)} boundary file(s) at or above the latest id, or unreadable",
    )


def _exists(store: ObjectStore, key: str) -> bool:
    try:
        store.head(key)
    except ObjectNotFoundError:
        return False
    return True


def _result(name: str, problems: list[str], ok: str, bad: str) -> CheckResult:
    return CheckResult(name, not problems, CHECKS[name][0], bad if problems else ok, tuple(problems))


def _name(c: CheckpointView) -> str:
    return c.id + ("" if c.name is None else f" {c.name!r}")


def _range(v: SstView) -> str:
    first = "-inf" if v.first_key is None else v.first_key.hex()
    last = "+inf" if v.last_key is None else v.last_key.hex()
    return f"[{first}, {last}]"
