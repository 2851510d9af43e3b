"""Tags and checkpoint expiry on a SlateDB database (docs/design/slatedb-engine.md §4).

A tag is what it is on ours: a checkpoint named ``tag:<name>`` (:data:`TAG_PREFIX`) with no
expiry, which the handle's checkpoint calls refuse to refresh or delete. SlateDB itself keeps
checkpoint names neither unique nor protected, and commits each checkpoint through its own
manifest CAS, so slate_ops cannot make "check the name, then add" one commit. Uniqueness is kept
by a rule every slate_ops process applies the same way:

* **the canonical checkpoint of a name** is the first committed one: the first of that name in
  the manifest's checkpoint list, to which SlateDB appends (:func:`canonical`; a creation time
  would not do: two racers create within one second); every read (``list_tags``,
  ``restore_to_new(tag=)``, the tag policy) uses only it, so a duplicate never shows;
* ``create_tag`` refuses an existing name first (nothing written), creates its checkpoint, then
  lists the name again: when a racer's checkpoint won, it deletes its own and raises
  :class:`TagExistsError` naming the winner; when its own won, the racer deletes its own. With
  ``replace`` it deletes the checkpoints of the name it saw before creating, then settles a race
  with other replacers by the same rule;
* ``delete_tag`` deletes every checkpoint of the name (a leftover duplicate of a racer that died
  between its create and its check included).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pyarrow as pa

from slate_ops.admin.checkpoints import TAG_PREFIX
from slate_ops.admin.tag_policy import TagPolicy, TagPolicyReport, plan_tag_policy, policy_report
from slate_ops.admin.tags import TAGS_SCHEMA, Tag, validate_tag_name
from slate_ops.engines.slatedb.views import CheckpointView
from slate_ops.errors import SlateDbError, TagExistsError, TagNotFoundError
from slate_ops.gc.checkpoints import CheckpointExpiryReport
from slate_ops.manifest.model import Checkpoint, Manifest

if TYPE_CHECKING:
    from slate_ops.admin.handle.slatedb_handle import SlateDbHandle

__all__ = [
    "apply_tag_policy",
    "canonical",
    "create_tag",
    "delete_tag",
    "expire_checkpoints",
    "find_tag",
    "list_tags",
]


def canonical(checkpoints: tuple[CheckpointView, ...] | list[CheckpointView]) -> dict[str, CheckpointView]:
    """Tag name -> its canonical checkpoint: the first of that name in the manifest's list, i.e.
    the first one committed (SlateDB appends a new checkpoint to the list)."""
    found: dict[str, CheckpointView] = {}
    for c in checkpoints:
        if c.name is not None and c.name.startswith(TAG_PREFIX):
            found.setdefault(c.name[len(TAG_PREFIX) :], c)
    return found


def _tag(name: str, c: CheckpointView) -> Tag:
    return Tag(name, uuid.UUID(c.id), c.manifest_id, c.create_time_s)


def _named(handle: SlateDbHandle, name: str) -> list[CheckpointView]:
    return [c for c in handle.current_manifest().checkpoints if c.name == TAG_PREFIX + name]


def _delete(handle: SlateDbHandle, checkpoint_id: str) -> None:
    """``delete_checkpoint``, where a checkpoint a concurrent call already deleted is no error."""
    try:
        handle.db.delete_checkpoint(checkpoint_id)
    except SlateDbError:
        if any(c.id == checkpoint_id for c in handle.current_manifest().checkpoints):
            raise


def find_tag(handle: SlateDbHandle, name: str) -> Tag:
    """The tag ``name`` (its canonical checkpoint); :class:`TagNotFoundError` without one."""
    found = canonical(_named(handle, name)).get(name)
    if found is None:
        raise TagNotFoundError(f"no tag {name!r} in {handle.location}; list them with `slate-ops list-tags`")
    return _tag(name, found)


def list_tags(handle: SlateDbHandle) -> pa.Table:
    """The ``$tags`` table (:data:`TAGS_SCHEMA`), one row per tag name. ``record_count`` is 0
    (SlateDB's manifest has no entry counts); ``bytes`` sums SlateDB's estimated sizes of the SSTs
    the tagged manifest references (each SST once)."""
    tags = canonical(handle.current_manifest().checkpoints)
    totals: dict[int, int] = {}
    for c in tags.values():
        if c.manifest_id not in totals:
            m = handle.db.read_manifest(c.manifest_id)
            views = () if m is None else m.views()
            sizes = {v.sst_id: v.size for v in views}
            totals[c.manifest_id] = sum(sizes.values())
    names = list(tags)
    return pa.Table.from_pydict(
        {
            "tag_name": names,
            "checkpoint_id": [tags[n].id for n in names],
            "manifest_id": [tags[n].manifest_id for n in names],
            "create_time": [tags[n].create_time_s for n in names],
            "record_count": [0 for _ in names],
            "bytes": [totals[tags[n].manifest_id] for n in names],
        },
        schema=TAGS_SCHEMA,
    )


def create_tag(
    handle: SlateDbHandle, name: str, *, checkpoint: uuid.UUID | None = None, replace: bool = False
) -> Tag:
    """Tag the current state, or the state of the live ``checkpoint`` (module docstring: how a
    race between two creations is resolved)."""
    validate_tag_name(name)
    seen = _named(handle, name)
    if seen and not replace:
        existing = canonical(seen)[name]
        raise TagExistsError(
            f"tag {name!r} of {handle.location} already exists (checkpoint {existing.id}, manifest "
            f"{existing.manifest_id}); delete it first or pass replace=True (--replace)"
        )
    source = None
    if checkpoint is not None:
        source = str(handle.live_checkpoint(checkpoint).id)
    own_id, _ = handle.db.create_checkpoint(lifetime_s=None, source=source, name=TAG_PREFIX + name)
    for old in seen:  # replace: the checkpoints of the name seen before ours was created
        _delete(handle, old.id)
    now = _named(handle, name)
    winner = canonical(now)[name] if now else None
    own = next((c for c in now if c.id == own_id), None)
    if own is None or winner is None:
        raise TagExistsError(
            f"tag {name!r} of {handle.location}: the checkpoint created for it ({own_id}) was removed "
            "by a concurrent replace or delete; list the tags and retry if it is still wanted"
        )
    if winner.id != own_id:
        _delete(handle, own_id)
        raise TagExistsError(
            f"tag {name!r} of {handle.location} was created concurrently by another process "
            f"(checkpoint {winner.id}, manifest {winner.manifest_id}); ours was removed. Delete "
            "that tag first or pass replace=True (--replace)"
        )
    return _tag(name, own)


def delete_tag(handle: SlateDbHandle, name: str, *, dry_run: bool = True) -> Tag:
    """The tag ``name``; with ``dry_run=False`` deletes every checkpoint of that name."""
    tag = find_tag(handle, name)
    if not dry_run:
        for c in _named(handle, name):
            _delete(handle, c.id)
    return tag


def _as_checkpoint(c: CheckpointView) -> Checkpoint:
    return Checkpoint(uuid.UUID(c.id), c.manifest_id, c.create_time_s, c.expire_time_s, name=c.name)


def apply_tag_policy(handle: SlateDbHandle, policy: TagPolicy, *, dry_run: bool = True) -> TagPolicyReport:
    """slate_ops' tag policy (the same plan as ours, from the canonical tags): create the due tag
    when missing, delete expired and excess policy tags. Not one commit on SlateDB: one
    ``create_tag`` and one ``delete_checkpoint`` per deleted tag; a run interrupted half-way is
    finished by the next (the plan is recomputed from the manifest). A dry run's ``created`` tag has
    the nil checkpoint id (SlateDB names the checkpoint when it creates it) and ``manifest_id`` the
    current one plus one write per change."""
    now = handle.clock.now()
    m = handle.current_manifest()
    tags = canonical(m.checkpoints)
    plan = plan_tag_policy(Manifest(checkpoints=tuple(_as_checkpoint(c) for c in tags.values())), policy, now)
    created: Tag | None = None
    manifest_id = m.id
    if dry_run:
        if plan.create is not None:
            created = Tag(plan.create, uuid.UUID(int=0), m.id + 1, int(now))
        manifest_id = m.id + (1 if plan.create else 0) + len(plan.deleted)
    else:
        if plan.create is not None:
            created = create_tag(handle, plan.create)
        for t, _, _ in plan.deleted:
            for c in _named(handle, t.name):
                _delete(handle, c.id)
        manifest_id = handle.current_manifest().id
    return policy_report(
        handle.path, policy, now, plan, dry_run=dry_run, created=created, manifest_id=manifest_id
    )


def expire_checkpoints(handle: SlateDbHandle, *, dry_run: bool = True) -> CheckpointExpiryReport:
    """Delete the checkpoints whose expiry has passed, never a tag (a ``tag:`` checkpoint that
    someone gave an expiry through SlateDB directly is left alone). The dry run lists them; the
    real run deletes each through ``delete_checkpoint``, re-reading the manifest first so that a
    checkpoint refreshed meanwhile is kept (a refresh between that read and the delete is lost:
    SlateDB deletes by id, without a condition)."""
    m = handle.current_manifest()
    now = handle.clock.now()

    def expired(view: tuple[CheckpointView, ...]) -> list[CheckpointView]:
        return [
            c
            for c in view
            if c.expire_time_s is not None
            and c.expire_time_s <= now
            and not (c.name or "").startswith(TAG_PREFIX)
        ]

    found = expired(m.checkpoints)
    if dry_run or not found:
        return CheckpointExpiryReport(dry_run, m.id, tuple(_as_checkpoint(c) for c in found))
    still = expired(handle.current_manifest().checkpoints)
    for c in still:
        _delete(handle, c.id)
    return CheckpointExpiryReport(
        False, handle.current_manifest().id, tuple(_as_checkpoint(c) for c in still)
    )
