"""Every database owns its protection: the reachability invariant across a family of databases.

Clones, split shards and merged databases read SSTs of other databases in place (``external_dbs``)
and keep them alive with a *final checkpoint* on each of those databases (no expiry), which that
database's GC honours. :func:`check_references` checks, read-only, that nothing any database can read
has been (or may be) deleted, for every live database (its manifest exists; a soft-destroyed one is
live until GC deletes it):

``missing_sst``
    an SST that the latest manifest or the manifest of a live checkpoint reads (own or external,
    resolved with :func:`~slate_ops.manifest.model.resolve_sst_path`) does not exist;
``missing_pinned_manifest``
    a live checkpoint (the database's own, or its final checkpoint on an external database) pins a
    manifest that does not exist;
``missing_external_db``
    an external database the database references has no manifest (it was hard-destroyed or deleted);
``unpinned_external``
    an external database holds no live checkpoint with the entry's ``final_checkpoint_id``: its GC
    may delete what the database reads;
``unprotected_external_sst``
    an SST read through an entry is not referenced by the manifest that entry's final checkpoint
    pins, so that checkpoint does not keep it (the pin was made from another state);
``shared_final_checkpoint``
    two entries (of one database or of two) name the same final checkpoint ``(external path, id)``:
    when one of them releases it (hard destroy, GC detaching a compacted clone) the other silently
    loses its protection;
``foreign_final_checkpoint``
    the final checkpoint an entry names was created for another database (its name is
    ``slate_ops/clone:<other path>``), the same defect seen from the external side;
``unreadable_manifest``
    a manifest exists but cannot be decoded.

Pins (``unpinned_external``, ``unprotected_external_sst``, ``foreign_final_checkpoint``) are checked
for *initialised* databases: for every entry of the latest manifest and every entry that lists SSTs
in a live checkpoint's manifest. An *uninitialised* database (an interrupted clone, split or merge)
has no final checkpoints yet by design; only the SSTs of its entries whose source (or final)
checkpoint is still live are checked for existence, and its own SSTs. A *destroyed database without
a live checkpoint* is readable by nothing and may be in the middle of its deletion (GC or hard
destroy delete its objects, the manifest last), so only its entries' ownership is checked.
Ownership (``shared_final_checkpoint``) is checked across every database looked at, whatever its
state.

Cost: one LIST of the whole store when ``paths`` is None (to find the databases); per database one
LIST and GET for the latest manifest and one GET per distinct manifest a live checkpoint pins; the
same for each external database outside ``paths``; then one LIST of ``<db>/compacted/`` per
database directory that holds a needed SST. The SST listings are taken after every manifest was
read: an SST is written before any manifest references it, so a listing taken later sees every
SST those manifests may read, and a missing one is really missing. Nothing is written.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX
from slate_ops.admin.fleet import discover_databases
from slate_ops.errors import CorruptObjectError, ObjectNotFoundError
from slate_ops.gc.references import own_sst_keys
from slate_ops.layout import normalize_db_path
from slate_ops.manifest.model import Checkpoint, ExternalDb, Manifest, resolve_sst_path
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore

MISSING_SST = "missing_sst"
MISSING_PINNED_MANIFEST = "missing_pinned_manifest"
MISSING_EXTERNAL_DB = "missing_external_db"
UNPINNED_EXTERNAL = "unpinned_external"
UNPROTECTED_EXTERNAL_SST = "unprotected_external_sst"
SHARED_FINAL_CHECKPOINT = "shared_final_checkpoint"
FOREIGN_FINAL_CHECKPOINT = "foreign_final_checkpoint"
UNREADABLE_MANIFEST = "unreadable_manifest"

KINDS: dict[str, str] = {
    MISSING_SST: "an SST a live manifest reads does not exist",
    MISSING_PINNED_MANIFEST: "a live checkpoint pins a manifest that does not exist",
    MISSING_EXTERNAL_DB: "an external database the database reads has no manifest",
    UNPINNED_EXTERNAL: "an external database does not hold the entry's final checkpoint (live)",
    UNPROTECTED_EXTERNAL_SST: "an external SST is not referenced by the manifest its final checkpoint pins",
    SHARED_FINAL_CHECKPOINT: "two entries name the same final checkpoint on an external database",
    FOREIGN_FINAL_CHECKPOINT: "the final checkpoint an entry names was created for another database",
    UNREADABLE_MANIFEST: "a manifest cannot be decoded",
}
"""Every kind of problem :func:`check_references` reports, and what it means."""

_SHOWN = 3  # manifests named per missing SST


@dataclass(frozen=True)
class ReferenceProblem:
    """One broken reference. ``database`` is the database whose reference is broken (the reader, not
    the database that lost the object); ``kind`` one of :data:`KINDS`; ``detail`` names the object
    and what to do."""

    database: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.database or '<root>'}: {self.kind}: {self.detail}"


def check_references(
    store: ObjectStore, paths: Iterable[str] | None = None, *, now: float
) -> list[ReferenceProblem]:
    """The broken references of the databases at ``paths`` (None: every database in the store);
    empty when everything every database can read is there and protected by its own pins.

    ``now`` (unix seconds) decides which checkpoints are live. Read-only; see the module docstring
    for the kinds of problem and the cost. Paths without a database are skipped (a deleted database,
    whose latest manifest is a tombstone, has nothing left to check).
    """
    chosen = (
        discover_databases(store) if paths is None else list(dict.fromkeys(map(normalize_db_path, paths)))
    )
    return _Check(store, now).run(chosen)


# --- the check -------------------------------------------------------------------------------------


@dataclass
class _Db:
    path: str
    latest: VersionedManifest
    # The manifests whose reads must exist: label -> manifest (the latest, then live checkpoints').
    manifests: dict[str, Manifest] = field(default_factory=dict)


@dataclass(frozen=True)
class _Need:
    """An SST object some database reads."""

    database: str
    key: str
    label: str  # which manifest of the database reads it
    owner: str | None  # the external database holding it (None: the database's own)


class _Check:
    def __init__(self, store: ObjectStore, now: float) -> None:
        self.store = store
        self.now = now
        self.problems: list[ReferenceProblem] = []
        self._latest: dict[str, VersionedManifest | None] = {}
        self._read: dict[tuple[str, int], Manifest | None] = {}
        self._protects: dict[tuple[str, int], frozenset[str]] = {}

    # --- reading, each object at most once ---------------------------------------------------------

    def latest(self, path: str, reader: str) -> VersionedManifest | None:
        if path not in self._latest:
            try:
                self._latest[path] = ManifestStore(self.store, path).read_latest()
            except CorruptObjectError as error:
                self._latest[path] = None
                self.report(reader, UNREADABLE_MANIFEST, f"{error}")
        return self._latest[path]

    def manifest(self, path: str, manifest_id: int, reader: str) -> Manifest | None:
        """Manifest ``manifest_id`` of ``path``, None if it is missing (or unreadable: reported)."""
        known = self._latest.get(path)
        if known is not None and known.id == manifest_id:
            return known.value
        if (path, manifest_id) not in self._read:
            try:
                self._read[path, manifest_id] = ManifestStore(self.store, path).read(manifest_id).value
            except ObjectNotFoundError:
                self._read[path, manifest_id] = None
            except CorruptObjectError as error:
                self._read[path, manifest_id] = None
                self.report(reader, UNREADABLE_MANIFEST, f"{error}")
        return self._read[path, manifest_id]

    def report(self, database: str, kind: str, detail: str) -> None:
        self.problems.append(ReferenceProblem(database, kind, detail))

    # --- the run -----------------------------------------------------------------------------------

    def run(self, paths: list[str]) -> list[ReferenceProblem]:
        dbs = []
        for path in paths:
            latest = self.latest(path, path)
            if latest is not None:
                dbs.append(_Db(path, latest))
        needs: list[_Need] = []
        for db in dbs:
            self.read_live_manifests(db)
        for db in dbs:
            needs += self.check_db(db)
        self.check_ownership(dbs)
        self.check_existence(needs)
        unique = dict.fromkeys(self.problems)
        return sorted(unique, key=lambda p: (p.database, p.kind, p.detail))

    def read_live_manifests(self, db: _Db) -> None:
        latest = db.latest
        db.manifests[f"latest manifest {latest.id}"] = latest.value
        for checkpoint in _live(latest.value, self.now):
            pinned = self.manifest(db.path, checkpoint.manifest_id, db.path)
            if pinned is None:
                key = ManifestStore(self.store, db.path).sequence.key(checkpoint.manifest_id)
                self.report(
                    db.path,
                    MISSING_PINNED_MANIFEST,
                    f"its checkpoint {_describe(checkpoint)} pins {key}, which is missing or unreadable: "
                    "readers of the checkpoint fail and GC cannot tell what it protects. Delete the "
                    f"checkpoint (`slate-ops --path {db.path} delete-checkpoint`) once nothing uses it",
                )
            elif checkpoint.manifest_id != latest.id:
                db.manifests[f"manifest {checkpoint.manifest_id}"] = pinned

    def check_db(self, db: _Db) -> list[_Need]:
        """The SSTs ``db`` needs, and its pins checked (initialised databases only)."""
        latest = db.latest.value
        if latest.destroyed_at_s is not None and not _live(latest, self.now):
            return []  # readable by nothing, possibly being deleted: ownership only
        initialised = latest.initialized
        pins: dict[tuple[str, uuid.UUID], _Pin | None] = {}
        needs: list[_Need] = []
        unprotected: set[str] = set()  # reported once per key, not per manifest reading it
        if initialised:
            # An entry that lists no SST protects nothing: GC detaching it releases the checkpoint
            # first and drops the entry after, so an interrupted detach leaves exactly that.
            for entry in latest.external_dbs:
                if entry.sst_ids:
                    pins[_pin_key(entry)] = self.pin(db.path, entry)
        for label, manifest in db.manifests.items():
            for entry in manifest.external_dbs:
                if initialised and entry.sst_ids and _pin_key(entry) not in pins:
                    pins[_pin_key(entry)] = self.pin(db.path, entry)
            live_sources = None if initialised else self.live_sources(db.path, manifest)
            for sst in manifest.ssts:
                owner = manifest.owner_of(sst)
                key = resolve_sst_path(manifest, db.path, sst)
                if owner is None:
                    needs.append(_Need(db.path, key, label, None))
                    continue
                if live_sources is not None:
                    if _pin_key(owner) in live_sources:
                        needs.append(_Need(db.path, key, label, owner.path))
                    continue
                needs.append(_Need(db.path, key, label, owner.path))
                pin = pins.get(_pin_key(owner))
                if pin is not None and key not in pin.protects and key not in unprotected:
                    unprotected.add(key)
                    self.report(
                        db.path,
                        UNPROTECTED_EXTERNAL_SST,
                        f"its {label} reads {key} of {owner.path!r}, but the manifest {pin.manifest_id} that "
                        f"its final checkpoint {owner.final_checkpoint_id} pins there does not reference it, "
                        f"so the GC of {owner.path!r} may delete it. Compact {db.path!r} fully "
                        f"(`slate-ops --path {db.path} compact --full`) before GC of {owner.path!r} runs",
                    )
        return needs

    def live_sources(self, path: str, manifest: Manifest) -> set[tuple[str, uuid.UUID]]:
        """The entries of an uninitialised database whose source or final checkpoint is live."""
        live = set()
        for entry in manifest.external_dbs:
            external = self.latest(entry.path, path)
            if external is None:
                continue
            for checkpoint_id in (entry.source_checkpoint_id, entry.final_checkpoint_id):
                checkpoint = external.value.checkpoint(checkpoint_id)
                if checkpoint is not None and not checkpoint.is_expired(self.now):
                    live.add(_pin_key(entry))
        return live

    def pin(self, path: str, entry: ExternalDb) -> _Pin | None:
        """The final checkpoint ``entry`` names on its external database, checked; None if broken."""
        external = self.latest(entry.path, path)
        count = len(entry.sst_ids)
        if external is None:
            self.report(
                path,
                MISSING_EXTERNAL_DB,
                f"it references {count} SST(s) of {entry.path!r}, which holds no database (no manifest, or "
                "deleted: hard-destroyed or deleted by GC): reads of those keys fail. Restore "
                f"{entry.path!r} from a backup, or destroy {path!r}",
            )
            return None
        checkpoint = external.value.checkpoint(entry.final_checkpoint_id)
        if checkpoint is None or checkpoint.is_expired(self.now):
            state = "holds no checkpoint" if checkpoint is None else "holds only an expired checkpoint"
            self.report(
                path,
                UNPINNED_EXTERNAL,
                f"{entry.path!r} {state} {entry.final_checkpoint_id}, the final checkpoint of its entry "
                f"listing {count} SST(s) there, so the GC of {entry.path!r} may delete them. Do not run "
                f"GC of {entry.path!r}; compact {path!r} fully (`slate-ops --path {path} compact --full`) "
                "so it stops reading them",
            )
            return None
        name = checkpoint.name or ""
        if name.startswith(FINAL_CHECKPOINT_PREFIX) and name != FINAL_CHECKPOINT_PREFIX + path:
            self.report(
                path,
                FOREIGN_FINAL_CHECKPOINT,
                f"its final checkpoint {entry.final_checkpoint_id} on {entry.path!r} is named "
                f"{checkpoint.name!r}, i.e. it was created for another database: when that one "
                f"releases it, {path!r} loses its protection. Compact {path!r} fully "
                f"(`slate-ops --path {path} compact --full`) so it stops reading {entry.path!r}",
            )
        pinned = self.manifest(entry.path, checkpoint.manifest_id, path)
        if pinned is None:
            key = ManifestStore(self.store, entry.path).sequence.key(checkpoint.manifest_id)
            self.report(
                path,
                MISSING_PINNED_MANIFEST,
                f"its final checkpoint {entry.final_checkpoint_id} on {entry.path!r} pins {key}, which is "
                f"missing or unreadable, so the GC of {entry.path!r} cannot tell what it protects. Compact "
                f"{path!r} fully (`slate-ops --path {path} compact --full`) so it stops reading "
                f"{entry.path!r}",
            )
            return None
        protects = self._protects.get((entry.path, checkpoint.manifest_id))
        if protects is None:  # one pinned manifest often protects many databases' entries
            protects = frozenset(own_sst_keys(pinned, entry.path))
            self._protects[entry.path, checkpoint.manifest_id] = protects
        return _Pin(checkpoint.manifest_id, protects)

    def check_ownership(self, dbs: list[_Db]) -> None:
        """No two entries, of one database or of two, name the same final checkpoint."""
        holders: dict[tuple[str, uuid.UUID], dict[str, int]] = defaultdict(dict)
        for db in dbs:
            for manifest in db.manifests.values():
                counts: dict[tuple[str, uuid.UUID], int] = defaultdict(int)
                for entry in manifest.external_dbs:
                    counts[_pin_key(entry)] += 1
                for pin, count in counts.items():  # entries of one manifest; the same entry over time
                    holders[pin][db.path] = max(holders[pin].get(db.path, 0), count)
        for (external, checkpoint_id), holding in sorted(holders.items(), key=lambda kv: str(kv[0])):
            if len(holding) < 2 and sum(holding.values()) < 2:
                continue
            for path, entries in sorted(holding.items()):
                sharers = [repr(p) for p in sorted(holding) if p != path]
                if entries > 1:
                    sharers.append(f"{entries - 1} other entr{'y' if entries == 2 else 'ies'} of its own")
                self.report(
                    path,
                    SHARED_FINAL_CHECKPOINT,
                    f"its final checkpoint {checkpoint_id} on {external!r} is shared with "
                    f"{' and '.join(sharers)}: when one holder releases it (hard destroy, GC detaching), "
                    f"the others lose their protection and the GC of {external!r} may delete SSTs they read. "
                    f"Compact {path!r} fully (`slate-ops --path {path} compact --full`) so it stops "
                    f"reading {external!r}, and do not hard-destroy a holder or run GC of {external!r} "
                    "before",
                )

    def check_existence(self, needs: list[_Need]) -> None:
        """One LIST per directory holding a needed SST; one problem per (database, missing key)."""
        by_directory: dict[str, set[str]] = defaultdict(set)
        for need in needs:
            by_directory[need.key.rsplit("/", 1)[0]].add(need.key)
        existing: set[str] = set()
        for directory in sorted(by_directory):
            existing |= {meta.key for meta in self.store.list(directory + "/")} & by_directory[directory]
        missing: dict[tuple[str, str], list[_Need]] = defaultdict(list)
        for need in needs:
            if need.key not in existing:
                missing[need.database, need.key].append(need)
        for (database, key), found in missing.items():
            labels = list(dict.fromkeys(n.label for n in found))
            shown = ", ".join(labels[:_SHOWN]) + (
                f" and {len(labels) - _SHOWN} more" if len(labels) > _SHOWN else ""
            )
            owner = found[0].owner
            where = "" if owner is None else f" (an SST of {owner!r})"
            self.report(
                database,
                MISSING_SST,
                f"{key}{where} is missing; its {shown} read(s) it, so reads of those keys fail. Restore "
                f"the object from a backup, or roll {database!r} back to a tag that does not read it "
                f"(`slate-ops --path {database} rollback`)",
            )


@dataclass(frozen=True)
class _Pin:
    manifest_id: int
    protects: frozenset[str]  # the SST keys the pinned manifest keeps in its database


def _pin_key(entry: ExternalDb) -> tuple[str, uuid.UUID]:
    return entry.path, entry.final_checkpoint_id


def _live(manifest: Manifest, now: float) -> list[Checkpoint]:
    return [c for c in manifest.checkpoints if not c.is_expired(now)]


def _describe(checkpoint: Checkpoint) -> str:
    return f"{checkpoint.id}" + (f" ({checkpoint.name})" if checkpoint.name else "")


__all__ = [
    "KINDS",
    "ReferenceProblem",
    "check_references",
]
