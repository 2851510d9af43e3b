"""Tags (Paimon's tag design (docs/design/tags.md)): named, never-expiring checkpoints with unique names
(docs/design/tags.md).

A tag is stored as an ordinary checkpoint named ``tag:<name>`` (:data:`TAG_PREFIX`) whose
``expire_time_s`` is None, so ``list_checkpoints`` shows it, ``expire_checkpoints`` never removes
it and GC keeps everything its manifest references. The ``tag:`` name prefix is reserved: a
checkpoint created by hand with such a name is treated as a tag. As with checkpoints, each call is
one sequenced manifest update and a refused call writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from slate_ops.admin.checkpoints import TAG_PREFIX, checkpoint_adder
from slate_ops.config import CheckpointOptions
from slate_ops.errors import InvalidArgumentError, TagExistsError, TagNotFoundError
from slate_ops.manifest.model import Checkpoint, Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest, require_not_destroyed
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

"""The checkpoint-name prefix that marks a tag checkpoint."""

MAX_TAG_NAME_CHARS = 200

_FIRST_SECOND = -62_135_596_800  # 0001-01-01T00:00:00Z
_LAST_SECOND = 253_402_300_799  # 9999-12-31T23:59:59Z

TAGS_SCHEMA = pa.schema(
    [
        pa.field("tag_name", pa.string(), nullable=False),
        pa.field("checkpoint_id", pa.string(), nullable=False),
        pa.field("manifest_id", pa.uint64(), nullable=False),
        pa.field("create_time", pa.timestamp("s", tz="UTC"), nullable=False),
        pa.field("record_count", pa.uint64(), nullable=False),
        pa.field("bytes", pa.uint64(), nullable=False),
    ]
)
"""The ``$tags`` table of :func:`list_tags`."""


@dataclass(frozen=True)
class Tag:
    """A tag: its name, the checkpoint that stores it and the manifest version that checkpoint pins."""

    name: str
    checkpoint_id: uuid.UUID
    manifest_id: int
    create_time_s: int


def validate_tag_name(name: str) -> str:
    """``name`` if it is a valid tag name (non-empty, at most 200 characters, no whitespace or
    control characters), else :class:`InvalidArgumentError`."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"tag name must be a non-empty string, got {name!r}")
    if len(name) > MAX_TAG_NAME_CHARS:
        raise InvalidArgumentError(
            f"tag name is {len(name)} characters long; the limit is {MAX_TAG_NAME_CHARS}"
        )
    if any(c.isspace() or not c.isprintable() for c in name):
        raise InvalidArgumentError(f"tag name {name!r} contains whitespace or control characters")
    return name


def is_tag(checkpoint: Checkpoint) -> bool:
    return checkpoint.name is not None and checkpoint.name.startswith(TAG_PREFIX)


def tag_of(checkpoint: Checkpoint) -> Tag:
    assert checkpoint.name is not None
    return Tag(
        name=checkpoint.name[len(TAG_PREFIX) :],
        checkpoint_id=checkpoint.id,
        manifest_id=checkpoint.manifest_id,
        create_time_s=checkpoint.create_time_s,
    )


def find_tags(manifest: Manifest) -> list[Tag]:
    """The tags of ``manifest``, in checkpoint order."""
    return [tag_of(c) for c in manifest.checkpoints if is_tag(c)]


def _without_tag(manifest: Manifest, name: str, keep: uuid.UUID | None = None) -> Manifest:
    checkpoints = tuple(c for c in manifest.checkpoints if c.id == keep or c.name != TAG_PREFIX + name)
    return manifest.with_changes(checkpoints=checkpoints)


