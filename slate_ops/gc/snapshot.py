"""The manifest state one GC run decides from, and the min_age rule of SlateDB issue 204.

**When did an object stop being referenced?** SlateDB compares ``min_age`` with the time an SST was
*written* (issue 204), so an SST written long ago and dereferenced a moment ago is deleted at once —
under any reader that was still using it. slate_ops measures from when it stopped being referenced,
using the manifest history that is still stored:

* The *edge* for a cutoff ``now - min_age`` is the newest manifest (by id, in the contiguous run of
  stored ids that ends at the latest) whose ``last_modified`` is at or before the cutoff.
* Every manifest from the edge to the latest (the *history*) protects what it references, and so
  does every checkpoint listed in the history that had not expired by the cutoff (through the
  manifest it pins). The live checkpoints of the latest manifest always protect.
* So an object that is deleted is referenced by nothing in the history: the first manifest without
  it (or without the checkpoint that pinned it) is at or before the edge, so it has been
  unreferenced since at least the edge's ``last_modified`` <= ``now - min_age``. An object never
  referenced at all must also have been *written* before the cutoff (checked by the tasks).
* With no edge (every stored manifest of the contiguous run is younger than the cutoff), or a
  history manifest that cannot be read, nothing is provable and every object is kept.

The manifest task keeps the history and the manifests its checkpoints pin, so the next run finds
its edge (docs/design/gc.md). Manifest ids are created in order, so ``last_modified`` follows id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slate_ops.errors import ObjectNotFoundError
from slate_ops.gc.references import Protection
from slate_ops.manifest.model import Checkpoint, Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.txn import SequencedFile


def timestamp(file: SequencedFile) -> float:
    return file.meta.last_modified.timestamp()


def contiguous_suffix(files: list[SequencedFile]) -> list[SequencedFile]:
    """The stored manifests whose ids run without a gap up to the latest."""
    if not files:
        return []
    suffix = [files[-1]]
    for file in reversed(files[:-1]):
        if file.id != suffix[-1].id - 1:
            break
        suffix.append(file)
    return suffix[::-1]


def edge(files: list[SequencedFile], cutoff: float) -> SequencedFile | None:
    """The newest manifest of the contiguous suffix written at or before ``cutoff``."""
    return next((f for f in reversed(contiguous_suffix(files)) if timestamp(f) <= cutoff), None)


def pinned_since(manifests: Iterable[Manifest], cutoff: float) -> set[int]:
    """Manifest ids pinned by checkpoints in ``manifests`` that had not expired by ``cutoff``."""
    return {
        c.manifest_id
        for m in manifests
        for c in m.checkpoints
        if c.expires_at is None or c.expires_at > cutoff
    }


@dataclass(frozen=True)
class Snapshot:
    path: str
    now: float
    files: tuple[SequencedFile, ...]
    latest: VersionedManifest
    manifests: Mapping[int, Manifest]  # every manifest read: latest, checkpointed, history
    live_checkpoints: tuple[Checkpoint, ...]
    problems: tuple[str, ...] = ()  # live checkpoints whose manifest could not be read

    def checkpointed(self) -> list[Manifest]:
        """The manifests of the live checkpoints."""
        return [
            self.manifests[c.manifest_id] for c in self.live_checkpoints if c.manifest_id in self.manifests
        ]

    def history(self, cutoff: float) -> range | None:
        """Ids from the edge of ``cutoff`` to the latest; None without an edge."""
        found = edge(list(self.files), cutoff)
        return None if found is None else range(found.id, self.latest.id + 1)

    def protection(self, cutoff: float) -> Protection:
        """What must survive a deletion whose min_age cutoff is ``cutoff`` (see the module docstring)."""
        protection = Protection(self.path)
        protection.add(self.latest.value, as_latest=True)
        for manifest in self.checkpointed():
            protection.add(manifest, as_latest=False)
        history = self.history(cutoff)
        if self.problems or history is None or any(i not in self.manifests for i in history):
            protection.everything = True
            return protection
        pinned = pinned_since((self.manifests[i] for i in history), cutoff)
        if any(i not in self.manifests for i in pinned):
            protection.everything = True
            return protection
        for manifest_id in history:
            protection.add(self.manifests[manifest_id], as_latest=True)
        for manifest_id in pinned:
            protection.add(self.manifests[manifest_id], as_latest=False)
        return protection

    def kept_manifests(self, cutoffs: Iterable[float]) -> set[int]:
        """Manifests the rule needs for ``cutoffs``: each history and what its checkpoints pin."""
        ids = {c.manifest_id for c in self.live_checkpoints}
        for cutoff in cutoffs:
            history = self.history(cutoff)
            if history is not None:
                ids |= set(history)
                ids |= pinned_since((self.manifests[i] for i in history if i in self.manifests), cutoff)
        return ids


def read_snapshot(manifests: ManifestStore, now: float, *, history_cutoffs: list[float]) -> Snapshot | None:
    """List the manifests and read the latest, every live checkpoint's manifest, the history the
    cutoffs need and the manifests its checkpoints pin. None if the database has no manifest."""
    files, latest = _list_and_read_latest(manifests)
    if latest is None:
        return None
    live = tuple(c for c in latest.value.checkpoints if not c.is_expired(now))
    read: dict[int, Manifest] = {latest.id: latest.value}
    problems: list[str] = []
    for checkpoint in live:
        if checkpoint.manifest_id not in read:
            try:
                read[checkpoint.manifest_id] = manifests.read(checkpoint.manifest_id).value
            except ObjectNotFoundError:
                problems.append(
                    f"live checkpoint {checkpoint.id} references manifest {checkpoint.manifest_id}, "
                    "which does not exist; no WAL or compacted SST is deleted until this is resolved"
                )
    snapshot = Snapshot(manifests.path, now, tuple(files), latest, read, live)
    for cutoff in history_cutoffs:
        history = snapshot.history(cutoff)
        if history is None:
            continue
        _read_missing(manifests, read, history)
        _read_missing(manifests, read, pinned_since((read[i] for i in history if i in read), cutoff))
    return Snapshot(manifests.path, now, tuple(files), latest, read, live, tuple(problems))


def _read_missing(manifests: ManifestStore, read: dict[int, Manifest], ids: Iterable[int]) -> None:
    for manifest_id in sorted(set(ids) - read.keys()):
        try:
            read[manifest_id] = manifests.read(manifest_id).value
        except ObjectNotFoundError:
            continue  # deleted by a concurrent GC: Snapshot.protection then keeps everything


def _list_and_read_latest(manifests: ManifestStore) -> tuple[list[SequencedFile], VersionedManifest | None]:
    for _ in range(8):
        files = manifests.list()
        if not files:
            return [], None
        try:
            return files, manifests.read(files[-1].id)
        except ObjectNotFoundError:
            continue  # the listed latest vanished (a destroy in progress): list again
    latest = manifests.read_latest_required()
    return manifests.list(), latest
