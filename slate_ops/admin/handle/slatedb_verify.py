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

from collections import defaultdict
from collections.abc import Callable

from slate_ops.admin.verify import (
    BOUNDARIES_BELOW_LATEST,
    CHECKS,
    CheckResult,
    RunView,
    boundaries_result,
    check_checkpoint_manifests,
    check_expired,
    check_l0,
    check_sorted_runs,
    check_ssts_exist,
    checkpoint_label,
    manifest_labels,
    object_exists,
)
from slate_ops.engines.slatedb import CheckpointView, ManifestView, SlateDbAdmin
from slate_ops.engines.slatedb.store import store_prefix
from slate_ops.engines.slatedb.views import SstView
from slate_ops.errors import DbNotFoundError, InvalidArgumentError, ObjectNotFoundError, SlateDbError
from slate_ops.layout import (
    COMPACTIONS_DIR,
    COMPACTIONS_SUFFIX,
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    boundary_key,
    compactions_key,
    manifest_key,
    own_directory,
    parse_compactions_key,
    parse_own_manifest_key,
    sst_key,
)
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
        if c.manifest_id != latest.id and not object_exists(store, manifest_key(path, c.manifest_id))
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
    labels = manifest_labels(latest.id, [(c.manifest_id, _name(c)) for c in live])
    expired = [c for c in latest.checkpoints if c.expire_time_s is not None and c.expire_time_s <= now]
    return [
        _check_ssts(store, path, read, labels, max_workers),
        _check_runs(read, labels),
        check_checkpoint_manifests(
            [(_name(c), c.manifest_id) for c in live],
            {i: f"{manifest_key(path, i)} is missing or unreadable" for i in missing},
        ),
        check_expired(
            latest.id,
            len(latest.checkpoints),
            [(_name(c), c.manifest_id, c.expire_time_s or 0) for c in expired],
            now,
        ),
        check_l0(
            latest.id,
            [v.sst_id for v in latest.l0],
            l0_threshold,
            l0_max_ssts,
            "compaction is behind (a SlateDB compactor must be running)",
        ),
        boundaries,
    ]


def _check_ssts(
    store: ObjectStore, path: str, read: dict[int, ManifestView], labels: dict[int, str], max_workers: int
) -> CheckResult:
    needed_by: dict[str, list[str]] = defaultdict(list)
    what: dict[str, str] = {}
    prefix = store_prefix(store)  # SlateDB records an external database by the binding's path
    for manifest_id, m in sorted(read.items(), reverse=True):
        owner = {sst: e.path.strip("/") for e in m.external_dbs for sst in e.sst_ids}
        for view in m.views():
            base = owner.get(view.sst_id, path)
            if prefix and base.startswith(prefix + "/"):
                base = base[len(prefix) + 1 :]
            key = sst_key(base, view.sst_id)
            if labels[manifest_id] not in needed_by[key]:
                needed_by[key].append(labels[manifest_id])
            what[key] = f"SST {view.sst_id}" + (
                f" of external database {base!r}" if view.sst_id in owner else ""
            )
    return check_ssts_exist(store, needed_by, what, len(read), max_workers)


def _check_runs(read: dict[int, ManifestView], labels: dict[int, str]) -> CheckResult:
    runs: list[tuple[str, int, list[RunView[SstView]]]] = [
        (labels[manifest_id], run.id, [(v.view_id, v.sst_id, v) for v in run.ssts])
        for manifest_id, m in sorted(read.items(), reverse=True)
        for run in m.sorted_runs
    ]
    return check_sorted_runs(runs, len(read), _disorder, _range)


def _disorder(a: SstView, b: SstView) -> str | None:
    if a.first_key is None or b.first_key is None:
        return None  # an empty SST (no entries) has no range to order
    if b.first_key < a.first_key:
        return "are out of key order"
    if a.last_key is not None and a.last_key >= b.first_key:
        return "overlap"
    return None


def check_boundaries(store: ObjectStore, path: str) -> CheckResult:
    """``boundaries_below_latest`` from the store alone (a LIST of ``manifest/`` and of
    ``compactions/``, a GET per boundary file): safe to run before the binding reads anything."""
    manifests = [parse_own_manifest_key(path, m.key) for m in store.list(own_directory(path, MANIFEST_DIR))]
    latest_id = max((i for i in manifests if i is not None), default=None)
    if latest_id is None:
        raise DbNotFoundError(f"no database at {path!r} in {store.url}: no manifest")
    ids = [parse_compactions_key(path, m.key) for m in store.list(own_directory(path, COMPACTIONS_DIR))]
    latest_compactions = max((i for i in ids if i is not None), default=0)
    problems: list[str] = []
    values: list[str] = []
    for name, latest, what, current in (
        (MANIFEST_SUFFIX, latest_id, "manifest", manifest_key(path, latest_id)),
        (
            COMPACTIONS_SUFFIX,
            latest_compactions,
            f".{COMPACTIONS_SUFFIX}",
            compactions_key(path, latest_compactions),
        ),
    ):
        key = boundary_key(path, name)
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
    return boundaries_result(problems, values, latest_id, latest_compactions)


def _name(c: CheckpointView) -> str:
    return checkpoint_label(c.id, c.name)


def _range(v: SstView) -> str:
    first = "-inf" if v.first_key is None else v.first_key.hex()
    last = "+inf" if v.last_key is None else v.last_key.hex()
    return f"[{first}, {last}]"