def create_tag(
    path: str,
    store: ObjectStore,
    name: str,
    *,
    checkpoint: uuid.UUID | None = None,
    replace: bool = False,
    clock: Runtime = SYSTEM_RUNTIME,
    new_id: Callable[[], uuid.UUID] | None = None,
) -> Tag:
    """Tag the current manifest, or the manifest of the live ``checkpoint``.

    From the current manifest, ``manifest_id`` is the version being written (as for
    ``create_checkpoint``); from a checkpoint it is that checkpoint's. An existing tag of that name
    is refused with :class:`TagExistsError` unless ``replace``, which removes the old tag's
    checkpoint in the same commit.
    """
    validate_tag_name(name)
    options = CheckpointOptions(source=checkpoint, name=TAG_PREFIX + name, lifetime=None)
    manifests = ManifestStore(store, path)
    checkpoint_id = (new_id or clock.new_uuid)()
    add_checkpoint = checkpoint_adder(manifests, options, checkpoint_id, clock)  # covers WAL-only writes

    def add(current: VersionedManifest) -> Manifest:
        require_not_destroyed(current.value, manifests.location)
        existing = [t for t in find_tags(current.value) if t.name == name]
        if existing and not replace:
            raise TagExistsError(
                f"tag {name!r} of {manifests.location} already exists (checkpoint "
                f"{existing[0].checkpoint_id}, manifest {existing[0].manifest_id}); "
                "delete it first or pass replace=True (--replace)"
            )
        return _without_tag(add_checkpoint(current), name, keep=checkpoint_id)

    committed = manifests.update(add)
    created = committed.value.checkpoint(checkpoint_id)
    assert created is not None
    return tag_of(created)


def delete_tag(path: str, store: ObjectStore, name: str, *, dry_run: bool = True) -> Tag:
    """Remove the tag (its checkpoint) and return it; a missing tag raises :class:`TagNotFoundError`.

    In the default dry run the tag is returned and nothing is written; ``dry_run=False`` deletes it.
    """
    manifests = ManifestStore(store, path)
    removed: list[Tag] = []

    def find(manifest: Manifest) -> Tag:
        found = next((t for t in find_tags(manifest) if t.name == name), None)
        if found is None:
            raise TagNotFoundError(
                f"no tag {name!r} in the current manifest of {manifests.location}; "
                "list them with `slate-ops list-tags`"
            )
        return found

    if dry_run:
        return find(manifests.read_latest_required().value)

    def delete(current: VersionedManifest) -> Manifest:
        removed[:] = [find(current.value)]
        return _without_tag(current.value, name)

    manifests.update(delete)
    return removed[0]


def _totals(manifest: Manifest) -> tuple[int, int]:
    """(entries, bytes) of the distinct SSTs that the L0 and sorted runs of ``manifest`` reference."""
    ssts = {s.id: s.info for s in manifest.ssts}
    referenced = {v.sst_id for v in manifest.l0}
    referenced.update(v.sst_id for run in manifest.compacted for v in run.views)
    infos = [ssts[i] for i in referenced]
    return sum(i.num_entries for i in infos), sum(i.size_bytes for i in infos)


def list_tags(path: str, store: ObjectStore) -> pa.Table:
    """The ``$tags`` table (:data:`TAGS_SCHEMA`) of the current manifest, one row per tag.

    ``record_count`` and ``bytes`` sum ``num_entries`` and ``size_bytes`` over the SSTs the tagged
    manifest references (L0 and sorted runs, each SST once): ``record_count`` counts stored versions
    and tombstones, not distinct live keys, and leaves out writes only in the WAL. A stored
    ``create_time_s`` outside the calendar (years 1 to 9999; slate_ops never writes one, a hostile or
    damaged manifest may) is shown as the calendar's nearest end, so the table always builds.
    """
    manifests = ManifestStore(store, path)
    tags = find_tags(manifests.read_latest_required().value)
    totals: dict[int, tuple[int, int]] = {}
    for tag in tags:
        if tag.manifest_id not in totals:
            totals[tag.manifest_id] = _totals(manifests.read(tag.manifest_id).value)
    return pa.Table.from_pydict(
        {
            "tag_name": [t.name for t in tags],
            "checkpoint_id": [str(t.checkpoint_id) for t in tags],
            "manifest_id": [t.manifest_id for t in tags],
            "create_time": [min(max(t.create_time_s, _FIRST_SECOND), _LAST_SECOND) for t in tags],
            "record_count": [totals[t.manifest_id][0] for t in tags],
            "bytes": [totals[t.manifest_id][1] for t in tags],
        },
        schema=TAGS_SCHEMA,
    )


__all__ = [
    "MAX_TAG_NAME_CHARS",
    "TAGS_SCHEMA",
    "TAG_PREFIX",
    "Tag",
    "create_tag",
    "delete_tag",
    "list_tags",
    "validate_tag_name",
]
